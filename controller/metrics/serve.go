package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/serve"
)

// Services (docs/serve.md), from the service manager's counters.
var (
	mServeReplicas  = desc("service_replicas_total", "Service replicas the service manager followed.")
	mServeReleased  = desc("service_replicas_released_total", "Pending service jobs released with their siblings' nodes excluded.")
	mServeSubmitted = desc("service_successors_submitted_total", "Successors submitted to roll service replicas over before their limits.")
	mServeRollovers = desc("service_rollovers_total", "Service jobs stopped because their successor was ready.")
	mServeGaps      = desc("service_gaps_total", "Service jobs that ended before their successor was ready: the replica served nothing for a while.")
	mServeErrors    = desc("service_errors_total", "Service manager actions that failed (Slurm unreadable, a submission or update refused); retried the next tick.")
)

// Services reads the service manager's counters.
type Services struct {
	// Manager is the service manager while leading, nil otherwise.
	Manager func() *serve.Manager
}

func (Services) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, mServeReplicas, mServeReleased, mServeSubmitted, mServeRollovers, mServeGaps, mServeErrors)
}

func (c Services) Collect(ch chan<- prometheus.Metric) {
	m := c.Manager()
	if m == nil {
		return
	}
	s := m.Stats()
	counter(ch, mServeReplicas, float64(s.Replicas))
	counter(ch, mServeReleased, float64(s.Released))
	counter(ch, mServeSubmitted, float64(s.Submitted))
	counter(ch, mServeRollovers, float64(s.Rollovers))
	counter(ch, mServeGaps, float64(s.Gaps))
	counter(ch, mServeErrors, float64(s.Errors))
}
