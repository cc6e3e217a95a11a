package sim

import (
	"context"
	"reflect"
	"testing"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

func cfg(t *testing.T, static bool) Config {
	tab, err := workload.Load("../../../shared/data/gavel/simulation_throughputs.json", []string{"v100", "p100", "k80"})
	if err != nil {
		t.Fatal(err)
	}
	g := workload.NewGenerator(tab, 3, true)
	var jobs []workload.Job
	rate := 6.0
	if static {
		rate = 0
	}
	for i := 0; i < 120; i++ {
		jobs = append(jobs, g.Next(rate))
	}
	return Config{Types: []string{"v100", "p100", "k80"}, Capacity: []int{8, 8, 8}, Round: 360,
		GPUsPerNode: 4, Jobs: jobs, MeasureLo: 20, MeasureHi: 80, MigrationCost: 30}
}

func TestDeterministic(t *testing.T) {
	c := cfg(t, false)
	pol, _ := policy.New("las", policy.Options{})
	a, err := Run(context.Background(), c, pol)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(context.Background(), c, pol)
	a.SolveSecondsMean, a.SolveSecondsMax, b.SolveSecondsMean, b.SolveSecondsMax = 0, 0, 0, 0
	if !reflect.DeepEqual(a, b) || a.JobsMeasured != 60 {
		t.Fatalf("runs differ or incomplete:\n%+v\n%+v", a, b)
	}
	for k, u := range a.Utilisation {
		if u <= 0 || u > 1+1e-9 {
			t.Fatalf("type %d utilisation %.3f outside (0, 1]", k, u)
		}
	}
	if a.Solves == 0 || a.Solves > a.Rounds || a.LeaseExtensions == 0 {
		t.Fatalf("solves %d, rounds %d, lease extensions %d", a.Solves, a.Rounds, a.LeaseExtensions)
	}
}

// TestReallocInterval: a longer interval between solves means fewer solves,
// and every job still finishes.
func TestReallocInterval(t *testing.T) {
	c := cfg(t, false)
	pol, _ := policy.New("las", policy.Options{})
	a, err := Run(context.Background(), c, pol)
	if err != nil {
		t.Fatal(err)
	}
	c.ReallocInterval = 1920
	b, err := Run(context.Background(), c, pol)
	if err != nil {
		t.Fatal(err)
	}
	if !(b.Solves < a.Solves) || b.JobsMeasured != 60 {
		t.Fatalf("solves %d (every change) vs %d (1920 s), measured %d", a.Solves, b.Solves, b.JobsMeasured)
	}
}

// TestMakespanBeatsFIFO on a static trace, the shape of Gavel's result.
func TestMakespanBeatsFIFO(t *testing.T) {
	c := cfg(t, true)
	c.MeasureLo, c.MeasureHi = 0, 60
	c.Jobs = c.Jobs[:60]
	mk, _ := policy.New("makespan", policy.Options{})
	ff, _ := policy.New("fifo", policy.Options{Agnostic: true})
	a, err := Run(context.Background(), c, mk)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(context.Background(), c, ff)
	if !(a.MakespanHours < b.MakespanHours) {
		t.Fatalf("makespan %.2f h not below fifo %.2f h", a.MakespanHours, b.MakespanHours)
	}
}
