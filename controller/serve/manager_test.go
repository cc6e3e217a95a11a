package serve

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
)

// fakeSlurm is Slurm in memory: one GPU per node; a pending job starts,
// once its begin time has passed, on the first free node it is not
// excluded from; a running job is killed at its limit and becomes ready
// readyAfter after it starts (never when readyAfter < 0). It is also the
// controller's Jobs: every job it holds is a serve job of its service.
type fakeSlurm struct {
	now        *time.Time
	nodes      []slurm.Node
	jobs       map[uint32]*fjob
	order      []uint32
	nextID     uint32
	readyAfter time.Duration
	// succReady overrides readyAfter for successors (jobs Rota submitted).
	succReady *time.Duration
	submits   []slurm.Submission
	cancels   []uint32
	updates   map[uint32][]slurm.JobUpdate
}

type fjob struct {
	job     slurm.Job
	service string
	chain   string // --rota-chain
	begin   time.Time
	exclude []string
	ended   bool
	state   string
	end     time.Time
	rota    bool
}

func newFake(now *time.Time, types ...string) *fakeSlurm {
	f := &fakeSlurm{now: now, jobs: map[uint32]*fjob{}, nextID: 100, readyAfter: 30 * time.Second, updates: map[uint32][]slurm.JobUpdate{}}
	for i, t := range types {
		f.nodes = append(f.nodes, slurm.Node{Name: fmt.Sprintf("n%d-%s", i+1, t), State: "idle", Partitions: []string{"gpu"},
			GPUs: map[string]int{t: 1}, GPUsUsed: map[string]int{}})
	}
	return f
}

// add submits a replica of service as its user would, held for hold.
func (f *fakeSlurm) add(service string, limit uint32, hold time.Duration) uint32 {
	f.nextID++
	id := f.nextID
	f.jobs[id] = &fjob{service: service, begin: f.now.Add(hold), job: slurm.Job{ID: id, State: "PENDING", User: "alice",
		Name: "serve", Partition: "gpu", Submit: *f.now, TimeLimitMin: limit, TresPerNode: "gres/gpu:1", NumNodes: 1}}
	f.order = append(f.order, id)
	return id
}

func (f *fakeSlurm) busy(node string) bool {
	for _, j := range f.jobs {
		if !j.ended && j.job.State == "RUNNING" && slices.Contains(j.job.Nodes, node) {
			return true
		}
	}
	return false
}

// advance plays time up to now.
func (f *fakeSlurm) advance() {
	for _, id := range f.order {
		j := f.jobs[id]
		if j.ended {
			continue
		}
		if j.job.State == "PENDING" && !f.now.Before(j.begin) {
			for _, n := range f.nodes {
				if !slices.Contains(j.exclude, n.Name) && !f.busy(n.Name) {
					j.job.State, j.job.Start, j.job.Nodes = "RUNNING", *f.now, []string{n.Name}
					break
				}
			}
		}
		if j.job.State == "RUNNING" && f.now.Sub(j.job.Start) >= time.Duration(j.job.TimeLimitMin)*time.Minute {
			j.ended, j.state, j.end = true, "TIMEOUT", *f.now
		}
	}
}

func (f *fakeSlurm) Nodes(context.Context) ([]slurm.Node, error) { return f.nodes, nil }
func (f *fakeSlurm) Partitions(context.Context) ([]slurm.Partition, error) {
	return []slurm.Partition{{Name: "gpu", MaxTimeMin: 60}}, nil
}
func (f *fakeSlurm) JobAdminComment(context.Context, uint32) (string, error) { return "", nil }
func (f *fakeSlurm) DecisionIDs(context.Context) (map[uint32]string, error)  { return nil, nil }
func (f *fakeSlurm) Requeue(context.Context, uint32) error                   { return nil }
func (f *fakeSlurm) BatchScript(context.Context, uint32) ([]byte, error) {
	return []byte("#!/bin/sh\nexec serve\n"), nil
}
func (f *fakeSlurm) ClearDependency(context.Context, uint32) error { return nil }
func (f *fakeSlurm) Signal(context.Context, uint32, string) error  { return nil }

