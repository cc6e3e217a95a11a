package sim

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

func las() (policy.Policy, error) { return policy.New("las", policy.Options{}) }

// twoClusters is cfg's trace over a fast cluster a (V100, P100) and a
// larger, slower b (K80, a few V100) joined by a link of the given speed.
func twoClusters(t *testing.T, bw float64, mode MoveMode) MultiConfig {
	c := cfg(t, false)
	cls := []Cluster{{Name: "a", Capacity: []int{4, 4, 0}}, {Name: "b", Capacity: []int{2, 0, 10}}}
	return MultiConfig{Base: c, Clusters: cls, Links: []Link{{A: "a", B: "b", Bandwidth: bw, Latency: 0.02}},
		Jobs: DrawMulti(c.Jobs, cls, [2]float64{1, 20}, [2]float64{10, 500}, 1), Moves: mode,
		Margin: 3600, MinStay: 2 * 3600} // no margin fraction: jobs move more than once, so the stay is tested
}

// job is a hand-made single-GPU job over types (v100, k80).
func job(id int, home int, v100, k80, steps, dataGB float64) MultiJob {
	return MultiJob{Job: workload.Job{ID: id, Type: "t", Scale: 1, Steps: steps, Rates: []float64{v100, k80}},
		Home: home, CheckpointBytes: 0.36e9, DataBytes: dataGB * 1e9}
}

// small is two one-type clusters, a (k80) and b (v100), over a 1 MB/s link.
func small(jobs []MultiJob, mode MoveMode) MultiConfig {
	return MultiConfig{Base: Config{Types: []string{"v100", "k80"}, Round: 360, MigrationCost: 60, GPUsPerNode: 4,
		MeasureLo: 0, MeasureHi: len(jobs), Seed: 1},
		Clusters: []Cluster{{Name: "a", Capacity: []int{0, 1}}, {Name: "b", Capacity: []int{1, 0}}},
		Links:    []Link{{A: "a", B: "b", Bandwidth: 1e6}}, Jobs: jobs, Moves: mode, Margin: 7200, MinStay: 7200}
}

// A job only cluster b can run is sent there, unless jobs never move; then
// it is rejected, not left waiting for ever.
func TestFitsOnlyElsewhere(t *testing.T) {
	t.Parallel()
	for _, mode := range MoveModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			rep, err := RunMulti(context.Background(), small([]MultiJob{job(0, 0, 1, 0, 3600, 1)}, mode), las)
			if err != nil {
				t.Fatal(err)
			}
			if mode == MovesNone {
				if rep.Rejected != 1 || rep.JobsMeasured != 0 || rep.PlacedAway != 0 {
					t.Fatalf("none: %+v", rep)
				}
				return
			}
			if rep.JobsMeasured != 1 || rep.PlacedAway != 1 || rep.Moves != 0 || rep.Clusters[1].JobsFinished != 1 {
				t.Fatalf("%s: %+v", mode, rep)
			}
		})
	}
}

// Job 1 waits on slow a while job 0 holds b; when b frees, moving saves
// 30 - 7.5 h of run for 21 h of copying over the 1 MB/s link: greedy
// moves, planned (which adds checkpoint, restart and a 2 h margin) does
// not, and never moves the job anywhere at any time.
func TestSlowLinkPlannedStays(t *testing.T) {
	t.Parallel()
	jobs := []MultiJob{job(0, 1, 1, 0.5, 36000, 1), job(1, 0, 1, 0.25, 36000, 75.6)}
	for _, tc := range []struct {
		mode  MoveMode
		moves int
	}{{MovesGreedy, 1}, {MovesPlanned, 0}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			rep, err := RunMulti(context.Background(), small(jobs, tc.mode), las)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Moves != tc.moves || rep.PlacedAway != 0 || rep.JobsMeasured != 2 {
				t.Fatalf("%s: %d moves, %d placed away, %d jobs; log %+v", tc.mode, rep.Moves, rep.PlacedAway, rep.JobsMeasured, rep.Log)
			}
		})
	}
}

