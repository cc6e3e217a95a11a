package live

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/estimate/queuewait"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
	"github.com/rs/zerolog"
)

// smallModel trains a queue-wait model on a first-come-first-served
// queue of 4 nodes, enough to load and predict with.
func smallModel(t *testing.T, path string) {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	free := make([]time.Time, 4) // when each node frees up
	var jobs []queuewait.TraceJob
	for i := 0; i < 400; i++ {
		submit := t0.Add(time.Duration(i) * 10 * time.Minute)
		k := 0
		for n := range free {
			if free[n].Before(free[k]) {
				k = n
			}
		}
		start := submit
		if free[k].After(start) {
			start = free[k]
		}
		run := time.Duration(10+rng.Intn(50)) * time.Minute
		free[k] = start.Add(run)
		jobs = append(jobs, queuewait.TraceJob{ID: strconv.Itoa(i), User: "u" + strconv.Itoa(i%5), Partition: "p",
			Submit: submit, Start: start, End: start.Add(run), Nodes: 1, GPUs: 4, TimeLimit: time.Hour})
	}
	o := queuewait.DefaultTrainOptions()
	o.Trees, o.MinLeaf, o.GPUsPerNode = 20, 5, 4
	m, err := queuewait.TrainTrace(jobs, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveFile(path); err != nil {
		t.Fatal(err)
	}
}

func TestWaitPredictorLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	smallModel(t, good)
	writeFile(t, filepath.Join(dir, "garbage.json"), "{not json")
	writeFile(t, filepath.Join(dir, "other.json"), `{"format":"something-else","version":1}`)
	kb := &wire.Site{Partitions: []wire.SitePartition{{Name: "gpu", Types: []wire.SitePartitionType{{Type: "v100", Nodes: 1, GPUs: 4, MaxPerNode: 4}}}},
		Nodes: []wire.SiteNode{{Name: "n1", GPUs: map[string]int{"v100": 4}, Partitions: []string{"gpu"}}}}
	q := forecast.WaitQuery{Partition: "gpu", GPUType: "v100", Nodes: 1, GPUs: 1, LimitMin: 60}
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	queue := func(context.Context) ([]slurm.Job, error) {
		return []slurm.Job{{ID: 1, State: "RUNNING", Partition: "gpu", Nodes: []string{"n1"}, NumNodes: 1, TimeLimitMin: 60,
			Submit: now.Add(-time.Hour), Start: now.Add(-30 * time.Minute), TresPerNode: "gres:gpu:4"}}, nil
	}
	tests := []struct {
		name   string
		path   string
		jobs   func(context.Context) ([]slurm.Job, error)
		loaded bool
		status string // substring
		known  bool
		basis  string
	}{
		{"none configured", "", queue, false, "no model: train one with", false, "rota queuewait train"},
		{"missing file", filepath.Join(dir, "missing.json"), queue, false, "cannot be used", false, "missing.json"},
		{"broken file", filepath.Join(dir, "garbage.json"), queue, false, "cannot be used", false, "garbage.json"},
		{"not a model", filepath.Join(dir, "other.json"), queue, false, "not a queue-wait model", false, "not a queue-wait model"},
		{"good model", good, queue, true, "trained on", true, "1 running on 1 nodes"},
		{"good model, queue unreadable", good, func(context.Context) ([]slurm.Job, error) { return nil, errors.New("squeue: timed out") },
			true, "trained on", false, "squeue: timed out"},
		{"good model, no queue reader", good, nil, true, "trained on", false, "cannot read the queue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWaits(tc.path, tc.jobs, zerolog.Nop())
			if w.Loaded() != tc.loaded || !strings.Contains(w.Status(), tc.status) {
				t.Fatalf("loaded %v status %q, want %v %q", w.Loaded(), w.Status(), tc.loaded, tc.status)
			}
			got := w.Predict(context.Background(), kb, q, "u1", now)
			if got.Known != tc.known || !strings.Contains(got.Basis, tc.basis) {
				t.Fatalf("wait %+v, want known=%v basis ~%q", got, tc.known, tc.basis)
			}
			if got.Known && !(got.Minutes >= 0) {
				t.Fatalf("wait %v minutes", got.Minutes)
			}
		})
	}
}

