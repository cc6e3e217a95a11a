package sim

import (
	"context"
	"math"
	"reflect"
	"strconv"
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

// TestGroupSameOptimum: las over groups of identical jobs has the optimum
// of las over the single jobs, and every member's row respects the time
// constraint; capacity holds with every member on its group's row.
func TestGroupSameOptimum(t *testing.T) {
	c := cfg(t, false)
	for _, agnostic := range []bool{false, true} {
		var active []*live
		for _, j := range c.Jobs[:90] {
			active = append(active, &live{id: strconv.Itoa(j.ID), job: j, remaining: j.Steps, seen: j.Rates})
		}
		pol, _ := policy.New("las", policy.Options{Agnostic: agnostic})
		single := &policy.Problem{Types: c.Types, Capacity: c.Capacity, CostPerHour: ones(3)}
		for _, l := range active {
			single.Jobs = append(single.Jobs, policy.Job{ID: l.id, Throughput: l.seen, Scale: l.job.Scale, Steps: l.remaining})
		}
		grouped := &policy.Problem{Types: c.Types, Capacity: c.Capacity, CostPerHour: ones(3)}
		rowOf := group(grouped, active)
		if len(grouped.Jobs) >= len(single.Jobs) {
			t.Fatalf("no groups formed: %d rows for %d jobs", len(grouped.Jobs), len(single.Jobs))
		}
		a, err := pol.Allocate(context.Background(), single)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pol.Allocate(context.Background(), grouped)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(a.Objective-b.Objective) > 1e-6*math.Max(1, math.Abs(a.Objective)) {
			t.Fatalf("agnostic=%v: objective %.9g over jobs, %.9g over groups", agnostic, a.Objective, b.Objective)
		}
		used := make([]float64, 3)
		for i, l := range active {
			row := b.X[rowOf[i]]
			sum := 0.0
			for k, x := range row {
				sum += x
				used[k] += x * float64(l.job.Scale)
			}
			if sum > 1+1e-9 {
				t.Fatalf("job %s time %.6f > 1", l.id, sum)
			}
		}
		for k, u := range used {
			if u > float64(c.Capacity[k])+1e-6 {
				t.Fatalf("type %d: %.6f GPUs used of %d", k, u, c.Capacity[k])
			}
		}
	}
}
