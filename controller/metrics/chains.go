package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/chains"
)

// Chains (docs/chains.md), from the chain manager's counters.
var (
	mChains      = desc("chains_started_total", "Jobs past MaxTime that Rota runs as chains of segments.")
	mChainsRun   = desc("chains_running", "Chains running now.")
	mChainSegs   = desc("chain_segments_submitted_total", "Successor segments the chain manager submitted.")
	mChainCkpts  = desc("chain_checkpoints_total", "Checkpoints the chain manager asked of segments before their limit.")
	mChainErrors = desc("chain_errors_total", "Chain manager actions that failed (Slurm unreadable, a submission refused); retried the next tick.")
	mChainsEnded = prometheus.NewDesc("rota_controller_chains_ended_total", "Chains ended, by how: done, cancelled, failed.", []string{"state"}, nil)
)

// Chains reads the chain manager's counters.
type Chains struct {
	// Manager is the chain manager while leading, nil otherwise.
	Manager func() *chains.Manager
}

func (Chains) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, mChains, mChainsRun, mChainSegs, mChainCkpts, mChainErrors, mChainsEnded)
}

func (c Chains) Collect(ch chan<- prometheus.Metric) {
	m := c.Manager()
	if m == nil {
		return
	}
	s := m.Stats()
	counter(ch, mChains, float64(s.Chains))
	gauge(ch, mChainsRun, float64(m.Running()))
	counter(ch, mChainSegs, float64(s.Submitted))
	counter(ch, mChainCkpts, float64(s.Checkpoints))
	counter(ch, mChainErrors, float64(s.Errors))
	for state, n := range map[string]uint64{chains.StateDone: s.Done, chains.StateCancelled: s.Cancelled, chains.StateFailed: s.Failed} {
		ch <- prometheus.MustNewConstMetric(mChainsEnded, prometheus.CounterValue, float64(n), state)
	}
}
