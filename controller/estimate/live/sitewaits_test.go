package live

import (
	"context"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
	"github.com/rs/zerolog"
)

// The site's queue-wait predictor answers when it has a model and a
// knowledge base, and says so when it has not (the chain manager then
// uses its observed waits).
func TestSiteWaits(t *testing.T) {
	kb := &wire.Site{Partitions: []wire.SitePartition{{Name: "gpu", Types: []wire.SitePartitionType{{Type: "v100", Nodes: 1, GPUs: 4, MaxPerNode: 4}}}},
		Nodes: []wire.SiteNode{{Name: "n1", GPUs: map[string]int{"v100": 4}, Partitions: []string{"gpu"}}}}
	queue := func(context.Context) ([]slurm.Job, error) { return nil, nil }
	q := forecast.WaitQuery{Partition: "gpu", GPUType: "v100", Nodes: 1, GPUs: 1, LimitMin: 60}
	tests := []struct {
		name string
		ext  estimate.QueueWait // nil: no model, no plugin
		kb   *wire.Site
		want time.Duration // 0: no answer
	}{
		{"no predictor", nil, kb, 0},
		{"predictor answers", fixedWait{estimate.QueueWaitAnswer{Wait: 3 * time.Minute, Source: "external:x"}, new(estimate.QueueWaitQuery)}, kb, 3 * time.Minute},
		{"predictor unknown", fixedWait{estimate.QueueWaitAnswer{Source: estimate.SourceUnknown}, new(estimate.QueueWaitQuery)}, kb, 0},
		{"no knowledge base yet", fixedWait{estimate.QueueWaitAnswer{Wait: 3 * time.Minute, Source: "external:x"}, new(estimate.QueueWaitQuery)}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWaits("", queue, zerolog.Nop())
			w.SetExternal(tc.ext)
			kb := tc.kb
			got, ok := (&SiteWaits{Waits: w, Site: func() *wire.Site { return kb }}).Wait(q)
			if ok != (tc.want > 0) || got != tc.want {
				t.Fatalf("wait %v %v, want %v", got, ok, tc.want)
			}
		})
	}
}