func (f *fakeSlurm) Jobs(context.Context) ([]slurm.Job, error) {
	var out []slurm.Job
	for _, id := range f.order {
		if j := f.jobs[id]; !j.ended {
			jj := j.job
			if jj.State == "RUNNING" {
				jj.RunSeconds = f.now.Sub(jj.Start).Seconds()
			}
			out = append(out, jj)
		}
	}
	return out, nil
}

func (f *fakeSlurm) Job(ctx context.Context, id uint32) (slurm.Job, bool, error) {
	j, ok := f.jobs[id]
	if !ok || j.ended {
		return slurm.Job{}, false, nil
	}
	return j.job, true, nil
}

func (f *fakeSlurm) Update(_ context.Context, id uint32, u slurm.JobUpdate) error {
	j, ok := f.jobs[id]
	if !ok || j.ended {
		return fmt.Errorf("job %d gone", id)
	}
	f.updates[id] = append(f.updates[id], u)
	if u.ExcNodes != nil {
		if j.job.State != "PENDING" {
			return fmt.Errorf("job %d is no longer pending", id)
		}
		j.exclude = splitList(*u.ExcNodes)
	}
	if u.StartNow {
		j.begin = *f.now
	}
	return nil
}

func (f *fakeSlurm) ShowJob(_ context.Context, id uint32) (slurm.JobSpec, bool, error) {
	j, ok := f.jobs[id]
	if !ok {
		return slurm.JobSpec{}, false, nil
	}
	s := slurm.JobSpec{ID: id, User: j.job.User, State: j.job.State, Partition: "gpu", TimeLimitMin: j.job.TimeLimitMin,
		NumNodes: 1, TresPerNode: "gres/gpu:1", ExcNodes: strings.Join(j.exclude, ","), Eligible: j.begin}
	if j.ended {
		s.State, s.End = j.state, j.end
	}
	return s, true, nil
}

func (f *fakeSlurm) Submit(_ context.Context, s slurm.Submission) (uint32, error) {
	f.submits = append(f.submits, s)
	f.nextID++
	id := f.nextID
	j := &fjob{rota: true, begin: *f.now, job: slurm.Job{ID: id, State: "PENDING", User: s.User, Partition: "gpu", Submit: *f.now, NumNodes: 1}}
	for _, a := range s.Args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "--time":
			fmt.Sscan(v, &j.job.TimeLimitMin)
		case "--exclude":
			j.exclude = splitList(v)
		case "--rota-service":
			j.service = v
			j.begin = f.now.Add(30 * time.Second) // the plugin's hold
		case "--dependency":
			return 0, fmt.Errorf("a service successor must not wait on its predecessor: %s", a)
		}
	}
	f.jobs[id] = j
	f.order = append(f.order, id)
	return id, nil
}

func (f *fakeSlurm) Cancel(_ context.Context, id uint32) error {
	f.cancels = append(f.cancels, id)
	if j := f.jobs[id]; j != nil && !j.ended {
		j.ended, j.state, j.end = true, "CANCELLED", *f.now
	}
	return nil
}

// Decision and Ready: the fake is also the controller's view of jobs.
func (f *fakeSlurm) Decision(id uint32) *wire.Decision {
	j, ok := f.jobs[id]
	if !ok {
		return nil
	}
	return &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Kind: wire.KindServe, Service: j.service, Chain: j.chain}},
		Given: wire.PlaceReply{Kind: wire.KindServe}}
}

func (f *fakeSlurm) Ready(id uint32) bool {
	j, ok := f.jobs[id]
	if !ok || j.ended || j.job.State != "RUNNING" {
		return false
	}
	after := f.readyAfter
	if j.rota && f.succReady != nil {
		after = *f.succReady
	}
	return after >= 0 && f.now.Sub(j.job.Start) >= after
}

func testConfig() Config {
	c := DefaultConfig()
	c.Tick, c.Lead = 5*time.Second, 2*time.Minute
	return c
}

