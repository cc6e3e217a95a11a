package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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

// The estimator counts each rate it gives by its source: measured where
// a type was measured, the table's scaling elsewhere, and the admin's
// relative speeds for a job nothing is known of; walltimes likewise.
func TestEstimateCounts(t *testing.T) {
	types := []string{"k80", "p100", "v100"}
	for _, tc := range []struct {
		name    string
		prepare func(e *estimator)
		key     string
		want    map[string]float64 // source -> count after one Rates call
	}{
		{"nothing known: relative speeds", func(*estimator) {}, "bob/bert",
			map[string]float64{"relative": 3}},
		{"measured on one type: the table scales it to the others", func(e *estimator) {
			e.Observe(context.Background(), "alice/resnet", "k80", 6, time.Now())
			e.Observe(context.Background(), "alice/resnet", "k80", 6, time.Now().Add(time.Second))
		}, "alice/resnet", map[string]float64{"measured": 1, "table": 2}},
		{"hinted on every type", func(e *estimator) {
			e.Hint(context.Background(), "carol/lm", map[string]float64{"k80": 1, "p100": 3, "v100": 4})
		}, "carol/lm", map[string]float64{"hint": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEstimator(map[string]float64{"v100": 4, "p100": 3, "k80": 1}, 1.5, 5)
			tc.prepare(e)
			e.Rates(context.Background(), tc.key, types)
			for _, src := range countedSources[estThroughput] {
				if got := testutil.ToFloat64(e.counts.WithLabelValues(estThroughput, src)); got != tc.want[src] {
					t.Errorf("estimates_total{throughput,%s} = %v, want %v", src, got, tc.want[src])
				}
			}
		})
	}
	e := newEstimator(nil, 1.5, 5)
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

// The whole exposition registers cleanly (what Describe says is what
// Collect gives), the round and solve times are histograms under their
// base-unit names, and the counters a dashboard rates exist at 0 before
// anything happened.
func TestMetricsExposition(t *testing.T) {
	c := &Controller{cfg: DefaultConfig(), inst: newInstruments(), estimator: newEstimator(nil, 1.5, 5)}
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
		{"rota_controller_estimates_total", "COUNTER", len(countedSources[estThroughput]) + len(countedSources[estWalltime])},
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
