package queuewait

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"math/rand"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// simTrace runs a small FCFS cluster of capacity nodes: n jobs arrive
// about every gapMin minutes, ask for 1-4 nodes and a limit, run a random
// part of it, and start in submit order as nodes free up. Its waits
// depend on the queue, which a model should pick up.
func simTrace(n, capacity int, gapMin float64, seed int64) []TraceJob {
	rng := rand.New(rand.NewSource(seed))
	limits := []int{30, 60, 120, 240}
	var ends endHeap
	free := capacity
	t := t0
	last := t0
	jobs := make([]TraceJob, n)
	for i := range jobs {
		t = t.Add(time.Duration(rng.ExpFloat64() * gapMin * float64(time.Minute))).Truncate(time.Second)
		nodes := 1 + rng.Intn(min(4, capacity))
		lim := time.Duration(limits[rng.Intn(len(limits))]) * time.Minute
		run := time.Duration(float64(lim) * (0.05 + 0.95*rng.Float64())).Truncate(time.Second)
		start := t
		if last.After(start) {
			start = last
		}
		for free < nodes {
			e := heap.Pop(&ends).(nodeEnd)
			if e.end.After(start) {
				start = e.end
			}
			free += e.nodes
		}
		// Release everything that ended by the start, as a scheduler would.
		for ends.Len() > 0 && !ends[0].end.After(start) {
			free += heap.Pop(&ends).(nodeEnd).nodes
		}
		heap.Push(&ends, nodeEnd{end: start.Add(run), nodes: nodes})
		free -= nodes
		last = start
		jobs[i] = TraceJob{ID: strconv.Itoa(1000 + i), User: "u" + strconv.Itoa(rng.Intn(8)), Partition: "p",
			Submit: t, Start: start, End: start.Add(run), Nodes: nodes, GPUs: 3 * nodes, TimeLimit: lim}
	}
	return jobs
}

func quickOptions() TrainOptions {
	o := DefaultTrainOptions()
	o.Trees = 60
	o.GPUsPerNode = 3
	return o
}

