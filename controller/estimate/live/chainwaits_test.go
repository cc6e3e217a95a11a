package live

import (
	"context"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
	"github.com/rs/zerolog"
)

type constWait struct{ d time.Duration }

func (c constWait) PredictWait(chains.WaitRequest) (time.Duration, bool) { return c.d, true }

// A chain's successor is timed by the site's queue-wait predictor when it
// has an answer, else by the chain manager's observed waits.
func TestChainWaitsUseTheSitePredictor(t *testing.T) {
	kb := &wire.Site{Partitions: []wire.SitePartition{{Name: "gpu", Types: []wire.SitePartitionType{{Type: "v100", Nodes: 1, GPUs: 4, MaxPerNode: 4}}}},
		Nodes: []wire.SiteNode{{Name: "n1", GPUs: map[string]int{"v100": 4}, Partitions: []string{"gpu"}}}}
	queue := func(context.Context) ([]slurm.Job, error) { return nil, nil }
	req := chains.WaitRequest{Partition: "gpu", GPUType: "v100", GPUs: 1, TimeLimitMin: 60}
	tests := []struct {
		name string
		ext  estimate.QueueWait // nil: no model, no plugin
		kb   *wire.Site
		want time.Duration
	}{
		{"no predictor: observed waits", nil, kb, 7 * time.Minute},
		{"predictor answers", fixedWait{estimate.QueueWaitAnswer{Wait: 3 * time.Minute, Source: "external:x"}, new(estimate.QueueWaitQuery)}, kb, 3 * time.Minute},
		{"predictor unknown: observed waits", fixedWait{estimate.QueueWaitAnswer{Source: estimate.SourceUnknown}, new(estimate.QueueWaitQuery)}, kb, 7 * time.Minute},
		{"no knowledge base yet: observed waits", fixedWait{estimate.QueueWaitAnswer{Wait: 3 * time.Minute, Source: "external:x"}, new(estimate.QueueWaitQuery)}, nil, 7 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWaits("", queue, zerolog.Nop())
			w.SetExternal(tc.ext)
			kb := tc.kb
			got, ok := (&ChainWaits{Waits: w, Site: func() *wire.Site { return kb }, Fallback: constWait{7 * time.Minute}}).PredictWait(req)
			if !ok || got != tc.want {
				t.Fatalf("wait %v %v, want %v", got, ok, tc.want)
			}
		})
	}
}
