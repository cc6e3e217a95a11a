package live

import (
	"context"
	"time"

	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/wire"
)

// SiteWaits predicts a job's queue wait with the site's queue-wait
// predictor (the model from queuewait_model, or the external estimator).
// The chain manager times a successor's submission by it (app wires it,
// with the manager's observed waits behind).
type SiteWaits struct {
	Waits *Waits
	// Site is the latest knowledge base (nil before any).
	Site func() *wire.Site
}

// Wait is q's predicted wait; ok false when there is no answer: no model,
// the queue unreadable, the knowledge base not built.
func (w *SiteWaits) Wait(q forecast.WaitQuery) (time.Duration, bool) {
	if w.Waits == nil || !w.Waits.Predicts() {
		return 0, false
	}
	kb := w.Site()
	if kb == nil {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p := w.Waits.Predict(ctx, kb, q, "", time.Now()); p.Known {
		return time.Duration(p.Minutes * float64(time.Minute)), true
	}
	return 0, false
}
