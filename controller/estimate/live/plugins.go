package live

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/external"
	"github.com/rota-hpc/rota/internal/conf"
)

// Plugins names external estimators (docs/estimators.md, "External
// estimators"): an executable's absolute path, then its arguments. ""
// keeps the built-in.
type Plugins struct {
	Throughput string
	Walltime   string
	QueueWait  string
	// Timeout bounds every call to a plugin; past it the built-in
	// answers. 0: 200 ms.
	Timeout time.Duration
}

// Read reads the estimator_* keys over p.
func (p *Plugins) Read(v *conf.Values) {
	v.String("estimator_throughput", &p.Throughput)
	v.String("estimator_walltime", &p.Walltime)
	v.String("estimator_queuewait", &p.QueueWait)
	v.Duration("estimator_timeout", &p.Timeout, time.Millisecond, 10*time.Second)
}

// plugins are the external estimators in front of the built-ins; nil
// fields are not configured.
type plugins struct {
	tp   *external.Throughput
	wall *external.Walltime
}

func (p Plugins) config(cmd string, log zerolog.Logger) external.Config {
	return external.Config{Command: cmd, Timeout: p.Timeout, Log: log.With().Str("component", "estimators").Logger()}
}

// StartPlugins launches p's throughput and walltime plugins in front of
// e's built-ins. An executable that cannot be run is an error; one that
// does not start is logged and retried, the built-in answering. stop
// ends those started, error or not.
func (e *Estimator) StartPlugins(p Plugins, log zerolog.Logger) (stop func(), err error) {
	stop = func() {
		if e.ext.tp != nil {
			e.ext.tp.Close()
		}
		if e.ext.wall != nil {
			e.ext.wall.Close()
		}
	}
	if p.Throughput != "" {
		if e.ext.tp, err = external.NewThroughput(p.config(p.Throughput, log), estimate.BuiltinThroughput{T: e.tp}); err != nil {
			return stop, err
		}
	}
	if p.Walltime != "" {
		if e.ext.wall, err = external.NewWalltime(p.config(p.Walltime, log), estimate.BuiltinWalltime{W: e.wall}); err != nil {
			return stop, err
		}
	}
	return stop, nil
}

// StartPlugin puts p's queue-wait plugin, if any, in front of w's model
// (which answers when it cannot).
func (w *Waits) StartPlugin(p Plugins, log zerolog.Logger) (stop func(), err error) {
	if p.QueueWait == "" {
		return func() {}, nil
	}
	ext, err := external.NewQueueWait(p.config(p.QueueWait, log), estimate.BuiltinQueueWait{M: w.model})
	if err != nil {
		return func() {}, err
	}
	w.SetExternal(ext)
	return ext.Close, nil
}

// throughputs is the throughput estimate for key: the plugin's where
// one is configured (it falls back to the built-in by itself), asked
// within ctx and its own per-call deadline.
func (e *Estimator) throughputs(ctx context.Context, key string, types []string) []estimate.Estimate {
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
func (e *Estimator) walltime(ctx context.Context, in estimate.WalltimeInput) estimate.WalltimeEstimate {
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
		"Calls an external estimator answered (docs/estimators.md).", []string{"estimator"}, nil)
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
