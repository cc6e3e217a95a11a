package policy

import (
	"context"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/controller/policy/lp"
)

// checkPacked checks an allocation with pairs against the problem: every
// member's time (alone plus in its pairs) is at most 1 and every type's
// GPUs (members alone plus pairs) at most its capacity.
func checkPacked(t *testing.T, p *Problem, a Allocation) {
	t.Helper()
	used := make([]float64, len(p.Types))
	time := make([]float64, len(p.Jobs))
	for j, row := range a.X {
		for k, x := range row {
			if x < -1e-9 {
				t.Fatalf("%s: X[%d][%d] = %g < 0", a.Policy, j, k, x)
			}
			time[j] += x
			used[k] += x * p.Jobs[j].scale() * p.Jobs[j].count()
		}
	}
	for q, row := range a.PairX {
		pr := p.Pairs[q]
		for k, y := range row {
			if y < -1e-9 {
				t.Fatalf("%s: PairX[%d][%d] = %g < 0", a.Policy, q, k, y)
			}
			if y > 1e-9 && p.shareGain(&pr, k) < 1 {
				t.Fatalf("%s: pair %d shares type %d where it loses (gain %g)", a.Policy, q, k, p.shareGain(&pr, k))
			}
			used[k] += y
			if pr.A == pr.B {
				time[pr.A] += 2 * y / p.Jobs[pr.A].count()
				continue
			}
			time[pr.A] += y / p.Jobs[pr.A].count()
			time[pr.B] += y / p.Jobs[pr.B].count()
		}
	}
	for j, s := range time {
		if s > 1+1e-7 {
			t.Fatalf("%s: job %d's members each run %g of the time", a.Policy, j, s)
		}
	}
	for k, u := range used {
		if u > float64(p.Capacity[k])+1e-7 {
			t.Fatalf("%s: type %d uses %g > %d", a.Policy, k, u, p.Capacity[k])
		}
	}
}

func pairTotal(a Allocation) float64 {
	s := 0.0
	for _, row := range a.PairX {
		for _, y := range row {
			s += y
		}
	}
	return s
}

func TestSpaceSharingHandChecked(t *testing.T) {
	t.Parallel()
	// One GPU, two jobs as fast as each other; sharing it each runs at
	// 0.75 of its speed alone (together 1.5 of a GPU's work). Taking
	// turns each gets half the GPU: las's value is 0.5. Sharing all the
	// time each gets 0.75.
	two := func(pair [2]float64) *Problem {
		return &Problem{Types: []string{"v100"}, Capacity: []int{1},
			Jobs:  []Job{{ID: "a", Throughput: []float64{2}, Steps: 100}, {ID: "b", Throughput: []float64{4}, Steps: 100}},
			Pairs: []Pair{{A: 0, B: 1, Throughput: [][2]float64{pair}}}}
	}
	// the same as one row standing for two identical jobs
	self := &Problem{Types: []string{"v100"}, Capacity: []int{1},
		Jobs:  []Job{{ID: "a", Throughput: []float64{2}, Steps: 100, Count: 2}},
		Pairs: []Pair{{A: 0, B: 0, Throughput: [][2]float64{{1.5, 1.5}}}}}
	cases := []struct {
		name     string
		p        *Problem
		o        Options
		want     float64
		wantPair float64
	}{
		{"shares when it pays", two([2]float64{1.5, 3}), Options{SpaceSharing: true, NoFill: true}, 0.75, 1},
		{"two members of one row", self, Options{SpaceSharing: true, NoFill: true}, 0.75, 1},
		{"below the margin takes turns", two([2]float64{1.05, 2.1}), Options{SpaceSharing: true, NoFill: true}, 0.5, 0},
		{"the admin's margin", two([2]float64{1.05, 2.1}), Options{SpaceSharing: true, ShareMargin: 1.01, NoFill: true}, 0.525, 1},
		{"cannot share ([0, 0])", two([2]float64{0, 0}), Options{SpaceSharing: true, NoFill: true}, 0.5, 0},
		{"off", two([2]float64{1.5, 3}), Options{NoFill: true}, 0.5, 0},
		{"agnostic never shares", two([2]float64{1.5, 3}), Options{SpaceSharing: true, Agnostic: true, NoFill: true}, 0.5, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pol, err := New("las", c.o)
			if err != nil {
				t.Fatal(err)
			}
			a, err := pol.Allocate(context.Background(), c.p)
			if err != nil {
				t.Fatal(err)
			}
			checkPacked(t, c.p, a)
			if math.Abs(a.Objective-c.want) > 1e-9 {
				t.Fatalf("objective %g, want %g", a.Objective, c.want)
			}
			if math.Abs(pairTotal(a)-c.wantPair) > 1e-9 {
				t.Fatalf("pairs hold %g GPUs, want %g (%v)", pairTotal(a), c.wantPair, a.PairX)
			}
		})
	}
}

