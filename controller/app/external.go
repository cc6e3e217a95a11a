package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/external"
	"github.com/rota-hpc/rota/internal/conf"
)

// EstimatorPlugins names external estimators (docs/estimate.md,
// "External estimators"): an executable's absolute path, then its
// arguments. "" keeps the built-in.
type EstimatorPlugins struct {
	Throughput string
	Walltime   string
	QueueWait  string
	// Timeout bounds every call to a plugin; past it the built-in
	// answers. 0: 200 ms.
	Timeout time.Duration
}

func loadEstimatorPlugins(v *conf.Values, c *Config) {
	v.String("estimator_throughput", &c.Estimators.Throughput)
	v.String("estimator_walltime", &c.Estimators.Walltime)
	v.String("estimator_queuewait", &c.Estimators.QueueWait)
	v.Duration("estimator_timeout", &c.Estimators.Timeout, time.Millisecond, 10*time.Second)
}

// plugins are the external estimators in front of the built-ins; nil
// fields are not configured.
type plugins struct {
	tp   *external.Throughput
	wall *external.Walltime
}

// startEstimatorPlugins launches the configured plugins in front of e's
// built-ins. An executable that cannot be run is an error; one that
// does not start is logged and retried, the built-in answering.
func (c *Controller) startEstimatorPlugins(e *estimator) (stop func(), err error) {
	cfg := func(cmd string) external.Config {
		return external.Config{Command: cmd, Timeout: c.cfg.Estimators.Timeout,
			Log: c.log.With().Str("component", "estimators").Logger()}
	}
	stop = func() {
		if e.ext.tp != nil {
			e.ext.tp.Close()
		}
		if e.ext.wall != nil {
			e.ext.wall.Close()
		}
	}
	if cmd := c.cfg.Estimators.Throughput; cmd != "" {
		if e.ext.tp, err = external.NewThroughput(cfg(cmd), estimate.BuiltinThroughput{T: e.tp}); err != nil {
			return stop, err
		}
	}
	if cmd := c.cfg.Estimators.Walltime; cmd != "" {
		if e.ext.wall, err = external.NewWalltime(cfg(cmd), estimate.BuiltinWalltime{W: e.wall}); err != nil {
			return stop, err
		}
	}
	return stop, nil
}

// throughputs is the throughput estimate for key: the plugin's where
// one is configured (it falls back to the built-in by itself), asked
// within ctx and its own per-call deadline.
func (e *estimator) throughputs(ctx context.Context, key string, types []string) []estimate.Estimate {
	if e.ext.tp == nil {
		return e.tp.Estimate(key, types)
	}
	a, err := e.ext.tp.Throughput(ctx, estimate.ThroughputQueryFor(e.tp, key, types))
	if err != nil || len(a.Rates) != len(types) {
		return e.tp.Estimate(key, types)
	}
	out := make([]estimate.Estimate, len(a.Rates))
	for i, r := range a.Rates {
		out[i] = estimate.Estimate{GPUType: r.GPUType, StepsPerSec: r.StepsPerSec, Source: r.Source, Basis: r.Basis}
	}
	return out
}

// walltime is the walltime estimate for in, the plugin's where one is
// configured.
func (e *estimator) walltime(ctx context.Context, in estimate.WalltimeInput) estimate.WalltimeEstimate {
	if e.ext.wall == nil {
		return e.wall.Estimate(in)
	}
	w, err := e.ext.wall.Walltime(ctx, estimate.WalltimeQueryFor(e.wall, in))
	if err != nil {
		return e.wall.Estimate(in)
	}
	return w
}

var (
	mPluginAnswers = prometheus.NewDesc("rota_controller_estimator_plugin_answers_total",
		"Calls an external estimator answered (docs/estimate.md).", []string{"estimator"}, nil)
	mPluginFallbacks = prometheus.NewDesc("rota_controller_estimator_plugin_fallbacks_total",
		"Calls the built-in estimator answered in an external one's place, by reason (down, crash, timeout, error, nonsense).",
		[]string{"estimator", "reason"}, nil)
	mPluginStarts = prometheus.NewDesc("rota_controller_estimator_plugin_starts_total",
		"Launches of an external estimator, failed ones included.", []string{"estimator"}, nil)
	mPluginStartFails = prometheus.NewDesc("rota_controller_estimator_plugin_start_failures_total",
		"Launches of an external estimator that failed (executable, handshake).", []string{"estimator"}, nil)
	pluginDescs = []*prometheus.Desc{mPluginAnswers, mPluginFallbacks, mPluginStarts, mPluginStartFails}
	// fallbackReasons are the reasons a call falls back to the built-in
	// (external.Stats.Fallbacks' keys).
	fallbackReasons = []string{external.FailDown, external.FailCrash, external.FailTimeout, external.FailError, external.FailNonsense}
)

func (c *Controller) collectEstimatorPlugins(ch chan<- prometheus.Metric) {
	e, ok := c.estimator.(*estimator)
	if !ok {
		return
	}
	emit := func(kind string, s external.Stats) {
		ch <- prometheus.MustNewConstMetric(mPluginAnswers, prometheus.CounterValue, float64(s.Answered), kind)
		ch <- prometheus.MustNewConstMetric(mPluginStarts, prometheus.CounterValue, float64(s.Starts), kind)
		ch <- prometheus.MustNewConstMetric(mPluginStartFails, prometheus.CounterValue, float64(s.StartFailures), kind)
		// Every reason from 0, so a dashboard's rate is 0, not absent.
		for _, reason := range fallbackReasons {
			ch <- prometheus.MustNewConstMetric(mPluginFallbacks, prometheus.CounterValue, float64(s.Fallbacks[reason]), kind, reason)
		}
	}
	if e.ext.tp != nil {
		emit(external.KindThroughput, e.ext.tp.Stats())
	}
	if e.ext.wall != nil {
		emit(external.KindWalltime, e.ext.wall.Stats())
	}
}

// startQueueWaitPlugin puts the configured external queue-wait estimator
// in front of the model (which answers when it cannot).
func (c *Controller) startQueueWaitPlugin(w *waitPredictor) (stop func(), err error) {
	if c.cfg.Estimators.QueueWait == "" {
		return func() {}, nil
	}
	ext, err := external.NewQueueWait(external.Config{Command: c.cfg.Estimators.QueueWait, Timeout: c.cfg.Estimators.Timeout,
		Log: c.log.With().Str("component", "estimators").Logger()}, estimate.BuiltinQueueWait{M: w.model})
	if err != nil {
		return func() {}, err
	}
	w.ext = ext
	return ext.Close, nil
}
