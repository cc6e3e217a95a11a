package policy

import (
	"context"
	"math"
	"math/rand"
	"testing"
)

func small() *Problem {
	return &Problem{Types: []string{"fast", "slow"}, Capacity: []int{1, 1}, CostPerHour: []float64{2, 1},
		Jobs: []Job{
			{ID: "a", Throughput: []float64{4, 1}, Steps: 100},
			{ID: "b", Throughput: []float64{2, 2}, Steps: 100},
		}}
}

func checkFeasible(t *testing.T, p *Problem, a Allocation) {
	t.Helper()
	used := make([]float64, len(p.Types))
	for j, row := range a.X {
		s := 0.0
		for k, x := range row {
			if x < -1e-9 || x > 1+1e-9 {
				t.Fatalf("%s: X[%d][%d] = %g outside [0,1]", a.Policy, j, k, x)
			}
			s += x
			used[k] += x * p.Jobs[j].scale()
		}
		if s > 1+1e-9 {
			t.Fatalf("%s: job %d time %g > 1", a.Policy, j, s)
		}
	}
	for k, u := range used {
		if u > float64(p.Capacity[k])+1e-7 {
			t.Fatalf("%s: type %d uses %g > %d", a.Policy, k, u, p.Capacity[k])
		}
	}
}

func TestLASHandChecked(t *testing.T) {
	// Equal-share throughputs: a (4+1)/2 = 2.5, b (2+2)/2 = 2. b's share
	// x_b,fast + x_b,slow can never exceed its time, 1, so the max-min value
	// is at most 1, and 1 is reachable: b takes the slow GPU, a gets
	// 2.5/4 = 0.625 of the fast one.
	p := small()
	pol, _ := New("las", Options{NoFill: true})
	a, err := pol.Allocate(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(a.Objective-1) > 1e-9 {
		t.Fatalf("objective %g, want 1", a.Objective)
	}
	checkFeasible(t, p, a)
	// Three such jobs on a cluster of one fast GPU: the equal share is 4,
	// each job gets a third of the GPU, so each share is (4/3)/4 = 1/3.
	q := &Problem{Types: []string{"fast", "slow"}, Capacity: []int{1, 0}, Jobs: []Job{
		{Throughput: []float64{4, 1}}, {Throughput: []float64{4, 1}}, {Throughput: []float64{4, 1}}}}
	a, err = pol.Allocate(context.Background(), q)
	if err != nil || math.Abs(a.Objective-1.0/3) > 1e-9 {
		t.Fatalf("three jobs: %v %g, want 1/3", err, a.Objective)
	}
}

func TestDegenerate(t *testing.T) {
	ctx := context.Background()
	for _, name := range Names() {
		for _, ag := range []bool{false, true} {
			pol, _ := New(name, Options{Agnostic: ag})
			// no jobs
			p := &Problem{Types: []string{"v"}, Capacity: []int{4}, CostPerHour: []float64{1}}
			if a, err := pol.Allocate(ctx, p); err != nil || len(a.X) != 0 {
				t.Fatalf("%s no jobs: %v", name, err)
			}
			// zero throughputs and more GPUs than exist: unschedulable
			p.Jobs = []Job{{ID: "z", Throughput: []float64{0}, Steps: 1}, {ID: "big", Throughput: []float64{3}, Scale: 8, Steps: 1}}
			a, err := pol.Allocate(ctx, p)
			if err != nil || len(a.Unschedulable) != 2 || a.X[0][0] != 0 || a.X[1][0] != 0 {
				t.Fatalf("%s unschedulable: %v %+v", name, err, a)
			}
			// one job gets its whole time
			p.Jobs = []Job{{ID: "one", Throughput: []float64{3}, Steps: 10, Deadline: 100}}
			a, err = pol.Allocate(ctx, p)
			if err != nil || math.Abs(a.X[0][0]-1) > 1e-9 {
				t.Fatalf("%s one job: %v %v", name, err, a.X)
			}
		}
	}
	// invalid shape
	pol, _ := New("las", Options{})
	if _, err := pol.Allocate(ctx, &Problem{Types: []string{"a"}, Capacity: []int{1, 2}}); err == nil {
		t.Fatal("want shape error")
	}
}

func randomProblem(rng *rand.Rand, n int) *Problem {
	p := &Problem{Types: []string{"v100", "p100", "k80"}, Capacity: []int{3 + rng.Intn(8), 3 + rng.Intn(8), 3 + rng.Intn(8)}, CostPerHour: []float64{2.48, 1.46, 0.45}}
	for j := 0; j < n; j++ {
		base := 1 + 10*rng.Float64()
		sf := []int{1, 1, 1, 2, 4}[rng.Intn(5)]
		p.Jobs = append(p.Jobs, Job{Throughput: []float64{base * (1 + 3*rng.Float64()), base * (1 + rng.Float64()), base},
			Scale: sf, Steps: 1000 * (1 + rng.Float64()), Arrival: float64(j), Deadline: 200 + 2000*rng.Float64()})
	}
	return p
}

// TestProperties: every policy respects capacity and X in [0,1], and the
// heterogeneity-aware las is never worse than the agnostic one on las's own
// objective evaluated with the true throughputs.
func TestProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	ctx := context.Background()
	for trial := 0; trial < 30; trial++ {
		p := randomProblem(rng, 1+rng.Intn(40))
		for _, name := range Names() {
			for _, ag := range []bool{false, true} {
				pol, _ := New(name, Options{Agnostic: ag})
				a, err := pol.Allocate(ctx, p)
				if err != nil {
					t.Fatalf("trial %d %s: %v", trial, pol.Name(), err)
				}
				checkFeasible(t, p, a)
			}
		}
		het, _ := New("las", Options{})
		ag, _ := New("las", Options{Agnostic: true})
		ah, _ := het.Allocate(ctx, p)
		aa, _ := ag.Allocate(ctx, p)
		if v := lasValue(p, aa.X); v > ah.Objective*(1+1e-9) {
			t.Fatalf("trial %d: agnostic allocation scores %g > hetero optimum %g", trial, v, ah.Objective)
		}
	}
}

// lasValue is las's objective of X with true throughputs.
func lasValue(p *Problem, X [][]float64) float64 {
	v := math.Inf(1)
	for j := range p.Jobs {
		u := p.usable(j, false)
		f := p.Jobs[j].scale() / (p.Jobs[j].weight() * p.equalShare(u))
		s := 0.0
		for k, x := range X[j] {
			s += x * u[k] * f
		}
		v = math.Min(v, s)
	}
	return v
}

func TestSLOFallback(t *testing.T) {
	p := small()
	p.Jobs[0].Deadline, p.Jobs[1].Deadline = 1, 1 // 100 steps in 1 s: impossible
	pol, _ := New("min-cost-slo", Options{})
	a, err := pol.Allocate(context.Background(), p)
	if err != nil || a.Note == "" {
		t.Fatalf("want clean fallback with a note, got %v %q", err, a.Note)
	}
	checkFeasible(t, p, a)
}