// Every job finishes once, moves chain (each leaves where the last one
// landed), planned never moves a job before its stay is over, and a seed
// gives the same run twice.
func TestMultiConserved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode MoveMode
		bw   float64
	}{{MovesNone, 1e9}, {MovesGreedy, 1e9}, {MovesPlanned, 1e9}, {MovesGreedy, 1e7}, {MovesPlanned, 1e7}} {
		t.Run(fmt.Sprintf("%s_%.0e", tc.mode, tc.bw), func(t *testing.T) {
			t.Parallel()
			c := twoClusters(t, tc.bw, tc.mode)
			rep, err := RunMulti(context.Background(), c, las)
			if err != nil {
				t.Fatal(err)
			}
			if rep.JobsMeasured != 60 || rep.Rejected != 0 {
				t.Fatalf("measured %d, rejected %d", rep.JobsMeasured, rep.Rejected)
			}
			seen := map[int]bool{}
			for _, id := range rep.Done {
				if seen[id] {
					t.Fatalf("job %d finished twice", id)
				}
				seen[id] = true
			}
			sum := 0
			for _, cr := range rep.Clusters {
				sum += cr.JobsFinished
				for k, u := range cr.Utilisation {
					if u < 0 || u > 1+1e-9 {
						t.Fatalf("%s type %d utilisation %.3f", cr.Name, k, u)
					}
				}
			}
			if sum != len(rep.Done) {
				t.Fatalf("clusters finished %d jobs, %d done", sum, len(rep.Done))
			}
			at := map[int]int{}
			landed := map[int]float64{}
			stay := map[int]float64{}
			moves, placed, again, gb := 0, 0, 0, 0.0
			for _, m := range rep.Log {
				where, ok := at[m.Job]
				if !ok {
					where = c.Jobs[m.Job].Home
				}
				if m.From != where || m.From == m.To || m.Lands < m.At {
					t.Fatalf("move %+v from %d", m, where)
				}
				if m.Placement {
					placed++
					if ok {
						t.Fatalf("placement after a move: %+v", m)
					}
				} else {
					moves++
					if ok {
						again++
					}
					if tc.mode == MovesPlanned && ok && m.At-landed[m.Job] < stay[m.Job]-1e-9 {
						t.Fatalf("job %d moved %.0f s after landing, stay %.0f", m.Job, m.At-landed[m.Job], stay[m.Job])
					}
				}
				at[m.Job], landed[m.Job] = m.To, m.Lands
				stay[m.Job] = math.Max(c.MinStay, m.Lands-m.At)
				gb += m.Bytes / 1e9
			}
			if moves != rep.Moves || placed != rep.PlacedAway || math.Abs(gb-rep.GBMoved) > 1e-6 {
				t.Fatalf("log: %d moves, %d placed, %.1f GB; report %d, %d, %.1f", moves, placed, gb, rep.Moves, rep.PlacedAway, rep.GBMoved)
			}
			t.Logf("%s, %.0e B/s: avg JCT %.2f h, %d moves, %d placed away, %.0f GB", tc.mode, tc.bw, rep.AvgJCTHours, moves, placed, gb)
			if (tc.mode == MovesNone) != (moves+placed == 0) || (tc.mode == MovesPlanned) && again == 0 {
				t.Fatalf("%s: %d moves (%d of a job moved before), %d placed away", tc.mode, moves, again, placed)
			}
			rerun, err := RunMulti(context.Background(), c, las)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep, rerun) {
				t.Fatalf("same seed, different runs:\n%+v\n%+v", rep, rerun)
			}
		})
	}
}

// With one cluster, RunMulti is Run: both drive the same engine.
func TestMultiOneClusterIsRun(t *testing.T) {
	t.Parallel()
	c := cfg(t, false)
	pol, _ := las()
	a, err := Run(context.Background(), c, pol)
	if err != nil {
		t.Fatal(err)
	}
	one := []Cluster{{Name: "a", Capacity: c.Capacity}}
	b, err := RunMulti(context.Background(), MultiConfig{Base: c, Clusters: one,
		Jobs: DrawMulti(c.Jobs, one, [2]float64{1, 20}, [2]float64{10, 500}, 1), Moves: MovesGreedy}, las)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.JCTHours, b.JCTHours) || a.Rounds != b.Rounds || a.MakespanHours != b.MakespanHours {
		t.Fatalf("Run: %d jobs avg %.4f h, %d rounds; RunMulti: %d jobs avg %.4f h, %d rounds",
			a.JobsMeasured, a.AvgJCTHours, a.Rounds, b.JobsMeasured, b.AvgJCTHours, b.Rounds)
	}
}
