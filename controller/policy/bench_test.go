package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/lp"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

// The speed goals of issue #3, one benchmark each, on the problems that
// `rota solve --policy P --jobs N --cluster v100=C,p100=C,k80=C --seed 1`
// draws (workload.DrawProblem, Gavel's table from ../shared/data):
//
//	go test ./controller/policy -run '^$' -bench Goal -count 5
//
// With ROTA_BENCH_CLP=1 each benchmark also exports its LP (the first
// level for hierarchical) and reports clp's own solve time on it as
// clp-s/op, the figure the goals compare with.

const gavelTable = "../../../shared/data/gavel/simulation_throughputs.json"

func benchPolicy(b *testing.B, name string, o policy.Options, n, c, entities int) {
	b.Helper()
	types := []string{"v100", "p100", "k80"}
	tab, err := workload.Load(gavelTable, types)
	if err != nil {
		b.Fatalf("reading Gavel's table (benchmarks read ../shared/data): %v", err)
	}
	p := workload.DrawProblem(tab, types, []int{c, c, c}, n, 1, false, 0.2, entities)
	p.CostPerHour = []float64{2.48, 1.46, 0.45}
	pol, err := policy.New(name, o)
	if err != nil {
		b.Fatal(err)
	}
	clp := -1.0
	if os.Getenv("ROTA_BENCH_CLP") == "1" {
		clp = clpSeconds(b, pol, p)
	}
	b.ResetTimer()
	var a policy.Allocation
	for i := 0; i < b.N; i++ {
		if a, err = pol.Allocate(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(a.ReducedJobs), "reduced-jobs")
	if clp >= 0 {
		b.ReportMetric(clp, "clp-s/op")
	}
}

func clpSeconds(b *testing.B, pol policy.Policy, p *policy.Problem) float64 {
	form, err := pol.(policy.LPPolicy).Formulate(p)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "bench.mps")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := lp.WriteFreeMPS(f, form, pol.Name()); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	_, secs, err := lp.SolveWithCLPTimed(path)
	if err != nil {
		b.Fatal(err)
	}
	return secs
}

// Goal 1: las, 2,048 jobs on 512:512:512, under 50 ms.
func BenchmarkGoalLAS2048(b *testing.B) { benchPolicy(b, "las", policy.Options{}, 2048, 512, 8) }

// Goal 2: min-cost-slo, 512 jobs on 128:128:128, no slower than clp.
func BenchmarkGoalMinCostSLO512(b *testing.B) {
	benchPolicy(b, "min-cost-slo", policy.Options{}, 512, 128, 8)
}

// Goal 3: las at 10,000 jobs under 0.5 s and 10x faster than clp;
// hierarchical at 2,048 jobs under 1 s; the other LP policies no slower
// than clp.
func BenchmarkGoalLAS10000(b *testing.B) { benchPolicy(b, "las", policy.Options{}, 10000, 512, 8) }
func BenchmarkGoalHierarchical2048(b *testing.B) {
	benchPolicy(b, "hierarchical", policy.Options{}, 2048, 512, 8)
}
func BenchmarkGoalMaxThroughput2048(b *testing.B) {
	benchPolicy(b, "max-throughput", policy.Options{}, 2048, 512, 8)
}
func BenchmarkGoalMinCost2048(b *testing.B) {
	benchPolicy(b, "min-cost", policy.Options{}, 2048, 512, 8)
}
func BenchmarkGoalMinCostSLO2048(b *testing.B) {
	benchPolicy(b, "min-cost-slo", policy.Options{}, 2048, 512, 8)
}
func BenchmarkGoalFTF2048(b *testing.B) { benchPolicy(b, "ftf", policy.Options{}, 2048, 512, 8) }
func BenchmarkGoalMakespan2048(b *testing.B) {
	benchPolicy(b, "makespan", policy.Options{}, 2048, 512, 8)
}

// Goal 5: hierarchical with many small entities (57 levels at 256 jobs).
func BenchmarkGoalHierarchical64Entities(b *testing.B) {
	benchPolicy(b, "hierarchical", policy.Options{}, 256, 64, 64)
}

// Issue #17: hierarchical with many entities, as `rota solve --policy
// hierarchical --entities E --jobs N` draws it (seed 1 here): 64 and 256
// entities with 2,048 jobs on 512:512:512, 1,000 entities with 10,000
// jobs on 2500:2500:2500 (the same GPUs per job), under 1 s.
func BenchmarkHierarchicalEntities64(b *testing.B) {
	benchPolicy(b, "hierarchical", policy.Options{}, 2048, 512, 64)
}
func BenchmarkHierarchicalEntities256(b *testing.B) {
	benchPolicy(b, "hierarchical", policy.Options{}, 2048, 512, 256)
}
func BenchmarkHierarchicalEntities1000(b *testing.B) {
	benchPolicy(b, "hierarchical", policy.Options{}, 10000, 2500, 1000)
}
