package wire

import (
	"math"
	"testing"
)

// A hint's speed on a type: given, or scaled from the fastest given type
// by the relative speeds; 0 when nothing to scale from.
func TestHintsStepsPerSecond(t *testing.T) {
	t.Parallel()
	speed := func(t string) float64 {
		return map[string]float64{"v100": 3, "p100": 2, "k80": 1, "broken": math.Inf(1)}[t]
	}
	for _, tc := range []struct {
		name string
		h    Hints
		t    string
		want float64
	}{
		{"given for the type", Hints{Throughput: map[string]float64{"k80": 5}}, "k80", 5},
		{"scaled from the one given", Hints{Throughput: map[string]float64{"v100": 6}}, "k80", 2},
		{"scaled from the fastest given, not the first by name", Hints{Throughput: map[string]float64{"p100": 4, "v100": 9}}, "k80", 3},
		{"even: by name", Hints{Throughput: map[string]float64{"v100": 6, "p100": 6}}, "k80", 3},
		{"nothing given", Hints{}, "k80", 0},
		{"only zeros given", Hints{Throughput: map[string]float64{"v100": 0}}, "k80", 0},
		{"a type of unknown speed", Hints{Throughput: map[string]float64{"v100": 6}}, "a100", 0},
		{"scaled from a type of unknown speed", Hints{Throughput: map[string]float64{"a100": 6}}, "k80", 0},
		{"an infinite speed", Hints{Throughput: map[string]float64{"v100": 6}}, "broken", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.h.StepsPerSecond(tc.t, speed); got != tc.want {
				t.Errorf("StepsPerSecond(%q) = %v, want %v", tc.t, got, tc.want)
			}
		})
	}
}
