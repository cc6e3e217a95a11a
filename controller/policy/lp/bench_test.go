package lp

import (
	"context"
	"math/rand"
	"testing"
)

func benchMaxMin(b *testing.B, n int) {
	mm := randomMaxMin(rand.New(rand.NewSource(3)), n, []float64{512, 512, 512})
	r, err := SolveMaxMin(context.Background(), mm)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(r.Reduced), "reduced-jobs")
	b.ReportMetric(float64(r.Rounds), "rounds")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := SolveMaxMin(context.Background(), mm); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMaxMin2048(b *testing.B)  { benchMaxMin(b, 2048) }
func BenchmarkMaxMin10000(b *testing.B) { benchMaxMin(b, 10000) }
