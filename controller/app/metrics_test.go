package app

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/controller/metrics"
)

// The whole exposition registers cleanly (what Describe says is what
// Collect gives), the round and solve times are histograms under their
// base-unit names, and the counters a dashboard rates exist at 0 before
// anything happened.
func TestMetricsExposition(t *testing.T) {
	c := &Controller{cfg: DefaultConfig(), inst: metrics.NewInstruments(), estimator: live.NewEstimator(nil, 1.5, 5)}
	c.inst.Round(1500 * time.Millisecond)
	c.inst.Solve(20 * time.Millisecond)
	reg := prometheus.NewPedanticRegistry()
	for _, col := range c.collectors() {
		if err := reg.Register(col); err != nil {
			t.Fatal(err)
		}
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
