package queuewait

import (
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2023, 3, 1, 12, 0, 0, 0, time.UTC)

// tj makes a trace job with times in minutes after t0.
func tj(id string, submit, start, end, nodes, limitMin int) TraceJob {
	m := func(v int) time.Time { return t0.Add(time.Duration(v) * time.Minute) }
	return TraceJob{ID: id, User: "u" + id, Submit: m(submit), Start: m(start), End: m(end), Nodes: nodes,
		GPUs: 3 * nodes, TimeLimit: time.Duration(limitMin) * time.Minute}
}

func ids(q []QueueJob) string {
	var s []string
	for _, j := range q {
		s = append(s, j.ID)
	}
	return strings.Join(s, ",")
}

func TestReplayHandMade(t *testing.T) {
	// In the file out of submit order; D and E share a submit second and
	// keep their file order.
	jobs := []TraceJob{
		tj("F", 60, 60, 70, 1, 30),
		tj("A", 0, 0, 100, 2, 120),
		tj("C", 20, 20, 30, 1, 60),
		tj("B", 10, 50, 60, 1, 30),
		tj("D", 40, 100, 200, 4, 240),
		tj("E", 40, 40, 45, 1, 10),
		tj("G", 100, 130, 140, 1, 10),
	}
	type want struct{ pending, running, recent string }
	wants := map[string]want{
		"A": {"", "", ""},
		"B": {"", "A", "A"},
		"C": {"B", "A", "A"},
		"D": {"B", "A", "A,C"},        // E comes after D: not seen
		"E": {"B,D", "A", "A,C"},      // C ended at 30
		"F": {"D", "A", "A,C,E,B"},    // B ended exactly at 60: not running
		"G": {"", "D", "A,C,E,B,F,D"}, // A ends and D starts exactly at 100
	}
	var order []string
	Replay(jobs, func(s Snapshot) bool {
		order = append(order, s.Job.ID)
		w := wants[s.Job.ID]
		got := want{ids(s.State.Pending), ids(s.State.Running), ids(s.State.Recent)}
		if got != w {
			t.Errorf("%s: got %+v, want %+v", s.Job.ID, got, w)
		}
		if !s.State.Now.Equal(s.Job.Submit) || s.Req.Nodes != s.Job.Nodes || s.Req.GPUs != s.Job.GPUs ||
			s.Req.TimeLimit != s.Job.TimeLimit || s.Req.User != s.Job.User {
			t.Errorf("%s: state time %v, request %+v", s.Job.ID, s.State.Now, s.Req)
		}
		// Pending jobs show no start: it is in the future.
		for _, p := range s.State.Pending {
			if !p.Start.IsZero() {
				t.Errorf("%s: pending %s has a start", s.Job.ID, p.ID)
			}
		}
		return true
	})
	if strings.Join(order, "") != "ABCDEFG" {
		t.Fatalf("order %v", order)
	}

	// The features at F's submit, by hand: D (4 nodes, 4 h) pends; A
	// (2 nodes) runs until its limit at 120, 60 min from now.
	var fs featureScratch
	x := make([]float64, len(featureNames))
	env := featureEnv{capacity: 5, gpusPerNode: 3, defaultLimit: time.Hour}
	Replay(jobs, func(s Snapshot) bool {
		if s.Job.ID != "F" {
			return true
		}
		env.features(s.State, s.Req, &fs, x)
		return false
	})
	got := map[string]float64{}
	for i, n := range featureNames {
		got[n] = x[i]
	}
	wantF := map[string]float64{
		"req_nodes": 1, "req_limit_h": 0.5, "req_frac_capacity": 0.2,
		"pend_jobs": 1, "pend_nodes": 4, "pend_node_h": 16, "pend_user_jobs": 0, "pend_oldest_h": 20.0 / 60,
		"run_jobs": 1, "run_nodes": 2, "free_nodes": 3, "run_remain_node_h": 2, "run_user_nodes": 0,
		"shadow_h": 0, // one node is free now
		// FCFS: D needs 4 of 3 free, waits for A's limit at +1 h; F then
		// has the 5th node.
		"fcfs_h": 1,
		// recent waits: A 0, C 0, E 0, B 40 min; latest first B,E,C,A.
		"recent_mean_h": 10.0 / 60, "recent_median_h": 0, "recent_mean10_h": 10.0 / 60, "recent_under1m": 0.75,
		"last_start_age_h": 10.0 / 60, "hour": 13, "weekday": 3,
	}
	for n, w := range wantF {
		if d := got[n] - w; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %v, want %v", n, got[n], w)
		}
	}
	if len(wantF) != len(featureNames) {
		t.Errorf("test covers %d of %d features", len(wantF), len(featureNames))
	}
}

// TestReplayMatchesDefinition checks the sweep against the definition,
// computed the slow way, on random traces full of ties.
func TestReplayMatchesDefinition(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		n := 40 + rng.Intn(120) // also more starts than RecentWindow
		jobs := make([]TraceJob, n)
		for i := range jobs {
			sub := rng.Intn(60)
			st := sub + rng.Intn(4)*rng.Intn(10)
			jobs[i] = tj(string(rune('a'+i%26))+strings.Repeat("'", i/26), sub, st, st+rng.Intn(20), 1+rng.Intn(3), 30)
		}
		pos := make([]int, n)
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return jobs[order[a]].Submit.Before(jobs[order[b]].Submit) })
		for p, i := range order {
			pos[i] = p
		}
		byStart := func(s []int) {
			sort.Slice(s, func(a, b int) bool {
				x, y := jobs[s[a]], jobs[s[b]]
				if !x.Start.Equal(y.Start) {
					return x.Start.Before(y.Start)
				}
				return pos[s[a]] < pos[s[b]]
			})
		}
		names := func(s []int) string {
			var out []string
			for _, i := range s {
				out = append(out, jobs[i].ID)
			}
			return strings.Join(out, ",")
		}
		Replay(jobs, func(s Snapshot) bool {
			j := order[s.Index]
			tt := jobs[j].Submit
			var pend, run, rec []int
			for _, i := range order[:s.Index] {
				if jobs[i].Start.After(tt) {
					pend = append(pend, i)
				} else {
					rec = append(rec, i)
					if jobs[i].End.After(tt) {
						run = append(run, i)
					}
				}
			}
			byStart(run)
			byStart(rec)
			if len(rec) > RecentWindow {
				rec = rec[len(rec)-RecentWindow:]
			}
			got := []string{ids(s.State.Pending), ids(s.State.Running), ids(s.State.Recent)}
			want := []string{names(pend), names(run), names(rec)}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, job %s at %v:\ngot  %q\nwant %q", seed, jobs[j].ID, tt, got, want)
			}
			return true
		})
	}
}

func TestReplayStops(t *testing.T) {
	jobs := []TraceJob{tj("A", 0, 0, 1, 1, 1), tj("B", 1, 1, 2, 1, 1), tj("C", 2, 2, 3, 1, 1)}
	n := 0
	Replay(jobs, func(Snapshot) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("fn called %d times after returning false", n)
	}
}
