package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/estimate/live"
)

// metrics is the controller's Prometheus collector: the values defined
// here are read from the parts' own counters at scrape time, so nothing on
// the request path or in the round loop pays for them; latencies and
// counts by label come from the instruments (instruments.go) and the
// estimator, observed as they happen.
type metrics struct{ c *Controller }

func metricDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("rota_controller_"+name, help, nil, nil)
}

var (
	mDecisions   = metricDesc("decisions_total", "Placement decisions answered to the job_submit plugin.")
	mRounds      = metricDesc("rounds_total", "Rounds of the round loop run (while leading).")
	mRoundErrors = metricDesc("round_errors_total", "Rounds that failed (Slurm unreadable, policy error); the next round retries.")
	mRetyped     = metricDesc("retyped_total", "Pending jobs whose GPU type the round loop changed.")
	mReprio      = metricDesc("reprioritised_total", "Pending jobs whose order (nice or priority) the round loop changed.")
	mMigrations  = metricDesc("migrations_total", "Running jobs checkpointed and requeued onto another GPU type.")
	mMigFail     = metricDesc("migration_failures_total", "Migrations abandoned (checkpoint failed or refused, requeue failed); the job kept running.")
	mLimits      = metricDesc("limits_raised_total", "Running jobs' time limits Rota had shortened and raised to follow their progress (or gave back for want of a measurement).")
	mSlurmErrors = metricDesc("slurm_update_errors_total", "scontrol updates that failed (job ended meanwhile, Slurm busy).")
	mUnannotated = metricDesc("gpu_jobs_without_decision", "GPU jobs in the queue with no Rota annotation: submitted while the plugin failed open (controller unreachable, deadline) or opted out.")

	// Chains (docs/chains.md), from the chain manager's counters.
	mChains      = metricDesc("chains_started_total", "Jobs past MaxTime that Rota runs as chains of segments.")
	mChainsRun   = metricDesc("chains_running", "Chains running now.")
	mChainSegs   = metricDesc("chain_segments_submitted_total", "Successor segments the chain manager submitted.")
	mChainCkpts  = metricDesc("chain_checkpoints_total", "Checkpoints the chain manager asked of segments before their limit.")
	mChainErrors = metricDesc("chain_errors_total", "Chain manager actions that failed (Slurm unreadable, a submission refused); retried the next tick.")
	mChainsEnded = prometheus.NewDesc("rota_controller_chains_ended_total", "Chains ended, by how: done, cancelled, failed.", []string{"state"}, nil)
	roundsDescs  = []*prometheus.Desc{mRounds, mRoundErrors, mRetyped, mReprio, mMigrations, mMigFail, mLimits, mSlurmErrors, mUnannotated}
	chainDescs   = []*prometheus.Desc{mChains, mChainsRun, mChainSegs, mChainCkpts, mChainErrors, mChainsEnded}
)

func (m metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- mDecisions
	for _, ds := range [][]*prometheus.Desc{roundsDescs, chainDescs} {
		for _, d := range ds {
			ch <- d
		}
	}
	// The same descriptors as the live ones, whether or not this
	// controller has its instruments yet (tests build bare ones).
	for _, c := range newInstruments().collectors() {
		c.Describe(ch)
	}
	live.Describe(ch)
}

func (m metrics) Collect(ch chan<- prometheus.Metric) {
	c := m.c
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	if c.store != nil {
		counter(mDecisions, float64(c.store.Count()))
	}
	if l := c.rounds.Load(); l != nil {
		s := l.Stats()
		counter(mRounds, float64(s.Rounds))
		counter(mRoundErrors, float64(s.RoundErrors))
		counter(mRetyped, float64(s.Retyped))
		counter(mReprio, float64(s.Reprioritised))
		counter(mMigrations, float64(s.Migrations))
		counter(mMigFail, float64(s.MigrationFailures))
		counter(mLimits, float64(s.LimitsRaised))
		counter(mSlurmErrors, float64(s.SlurmErrors))
		gauge(mUnannotated, float64(s.Unannotated))
	}
	if cm := c.chains.Load(); cm != nil {
		s := cm.Stats()
		counter(mChains, float64(s.Chains))
		gauge(mChainsRun, float64(cm.Running()))
		counter(mChainSegs, float64(s.Submitted))
		counter(mChainCkpts, float64(s.Checkpoints))
		counter(mChainErrors, float64(s.Errors))
		for state, n := range map[string]uint64{chains.StateDone: s.Done, chains.StateCancelled: s.Cancelled, chains.StateFailed: s.Failed} {
			ch <- prometheus.MustNewConstMetric(mChainsEnded, prometheus.CounterValue, float64(n), state)
		}
	}
	for _, in := range c.inst.collectors() {
		in.Collect(ch)
	}
	if e, ok := c.estimator.(*live.Estimator); ok {
		e.Collect(ch)
	}
}

// serveMetrics serves /metrics on addr until ctx ends.
func (c *Controller) serveMetrics(ctx context.Context, addr string) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics{c})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	c.serveHTTP(ctx, ln, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, "metrics server")
	return nil
}

// serveHTTP serves srv on ln until ctx ends, then shuts it down; what is
// the server's name in the log line if it stops on its own.
func (c *Controller) serveHTTP(ctx context.Context, ln net.Listener, srv *http.Server, what string) {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error().Err(err).Str("listen", ln.Addr().String()).Msg(what + " stopped")
		}
	}()
}