func TestQueueStateFor(t *testing.T) {
	kb := &wire.Site{
		Partitions: []wire.SitePartition{{Name: "gpu", Types: []wire.SitePartitionType{{Type: "v100", Nodes: 2}, {Type: "k80", Nodes: 1}}}},
		Nodes: []wire.SiteNode{{Name: "v1", GPUs: map[string]int{"v100": 4}, Partitions: []string{"gpu"}},
			{Name: "v2", GPUs: map[string]int{"v100": 4}, Partitions: []string{"gpu"}},
			{Name: "k1", GPUs: map[string]int{"k80": 4}, Partitions: []string{"gpu"}}},
		GPUTypes: []wire.SiteGPUType{{Type: "v100"}, {Type: "k80"}},
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return now.Add(time.Duration(m) * time.Minute) }
	jobs := []slurm.Job{
		{ID: 1, State: "RUNNING", Partition: "gpu", Nodes: []string{"v1"}, NumNodes: 1, Submit: at(-90), Start: at(-60), TresPerNode: "gres:gpu:2"},
		{ID: 2, State: "RUNNING", Partition: "gpu", Nodes: []string{"k1"}, NumNodes: 1, Submit: at(-90), Start: at(-80)},
		{ID: 3, State: "PENDING", Partition: "gpu", NumNodes: 1, Submit: at(-5), TresPerNode: "gres:gpu:1"},
		{ID: 4, State: "PENDING", Partition: "gpu", NumNodes: 1, Submit: at(-10), TresPerNode: "gres:gpu:k80:1"},
		{ID: 5, State: "PENDING", Partition: "gpu", NumNodes: 1, Submit: at(-20), TresPerNode: "gres:gpu:1", Features: "ib&k80"},
		{ID: 6, State: "PENDING", Partition: "other", NumNodes: 1, Submit: at(-30), TresPerNode: "gres:gpu:1"},
		{ID: 7, State: "PENDING", Partition: "other,gpu", NumNodes: 2, Submit: at(-40), TresPerJob: "gres:gpu:v100:8"},
	}
	started := []slurm.Job{
		{ID: 8, State: "RUNNING", Partition: "gpu", Nodes: []string{"v2"}, NumNodes: 1, Submit: at(-300), Start: at(-200)},
		{ID: 1, State: "RUNNING", Partition: "gpu", Nodes: []string{"v1"}, NumNodes: 1, Submit: at(-90), Start: at(-60)},
		{ID: 9, State: "RUNNING", Partition: "gpu", Nodes: []string{"k1"}, NumNodes: 1, Submit: at(-300), Start: at(-100)},
	}
	st := QueueStateFor(kb, jobs, started, "gpu", "v100", now)
	ids := func(qs []queuewait.QueueJob) string {
		var s []string
		for _, q := range qs {
			s = append(s, q.ID)
		}
		return strings.Join(s, ",")
	}
	if st.TotalNodes != 2 || ids(st.Running) != "1" || ids(st.Pending) != "7,3" || ids(st.Recent) != "1,8" {
		t.Fatalf("total %d running %s pending %s recent %s; want 2, 1, 7,3 (submit order), 1,8", st.TotalNodes,
			ids(st.Running), ids(st.Pending), ids(st.Recent))
	}
	if st.Running[0].GPUs != 2 || st.Pending[0].GPUs != 8 || st.Pending[0].Nodes != 2 {
		t.Errorf("sizes: running %+v pending %+v", st.Running[0], st.Pending[0])
	}
	k := QueueStateFor(kb, jobs, started, "gpu", "k80", now)
	if k.TotalNodes != 1 || ids(k.Running) != "2" || ids(k.Pending) != "5,4,3" || ids(k.Recent) != "2,9" {
		t.Fatalf("k80: total %d running %s pending %s recent %s", k.TotalNodes, ids(k.Running), ids(k.Pending), ids(k.Recent))
	}
}

