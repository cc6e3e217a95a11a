package lp

import (
	"context"
	"math"
	"math/rand"
	"testing"
)

// TestSLOVertexHeld: one job, a slow type (A 1, value 1) and a fast one
// (A 2, value 0.5), an SLO of 1.5 and room to spare (prices 0). Its
// block's vertices are: fast alone at full time (0.5), fast alone at the
// SLO, 0.75 of the time (0.375), and half slow, half fast (0.5 + 0.25 =
// 0.75, the best). The job must be held at that split, not carried into
// the small LP.
func TestSLOVertexHeld(t *testing.T) {
	b := BlockJob{A: []float64{1, 2}, S: 1, C: 1.5, V: []float64{1, 0.5}}
	var got []lfix
	blockVertices(&b, func(f lfix) { got = append(got, f) })
	if len(got) != 3 {
		t.Fatalf("vertices %+v, want 3", got)
	}
	l := &Linear{Cap: []float64{4, 4}, Jobs: []BlockJob{b}}
	r, err := SolveLinear(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.Objective-0.75) > 1e-12 || math.Abs(r.X[0][0]-0.5) > 1e-12 || math.Abs(r.X[0][1]-0.5) > 1e-12 {
		t.Fatalf("objective %g x %v, want 0.75 at [0.5 0.5]", r.Objective, r.X[0])
	}
	if r.Reduced != 0 {
		t.Fatalf("%d jobs carried in full, want 0", r.Reduced)
	}
	// Unreachable SLO: an error, not a wrong answer.
	b.C = 3
	if _, err := SolveLinear(context.Background(), &Linear{Cap: []float64{4, 4}, Jobs: []BlockJob{b}}); err == nil {
		t.Fatal("SLO above every type's rate: want an error")
	}
}

// TestSLOHeavyMatchesDense: every job has an SLO, capacity tight enough
// that many bind; the held-vertex path must reach the dense optimum or
// agree that the LP is infeasible.
func TestSLOHeavyMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	solved := 0
	for trial := 0; trial < 60; trial++ {
		n := 5 + rng.Intn(80)
		caps := []float64{float64(1 + rng.Intn(n/3+1)), float64(1 + rng.Intn(n/3+1)), float64(1 + rng.Intn(n/3+1))}
		mm := randomMaxMin(rng, n, caps)
		l := &Linear{Cap: caps}
		for _, b := range mm.Jobs {
			b.D = 0
			b.V = make([]float64, len(b.A))
			for k := range b.V {
				b.V[k] = b.A[k] / []float64{2.48, 1.46, 0.45}[k] / b.S
			}
			if rng.Float64() < 0.8 {
				b.C = maxAbs(b.A) * rng.Float64() * 0.6
			}
			l.Jobs = append(l.Jobs, b)
		}
		full := l.FullLP()
		want := SolveDense(full)
		got, err := SolveLinear(context.Background(), l)
		if want.Status != Optimal {
			if err == nil {
				t.Fatalf("trial %d: dense %v, structured found %g", trial, want.Status, got.Objective)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		solved++
		if math.Abs(got.Objective-want.Objective) > 1e-9*math.Max(1, math.Abs(want.Objective)) {
			t.Fatalf("trial %d (n=%d): structured %.12g, dense %.12g", trial, n, got.Objective, want.Objective)
		}
		var x []float64
		for j, b := range l.Jobs {
			for k, a := range b.A {
				if a > 0 {
					x = append(x, got.X[j][k])
				}
			}
		}
		if v := full.MaxViolation(x); v > 1e-7 {
			t.Fatalf("trial %d: solution violates by %g", trial, v)
		}
	}
	if solved < 20 {
		t.Fatalf("only %d feasible trials; the test checks too little", solved)
	}
}

// TestDegeneratePriceRepaired: two jobs, two one-GPU types, job 0 worth
// 3 on type 0 and 1 on type 1, job 1 worth 2 and 1.5. The optimum is 4.5
// (job 0 on type 0, job 1 on type 1; swapped only 3). Both jobs are held
// and fill both types, so the small LP has no columns and reports prices
// 0, at which job 1 would rather have type 0; any prices with
// 0.5 <= p0 - p1 <= 2 prove the optimum, and the repair must find them so
// that the first round is already the proof (Rounds 1, nothing carried).
// The direct check: repairPrices on a zero price vector.
func TestDegeneratePriceRepaired(t *testing.T) {
	l := &Linear{Cap: []float64{1, 1}, Jobs: []BlockJob{
		{A: []float64{1, 1}, S: 1, V: []float64{3, 1}},
		{A: []float64{1, 1}, S: 1, V: []float64{2, 1.5}},
	}}
	r, err := SolveLinear(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.Objective-4.5) > 1e-12 || r.X[0][0] != 1 || r.X[1][1] != 1 {
		t.Fatalf("objective %g x %v, want 4.5 with job 0 on type 0", r.Objective, r.X)
	}
	fixed := []lfix{{k1: 0, k2: -1, x1: 1}, {k1: 1, k2: -1, x1: 1}}
	X := [][]float64{{1, 0}, {0, 1}}
	price := []float64{0, 0}
	l.repairPrices(price, []float64{0, 0}, X, fixed)
	if d := price[0] - price[1]; d < 0.5-1e-12 || d > 2+1e-12 {
		t.Fatalf("repaired prices %v: p0 - p1 = %g outside [0.5, 2]", price, d)
	}
	// A row with room left keeps its price 0 (complementary slackness).
	l.Cap[1] = 2
	price = []float64{0, 0}
	l.repairPrices(price, []float64{1, 1}, X, fixed)
	if price[1] != 0 {
		t.Fatalf("slack row repriced to %g", price[1])
	}
}