// randomPacked draws a problem of single-GPU jobs, some rows standing for
// several jobs, with a pair for most two rows and some rows with themselves.
func randomPacked(rng *rand.Rand, n, K int) *Problem {
	p := &Problem{}
	for k := 0; k < K; k++ {
		p.Types = append(p.Types, string(rune('a'+k)))
		p.Capacity = append(p.Capacity, 1+rng.Intn(4))
	}
	for j := 0; j < n; j++ {
		job := Job{ID: string(rune('A' + j)), Steps: 10 + 100*rng.Float64(), Count: 1 + rng.Intn(3),
			Elapsed: 50 * rng.Float64(), IsolatedElapsed: 50 * rng.Float64()}
		for k := 0; k < K; k++ {
			tp := 0.5 + 4*rng.Float64()
			if rng.Intn(6) == 0 {
				tp = 0
			}
			job.Throughput = append(job.Throughput, tp)
		}
		p.Jobs = append(p.Jobs, job)
	}
	for a := 0; a < n; a++ {
		for b := a; b < n; b++ {
			if (a == b && p.Jobs[a].Count < 2) || rng.Intn(4) == 0 {
				continue
			}
			q := Pair{A: a, B: b}
			for k := 0; k < K; k++ {
				fa, fb := 0.3+0.6*rng.Float64(), 0.3+0.6*rng.Float64()
				q.Throughput = append(q.Throughput, [2]float64{fa * p.Jobs[a].Throughput[k], fb * p.Jobs[b].Throughput[k]})
			}
			p.Pairs = append(p.Pairs, q)
		}
	}
	return p
}

func TestSpaceSharingNeverWorse(t *testing.T) {
	t.Parallel()
	// Pairs only add ways to run: on the same jobs (each row one job, so
	// the plain formulation sees the same jobs), las with space sharing
	// reaches at least the plain optimum and ftf at most the plain max
	// rho; every allocation is feasible, and the exported LP's optimum is
	// the allocation's.
	rng := rand.New(rand.NewSource(3))
	for it := 0; it < 40; it++ {
		p := randomPacked(rng, 2+rng.Intn(6), 1+rng.Intn(3))
		for j := range p.Jobs {
			p.Jobs[j].Count = 1
		}
		kept := p.Pairs[:0]
		for _, q := range p.Pairs {
			if q.A != q.B {
				kept = append(kept, q)
			}
		}
		p.Pairs = kept
		for _, name := range []string{"las", "ftf"} {
			plain, _ := New(name, Options{NoFill: true})
			ss, _ := New(name, Options{NoFill: true, SpaceSharing: true})
			a0, err := plain.Allocate(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			a1, err := ss.Allocate(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			checkPacked(t, p, a1)
			better := a1.Objective >= a0.Objective-1e-7
			if name == "ftf" {
				better = a1.Objective <= a0.Objective*(1+1e-7)
			}
			if !better {
				t.Fatalf("%d %s: with sharing %g, without %g", it, name, a1.Objective, a0.Objective)
			}
			prob, err := ss.(LPPolicy).Formulate(p)
			if err != nil {
				t.Fatal(err)
			}
			res := lp.SolveDense(prob)
			if res.Status != lp.Optimal {
				t.Fatalf("%d %s: exported LP %v", it, name, res.Status)
			}
			if got := ss.(LPPolicy).LPObjective(res.Objective); math.Abs(got-a1.Objective) > 1e-6*math.Max(1, a1.Objective) {
				t.Fatalf("%d %s: exported LP gives %g, allocation %g", it, name, got, a1.Objective)
			}
		}
	}
}

func TestSpaceSharingFeasibleWithCounts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(5))
	for it := 0; it < 40; it++ {
		p := randomPacked(rng, 2+rng.Intn(6), 1+rng.Intn(3))
		for _, name := range []string{"las", "ftf"} {
			for _, fill := range []bool{false, true} {
				pol, _ := New(name, Options{SpaceSharing: true, NoFill: !fill})
				a, err := pol.Allocate(context.Background(), p)
				if err != nil {
					t.Fatalf("%d %s: %v", it, name, err)
				}
				checkPacked(t, p, a)
			}
		}
	}
}

