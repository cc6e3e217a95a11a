package app

import (
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/wire"
)

type constWait time.Duration

func (c constWait) PredictWait(chains.WaitRequest) (time.Duration, bool) {
	return time.Duration(c), true
}

// Without a site predictor's answer (no model here), a chain successor is
// timed by the chain manager's observed waits.
func TestChainWaitsFallBack(t *testing.T) {
	t.Parallel()
	w := chainWaits{site: &live.SiteWaits{Site: func() *wire.Site { return &wire.Site{} }}, fallback: constWait(7 * time.Minute)}
	if d, ok := w.PredictWait(chains.WaitRequest{Partition: "gpu", GPUs: 1}); !ok || d != 7*time.Minute {
		t.Fatalf("wait %v %v, want the observed 7m", d, ok)
	}
}
