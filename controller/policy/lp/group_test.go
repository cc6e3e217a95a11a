package lp

import (
	"context"
	"math"
	"math/rand"
	"testing"
)

// TestGroupHandChecked: three identical jobs, each needing t per unit of
// time on the only type, share 1 GPU: t = 1/3 and every job gets 1/3. The
// requirement duals of the original LP sum to 1 over D (= 1 each), so each
// member's is a third of the group's 1.
func TestGroupHandChecked(t *testing.T) {
	mm := &MaxMin{Cap: []float64{1}}
	for i := 0; i < 3; i++ {
		mm.Jobs = append(mm.Jobs, BlockJob{A: []float64{1}, S: 1, D: 1})
	}
	r, err := SolveMaxMin(context.Background(), mm)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.T-1.0/3) > 1e-12 || r.Reduced > 1 {
		t.Fatalf("t = %g (want 1/3), reduced %d", r.T, r.Reduced)
	}
	for j := range mm.Jobs {
		if math.Abs(r.X[j][0]-1.0/3) > 1e-12 || math.Abs(r.Y[j]-1.0/3) > 1e-12 {
			t.Fatalf("job %d: x %g y %g, want 1/3, 1/3", j, r.X[j][0], r.Y[j])
		}
	}
	// Rows are copies, not shared: changing one must not change another.
	r.X[0][0] = 5
	if r.X[1][0] == 5 {
		t.Fatal("expanded rows share memory")
	}
}

// dupInstance draws a few distinct jobs and repeats each, the shape of the
// agnostic baselines (every job with the same usable types is identical).
func dupInstance(rng *rand.Rand, caps []float64) *MaxMin {
	base := randomMaxMin(rng, 1+rng.Intn(5), caps)
	mm := &MaxMin{Cap: caps}
	for len(mm.Jobs) < 10+rng.Intn(40) {
		mm.Jobs = append(mm.Jobs, base.Jobs[rng.Intn(len(base.Jobs))])
	}
	return mm
}

// TestGroupedMatchesDense: merged solves must have the dense simplex's
// optimum on the full (unmerged) LP, and the expanded allocation must be
// feasible there; for MaxMin and Linear, with and without SLO floors.
func TestGroupedMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for trial := 0; trial < 40; trial++ {
		caps := []float64{float64(1 + rng.Intn(10)), float64(1 + rng.Intn(10)), float64(1 + rng.Intn(10))}
		mm := dupInstance(rng, caps)
		if merged, _, _ := groupJobs(mm.Jobs); merged == nil {
			t.Fatalf("trial %d: no duplicates", trial)
		}
		full := mm.FullLP()
		want := SolveDense(full)
		got, err := SolveMaxMin(context.Background(), mm)
		if err != nil || want.Status != Optimal {
			t.Fatalf("trial %d: %v / dense %v", trial, err, want.Status)
		}
		if math.Abs(got.T-want.Objective) > 1e-9*math.Max(1, want.Objective) {
			t.Fatalf("trial %d: grouped %.12g, dense %.12g", trial, got.T, want.Objective)
		}
		if v := full.MaxViolation(flatten(mm, got)); v > 1e-7 {
			t.Fatalf("trial %d: expanded solution violates by %g", trial, v)
		}
		// The expanded duals must still sum to 1 over D (the t column).
		ysum := 0.0
		for j := range mm.Jobs {
			ysum += got.Y[j] * mm.Jobs[j].D
		}
		if math.Abs(ysum-1) > 1e-7 {
			t.Fatalf("trial %d: sum of D y = %g, want 1", trial, ysum)
		}

		l := &Linear{Cap: caps}
		for j, b := range mm.Jobs {
			b.V = make([]float64, len(b.A))
			for k := range b.V {
				b.V[k] = b.A[k] / float64(k+1)
			}
			b.D = 0
			if trial%2 == 0 && j%7 == 0 {
				b.C = 0.2 * b.A[0]
			}
			l.Jobs = append(l.Jobs, b)
		}
		lfull := l.FullLP()
		lwant := SolveDense(lfull)
		lgot, err := SolveLinear(context.Background(), l)
		if lwant.Status != Optimal {
			if err == nil {
				t.Fatalf("trial %d: dense %v, structured solved", trial, lwant.Status)
			}
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if math.Abs(lgot.Objective-lwant.Objective) > 1e-9*math.Max(1, math.Abs(lwant.Objective)) {
			t.Fatalf("trial %d: linear grouped %.12g, dense %.12g", trial, lgot.Objective, lwant.Objective)
		}
		var x []float64
		for j, b := range l.Jobs {
			for k, a := range b.A {
				if a > 0 {
					x = append(x, lgot.X[j][k])
				}
			}
		}
		if v := lfull.MaxViolation(x); v > 1e-7 {
			t.Fatalf("trial %d: linear expanded solution violates by %g", trial, v)
		}
		if math.Abs(lfull.Value(x)-lwant.Objective) > 1e-9*math.Max(1, math.Abs(lwant.Objective)) {
			t.Fatalf("trial %d: expanded objective %.12g, dense %.12g", trial, lfull.Value(x), lwant.Objective)
		}
	}
}
