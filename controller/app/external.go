package app

import (
	"context"
	"time"

	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/internal/conf"
)

// EstimatorPlugins names external estimators (docs/estimators.md,
// "External estimators"); "" keeps the built-in.
type EstimatorPlugins = live.Plugins

func loadEstimatorPlugins(v *conf.Values, c *Config) {
	v.String("estimator_throughput", &c.Estimators.Throughput)
	v.String("estimator_walltime", &c.Estimators.Walltime)
	v.String("estimator_queuewait", &c.Estimators.QueueWait)
	v.Duration("estimator_timeout", &c.Estimators.Timeout, time.Millisecond, 10*time.Second)
}

// startEstimatorPlugins launches the configured plugins in front of e's
// built-ins.
func (c *Controller) startEstimatorPlugins(e *live.Estimator) (stop func(), err error) {
	return e.StartPlugins(c.cfg.Estimators, c.log)
}

// startQueueWaitPlugin puts the configured external queue-wait estimator
// in front of the model.
func (c *Controller) startQueueWaitPlugin(w *live.Waits) (stop func(), err error) {
	return w.StartPlugin(c.cfg.Estimators, c.log)
}

// readHistory seeds the queue-wait history from slurmdbd over the
// configured window.
func (c *Controller) readHistory(ctx context.Context) {
	c.waits.ReadHistory(ctx, c.slurm, c.cfg.HistoryWindow, conf.FormatWindow(c.cfg.HistoryWindow), c.log)
}
