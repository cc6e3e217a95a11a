package live

import (
	"context"
	"time"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/wire"
)

// ChainWaits predicts a chain successor's queue wait with the site's
// queue-wait predictor (the model from queuewait_model, or the external
// estimator), and with fallback (recent observed waits) when that has no
// answer: no model, the queue unreadable, the knowledge base not built.
type ChainWaits struct {
	Waits *Waits
	// Site is the latest knowledge base (nil before any).
	Site     func() *wire.Site
	Fallback chains.WaitPredictor
}

// PredictWait implements chains.WaitPredictor.
func (w *ChainWaits) PredictWait(r chains.WaitRequest) (time.Duration, bool) {
	if w.Waits != nil && w.Waits.Predicts() {
		if kb := w.Site(); kb != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			q := forecast.WaitQuery{Partition: r.Partition, GPUType: r.GPUType, Nodes: 1, GPUs: max(r.GPUs, 1), LimitMin: r.TimeLimitMin}
			if p := w.Waits.Predict(ctx, kb, q, "", time.Now()); p.Known {
				return time.Duration(p.Minutes * float64(time.Minute)), true
			}
		}
	}
	return w.Fallback.PredictWait(r)
}
