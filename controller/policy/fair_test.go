package policy

import (
	"context"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/rota-hpc/rota/controller/policy/lp"
)

// oneType builds a cluster of c identical GPUs and jobs of throughput 1,
// entity given per job.
func oneType(c int, ents ...string) *Problem {
	p := &Problem{Types: []string{"g"}, Capacity: []int{c}, EntityWeights: map[string]float64{}}
	for i, e := range ents {
		p.Jobs = append(p.Jobs, Job{ID: e + string(rune('0'+i%10)), Throughput: []float64{1}, Steps: 100, Entity: e, Arrival: float64(i)})
	}
	return p
}

func rep(e string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = e
	}
	return out
}

// entityTotals sums X over each entity's jobs (throughput 1, one type, so
// this is the entity's share in GPUs).
func entityTotals(p *Problem, X [][]float64) map[string]float64 {
	m := map[string]float64{}
	for j, row := range X {
		m[p.Jobs[j].Entity] += row[0]
	}
	return m
}

func TestHierarchicalHandChecked(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		p       *Problem
		fifo    bool
		weights map[string]float64
		totals  map[string]float64
		perJob  []float64 // optional exact X per job
	}{
		// 1 vs 10 jobs on 2 GPUs: each entity gets one GPU, not 1/11 vs 10/11.
		{name: "1 vs 10", p: oneType(2, append([]string{"a"}, rep("b", 10)...)...),
			totals: map[string]float64{"a": 1, "b": 1}},
		// On 4 GPUs a's single job is capped at one GPU (its time); b takes the rest.
		{name: "1 vs 10, cap 4", p: oneType(4, append([]string{"a"}, rep("b", 10)...)...),
			totals: map[string]float64{"a": 1, "b": 3}},
		{name: "weights 2:1", p: oneType(3, append(rep("a", 10), rep("b", 10)...)...),
			weights: map[string]float64{"a": 2, "b": 1}, totals: map[string]float64{"a": 2, "b": 1}},
		// Fair inside: a's GPU is split three ways.
		{name: "fair inside", p: oneType(2, "a", "a", "a", "b"),
			totals: map[string]float64{"a": 1, "b": 1}, perJob: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 1}},
		// FIFO inside: a's jobs in arrival order take whole GPUs.
		{name: "fifo inside", p: oneType(3, "a", "a", "a", "b"), fifo: true,
			totals: map[string]float64{"a": 2, "b": 1}, perJob: []float64{1, 1, 0, 1}},
	}
	for _, c := range cases {
		for k, v := range c.weights {
			c.p.EntityWeights[k] = v
		}
		pol, _ := New("hierarchical", Options{NoFill: true, InnerFIFO: c.fifo})
		a, err := pol.Allocate(ctx, c.p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkFeasible(t, c.p, a)
		for e, want := range c.totals {
			if got := entityTotals(c.p, a.X)[e]; math.Abs(got-want) > 1e-6 {
				t.Fatalf("%s: entity %s gets %g, want %g (X=%v)", c.name, e, got, want, a.X)
			}
		}
		for j, want := range c.perJob {
			if math.Abs(a.X[j][0]-want) > 1e-6 {
				t.Fatalf("%s: job %d gets %g, want %g", c.name, j, a.X[j][0], want)
			}
		}
	}
}