// run ticks the manager every tick for d.
func run(t *testing.T, m *Manager, f *fakeSlurm, now *time.Time, d time.Duration) {
	t.Helper()
	for end := now.Add(d); now.Before(end); *now = now.Add(m.cfg.Tick) {
		f.advance()
		if err := m.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	f.advance()
}

func newManager(t *testing.T, cfg Config, f *fakeSlurm, now *time.Time, store state.Store) *Manager {
	t.Helper()
	m, err := New(cfg, zerolog.Nop(), f, f, store)
	if err != nil {
		t.Fatal(err)
	}
	m.now = func() time.Time { return *now }
	return m
}

func runningNodes(f *fakeSlurm) []string {
	var out []string
	for _, id := range f.order {
		if j := f.jobs[id]; !j.ended && j.job.State == "RUNNING" {
			out = append(out, j.job.Nodes...)
		}
	}
	return out
}

func typeOf(node string) string { return node[strings.IndexByte(node, '-')+1:] }

// Replicas submitted together start on distinct nodes, or distinct types
// when asked, while there are enough; beyond that they share rather than
// wait for ever.
func TestSpread(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		spread    string
		types     []string
		replicas  int
		wantNodes int // distinct nodes among the running replicas
		wantTypes int
	}{
		{"nodes", SpreadNodes, []string{"v100", "v100", "p100"}, 3, 3, 2},
		{"types", SpreadTypes, []string{"v100", "v100", "p100", "p100"}, 2, 2, 2},
		{"types, more replicas than types", SpreadTypes, []string{"v100", "v100", "p100"}, 3, 3, 2},
		{"more replicas than nodes", SpreadNodes, []string{"v100", "p100"}, 2, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
			f := newFake(&now, c.types...)
			cfg := testConfig()
			cfg.Spread = c.spread
			m := newManager(t, cfg, f, &now, nil)
			for range c.replicas {
				f.add("llm", 60, cfg.Hold)
			}
			run(t, m, f, &now, 25*time.Second) // within the hold: only the manager starts them
			nodes := runningNodes(f)
			types := map[string]bool{}
			for _, n := range nodes {
				types[typeOf(n)] = true
			}
			if len(nodes) != c.replicas || len(union(nodes)) != c.wantNodes || len(types) != c.wantTypes {
				t.Fatalf("running on %v, want %d replicas on %d nodes of %d types", nodes, c.replicas, c.wantNodes, c.wantTypes)
			}
			if st := m.Explain(101); st == nil || st.Name != "llm" || len(st.Replicas) != c.replicas || st.Spread != c.spread {
				t.Fatalf("explain %+v", st)
			}
		})
	}
}

// A replica rolls over before its limit: the successor starts on another
// node while the predecessor serves, and the predecessor is stopped only
// once the successor is ready. When the successor is never ready the
// predecessor runs to its limit.
func TestRollover(t *testing.T) {
	t.Parallel()
	never := -time.Second
	for _, c := range []struct {
		name          string
		succReady     *time.Duration
		noRollover    bool
		wantRollovers int
		wantGaps      int
	}{
		{"ready successors", nil, false, 4, 0},         // every 8.5 min: 2 min lead, then 30 s to ready
		{"successor never ready", &never, false, 0, 4}, // each job runs to its limit
		{"--rota-chain=off", nil, true, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
			f := newFake(&now, "v100", "p100", "k80")
			f.succReady = c.succReady
			m := newManager(t, testConfig(), f, &now, nil)
			id := f.add("llm", 10, 0)
			if c.noRollover {
				f.jobs[id].chain = "off"
			}
			f.add("llm", 60, 0) // a sibling on its own node throughout
			run(t, m, f, &now, 36*time.Minute)
			st := m.Explain(id)
			if st == nil || len(st.Replicas) != 2 {
				t.Fatalf("explain %+v", st)
			}
			r := m.replicas[id]
			if got := m.Stats().Rollovers; int(got) != c.wantRollovers || int(m.Stats().Gaps) != c.wantGaps {
				t.Fatalf("rollovers %d gaps %d, want %d %d; jobs %+v", got, m.Stats().Gaps, c.wantRollovers, c.wantGaps, r.Jobs)
			}
			sib := f.jobs[id+1].job.Nodes[0]
			for i := 1; i < len(r.Jobs); i++ {
				p, g := r.Jobs[i-1], r.Jobs[i]
				if g.Started.IsZero() {
					continue
				}
				if slices.Contains(g.Nodes, p.Nodes[0]) || slices.Contains(g.Nodes, sib) {
					t.Errorf("job %d runs on %v beside its predecessor (%v) or sibling (%s)", g.JobID, g.Nodes, p.Nodes, sib)
				}
				if !g.Started.Before(p.EndedAt) {
					t.Errorf("job %d started %s, after its predecessor ended %s", g.JobID, g.Started, p.EndedAt)
				}
				if d, ok := r.Overlap(i); c.succReady == nil && (!ok || d < 0 || d > 2*m.cfg.Tick) {
					t.Errorf("job %d: overlap %s %v, want 0 to two ticks", g.JobID, d, ok)
				}
				if p.State == "TIMEOUT" && c.succReady == nil {
					t.Errorf("job %d reached its limit though its successor was ready", p.JobID)
				}
			}
			for _, s := range f.submits {
				if !slices.Contains(s.Args, "--rota-kind=serve") || !slices.Contains(s.Args, "--rota-service=llm") || s.User != "alice" {
					t.Errorf("successor submitted as %s with %v", s.User, s.Args)
				}
			}
			if c.noRollover && (len(f.submits) != 0 || r.State != StateStopped) {
				t.Errorf("--rota-chain=off rolled over: %d successors, state %s", len(f.submits), r.State)
			}
			if c.succReady != nil && (r.Jobs[0].State != "TIMEOUT" || r.Jobs[0].StoppedByRota) {
				t.Errorf("predecessor of a successor never ready: %+v", r.Jobs[0])
			}
		})
	}
}

