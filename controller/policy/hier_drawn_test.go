package policy_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

// TestHierarchicalDrawnMatchesLevels: on the CLI's workloads (rota solve
// --policy hierarchical --entities E --jobs N --seed 11), the water-filling
// by stages gives every job the share the level-by-level one does.
func TestHierarchicalDrawnMatchesLevels(t *testing.T) {
	types := []string{"v100", "p100", "k80"}
	tab, err := workload.Load(gavelTable, types)
	if err != nil {
		t.Fatalf("reading Gavel's table (tests read ../shared/data): %v", err)
	}
	for _, c := range []struct {
		entities, jobs, gpus int
		fifo                 bool
	}{
		{64, 2048, 512, false},
		{256, 384, 96, false},
		{16, 128, 32, true},
	} {
		p := workload.DrawProblem(tab, types, []int{c.gpus, c.gpus, c.gpus}, c.jobs, 11, false, 0.2, c.entities)
		o := policy.Options{InnerFIFO: c.fifo}
		t0 := time.Now()
		got, lps, err := policy.HierarchicalShares(context.Background(), p, o, false)
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		want, levels, err := policy.HierarchicalShares(context.Background(), p, o, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d entities, %d jobs, fifo %v: %d LPs in %v, level by level %d in %v",
			c.entities, c.jobs, c.fifo, lps, t1.Sub(t0), levels, time.Since(t1))
		for j := range got {
			if math.Abs(got[j]-want[j]) > 1e-7*math.Max(1, want[j]) {
				t.Fatalf("%d entities, %d jobs: job %d share %.12g, level by level %.12g", c.entities, c.jobs, j, got[j], want[j])
			}
		}
	}
}
