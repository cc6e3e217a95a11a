package lp

import (
	"context"
	"errors"
	"math"
	"math/rand"
	"sync/atomic"
	"testing"
)

// countdownCtx reports itself cancelled from its n-th Err() call on, which
// cancels a solve at a chosen point of its work without timing.
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func newCountdown(n int64) *countdownCtx {
	c := &countdownCtx{Context: context.Background()}
	c.left.Store(n)
	return c
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func capacityBound(n int) *MaxMin {
	return randomMaxMin(rand.New(rand.NewSource(11)), n, []float64{float64(n) / 14, float64(n) / 14, float64(n) / 14})
}

func TestSolversHonourCancellation(t *testing.T) {
	mm := capacityBound(2048)
	lin := &Linear{Cap: mm.Cap}
	for j, b := range mm.Jobs {
		b.D, b.V = 0, append([]float64(nil), b.A...)
		if j%7 == 0 {
			b.C = 0.3 * maxAbs(b.A)
		}
		lin.Jobs = append(lin.Jobs, b)
	}
	solvers := []struct {
		name  string
		solve func(context.Context) error
	}{
		{"maxmin", func(ctx context.Context) error { _, err := SolveMaxMin(ctx, mm); return err }},
		{"linear", func(ctx context.Context) error { _, err := SolveLinear(ctx, lin); return err }},
	}
	for _, s := range solvers {
		pre, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.solve(pre); !errors.Is(err, context.Canceled) {
			t.Fatalf("%s, cancelled before the start: got %v, want context.Canceled", s.name, err)
		}
		// Count the checks a whole solve makes, then cancel at several
		// points inside it (the first check, the price search, the exact
		// phase): each must stop with the context's error.
		full := newCountdown(math.MaxInt64)
		if err := s.solve(full); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		checks := math.MaxInt64 - full.left.Load()
		if checks < 3 {
			t.Fatalf("%s looks at its context only %d times", s.name, checks)
		}
		for _, at := range []int64{0, 1, checks / 2, checks - 1} {
			if err := s.solve(newCountdown(at)); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s cancelled at check %d of %d: got %v, want context.Canceled", s.name, at, checks, err)
			}
		}
	}
}

func TestDenseHonoursCancellation(t *testing.T) {
	full := capacityBound(60).FullLP()
	if r, err := SolveDenseContext(newCountdown(math.MaxInt64), full); err != nil || r.Status != Optimal {
		t.Fatalf("uncancelled: %v %v", r.Status, err)
	}
	for _, at := range []int64{0, 1, 3} {
		r, err := SolveDenseContext(newCountdown(at), full)
		if !errors.Is(err, context.Canceled) || r.Status != Cancelled {
			t.Fatalf("cancelled at check %d: status %v, err %v", at, r.Status, err)
		}
	}
}

// TestMaxMinRecoversFromPoorPrices spoils the price estimate and demands
// the same optimum: the exact phase must not depend on a good start (a
// poor one used to send it into a dense solve of the whole LP).
func TestMaxMinRecoversFromPoorPrices(t *testing.T) {
	mm := capacityBound(400)
	want, err := SolveMaxMin(context.Background(), mm)
	if err != nil {
		t.Fatal(err)
	}
	full := mm.FullLP()
	defer func() { perturbPrices = nil }()
	for _, eps := range []float64{0.01, 0.05, 0.2, 0.5} {
		rng := rand.New(rand.NewSource(5))
		perturbPrices = func(p []float64, tt *float64) {
			for k := range p {
				p[k] *= 1 + eps*(2*rng.Float64()-1)
			}
			*tt *= 1 + eps*(2*rng.Float64()-1)
		}
		got, err := SolveMaxMin(context.Background(), mm)
		if err != nil {
			t.Fatalf("eps %g: %v", eps, err)
		}
		if math.Abs(got.T-want.T) > 1e-9*want.T {
			t.Fatalf("eps %g: optimum %.12g, want %.12g", eps, got.T, want.T)
		}
		if v := full.MaxViolation(flatten(mm, got)); v > 1e-7 {
			t.Fatalf("eps %g: solution violates constraints by %g", eps, v)
		}
		t.Logf("eps %g: %d rounds, %d jobs in the small LP", eps, got.Rounds, got.Reduced)
	}
}
