package live

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The estimator counts each rate it gives by its source: measured where
// a type was measured, the table's scaling elsewhere, and the admin's
// relative speeds for a job nothing is known of; walltimes likewise.
func TestEstimateCounts(t *testing.T) {
	types := []string{"k80", "p100", "v100"}
	for _, tc := range []struct {
		name    string
		prepare func(e *Estimator)
		key     string
		want    map[string]float64 // source -> count after one Rates call
	}{
		{"nothing known: relative speeds", func(*Estimator) {}, "bob/bert",
			map[string]float64{"relative": 3}},
		{"measured on one type: the table scales it to the others", func(e *Estimator) {
			e.Observe(context.Background(), "alice/resnet", "k80", 6, time.Now())
			e.Observe(context.Background(), "alice/resnet", "k80", 6, time.Now().Add(time.Second))
		}, "alice/resnet", map[string]float64{"measured": 1, "table": 2}},
		{"hinted on every type", func(e *Estimator) {
			e.Hint(context.Background(), "carol/lm", map[string]float64{"k80": 1, "p100": 3, "v100": 4})
		}, "carol/lm", map[string]float64{"hint": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEstimator(map[string]float64{"v100": 4, "p100": 3, "k80": 1}, 1.5, 5)
			tc.prepare(e)
			e.Rates(context.Background(), tc.key, types)
			for _, src := range countedSources[estThroughput] {
				if got := testutil.ToFloat64(e.counts.WithLabelValues(estThroughput, src)); got != tc.want[src] {
					t.Errorf("estimates_total{throughput,%s} = %v, want %v", src, got, tc.want[src])
				}
			}
		})
	}
	e := NewEstimator(nil, 1.5, 5)
	e.Walltime(context.Background(), "a/b", 3600, 2, 0, 0)
	e.Walltime(context.Background(), "a/b", 0, 0, 0, 0)
	for src, want := range map[string]float64{"steps": 1, "unknown": 1, "history": 0, "external": 0} {
		if got := testutil.ToFloat64(e.counts.WithLabelValues(estWalltime, src)); got != want {
			t.Errorf("estimates_total{walltime,%s} = %v, want %v", src, got, want)
		}
	}
	for in, want := range map[string]string{"external:table-scaled": "external", "measured": "measured", "same-name": "same-name"} {
		if got := sourceLabel(in); got != want {
			t.Errorf("sourceLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
