package lp

import (
	"context"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// randomMaxMin draws a las-like instance: n jobs, 3 types, scale factors
// 1..8 with Gavel's probabilities, throughputs with the fast/slow spread of
// real GPUs.
func randomMaxMin(rng *rand.Rand, n int, caps []float64) *MaxMin {
	mm := &MaxMin{Cap: caps}
	for j := 0; j < n; j++ {
		b := BlockJob{A: make([]float64, len(caps)), S: 1, D: 1}
		switch u := rng.Float64(); {
		case u < 0.1:
			b.S = 2
		case u < 0.2:
			b.S = 4
		}
		base := 0.5 + rng.Float64()
		for k := range b.A {
			b.A[k] = base * (1 + float64(len(caps)-k)*rng.Float64())
			if rng.Float64() < 0.05 {
				b.A[k] = 0
			}
		}
		mm.Jobs = append(mm.Jobs, b)
	}
	return mm
}

func TestMaxMinMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 40; trial++ {
		n := 1 + rng.Intn(60)
		caps := []float64{float64(1 + rng.Intn(20)), float64(1 + rng.Intn(20)), float64(1 + rng.Intn(20))}
		mm := randomMaxMin(rng, n, caps)
		if trial%3 == 0 { // some frozen jobs, as in water-filling
			for j := range mm.Jobs {
				if j%4 == 0 {
					mm.Jobs[j].D, mm.Jobs[j].C = 0, 0.01
				}
			}
		}
		full := mm.FullLP()
		want := SolveDense(full)
		got, err := SolveMaxMin(context.Background(), mm)
		if want.Status != Optimal {
			t.Fatalf("trial %d: dense %v", trial, want.Status)
		}
		if err != nil {
			if err == ErrUnbounded {
				continue
			}
			t.Fatalf("trial %d: %v", trial, err)
		}
		if math.Abs(got.T-want.Objective) > 1e-7*math.Max(1, want.Objective) {
			t.Fatalf("trial %d (n=%d): structured %.12g, dense %.12g", trial, n, got.T, want.Objective)
		}
		x := flatten(mm, got)
		if v := full.MaxViolation(x); v > 1e-7 {
			t.Fatalf("trial %d: solution violates constraints by %g", trial, v)
		}
	}
}

// flatten orders a solution as FullLP's columns: t, then allowed x.
func flatten(mm *MaxMin, r MaxMinResult) []float64 {
	x := []float64{r.T}
	for j, b := range mm.Jobs {
		for k, a := range b.A {
			if a > 0 {
				x = append(x, r.X[j][k])
			}
		}
	}
	return x
}

func TestDenseSmall(t *testing.T) {
	// max 3x + 2y, x + y <= 4, x + 3y <= 6, x <= 3  -> x=3, y=1, obj 11
	p := &Problem{}
	x, y := p.AddVar("x", 3), p.AddVar("y", 2)
	p.AddRow(Row{Idx: []int{x, y}, Val: []float64{1, 1}, Sense: LE, RHS: 4})
	p.AddRow(Row{Idx: []int{x, y}, Val: []float64{1, 3}, Sense: LE, RHS: 6})
	p.AddRow(Row{Idx: []int{x}, Val: []float64{1}, Sense: LE, RHS: 3})
	r := SolveDense(p)
	if r.Status != Optimal || math.Abs(r.Objective-11) > 1e-9 {
		t.Fatalf("got %v %g", r.Status, r.Objective)
	}
	// duals: row0 price 2, row2 price 1
	if math.Abs(r.Dual[0]-2) > 1e-9 || math.Abs(r.Dual[2]-1) > 1e-9 || math.Abs(r.Dual[1]) > 1e-9 {
		t.Fatalf("duals %v", r.Dual)
	}
	// infeasible: x >= 5, x <= 3
	q := &Problem{}
	q.AddVar("x", 1)
	q.AddRow(Row{Idx: []int{0}, Val: []float64{1}, Sense: GE, RHS: 5})
	q.AddRow(Row{Idx: []int{0}, Val: []float64{1}, Sense: LE, RHS: 3})
	if r := SolveDense(q); r.Status != Infeasible {
		t.Fatalf("want infeasible, got %v", r.Status)
	}
}

