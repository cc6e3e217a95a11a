package estimate

import (
	"strings"
	"testing"
	"time"
)

func TestEstimateHinted(t *testing.T) {
	tp := NewThroughputs(ThroughputConfig{Speed: map[string]float64{"v100": 4, "k80": 1}})
	at := time.Unix(0, 0)
	// A peer measured on v100 and p100: p100 runs at half the v100 rate.
	for _, o := range []struct {
		ty string
		v  float64
	}{{"v100", 10}, {"p100", 5}} {
		if err := tp.Observe(key("u", "peer", "h"), o.ty, o.v, at); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		hint   map[string]float64
		ty     string
		want   float64
		source string
	}{
		{"hinted type as given", map[string]float64{"v100": 8}, "v100", 8, SourceHint},
		{"completed from the peer's ratio", map[string]float64{"v100": 8}, "p100", 4, SourceCompleted},
		{"no peer: speed table", map[string]float64{"v100": 8}, "k80", 2, SourceTable},
		{"nothing hinted", nil, "v100", 0, SourceUnknown},
		{"bad hints dropped", map[string]float64{"v100": -1, "": 3}, "v100", 0, SourceUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := tp.EstimateHinted("job", tc.hint, []string{tc.ty})[0]
			if !near(e.StepsPerSec, tc.want) || e.Source != tc.source || e.GPUType != tc.ty {
				t.Errorf("got %+v, want %v from %s", e, tc.want, tc.source)
			}
		})
	}
	// Nothing was remembered: the peer is the only job.
	if got := tp.Estimate(key("u", "job", ""), []string{"v100"})[0]; got.Source != SourceUnknown {
		t.Errorf("what-if estimate left a job behind: %+v", got)
	}
	if s, ok := tp.SpeedOf("v100"); !ok || s != 4 {
		t.Errorf("SpeedOf(v100) = %v, %v", s, ok)
	}
	if _, ok := tp.SpeedOf("a100"); ok {
		t.Error("SpeedOf(a100) claims a speed the table lacks")
	}
	if e := tp.EstimateHinted("job", map[string]float64{"v100": 8}, []string{"a100"})[0]; !strings.Contains(e.Basis, "speed table") {
		t.Errorf("basis %q does not name the table", e.Basis)
	}
}
