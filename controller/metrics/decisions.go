package metrics

import "github.com/prometheus/client_golang/prometheus"

var mDecisions = desc("decisions_total", "Placement decisions answered to the job_submit plugin.")

// Decisions counts the placement decisions recorded.
type Decisions struct {
	// Count is the decisions recorded so far (nil: none yet).
	Count func() uint64
}

func (Decisions) Describe(ch chan<- *prometheus.Desc) { describe(ch, mDecisions) }

func (d Decisions) Collect(ch chan<- prometheus.Metric) {
	if d.Count != nil {
		counter(ch, mDecisions, float64(d.Count()))
	}
}