// TestMPSRoundTripCLP writes a structured instance as free MPS, solves it
// with clp and demands the same optimum. clp is a declared test dependency.
func TestMPSRoundTripCLP(t *testing.T) {
	if _, err := lookClp(); err != nil {
		t.Fatalf("clp is required for this test: run scripts/setup-deps (%v)", err)
	}
	rng := rand.New(rand.NewSource(7))
	mm := randomMaxMin(rng, 300, []float64{40, 40, 40})
	got, err := SolveMaxMin(context.Background(), mm)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mm.mps")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFreeMPS(f, mm.FullLP(), "maxmin"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	obj, err := SolveWithCLP(path)
	if err != nil {
		t.Fatalf("%v (run scripts/setup-deps)", err)
	}
	if math.Abs(-obj-got.T) > 1e-6*math.Abs(got.T) {
		t.Fatalf("clp optimum %.10g, ours %.10g", -obj, got.T)
	}
}

func TestLinearMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := 0; trial < 40; trial++ {
		n := 1 + rng.Intn(60)
		caps := []float64{float64(1 + rng.Intn(20)), float64(1 + rng.Intn(20)), float64(1 + rng.Intn(20))}
		mm := randomMaxMin(rng, n, caps)
		l := &Linear{Cap: caps}
		for j, b := range mm.Jobs {
			b.V = make([]float64, len(b.A))
			for k := range b.V {
				b.V[k] = b.A[k] / float64(k+1)
			}
			b.D = 0
			if trial%2 == 0 && j%5 == 0 {
				b.C = 0.2 * b.A[0]
			}
			l.Jobs = append(l.Jobs, b)
		}
		full := l.FullLP()
		want := SolveDense(full)
		got, err := SolveLinear(context.Background(), l)
		if want.Status == Infeasible {
			if err == nil {
				t.Fatalf("trial %d: want infeasible", trial)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if math.Abs(got.Objective-want.Objective) > 1e-7*math.Max(1, want.Objective) {
			t.Fatalf("trial %d (n=%d): structured %.12g, dense %.12g", trial, n, got.Objective, want.Objective)
		}
	}
}

// TestMaxMinAtTimeLimit: when the capacities do not bind, t* is set by
// the slowest job's time limit and no price is positive; the price
// search must still hold nearly every job (this instance used to free all
// 2,048 jobs into the dense simplex and not finish).
func TestMaxMinAtTimeLimit(t *testing.T) {
	mm := randomMaxMin(rand.New(rand.NewSource(3)), 2048, []float64{512, 512, 512})
	tmax := math.Inf(1)
	for _, b := range mm.Jobs {
		tmax = math.Min(tmax, maxAbs(b.A))
	}
	got, err := SolveMaxMin(context.Background(), mm)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.T-tmax) > 1e-12*tmax {
		t.Fatalf("t* = %.15g, want the time limit %.15g", got.T, tmax)
	}
	if v := mm.FullLP().MaxViolation(flatten(mm, got)); v > 1e-7 {
		t.Fatalf("solution violates constraints by %g", v)
	}
	if got.Reduced > 64 {
		t.Fatalf("%d jobs carried in full, want few", got.Reduced)
	}
}

// TestValueAtIsUpperBound: t*(p) bounds the optimum from above at every
// price, also from t = tmax, where the job that sets tmax is exactly at
// its best rate and the ways to reach it tie (blockCost). With the first
// tied way's slope instead of the largest, trial 13 fails.
func TestValueAtIsUpperBound(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	for trial := 0; trial < 300; trial++ {
		n := 2 + rng.Intn(40)
		c := float64(1 + rng.Intn(3*n))
		mm := randomMaxMin(rng, n, []float64{c, c * rng.Float64(), c * rng.Float64()})
		tmax := math.Inf(1)
		for j := range mm.Jobs {
			b := &mm.Jobs[j]
			b.D = 0.5 + rng.Float64()
			tmax = math.Min(tmax, maxAbs(b.A)/b.D)
		}
		want := SolveDense(mm.FullLP())
		if want.Status != Optimal {
			t.Fatalf("trial %d: dense %v", trial, want.Status)
		}
		for i := 0; i < 50; i++ {
			p := []float64{rng.Float64(), rng.Float64(), rng.Float64()}
			if i%2 == 0 {
				p[rng.Intn(3)] = 1e-3 * rng.Float64() // near an edge of the simplex
			}
			// 1e-8: valueAt steps 1e-9 inside when rounding puts a job
			// just past its reach at tmax.
			if v := mm.valueAt(p, tmax); v < want.Objective*(1-1e-8) {
				t.Fatalf("trial %d: t*(%v) = %.12g below the optimum %.12g (tmax %.12g)", trial, p, v, want.Objective, tmax)
			}
		}
	}
}
