package faulttol

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/checkpoint"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
)

// fakeSlurm is a queue and nodes a test sets directly.
type fakeSlurm struct {
	mu      sync.Mutex
	nodes   []slurm.Node
	jobs    []slurm.Job
	updates map[uint32][]slurm.JobUpdate
}

func (f *fakeSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]slurm.Node(nil), f.nodes...), nil
}

func (f *fakeSlurm) Jobs(context.Context) ([]slurm.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]slurm.Job(nil), f.jobs...), nil
}

func (f *fakeSlurm) Update(_ context.Context, id uint32, u slurm.JobUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.updates == nil {
		f.updates = map[uint32][]slurm.JobUpdate{}
	}
	f.updates[id] = append(f.updates[id], u)
	return nil
}

func (f *fakeSlurm) set(nodes []slurm.Node, jobs ...slurm.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes, f.jobs = nodes, jobs
}

// fakeAgents answer periodic checkpoints as the job at step does.
type fakeAgents struct {
	mu      sync.Mutex
	calls   []uint32
	step    uint64
	elapsed time.Duration
	refuse  string
	err     error
}

func (a *fakeAgents) CheckpointKeep(_ context.Context, nodes []string, id uint32, _ time.Duration) (checkpoint.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, id)
	if a.err != nil {
		return checkpoint.Result{}, a.err
	}
	if a.refuse != "" {
		return checkpoint.Result{Refused: a.refuse}, nil
	}
	return checkpoint.Result{Outcome: wire.CheckpointAcknowledged, Elapsed: a.elapsed, Step: a.step}, nil
}

func (a *fakeAgents) n() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.calls)
}

type fakeInfo map[uint32]Info

func (f fakeInfo) FaultInfo(id uint32) (Info, bool) { in, ok := f[id]; return in, ok }

type memStore map[string][]byte

func (m memStore) Get(_ context.Context, k string) ([]byte, error) {
	if b, ok := m[k]; ok {
		return b, nil
	}
	return nil, state.ErrNotFound
}
func (m memStore) Put(_ context.Context, k string, b []byte) error { m[k] = b; return nil }

func gpuNode(name, typ, st string) slurm.Node {
	return slurm.Node{Name: name, State: st, GPUs: map[string]int{typ: 4}}
}

func testConfig() Config {
	return Config{NodeMTBF: 5 * time.Minute, PriorMTBF: time.Hour, InitialCost: 2 * time.Second,
		MinInterval: time.Second, MaxInterval: time.Hour, Tick: time.Second, Grace: 10 * time.Second}
}

// clock drives a manager's time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(t *testing.T, cfg Config, info fakeInfo, agents *fakeAgents) (*Manager, *fakeSlurm, *clock) {
	t.Helper()
	s := &fakeSlurm{}
	m, err := New(cfg, zerolog.Nop(), s, info, agents, memStore{})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)}
	m.now = c.now
	return m, s, c
}

func (m *Manager) tickWait(t *testing.T) {
	t.Helper()
	if err := m.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.Wait()
}

// Periodic checkpoints come at Young/Daly's interval from the configured
// cost, then from the measured one; jobs that cannot take them, or are
// not checkpointable, get none.
func TestPeriodicCheckpoints(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      func(*Config)
		info     Info
		refuse   string
		err      error
		elapsed  time.Duration
		runFor   time.Duration
		wantCall int
		wantCkpt int
		why      string
	}{
		// Cost 2 s, MTBF 300 s: a checkpoint every 32.6 s; measured 8 s:
		// sqrt(2 x 8 x 300) - 8 = 61.3 s. Over 100 s: at 33 s, at 95 s.
		{"measured cost lengthens the interval", nil, Info{Checkpointable: true}, "", nil, 8 * time.Second, 100 * time.Second, 2, 2, "a checkpoint every 1m1s"},
		// Measured 2 s: every 32.6 s: at 33, 66, 99 s.
		{"cost as configured", nil, Info{Checkpointable: true}, "", nil, 2 * time.Second, 100 * time.Second, 3, 3, "a checkpoint every 33s"},
		{"job without a periodic signal is asked once", nil, Info{Checkpointable: true}, "the job declares no periodic checkpoint signal", nil, 0, 100 * time.Second, 1, 0, "no periodic checkpoints: the job declares no periodic checkpoint signal"},
		// A failed attempt waits an interval: at 33 and 66 s.
		{"failures retried an interval later", nil, Info{Checkpointable: true}, "", errors.New("agent down"), 0, 70 * time.Second, 2, 0, "a checkpoint every 33s"},
		{"not checkpointable", nil, Info{}, "", nil, 0, 100 * time.Second, 0, 0, ""},
		{"off", func(c *Config) { c.Off = true }, Info{Checkpointable: true}, "", nil, 0, 100 * time.Second, 0, 0, "periodic checkpoints are off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			agents := &fakeAgents{step: 500, elapsed: tc.elapsed, refuse: tc.refuse, err: tc.err}
			m, s, c := newTest(t, cfg, fakeInfo{7: tc.info}, agents)
			start := c.t
			s.set([]slurm.Node{gpuNode("n1", "v100", "mixed")},
				slurm.Job{ID: 7, State: "RUNNING", Start: start, Nodes: []string{"n1"}, NumNodes: 1})
			for c.t.Sub(start) <= tc.runFor {
				m.tickWait(t)
				c.t = c.t.Add(time.Second)
			}
			if agents.n() != tc.wantCall {
				t.Errorf("%d checkpoint requests, want %d", agents.n(), tc.wantCall)
			}
			ex := m.Explain(7)
			if tc.why == "" {
				if ex != nil {
					t.Errorf("explain of a job not followed: %+v", ex)
				}
				return
			}
			if ex == nil {
				t.Fatal("no explain")
			}
			if ex.Checkpoints != tc.wantCkpt || !strings.Contains(ex.Why, tc.why) {
				t.Errorf("explain: %d checkpoints, why %q; want %d, %q", ex.Checkpoints, ex.Why, tc.wantCkpt, tc.why)
			}
		})
	}
}

