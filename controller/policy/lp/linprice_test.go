package lp

import (
	"math"
	"math/rand"
	"sort"
	"testing"
)

func TestWeightedSelect(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.Intn(40)
		ev := make([]event, n)
		total := 0.0
		for i := range ev {
			// few distinct s so that ties are common
			ev[i] = event{s: float64(rng.Intn(10)), rise: 0.1 + rng.Float64()}
			total += ev[i].rise
		}
		need := total * rng.Float64() * 1.2
		sorted := append([]event(nil), ev...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].s < sorted[j].s })
		want, wantOK, acc := 0.0, false, 0.0
		for _, e := range sorted {
			acc += e.rise
			if acc >= need {
				want, wantOK = e.s, true
				break
			}
		}
		got, ok := weightedSelect(ev, need)
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("trial %d: got %v %v, want %v %v", trial, got, ok, want, wantOK)
		}
	}
}

// TestLineMinExact compares the exact line minimiser with a fine scan of
// the Lagrangian dual along random directions, SLO jobs included.
func TestLineMinExact(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for trial := 0; trial < 30; trial++ {
		l := &Linear{Cap: []float64{3, 4, 5}}
		for j := 0; j < 12; j++ {
			b := BlockJob{A: []float64{1 + rng.Float64(), 1 + rng.Float64(), 0.5 + rng.Float64()}, S: float64(1 + rng.Intn(2))}
			b.V = []float64{rng.Float64(), rng.Float64(), rng.Float64()}
			if j%3 == 0 {
				b.C = 0.7
			}
			l.Jobs = append(l.Jobs, b)
		}
		polys := l.polytopes()
		L := func(p []float64) float64 {
			v := 0.0
			for k, c := range l.Cap {
				v += c * p[k]
			}
			for j := range l.Jobs {
				_, best, _, _ := blockBest(&l.Jobs[j], p)
				v += best
			}
			return v
		}
		p := []float64{rng.Float64(), rng.Float64(), rng.Float64()}
		d := []float64{rng.Float64() - 0.5, rng.Float64() - 0.5, rng.Float64() - 0.5}
		lo, hi := -1.0, 1.0
		for k, dk := range d {
			if dk > 0 {
				lo = math.Max(lo, -p[k]/dk)
			} else if dk < 0 {
				hi = math.Min(hi, -p[k]/dk)
			}
		}
		at := func(s float64) float64 {
			q := make([]float64, 3)
			for k := range q {
				q[k] = p[k] + s*d[k]
			}
			return L(q)
		}
		var ls lineScratch
		s := l.lineMin(&ls, polys, p, d, lo, hi)
		if s < lo-1e-12 || s > hi+1e-12 {
			t.Fatalf("trial %d: %g outside [%g, %g]", trial, s, lo, hi)
		}
		best := at(s)
		for i := 0; i <= 2000; i++ {
			x := lo + (hi-lo)*float64(i)/2000
			if v := at(x); v < best-1e-9*(1+math.Abs(best)) {
				t.Fatalf("trial %d: L(%g) = %.12g below L(s = %g) = %.12g", trial, x, v, s, best)
			}
		}
	}
}