// With one entity and equal weights, the first water level is m times
// las's max-min value (each of the m jobs must reach dt/m).
func TestHierarchicalOneEntityIsLAS(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for trial := 0; trial < 10; trial++ {
		p := randomProblem(rng, 2+rng.Intn(30))
		h, _ := New("hierarchical", Options{})
		l, _ := New("las", Options{})
		ah, err := h.Allocate(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		al, _ := l.Allocate(context.Background(), p)
		m := float64(len(p.Jobs) - len(al.Unschedulable))
		if math.Abs(ah.FormulatedOptimum-m*al.Objective) > 1e-7*m*al.Objective {
			t.Fatalf("trial %d: first level %g, want %d x las %g", trial, ah.FormulatedOptimum, int(m), al.Objective)
		}
		checkFeasible(t, p, ah)
	}
}

// rho is job j's finish-time fairness under X (ftf's own definition).
func rho(p *Problem, X [][]float64, j int) float64 {
	n := float64(len(p.Jobs))
	job := &p.Jobs[j]
	u := p.usable(j, false)
	iso := p.equalShare(u) * math.Min(1, p.totalGPUs()/(n*job.scale()))
	return (job.Elapsed + job.Steps/p.Throughput(X, j)) / (job.IsolatedElapsed + job.Steps/iso)
}

func TestFTFHandChecked(t *testing.T) {
	ctx := context.Background()
	pol, _ := New("ftf", Options{NoFill: true})
	cases := []struct {
		name string
		jobs []Job
		want float64 // max rho; < 0: check only that the rhos are equal
	}{
		// Two equal jobs on one GPU: each gets half, exactly its 1/n share.
		{"equal", []Job{{Throughput: []float64{1}, Steps: 100}, {Throughput: []float64{1}, Steps: 100}}, 1},
		// Lengths do not matter without elapsed time: still half each.
		{"lengths", []Job{{Throughput: []float64{1}, Steps: 100}, {Throughput: []float64{1}, Steps: 300}}, 1},
		// Elapsed time: the job that has waited gets more than half.
		{"elapsed", []Job{{Throughput: []float64{1}, Steps: 100, Elapsed: 400, IsolatedElapsed: 100},
			{Throughput: []float64{1}, Steps: 100}}, -1},
	}
	for _, c := range cases {
		p := &Problem{Types: []string{"g"}, Capacity: []int{1}, Jobs: c.jobs}
		a, err := pol.Allocate(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkFeasible(t, p, a)
		r0, r1 := rho(p, a.X, 0), rho(p, a.X, 1)
		if math.Abs(math.Max(r0, r1)-a.Objective) > 1e-9*a.Objective {
			t.Fatalf("%s: objective %g but rhos %g %g", c.name, a.Objective, r0, r1)
		}
		if c.want > 0 && math.Abs(a.Objective-c.want) > 1e-9 {
			t.Fatalf("%s: max rho %g, want %g", c.name, a.Objective, c.want)
		}
		if math.Abs(r0-r1) > 1e-8*r0 {
			t.Fatalf("%s: rhos %g and %g differ at the optimum", c.name, r0, r1)
		}
		if c.want < 0 && !(a.X[0][0] > 0.5) {
			t.Fatalf("%s: waiting job gets %g", c.name, a.X[0][0])
		}
	}
}

// TestFTFElapsedBeatsPerturbation: on random problems with elapsed time,
// ftf's allocation has max rho equal to its objective and no random
// feasible shift of capacity between two jobs lowers it.
func TestFTFRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	pol, _ := New("ftf", Options{NoFill: true})
	for trial := 0; trial < 10; trial++ {
		p := randomProblem(rng, 2+rng.Intn(20))
		for j := range p.Jobs {
			p.Jobs[j].Elapsed = 3000 * rng.Float64()
			p.Jobs[j].IsolatedElapsed = p.Jobs[j].Elapsed * rng.Float64()
		}
		a, err := pol.Allocate(context.Background(), p)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		checkFeasible(t, p, a)
		worst := 0.0
		for j := range p.Jobs {
			if !slices.Contains(a.Unschedulable, j) {
				worst = math.Max(worst, rho(p, a.X, j))
			}
		}
		if math.Abs(worst-a.Objective) > 1e-7*a.Objective {
			t.Fatalf("trial %d: max rho %g, objective %g", trial, worst, a.Objective)
		}
	}
}

// TestFairPoliciesAgainstCLP exports ftf (with and without elapsed time)
// and every level of hierarchical as free MPS and demands clp's optimum.
func TestFairPoliciesAgainstCLP(t *testing.T) {
	if _, err := exec.LookPath("clp"); err != nil {
		t.Fatalf("clp is required for this test: run scripts/setup-deps (%v)", err)
	}
	rng := rand.New(rand.NewSource(9))
	dir := t.TempDir()
	check := func(name string, prob *lp.Problem, want float64) {
		path := filepath.Join(dir, name+".mps")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.WriteFreeMPS(f, prob, name); err != nil {
			t.Fatal(err)
		}
		f.Close()
		obj, err := lp.SolveWithCLP(path)
		if err != nil {
			t.Fatalf("%s: %v (run scripts/setup-deps)", name, err)
		}
		// 1e-6 relative, and 1e-9 absolute for the near-zero levels of a
		// degenerate water-filling step.
		if math.Abs(-obj-want) > 1e-6*math.Abs(want)+1e-9 {
			t.Fatalf("%s: clp optimum %.10g, ours %.10g", name, -obj, want)
		}
	}
	p := randomProblem(rng, 120)
	ents := []string{"u1", "u2", "u3", "u4"}
	p.EntityWeights = map[string]float64{"u1": 3, "u2": 1, "u3": 2}
	for j := range p.Jobs {
		p.Jobs[j].Entity = ents[rng.Intn(len(ents))]
	}
	for _, ag := range []bool{false, true} {
		for _, elapsed := range []bool{false, true} {
			q := *p
			q.Jobs = append([]Job(nil), p.Jobs...)
			if elapsed {
				for j := range q.Jobs {
					q.Jobs[j].Elapsed = 5000 * rng.Float64()
					q.Jobs[j].IsolatedElapsed = q.Jobs[j].Elapsed / 2
				}
			}
			pol, _ := New("ftf", Options{Agnostic: ag})
			a, err := pol.Allocate(context.Background(), &q)
			if err != nil {
				t.Fatal(err)
			}
			form, err := pol.(LPPolicy).Formulate(&q)
			if err != nil {
				t.Fatal(err)
			}
			check("ftf", form, a.FormulatedOptimum)
		}
		for _, fifo := range []bool{false, true} {
			h := &hierarchicalPolicy{o: Options{Agnostic: ag, InnerFIFO: fifo}}
			idx, _ := p.schedulable()
			w, err := h.solve(context.Background(), p, idx)
			if err != nil {
				t.Fatal(err)
			}
			for l, mm := range w.levels {
				check("hier", mm.FullLP(), w.dts[l])
			}
		}
	}
}

func TestFairDeterminism(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	p := randomProblem(rng, 60)
	for j := range p.Jobs {
		p.Jobs[j].Entity = []string{"x", "y", "z"}[j%3]
		p.Jobs[j].Elapsed = float64(j * 10)
	}
	for _, name := range []string{"hierarchical", "ftf"} {
		for _, fifo := range []bool{false, true} {
			pol, _ := New(name, Options{InnerFIFO: fifo})
			a, err := pol.Allocate(context.Background(), p)
			b, err2 := pol.Allocate(context.Background(), p)
			if err != nil || err2 != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: two solves differ (%v %v)", name, err, err2)
			}
		}
	}
}

// BenchmarkHierarchical2048: 2,048 random jobs in 8 entities on
// 512:512:512 (go test -bench Hierarchical -run '^$').
func BenchmarkHierarchical2048(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	p := randomProblem(rng, 2048)
	p.Capacity = []int{512, 512, 512}
	for j := range p.Jobs {
		p.Jobs[j].Entity = string(rune('a' + j%8))
	}
	pol, _ := New("hierarchical", Options{})
	for i := 0; i < b.N; i++ {
		if _, err := pol.Allocate(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
}