// A job on two nodes fails when either does: half the MTBF.
func TestIntervalCountsNodes(t *testing.T) {
	m, s, _ := newTest(t, testConfig(), fakeInfo{7: {Checkpointable: true}}, &fakeAgents{})
	s.set([]slurm.Node{gpuNode("n1", "v100", "mixed"), gpuNode("n2", "v100", "mixed")},
		slurm.Job{ID: 7, State: "RUNNING", Nodes: []string{"n1", "n2"}, NumNodes: 2})
	m.tickWait(t)
	// sqrt(2 x 2 x 150) - 2 = 22.5 s.
	if ex := m.Explain(7); ex == nil || ex.IntervalSeconds < 22.4 || ex.IntervalSeconds > 22.6 {
		t.Errorf("explain = %+v, want an interval of 22.5 s", ex)
	}
}

// A node failure under a checkpointed job: the failure, Slurm's requeue
// (and the begin time cleared), the restart on another node of another
// type, and the step it resumed from are recorded for explain.
func TestNodeFailureFollowed(t *testing.T) {
	info := fakeInfo{7: {Checkpointable: true, Step: 900}}
	agents := &fakeAgents{step: 800, elapsed: 2 * time.Second}
	m, s, c := newTest(t, testConfig(), info, agents)
	up := []slurm.Node{gpuNode("n-v100", "v100", "mixed"), gpuNode("n-p100", "p100", "idle")}
	run := slurm.Job{ID: 7, State: "RUNNING", Start: c.t, Nodes: []string{"n-v100"}, NumNodes: 1}
	s.set(up, run)
	for i := 0; i < 40; i++ { // one checkpoint at 33 s
		m.tickWait(t)
		c.t = c.t.Add(time.Second)
	}
	if agents.n() != 1 {
		t.Fatalf("%d checkpoints before the failure, want 1", agents.n())
	}
	// The node goes down; Slurm requeues the job in the same instant.
	down := []slurm.Node{gpuNode("n-v100", "v100", "down*"), gpuNode("n-p100", "p100", "idle")}
	s.set(down, slurm.Job{ID: 7, State: "PENDING", Restarts: 1, Reason: "BeginTime"})
	m.tickWait(t)
	if st := m.Stats(); st.NodeFailures != 1 || st.Requeued != 1 {
		t.Errorf("stats %+v, want one failure and one requeue", st)
	}
	if u := s.updates[7]; len(u) != 1 || !u[0].StartNow {
		t.Errorf("updates %+v, want the begin time cleared", u)
	}
	// It restarts on the P100 node; its first progress is still the old
	// run's (agents report a progress file until the job rewrites it),
	// then its own from the checkpoint.
	c.t = c.t.Add(5 * time.Second)
	s.set(down, slurm.Job{ID: 7, State: "RUNNING", Restarts: 1, Start: c.t, Nodes: []string{"n-p100"}, NumNodes: 1})
	m.tickWait(t)
	// A late report of the old run (below what it reached) is not taken
	// for the restart's: the job's next reading is lower still.
	for _, step := range []uint64{880, 805, 830} {
		c.t = c.t.Add(time.Second)
		info[7] = Info{Checkpointable: true, Step: step}
		m.tickWait(t)
	}
	ex := m.Explain(7)
	var kinds []string
	for _, e := range ex.Events {
		kinds = append(kinds, e.Kind)
	}
	if strings.Join(kinds, " ") != "node_failed requeued restarted resumed" {
		t.Fatalf("events %v", ex.Events)
	}
	for i, want := range []string{"latest checkpoint is step 800", "requeued the job (restart 1)", "restarted on n-p100 (p100)", "step 805, at or past the checkpoint at step 800: nothing checkpointed was lost (100 steps of the failed run were)"} {
		if !strings.Contains(ex.Events[i].Text, want) {
			t.Errorf("event %d %q lacks %q", i, ex.Events[i].Text, want)
		}
	}
	if st := m.Stats(); st.Resumed != 1 {
		t.Errorf("stats %+v, want one resumed", st)
	}
}

