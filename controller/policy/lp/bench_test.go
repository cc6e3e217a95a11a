package lp

import (
	"context"
	"math/rand"
	"testing"
)

// Random instances (randomMaxMin): the *Tight ones have capacity for
// about a third of the jobs' GPUs, so the capacities bind and prices
// matter; the plain ones bind at the jobs' time limits (t* = tmax),
// which used to send the exact phase into a dense solve of everything.
func benchMaxMin(b *testing.B, n int, capPerType float64) {
	mm := randomMaxMin(rand.New(rand.NewSource(3)), n, []float64{capPerType, capPerType, capPerType})
	var r MaxMinResult
	var err error
	for i := 0; i < b.N; i++ {
		if r, err = SolveMaxMin(context.Background(), mm); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.Reduced), "reduced-jobs")
	b.ReportMetric(float64(r.Rounds), "rounds")
}

func BenchmarkMaxMin2048(b *testing.B)       { benchMaxMin(b, 2048, 512) }
func BenchmarkMaxMin10000(b *testing.B)      { benchMaxMin(b, 10000, 512) }
func BenchmarkMaxMin2048Tight(b *testing.B)  { benchMaxMin(b, 2048, 150) }
func BenchmarkMaxMin10000Tight(b *testing.B) { benchMaxMin(b, 10000, 700) }