func modelJSON(t *testing.T, m *Model) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.Save(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestTrainDeterministic(t *testing.T) {
	jobs := simTrace(1500, 8, 25, 1)
	for _, loss := range []string{"lad", "l2"} {
		o := quickOptions()
		o.Loss = loss
		a, err := TrainTrace(jobs, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := TrainTrace(jobs, o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(modelJSON(t, a), modelJSON(t, b)) {
			t.Fatalf("%s: two trainings with the same seed differ", loss)
		}
		o.Seed = 2
		c, err := TrainTrace(jobs, o)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(modelJSON(t, a), modelJSON(t, c)) {
			t.Fatalf("%s: the seed changes nothing: is the subsample drawn?", loss)
		}
		if a.Capacity != 8 || a.Trained.Jobs != 1500 || len(a.Trees) != 60 || a.GPUsPerNode != 3 {
			t.Fatalf("%s: capacity %d, jobs %d, trees %d", loss, a.Capacity, a.Trained.Jobs, len(a.Trees))
		}
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	jobs := simTrace(1200, 8, 25, 3)
	m, err := TrainTrace(jobs, quickOptions())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.json")
	if err := m.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	l, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, l) {
		t.Fatal("loaded model differs from the saved one")
	}
	n, distinct := 0, map[time.Duration]bool{}
	Replay(jobs, func(s Snapshot) bool {
		a, okA := m.Predict(s.State, s.Req)
		b, okB := l.Predict(s.State, s.Req)
		if !okA || !okB || a != b {
			t.Fatalf("job %s: %v/%v vs %v/%v", s.Job.ID, a, okA, b, okB)
		}
		distinct[a] = true
		n++
		return true
	})
	if n != len(jobs) || len(distinct) < 20 {
		t.Fatalf("%d predictions, %d distinct: the model barely depends on the state", n, len(distinct))
	}
}

func TestLoadRejects(t *testing.T) {
	m, err := TrainTrace(simTrace(600, 8, 25, 4), quickOptions())
	if err != nil {
		t.Fatal(err)
	}
	good := modelJSON(t, m)
	edit := func(f func(map[string]any)) string {
		var v map[string]any
		if err := json.Unmarshal(good, &v); err != nil {
			t.Fatal(err)
		}
		f(v)
		b, _ := json.Marshal(v)
		return string(b)
	}
	tree0 := func(v map[string]any) map[string]any { return v["trees"].([]any)[0].(map[string]any) }
	tests := []struct{ name, in, want string }{
		{"not json", "{", "reading model"},
		{"format", edit(func(v map[string]any) { v["format"] = "other" }), "not a queue-wait model"},
		{"version", edit(func(v map[string]any) { v["version"] = 2 }), "model version 2"},
		{"target", edit(func(v map[string]any) { v["target"] = "minutes" }), "target"},
		{"features", edit(func(v map[string]any) { v["features"] = []string{"req_nodes"} }), "features"},
		{"unknown field", edit(func(v map[string]any) { v["extra"] = 1 }), "unknown field"},
		{"capacity", edit(func(v map[string]any) { v["capacity_nodes"] = 0 }), "capacity_nodes"},
		{"child loop", edit(func(v map[string]any) { tree0(v)["l"].([]any)[0] = 0 }), "children"},
		{"feature index", edit(func(v map[string]any) { tree0(v)["f"].([]any)[0] = 99 }), "feature 99"},
		{"ragged tree", edit(func(v map[string]any) { tree0(v)["v"] = []any{} }), "different lengths"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Load(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
}

func TestPredictInputs(t *testing.T) {
	jobs := simTrace(800, 8, 25, 5)
	m, err := TrainTrace(jobs, quickOptions())
	if err != nil {
		t.Fatal(err)
	}
	var st QueueState
	var req Request
	Replay(jobs, func(s Snapshot) bool {
		if len(s.State.Pending) >= 3 {
			st, req = s.State, s.Req
			st.Pending = append([]QueueJob(nil), st.Pending...)
			st.Running = append([]QueueJob(nil), st.Running...)
			st.Recent = append([]QueueJob(nil), st.Recent...)
			return false
		}
		return true
	})
	if st.Now.IsZero() {
		t.Fatal("no busy queue in the synthetic trace")
	}
	want, ok := m.Predict(st, req)
	if !ok || want < 0 {
		t.Fatalf("predict = %v, %v", want, ok)
	}
	var nilModel *Model
	bad := []struct {
		name string
		m    *Model
		st   QueueState
		req  Request
	}{
		{"nil model", nilModel, st, req},
		{"no time", m, QueueState{Pending: st.Pending}, req},
		{"negative nodes", m, st, Request{Nodes: -1}},
		{"negative limit", m, st, Request{Nodes: 1, TimeLimit: -time.Minute}},
	}
	for _, tc := range bad {
		if _, ok := tc.m.Predict(tc.st, tc.req); ok {
			t.Errorf("%s: ok", tc.name)
		}
	}
	// Jobs of another partition do not count.
	other := st
	other.Pending = append(append([]QueueJob(nil), st.Pending...), QueueJob{ID: "x", Partition: "other", Nodes: 8, TimeLimit: 48 * time.Hour, Submit: st.Now})
	other.Running = append(append([]QueueJob(nil), st.Running...), QueueJob{ID: "y", Partition: "other", Nodes: 8, TimeLimit: 48 * time.Hour, Submit: st.Now, Start: st.Now})
	if got, ok := m.Predict(other, req); !ok || got != want {
		t.Errorf("other partition's jobs changed the prediction: %v -> %v", want, got)
	}
	// A request given in GPUs only is sized by the model's GPUs per node.
	byGPU := req
	byGPU.Nodes = 0
	if got, ok := m.Predict(st, byGPU); !ok || got != want {
		t.Errorf("request by GPUs (%d) predicts %v, by nodes %v", byGPU.GPUs, got, want)
	}
	// A much longer queue ahead must not shorten the predicted wait.
	longer := st
	for i := 0; i < 30; i++ {
		longer.Pending = append(longer.Pending, QueueJob{ID: "z", Partition: "p", Nodes: 4, TimeLimit: 4 * time.Hour, Submit: st.Now})
	}
	if got, _ := m.Predict(longer, req); got < want {
		t.Errorf("30 more pending jobs: wait %v -> %v", want, got)
	}
}

func TestWithin2x(t *testing.T) {
	s, m, h := time.Second, time.Minute, time.Hour
	tests := []struct {
		pred, actual time.Duration
		want         bool
	}{
		{0, 0, true},
		{30 * s, 0, true}, // both under a minute
		{0, 59 * s, true},
		{2 * m, 0, true}, // 2 min vs (clamped) 1 min
		{121 * s, 0, false},
		{h, 2 * h, true},
		{h, 2*h + s, false},
		{3 * h, h, false},
		{10 * h, 6 * h, true},
	}
	for _, tc := range tests {
		if got := Within2x(tc.pred, tc.actual); got != tc.want {
			t.Errorf("Within2x(%v, %v) = %v", tc.pred, tc.actual, got)
		}
	}
}

func TestBaselineWait(t *testing.T) {
	now := t0.Add(10 * time.Hour)
	rec := func(part string, submitH, startH float64) QueueJob {
		return QueueJob{Partition: part, Submit: t0.Add(time.Duration(submitH * float64(time.Hour))), Start: t0.Add(time.Duration(startH * float64(time.Hour)))}
	}
	st := QueueState{Now: now}
	if got := baselineWait(st, Request{Partition: "p"}); got != 0 {
		t.Fatalf("no history: %v", got)
	}
	st.Recent = []QueueJob{rec("p", 0, 2), rec("q", 0, 9), rec("p", 1, 2), rec("p", 8, 11)} // waits 2h, (other), 1h, (future)
	if got := baselineWait(st, Request{Partition: "p"}); got != 90*time.Minute {
		t.Fatalf("got %v, want 1h30m", got)
	}
	// Only the latest RecentWindow starts count: 60 older zero waits
	// and then RecentWindow waits of 1 h.
	st.Recent = nil
	for i := 0; i < 60; i++ {
		st.Recent = append(st.Recent, rec("p", 0, 0))
	}
	for i := 0; i < RecentWindow; i++ {
		st.Recent = append(st.Recent, rec("p", 4, 5))
	}
	if got := baselineWait(st, Request{Partition: "p"}); got != time.Hour {
		t.Fatalf("got %v, want 1h", got)
	}
}

// TestModelBeatsBaselineSynthetic checks that training learns something
// on a cluster whose waits follow from its queue, without the real trace.
func TestModelBeatsBaselineSynthetic(t *testing.T) {
	jobs := simTrace(3000, 8, 25, 7) // about 52 days
	o := EvalOptions{HoldoutDays: 8, WarmupDays: 1, Train: quickOptions()}
	o.Train.Trees = 150
	rep, err := Evaluate(jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("synthetic: mae %.3f h vs baseline %.3f h, within 2x %.3f vs %.3f, train %d test %d",
		rep.MAEHours, rep.BaselineMAEHours, rep.Within2x, rep.BaselineWithin2x, rep.JobsTrain, rep.JobsTest)
	if rep.JobsTest < 400 || rep.JobsTrain < 1500 {
		t.Fatalf("train %d, test %d jobs", rep.JobsTrain, rep.JobsTest)
	}
	if !(rep.MAEHours < 0.8*rep.BaselineMAEHours) || !(rep.Within2x > rep.BaselineWithin2x) {
		t.Fatalf("model does not beat the baseline: %+v", rep)
	}
}

func TestEvaluateErrors(t *testing.T) {
	jobs := simTrace(300, 8, 25, 8) // about 5 days
	tests := []struct {
		name string
		opt  EvalOptions
		want string
	}{
		{"holdout zero", EvalOptions{HoldoutDays: 0, Train: quickOptions()}, "holdout days"},
		{"too short", EvalOptions{HoldoutDays: 4, WarmupDays: 2, Train: quickOptions()}, "too short"},
		{"bad loss", EvalOptions{HoldoutDays: 1, Train: TrainOptions{Loss: "l1", Trees: 1, Depth: 1, LearningRate: 1, MinLeaf: 1, Subsample: 1}}, "loss"},
	}
	for _, tc := range tests {
		if _, err := Evaluate(jobs, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Evaluate(nil, DefaultEvalOptions()); err == nil {
		t.Error("no jobs: no error")
	}
}
