package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Placements count by mode and given type; only the timed ones reach the
// latency histogram (a decision from the plugin's shelf has no time).
func TestPlacementMetrics(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mode         string
		gpuType      string
		took         time.Duration
		wantTypeLbl  string
		wantObserved uint64
	}{
		{"local, timed", Local, "v100", 40 * time.Microsecond, "v100", 1},
		{"local, from the shelf", Local, "k80", 0, "k80", 0},
		{"remote, left as asked", Remote, "", 2 * time.Millisecond, "none", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := NewInstruments()
			in.Placed(tc.mode, tc.gpuType, tc.took)
			if got := testutil.ToFloat64(in.placements.WithLabelValues(tc.mode, tc.wantTypeLbl)); got != 1 {
				t.Errorf("placements_total{%s,%s} = %v, want 1", tc.mode, tc.wantTypeLbl, got)
			}
			count, sum := histogram(t, in.placeSecs, "placement", tc.mode)
			if count != tc.wantObserved || sum != tc.took.Seconds()*float64(tc.wantObserved) {
				t.Errorf("latency count %d sum %v, want %d observations of %v", count, sum, tc.wantObserved, tc.took)
			}
		})
	}
	// A nil set of instruments (a controller built bare in a test) counts nothing.
	var none *Instruments
	none.Placed(Local, "", time.Millisecond)
}

// histogram is the count and sum of v's series with label=value.
func histogram(t *testing.T, v *prometheus.HistogramVec, label, value string) (uint64, float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(v)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	t.Fatalf("no series %s=%q", label, value)
	return 0, 0
}