func TestSpaceSharingFTFHandChecked(t *testing.T) {
	t.Parallel()
	// Two jobs of 100 steps at 1 step/s on one GPU, nothing elapsed. The
	// isolated time of each (half the GPU) is 200 s. Taking turns, the
	// best max rho is 1 (both finish by 200 s at half speed); sharing at
	// 0.75 each, 100/0.75 = 133 s: rho 2/3.
	p := &Problem{Types: []string{"v100"}, Capacity: []int{1},
		Jobs:  []Job{{ID: "a", Throughput: []float64{1}, Steps: 100}, {ID: "b", Throughput: []float64{1}, Steps: 100}},
		Pairs: []Pair{{A: 0, B: 1, Throughput: [][2]float64{{0.75, 0.75}}}}}
	for _, c := range []struct {
		o    Options
		want float64
	}{{Options{NoFill: true}, 1}, {Options{NoFill: true, SpaceSharing: true}, 2.0 / 3}} {
		pol, _ := New("ftf", c.o)
		a, err := pol.Allocate(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(a.Objective-c.want) > 1e-9 {
			t.Fatalf("%s: max rho %g, want %g", pol.Name(), a.Objective, c.want)
		}
	}
}

func TestSpaceSharingRejects(t *testing.T) {
	t.Parallel()
	base := func() *Problem {
		return &Problem{Types: []string{"v100"}, Capacity: []int{2},
			Jobs: []Job{{Throughput: []float64{1}}, {Throughput: []float64{1}, Scale: 2}}}
	}
	cases := []struct {
		name string
		mod  func(p *Problem)
		want string
	}{
		{"index", func(p *Problem) { p.Pairs = []Pair{{A: 0, B: 5, Throughput: [][2]float64{{1, 1}}}} }, "names job"},
		{"types", func(p *Problem) { p.Pairs = []Pair{{A: 0, B: 0, Throughput: nil}} }, "throughputs for 1 types"},
		{"negative", func(p *Problem) {
			p.Jobs[0].Count = 2
			p.Pairs = []Pair{{A: 0, B: 0, Throughput: [][2]float64{{-1, 1}}}}
		}, "throughput"},
		{"multi-GPU", func(p *Problem) { p.Pairs = []Pair{{A: 0, B: 1, Throughput: [][2]float64{{1, 1}}}} }, "single-GPU"},
		{"one job with itself", func(p *Problem) { p.Pairs = []Pair{{A: 0, B: 0, Throughput: [][2]float64{{1, 1}}}} }, "stands for one job"},
	}
	for _, c := range cases {
		p := base()
		c.mod(p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	if _, err := New("makespan", Options{SpaceSharing: true}); err == nil {
		t.Error("makespan accepted space sharing, which it does not formulate")
	}
}