// Cancelling a replica's job stops the replica, and Rota cancels its
// pending successor; its sibling carries on.
func TestUserCancelStopsReplica(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	f := newFake(&now, "v100", "p100", "k80")
	f.succReady = new(time.Duration)
	*f.succReady = time.Hour // not ready before the cancel
	m := newManager(t, testConfig(), f, &now, nil)
	id := f.add("llm", 10, 0)
	sib := f.add("llm", 60, 0)
	run(t, m, f, &now, 9*time.Minute)
	r := m.replicas[id]
	if len(r.Jobs) != 2 {
		t.Fatalf("no successor submitted: %+v", r.Jobs)
	}
	f.Cancel(context.Background(), id)
	f.cancels = nil
	run(t, m, f, &now, 10*time.Second)
	if r.State != StateStopped || !slices.Equal(f.cancels, []uint32{r.Jobs[1].JobID}) || m.replicas[sib].State != StateRunning {
		t.Fatalf("replica %s (%s), Rota cancelled %v, sibling %s", r.State, r.Why, f.cancels, m.replicas[sib].State)
	}
}

// A replica the user asked to begin later is kept off its siblings'
// nodes but not started before its time.
func TestUsersBeginStands(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	f := newFake(&now, "v100", "p100", "k80")
	m := newManager(t, testConfig(), f, &now, nil)
	f.add("llm", 60, 0)
	later := f.add("llm", 60, time.Hour)
	run(t, m, f, &now, 2*time.Minute)
	j := f.jobs[later]
	if j.job.State != "PENDING" || len(j.exclude) != 1 {
		t.Fatalf("job with a later --begin: %s, excluded %v", j.job.State, j.exclude)
	}
	now = now.Add(time.Hour)
	run(t, m, f, &now, 10*time.Second)
	if j.job.State != "RUNNING" || j.job.Nodes[0] == f.jobs[later-1].job.Nodes[0] {
		t.Fatalf("after its begin: %s on %v beside %v", j.job.State, j.job.Nodes, f.jobs[later-1].job.Nodes)
	}
}

// A job that is not a service is never touched.
func TestLeavesOtherJobsAlone(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	f := newFake(&now, "v100")
	m := newManager(t, testConfig(), f, &now, nil)
	m.jobs = batchOnly{}
	f.add("", 10, 0)
	run(t, m, f, &now, 12*time.Minute)
	if len(f.submits)+len(f.cancels)+len(f.updates) != 0 || len(m.Status()) != 0 {
		t.Fatalf("touched a batch job: %d submits, %v cancels, %v updates", len(f.submits), f.cancels, f.updates)
	}
}

