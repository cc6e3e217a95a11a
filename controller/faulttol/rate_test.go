package faulttol

import (
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
)

func TestDown(t *testing.T) {
	for _, tc := range []struct {
		state string
		down  bool
	}{
		{"idle", false}, {"mixed", false}, {"allocated", false}, {"drained", false}, {"idle+drain", false},
		{"down", true}, {"down*", true}, {"idle*", true}, {"mixed*", true}, {"fail", true}, {"failing", true},
		{"down+drain", true}, {"DOWN", true}, {"allocated+not_responding", true},
	} {
		if got := Down(tc.state); got != tc.down {
			t.Errorf("Down(%q) = %v, want %v", tc.state, got, tc.down)
		}
	}
}

func TestRateLearnsFromStateChanges(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	nodes := func(states ...string) []slurm.Node {
		var ns []slurm.Node
		for i, s := range states {
			ns = append(ns, slurm.Node{Name: string(rune('a' + i)), State: s})
		}
		return ns
	}
	prior := 10 * time.Hour
	for _, tc := range []struct {
		name     string
		looks    [][]string // node states at each look, one minute apart
		failed   []int      // failures reported at each look
		failures int
		upS      float64
	}{
		{"no failure", [][]string{{"idle", "mixed"}, {"idle", "mixed"}, {"idle", "mixed"}}, []int{0, 0, 0}, 0, 240},
		{"one node fails, stays down", [][]string{{"idle", "idle"}, {"down*", "idle"}, {"down", "idle"}}, []int{0, 1, 0}, 1, 180},
		{"fails, comes back, fails again", [][]string{{"idle"}, {"down"}, {"idle"}, {"fail"}}, []int{0, 1, 0, 1}, 2, 120},
		// A drained node is still up (it may fail), so its time counts.
		{"a drain is maintenance, not a failure", [][]string{{"idle"}, {"drained"}, {"idle"}}, []int{0, 0, 0}, 0, 120},
		{"a node first seen down is no failure", [][]string{{"down"}, {"down"}}, []int{0, 0}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Rate
			for i, l := range tc.looks {
				got := r.Observe(nodes(l...), t0.Add(time.Duration(i)*time.Minute))
				if len(got) != tc.failed[i] {
					t.Errorf("look %d: failed %v, want %d", i, got, tc.failed[i])
				}
			}
			if r.Failures != tc.failures || r.UpSeconds != tc.upS {
				t.Errorf("failures %d, up %gs; want %d, %gs", r.Failures, r.UpSeconds, tc.failures, tc.upS)
			}
			want := time.Duration((tc.upS + prior.Seconds()) / float64(tc.failures+1) * float64(time.Second))
			if got := r.MTBF(prior); got != want {
				t.Errorf("MTBF = %s, want %s", got, want)
			}
		})
	}
}

func TestRateBoundsAGap(t *testing.T) {
	var r Rate
	t0 := time.Now()
	r.Observe([]slurm.Node{{Name: "a", State: "idle"}}, t0)
	// The controller was away an hour: only maxGap counts.
	r.Observe([]slurm.Node{{Name: "a", State: "idle"}}, t0.Add(time.Hour))
	if r.UpSeconds != maxGap.Seconds() {
		t.Errorf("up %gs after an hour's gap, want %gs", r.UpSeconds, maxGap.Seconds())
	}
}

func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cost, mtbf   time.Duration
		lo, hi, want time.Duration
	}{
		// sqrt(2 x 60 x 86400) = 3219.94 s, minus the cost.
		{"a minute's checkpoint, a day's MTBF", time.Minute, 24 * time.Hour, time.Minute, 24 * time.Hour, 3159940 * time.Millisecond},
		// sqrt(2 x 2 x 300) = 34.641 s, minus 2 s.
		{"dev cluster", 2 * time.Second, 5 * time.Minute, time.Second, time.Hour, 32641 * time.Millisecond},
		{"clamped below", time.Second, time.Minute, 5 * time.Minute, time.Hour, 5 * time.Minute},
		{"clamped above", time.Hour, 10000 * time.Hour, time.Minute, 24 * time.Hour, 24 * time.Hour},
		// Cost above twice the MTBF: Young's term alone, sqrt(2 x 600 x 60).
		{"cost beyond the MTBF", 10 * time.Minute, time.Minute, time.Second, 24 * time.Hour, 268328 * time.Millisecond},
		{"no cost known", 0, time.Hour, time.Minute, 2 * time.Hour, 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Interval(tc.cost, tc.mtbf, tc.lo, tc.hi)
			if d := got - tc.want; d < -5*time.Millisecond || d > 5*time.Millisecond {
				t.Errorf("Interval(%s, %s) = %s, want %s", tc.cost, tc.mtbf, got, tc.want)
			}
		})
	}
}
