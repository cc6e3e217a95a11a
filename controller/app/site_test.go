package app

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

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/estimate/queuewait"
	"github.com/rota-hpc/rota/controller/site"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
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
			w := newWaitPredictor(tc.path, zerolog.Nop())
			w.jobs = tc.jobs
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

// failingSlurm cannot read nodes: a controller with it shows only what it
// stored.
type failingSlurm struct{ fakeSlurm }

func (f *failingSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	return nil, errors.New("sinfo: down")
}

func TestControllerSiteAndEstimate(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Site = site.Config{Unit: "SU", Debug: []string{"debug"}, GPUMemory: map[string]uint64{"k80": 12 << 30},
		Rates: []wire.Rate{{Resource: site.GPU, GPUType: "v100", PerHour: 3}, {Resource: site.GPU, GPUType: "k80", PerHour: 1}}}
	cfg.ThroughputTable = filepath.Join("..", "..", "..", "shared", "data", "gavel", "simulation_throughputs.json")
	url, stop := startWith(t, cfg, &fakeSlurm{comments: map[uint32]string{}})

	var st wire.StatusReply
	request(t, url, wire.SubjectStatus, wire.StatusRequest{V: wire.Version, Site: true}, &st)
	if st.Site == nil || len(st.Site.Partitions) != 1 || len(st.Site.GPUTypes) != 2 || !strings.Contains(st.Site.QueueWait, "no model") {
		t.Fatalf("site %+v", st.Site)
	}
	var plain wire.StatusReply
	request(t, url, wire.SubjectStatus, wire.StatusRequest{V: wire.Version}, &plain)
	if plain.Site != nil {
		t.Error("site sent without being asked for")
	}

	tests := []struct {
		name  string
		req   wire.EstimateRequest
		check func(t *testing.T, rep *wire.EstimateReply)
	}{
		{"hint on v100, scaled to k80 by the speed table", wire.EstimateRequest{GPUsPerNode: 1, Steps: 36000, Throughput: map[string]float64{"v100": 10}},
			func(t *testing.T, rep *wire.EstimateReply) {
				v, k := rowOf(t, rep, "v100"), rowOf(t, rep, "k80")
				if !near(*v.RunMin, 60) || !near(*k.RunMin, 180) || !near(*v.Cost, 3) || !near(*k.Cost, 3) {
					t.Errorf("v100 %v min %v SU, k80 %v min %v SU", *v.RunMin, *v.Cost, *k.RunMin, *k.Cost)
				}
				if v.WaitMin != nil || !strings.Contains(v.WaitWhy, "no model") || rep.Fastest == nil || rep.Fastest.GPUType != "v100" {
					t.Errorf("wait %v (%q), fastest %+v", v.WaitMin, v.WaitWhy, rep.Fastest)
				}
			}},
		{"model from Gavel's table: v100 faster than k80", wire.EstimateRequest{GPUsPerNode: 1, Steps: 100000, Model: "resnet-50 (batch size 64)"},
			func(t *testing.T, rep *wire.EstimateReply) {
				v, k := rowOf(t, rep, "v100"), rowOf(t, rep, "k80")
				if v.RunMin == nil || k.RunMin == nil || !(*v.RunMin < *k.RunMin) || !strings.Contains(v.RateBasis, "throughput table") {
					t.Errorf("v100 %+v k80 %+v", v, k)
				}
			}},
		{"GPU memory: k80 too small, v100 unknown", wire.EstimateRequest{GPUsPerNode: 1, GPUMemBytes: 16 << 30},
			func(t *testing.T, rep *wire.EstimateReply) {
				if k := rowOf(t, rep, "k80"); k.Fits != forecast.No {
					t.Errorf("k80 %+v", k)
				}
				if v := rowOf(t, rep, "v100"); v.Fits != forecast.Unknown {
					t.Errorf("v100 %+v", v)
				}
			}},
		{"unknown model is an error", wire.EstimateRequest{GPUsPerNode: 1, Model: "GPT-5"},
			func(t *testing.T, rep *wire.EstimateReply) {
				if !strings.Contains(rep.Error, "not in the throughput table") {
					t.Errorf("error %q", rep.Error)
				}
			}},
		{"nothing known: run time unknown, never guessed", wire.EstimateRequest{GPUsPerNode: 1, Steps: 1000},
			func(t *testing.T, rep *wire.EstimateReply) {
				for _, r := range rep.Rows {
					if r.RunMin != nil || r.Cost != nil || !strings.Contains(r.RunWhy, "--throughput") {
						t.Errorf("%+v", r)
					}
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.V = wire.Version
			var rep wire.EstimateReply
			request(t, url, wire.SubjectEstimate, tc.req, &rep)
			tc.check(t, &rep)
		})
	}
	stop()

	// Restarted with Slurm unreadable, the controller shows the stored site.
	url, stop = startWith(t, cfg, &failingSlurm{fakeSlurm{comments: map[uint32]string{}}})
	defer stop()
	st = wire.StatusReply{}
	request(t, url, wire.SubjectStatus, wire.StatusRequest{V: wire.Version, Site: true}, &st)
	if st.Site == nil || len(st.Site.Partitions) != 1 || st.Site.Partitions[0].Name != "gpu" {
		t.Fatalf("stored site not restored: %+v", st.Site)
	}
}

func rowOf(t *testing.T, rep *wire.EstimateReply, typ string) wire.EstimateRow {
	t.Helper()
	for _, r := range rep.Rows {
		if r.GPUType == typ {
			return r
		}
	}
	t.Fatalf("no %s row: %+v (error %q)", typ, rep.Rows, rep.Error)
	return wire.EstimateRow{}
}

func near(a, b float64) bool { return a > b-1e-6 && a < b+1e-6 }

func TestLoadConfigSiteKeys(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.conf")
	writeFile(t, good, `charge.unit = SU
charge.gpu_hour = 1
charge.gpu_hour.partition.gpu.type.a100 = 4
charge.core_hour = 0.02
debug_partitions = debug, dev
gpu_mem.v100 = 32GiB
throughput_table = /t.json
queuewait_model = /m.json
`)
	c, err := LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Site.Unit != "SU" || len(c.Site.Rates) != 3 || len(c.Site.Debug) != 2 || !c.Site.IsDebug("dev") ||
		c.Site.GPUMemory["v100"] != 32<<30 || c.ThroughputTable != "/t.json" || c.QueueWaitModel != "/m.json" {
		t.Fatalf("site config %+v, table %q, model %q", c.Site, c.ThroughputTable, c.QueueWaitModel)
	}
	for text, want := range map[string]string{
		"charge.gpu_hour.queue.gpu = 1\n": "want charge.gpu_hour",
		"gpu_mem.v100 = big\n":            "want a size",
		"charge.gpu_hourly = 1\n":         "want charge.gpu_hour",
	} {
		bad := filepath.Join(dir, "bad.conf")
		writeFile(t, bad, text)
		if _, err := LoadConfig(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
	// The shipped example, with its site keys turned on, loads.
	b, err := os.ReadFile("../../contrib/controller.conf")
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, k := range []string{"#charge.", "#debug_partitions", "#gpu_mem.", "#throughput_table", "#queuewait_model"} {
			if strings.HasPrefix(l, k) {
				l = l[1:]
			}
		}
		on = append(on, l)
	}
	ex := filepath.Join(dir, "example.conf")
	writeFile(t, ex, strings.Join(on, "\n"))
	if c, err := LoadConfig(ex); err != nil || len(c.Site.Rates) != 5 {
		t.Fatalf("contrib/controller.conf with site keys: %v (%d rates)", err, len(c.Site.Rates))
	}
}

// fixedWait is an external queue-wait estimator as the controller sees it
// (external.QueueWait falls back to the model by itself; see
// controller/estimate/external for the plugin side).
type fixedWait struct {
	a    estimate.QueueWaitAnswer
	seen *estimate.QueueWaitQuery
}

func (f fixedWait) QueueWait(_ context.Context, q estimate.QueueWaitQuery) (estimate.QueueWaitAnswer, error) {
	*f.seen = q
	return f.a, nil
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
			w := newWaitPredictor("", zerolog.Nop()) // no model: the plugin alone
			w.jobs = queue
			var seen estimate.QueueWaitQuery
			w.ext = fixedWait{tc.a, &seen}
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

type constWait struct{ d time.Duration }

func (c constWait) PredictWait(chains.WaitRequest) (time.Duration, bool) { return c.d, true }

// A chain's successor is timed by the site's queue-wait predictor when it
// has an answer, else by the chain manager's observed waits.
func TestChainWaitsUseTheSitePredictor(t *testing.T) {
	kb := &wire.Site{Partitions: []wire.SitePartition{{Name: "gpu", Types: []wire.SitePartitionType{{Type: "v100", Nodes: 1, GPUs: 4, MaxPerNode: 4}}}},
		Nodes: []wire.SiteNode{{Name: "n1", GPUs: map[string]int{"v100": 4}, Partitions: []string{"gpu"}}}}
	queue := func(context.Context) ([]slurm.Job, error) { return nil, nil }
	req := chains.WaitRequest{Partition: "gpu", GPUType: "v100", GPUs: 1, TimeLimitMin: 60}
	tests := []struct {
		name string
		ext  estimate.QueueWait // nil: no model, no plugin
		kb   *wire.Site
		want time.Duration
	}{
		{"no predictor: observed waits", nil, kb, 7 * time.Minute},
		{"predictor answers", fixedWait{estimate.QueueWaitAnswer{Wait: 3 * time.Minute, Source: "external:x"}, new(estimate.QueueWaitQuery)}, kb, 3 * time.Minute},
		{"predictor unknown: observed waits", fixedWait{estimate.QueueWaitAnswer{Source: estimate.SourceUnknown}, new(estimate.QueueWaitQuery)}, kb, 7 * time.Minute},
		{"no knowledge base yet: observed waits", fixedWait{estimate.QueueWaitAnswer{Wait: 3 * time.Minute, Source: "external:x"}, new(estimate.QueueWaitQuery)}, nil, 7 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaitPredictor("", zerolog.Nop())
			w.jobs, w.ext = queue, tc.ext
			c := &Controller{site: &siteState{waits: w, kb: tc.kb}}
			got, ok := (&chainWaits{c: c, fallback: constWait{7 * time.Minute}}).PredictWait(req)
			if !ok || got != tc.want {
				t.Fatalf("wait %v %v, want %v", got, ok, tc.want)
			}
		})
	}
}
