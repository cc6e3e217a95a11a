package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics is the controller's Prometheus collector: every value is read
// from the controller's own counters at scrape time, so nothing on the
// request path or in the round loop pays for it.
type metrics struct{ c *Controller }

func metricDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("rota_controller_"+name, help, nil, nil)
}

var (
	mDecisions   = metricDesc("decisions_total", "Placement decisions answered to the job_submit plugin.")
	mRounds      = metricDesc("rounds_total", "Rounds of the round loop run (while leading).")
	mRoundErrors = metricDesc("round_errors_total", "Rounds that failed (Slurm unreadable, policy error); the next round retries.")
	mRoundSecs   = metricDesc("round_duration_seconds", "Duration of the last round: reading Slurm, solving, applying.")
	mSolveSecs   = metricDesc("solve_seconds", "Policy solve time of the last round.")
	mRetyped     = metricDesc("retyped_total", "Pending jobs whose GPU type the round loop changed.")
	mMigrations  = metricDesc("migrations_total", "Running jobs checkpointed and requeued onto another GPU type.")
	mMigFail     = metricDesc("migration_failures_total", "Migrations abandoned (checkpoint failed or refused, requeue failed); the job kept running.")
	mLimits      = metricDesc("limits_raised_total", "Running jobs' time limits Rota had shortened and raised to follow their progress (or gave back for want of a measurement).")
	mSlurmErrors = metricDesc("slurm_update_errors_total", "scontrol updates that failed (job ended meanwhile, Slurm busy).")
	mUnannotated = metricDesc("gpu_jobs_without_decision", "GPU jobs in the queue with no Rota annotation: submitted while the plugin failed open (controller unreachable, deadline) or opted out.")
	mWallCount   = metricDesc("walltime_estimates_judged", "Finished jobs whose Rota walltime was compared with their run time (latest window).")
	mWallRatio   = metricDesc("walltime_estimate_ratio_median", "Median of Rota's time limit over the actual run time on finished jobs (above 1: room to spare).")
	mWallUnder   = metricDesc("walltime_underestimated_ratio", "Fraction of judged jobs whose run time exceeded Rota's limit.")
	mHintRatio   = metricDesc("throughput_hint_error_ratio_median", "Median of measured over hinted steps/s for jobs with --rota-throughput hints (1: hints were right).")
)

func (m metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mDecisions, mRounds, mRoundErrors, mRoundSecs, mSolveSecs, mRetyped, mMigrations,
		mMigFail, mLimits, mSlurmErrors, mUnannotated, mWallCount, mWallRatio, mWallUnder, mHintRatio} {
		ch <- d
	}
	for _, d := range pluginDescs {
		ch <- d
	}
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
		gauge(mRoundSecs, s.LastRound.Seconds())
		gauge(mSolveSecs, s.LastSolve.Seconds())
		counter(mRetyped, float64(s.Retyped))
		counter(mMigrations, float64(s.Migrations))
		counter(mMigFail, float64(s.MigrationFailures))
		counter(mLimits, float64(s.LimitsRaised))
		counter(mSlurmErrors, float64(s.SlurmErrors))
		gauge(mUnannotated, float64(s.Unannotated))
	}
	if e, ok := c.estimator.(*estimator); ok {
		w := e.wall.Errors()
		gauge(mWallCount, float64(w.Count))
		if w.Count > 0 {
			gauge(mWallRatio, w.MedianRatio)
			gauge(mWallUnder, w.Under)
		}
		if r, ok := e.hintRatio(); ok {
			gauge(mHintRatio, r)
		}
	}
	c.collectEstimatorPlugins(ch)
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error().Err(err).Str("listen", addr).Msg("metrics server stopped")
		}
	}()
	return nil
}