type batchOnly struct{}

func (batchOnly) Decision(uint32) *wire.Decision {
	return &wire.Decision{Given: wire.PlaceReply{}}
}
func (batchOnly) Ready(uint32) bool { return true }

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		f    func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"types", func(c *Config) { c.Spread = SpreadTypes }, true},
		{"unknown spread", func(c *Config) { c.Spread = "racks" }, false},
		{"lead under two ticks", func(c *Config) { c.Lead = c.Tick }, false},
		{"no tick", func(c *Config) { c.Tick = 0 }, false},
		{"no tries", func(c *Config) { c.MaxTries = 0 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			c.f(&cfg)
			if err := cfg.Check(); (err == nil) != c.ok {
				t.Fatalf("Check = %v, want ok %v", err, c.ok)
			}
		})
	}
}

// Two replicas due to roll over at the same moment on three nodes: the
// second waits until the first's successor is ready (one rollover at a
// time while half the lead is left), so both roll over with no gap and
// the serving jobs of the two replicas never share a node.
func TestSimultaneousRollovers(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	f := newFake(&now, "v100", "p100", "k80")
	m := newManager(t, testConfig(), f, &now, nil)
	a, b := f.add("llm", 10, 0), f.add("llm", 10, 0)
	for end := now.Add(30 * time.Minute); now.Before(end); now = now.Add(m.cfg.Tick) {
		f.advance()
		if err := m.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		serving := func(id uint32) string {
			r := m.replicas[id]
			for i := len(r.Jobs) - 1; i >= 0; i-- {
				if g := r.Jobs[i]; g.running() && !g.ReadyAt.IsZero() {
					return g.Nodes[0]
				}
			}
			return ""
		}
		if na, nb := serving(a), serving(b); na != "" && na == nb {
			t.Fatalf("%s: both replicas serve from %s", now.Format(time.TimeOnly), na)
		}
		rolling := 0
		for _, id := range []uint32{a, b} {
			r := m.replicas[id]
			if g := r.Jobs[len(r.Jobs)-1]; len(r.Jobs) > 1 && g.ReadyAt.IsZero() && !g.Ended {
				rolling++
			}
		}
		if rolling > 1 {
			t.Fatalf("%s: both replicas roll over at once", now.Format(time.TimeOnly))
		}
	}
	st := m.Stats()
	if st.Rollovers < 4 || st.Gaps != 0 {
		t.Fatalf("stats %+v", st)
	}
}

type memStore map[string][]byte

func (s memStore) Get(_ context.Context, k string) ([]byte, error) {
	if b, ok := s[k]; ok {
		return b, nil
	}
	return nil, state.ErrNotFound
}

func (s memStore) Put(_ context.Context, k string, b []byte) error {
	s[k] = append([]byte(nil), b...)
	return nil
}

// A controller that restarts mid-rollover (the successor submitted, not
// yet ready) carries on: the successor is not submitted twice, the
// predecessor is stopped once it is ready, and the history is kept.
func TestSurvivesRestart(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	f := newFake(&now, "v100", "p100", "k80")
	store := memStore{}
	m := newManager(t, testConfig(), f, &now, store)
	id := f.add("llm", 10, 0)
	run(t, m, f, &now, 8*time.Minute+10*time.Second)
	if n := len(m.replicas[id].Jobs); n != 2 || len(f.submits) != 1 {
		t.Fatalf("before the restart: %d jobs, %d submits", n, len(f.submits))
	}
	m2 := newManager(t, testConfig(), f, &now, store)
	if err := m2.restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	run(t, m2, f, &now, time.Minute)
	r := m2.replicas[id]
	if len(f.submits) != 1 || len(r.Jobs) != 2 || !r.Jobs[0].StoppedByRota || r.Jobs[1].ReadyAt.IsZero() || m2.Stats().Rollovers != 1 {
		t.Fatalf("after the restart: %d submits, jobs %+v, stats %+v", len(f.submits), r.Jobs, m2.Stats())
	}
}