// With estimator_queuewait, the external estimator's answer is the wait,
// given the same queue state the model would see; its "unknown" stays
// unknown, with its reason.
func TestWaitPredictorExternal(t *testing.T) {
	kb := &wire.Site{Partitions: []wire.SitePartition{{Name: "gpu", Types: []wire.SitePartitionType{{Type: "v100", Nodes: 1, GPUs: 4, MaxPerNode: 4}}}},
		Nodes: []wire.SiteNode{{Name: "n1", GPUs: map[string]int{"v100": 4}, Partitions: []string{"gpu"}}}}
	q := forecast.WaitQuery{Partition: "gpu", GPUType: "v100", Nodes: 1, GPUs: 2, LimitMin: 90}
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	queue := func(context.Context) ([]slurm.Job, error) {
		return []slurm.Job{{ID: 1, State: "PENDING", Partition: "gpu", NumNodes: 1, TimeLimitMin: 60,
			Submit: now.Add(-time.Hour), TresPerNode: "gres:gpu:1"}}, nil
	}
	tests := []struct {
		name  string
		a     estimate.QueueWaitAnswer
		known bool
		min   float64
		basis string
	}{
		{"known", estimate.QueueWaitAnswer{Wait: 12 * time.Minute, Source: "external:history", Basis: "site quantile"}, true, 12, "site quantile"},
		{"unknown", estimate.QueueWaitAnswer{Source: estimate.SourceUnknown, Basis: "no history for gpu"}, false, 0, "no history for gpu"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWaits("", queue, zerolog.Nop()) // no model: the plugin alone
			var seen estimate.QueueWaitQuery
			w.SetExternal(fixedWait{tc.a, &seen})
			got := w.Predict(context.Background(), kb, q, "u1", now)
			if got.Known != tc.known || got.Minutes != tc.min || !strings.Contains(got.Basis, tc.basis) {
				t.Fatalf("wait %+v, want known=%v %v min basis ~%q", got, tc.known, tc.min, tc.basis)
			}
			if seen.Request.GPUs != 2 || seen.Request.TimeLimit != 90*time.Minute || len(seen.State.Pending) != 1 {
				t.Fatalf("the estimator was asked %+v", seen)
			}
		})
	}
}

// Seeded jobs are the recent waits the model reads, as if seen running.
func TestSeededJobsAreRecent(t *testing.T) {
	now := time.Now()
	w := NewWaits("", nil, zerolog.Nop())
	w.Seed([]slurm.AcctJob{{ID: 7, State: "COMPLETED", Partition: "gpu", Submit: now.Add(-time.Hour), Start: now.Add(-30 * time.Minute),
		End: now.Add(-time.Minute), NumNodes: 1, Nodes: []string{"v1"}, GPUs: 2, GPUTypes: map[string]int{"v100": 2}}}, now.Add(-time.Hour), "1d")
	var started []slurm.Job
	for _, s := range w.started {
		started = append(started, s.job)
	}
	kb := historyKB()
	kb.Nodes[0].Partitions = []string{"gpu"}
	kb.Partitions = []wire.SitePartition{{Name: "gpu", Types: []wire.SitePartitionType{{Type: "v100", Nodes: 1}}}}
	st := QueueStateFor(kb, nil, started, "gpu", "v100", now)
	want := []queuewait.QueueJob{{ID: "7", Partition: "gpu", Nodes: 1, GPUs: 2, Submit: now.Add(-time.Hour), Start: now.Add(-30 * time.Minute)}}
	if len(st.Recent) != 1 || st.Recent[0] != want[0] {
		t.Fatalf("recent %+v, want %+v", st.Recent, want)
	}
	// A second seed (a restart reading the same window) adds nothing twice.
	if n := w.Seed([]slurm.AcctJob{{ID: 7, Submit: now, Start: now}}, now, "1d"); n != 0 {
		t.Errorf("seeded job 7 again: %d", n)
	}
}

// fixedWait is an external queue-wait estimator as Waits sees it
// (external.QueueWait falls back to the model by itself; see package
// external for the plugin side).
type fixedWait struct {
	a    estimate.QueueWaitAnswer
	seen *estimate.QueueWaitQuery
}

func (f fixedWait) QueueWait(_ context.Context, q estimate.QueueWaitQuery) (estimate.QueueWaitAnswer, error) {
	*f.seen = q
	return f.a, nil
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func historyKB() *wire.Site {
	return &wire.Site{Nodes: []wire.SiteNode{{Name: "v1", GPUs: map[string]int{"v100": 4}}, {Name: "k1", GPUs: map[string]int{"k80": 4}}}}
}
