package app

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/wire"
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
		{"local, timed", placeLocal, "v100", 40 * time.Microsecond, "v100", 1},
		{"local, from the shelf", placeLocal, "k80", 0, "k80", 0},
		{"remote, left as asked", placeRemote, "", 2 * time.Millisecond, "none", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstruments()
			in.placed(tc.mode, &wire.PlaceReply{GPUType: tc.gpuType}, tc.took)
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
	var none *instruments
	none.placed(placeLocal, &wire.PlaceReply{}, time.Millisecond)
}

// The whole exposition registers cleanly (what Describe says is what
// Collect gives), the round and solve times are histograms under their
// base-unit names, and the counters a dashboard rates exist at 0 before
// anything happened.
func TestMetricsExposition(t *testing.T) {
	c := &Controller{cfg: DefaultConfig(), inst: newInstruments(), estimator: live.NewEstimator(nil, 1.5, 5)}
	c.inst.Round(1500 * time.Millisecond)
	c.inst.Solve(20 * time.Millisecond)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(metrics{c}); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	series := map[string]int{}
	for _, f := range fams {
		types[f.GetName()] = f.GetType().String()
		series[f.GetName()] = len(f.GetMetric())
	}
	for _, tc := range []struct {
		name   string
		typ    string
		series int
	}{
		{"rota_controller_round_duration_seconds", "HISTOGRAM", 1},
		{"rota_controller_solve_duration_seconds", "HISTOGRAM", 1},
		{"rota_controller_migration_duration_seconds", "HISTOGRAM", 1},
		{"rota_controller_chain_segment_gap_seconds", "HISTOGRAM", 1},
		{"rota_controller_placement_duration_seconds", "HISTOGRAM", 2},
		// Throughput's 8 sources and walltime's 4, each from 0 (package live).
		{"rota_controller_estimates_total", "COUNTER", 12},
	} {
		if types[tc.name] != tc.typ || series[tc.name] != tc.series {
			t.Errorf("%s: %v with %d series, want %v with %d", tc.name, types[tc.name], series[tc.name], tc.typ, tc.series)
		}
	}
	for name := range types {
		if name == "rota_controller_solve_seconds" || strings.HasSuffix(name, "_percent") {
			t.Errorf("%s exposed", name)
		}
	}
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