// Without any checkpoint, explain says the job restarts from the start;
// a job Slurm does not requeue is reported as such.
func TestNodeFailureWithoutRequeue(t *testing.T) {
	cfg := testConfig()
	cfg.Off = true
	m, s, c := newTest(t, cfg, fakeInfo{7: {Checkpointable: true}}, &fakeAgents{})
	s.set([]slurm.Node{gpuNode("n1", "v100", "mixed")}, slurm.Job{ID: 7, State: "RUNNING", Start: c.t, Nodes: []string{"n1"}})
	m.tickWait(t)
	s.set([]slurm.Node{gpuNode("n1", "v100", "down")})
	m.tickWait(t)
	ex := m.Explain(7)
	if len(ex.Events) != 2 || ex.Events[0].Kind != "node_failed" || !strings.Contains(ex.Events[0].Text, "no checkpoint yet") || ex.Events[1].Kind != "not_requeued" {
		t.Errorf("events %+v", ex.Events)
	}
}

// The learned rate and the jobs followed survive a restart.
func TestSaveRestore(t *testing.T) {
	cfg := testConfig()
	cfg.NodeMTBF = 0
	store := memStore{}
	s := &fakeSlurm{}
	m, _ := New(cfg, zerolog.Nop(), s, fakeInfo{7: {Checkpointable: true}}, &fakeAgents{}, store)
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	s.set([]slurm.Node{gpuNode("n1", "v100", "idle")}, slurm.Job{ID: 7, State: "RUNNING", Start: now, Nodes: []string{"n1"}})
	m.tickWait(t)
	now = now.Add(time.Minute)
	s.set([]slurm.Node{gpuNode("n1", "v100", "down")})
	m.tickWait(t)
	m2, _ := New(cfg, zerolog.Nop(), s, nil, &fakeAgents{}, store)
	if err := m2.restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m2.rate.Failures != 1 || m2.rate.UpSeconds != 60 {
		t.Errorf("restored rate %+v", m2.rate)
	}
	if d, src := m2.NodeMTBF(); d != (time.Hour+time.Minute)/2 || !strings.Contains(src, "learned: 1 node failures") {
		t.Errorf("MTBF %s (%s), want (60 s + 1 h prior) / 2", d, src)
	}
	if ex := m2.Explain(7); ex == nil || len(ex.Events) == 0 {
		t.Errorf("restored explain %+v", ex)
	}
}

// The queue may show the requeue a tick before the nodes show the
// failure (two reads of Slurm, the failure between them): the failure,
// seen next, is still taken as the requeue's cause.
func TestRequeueSeenBeforeFailure(t *testing.T) {
	m, s, c := newTest(t, testConfig(), fakeInfo{7: {Checkpointable: true}}, &fakeAgents{})
	up := []slurm.Node{gpuNode("n1", "v100", "mixed"), gpuNode("n2", "p100", "idle")}
	s.set(up, slurm.Job{ID: 7, State: "RUNNING", Start: c.t, Nodes: []string{"n1"}})
	m.tickWait(t)
	c.t = c.t.Add(time.Second)
	s.set(up, slurm.Job{ID: 7, State: "PENDING", Restarts: 1, Reason: "BeginTime"})
	m.tickWait(t)
	c.t = c.t.Add(time.Second)
	s.set([]slurm.Node{gpuNode("n1", "v100", "down*"), gpuNode("n2", "p100", "idle")},
		slurm.Job{ID: 7, State: "PENDING", Restarts: 1, Reason: "BeginTime"})
	m.tickWait(t)
	ex := m.Explain(7)
	if len(ex.Events) != 2 || ex.Events[0].Kind != "node_failed" || ex.Events[1].Kind != "requeued" {
		t.Fatalf("events %+v", ex.Events)
	}
	if u := s.updates[7]; len(u) != 1 || !u[0].StartNow {
		t.Errorf("updates %+v, want the begin time cleared", u)
	}
}
