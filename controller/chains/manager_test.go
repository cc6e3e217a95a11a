package chains

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
)

// fakeSlurm is Slurm in memory with room for every job: a pending job
// starts as soon as its afterok dependency is satisfied; a running job
// trains at rate steps/s from its chain's checkpoint, checkpoints and
// exits 0 on its signal, exits 0 at its total, and is killed at its limit.
type fakeSlurm struct {
	now      *time.Time
	jobs     map[uint32]*fjob
	order    []uint32
	nextID   uint32
	ckpt     map[uint32]uint64 // chain id -> checkpointed step
	rate     float64
	total    uint64
	dec      *wire.Decision
	onSignal string // "" checkpoint and exit 0; "ignore"; "die" (FAILED 143)
	// limitFollowed: the round loop says it follows the job's limit.
	limitFollowed bool
	// noResume: the program starts from step 0 every time.
	noResume bool
	// every: the program also checkpoints every this many steps.
	every uint64
	// quiet: a segment reports no progress for this long after it
	// starts, and the round loop's steps left is then the whole job's.
	quiet time.Duration
	// wants: the type the round loop's plan gives the job most time on.
	wants   string
	submits []slurm.Submission
	signals []uint32
	cancels []uint32
	cleared []uint32
	prio    map[uint32]uint32
	nudges  map[uint32]int // priority updates per job
	// moving: jobs the round loop is moving (JobInfo.Moving).
	moving map[uint32]bool
}

type fjob struct {
	job      slurm.Job
	chain    uint32
	after    uint32
	from     uint64
	step     uint64
	state    string // final state once ended
	exitCode int
	end      time.Time
	ended    bool
}

func newFakeSlurm(now *time.Time) *fakeSlurm {
	return &fakeSlurm{now: now, jobs: map[uint32]*fjob{}, nextID: 100, ckpt: map[uint32]uint64{}, rate: 1, total: 9000,
		dec:  &wire.Decision{ID: "d", Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 9000, CheckpointSignal: "USR1"}}},
		prio: map[uint32]uint32{}, nudges: map[uint32]int{}}
}

func (f *fakeSlurm) add(limit uint32) uint32 {
	f.nextID++
	id := f.nextID
	f.jobs[id] = &fjob{chain: id, job: slurm.Job{ID: id, State: "PENDING", User: "alice", Name: "train", Partition: "gpu",
		Submit: *f.now, TimeLimitMin: limit, TresPerNode: "gres:gpu:1", NumNodes: 1, NumTasks: 1}}
	f.order = append(f.order, id)
	return id
}

func (f *fakeSlurm) end(j *fjob, state string, code int) {
	j.ended, j.state, j.exitCode, j.end = true, state, code, *f.now
}

// advance plays time up to now.
func (f *fakeSlurm) advance() {
	for _, id := range f.order {
		j := f.jobs[id]
		if j.ended {
			continue
		}
		if j.job.State == "PENDING" {
			if j.after != 0 {
				p := f.jobs[j.after]
				if !p.ended || p.state != "COMPLETED" {
					continue
				}
			}
			j.job.State, j.job.Start, j.job.Nodes = "RUNNING", *f.now, []string{"node-v100"}
			if !f.noResume {
				j.from = f.ckpt[j.chain]
			}
			j.step = j.from
		}
		run := f.now.Sub(j.job.Start)
		j.job.RunSeconds = run.Seconds()
		j.step = min(j.from+uint64(run.Seconds()*f.rate), f.total)
		if f.every > 0 {
			f.ckpt[j.chain] = max(f.ckpt[j.chain], j.step/f.every*f.every)
		}
		if j.step >= f.total {
			f.ckpt[j.chain] = f.total
			f.end(j, "COMPLETED", 0)
		} else if run >= time.Duration(j.job.TimeLimitMin)*time.Minute {
			f.end(j, "TIMEOUT", 0)
		}
	}
}

func (f *fakeSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	return []slurm.Node{{Name: "node-v100", Partitions: []string{"gpu"}, GPUs: map[string]int{"v100": 4}, GPUsUsed: map[string]int{}}}, nil
}
func (f *fakeSlurm) Partitions(context.Context) ([]slurm.Partition, error) {
	return []slurm.Partition{{Name: "gpu", MaxTimeMin: 60}}, nil
}
func (f *fakeSlurm) JobAdminComment(context.Context, uint32) (string, error) { return "", nil }
func (f *fakeSlurm) DecisionIDs(context.Context) (map[uint32]string, error) {
	return nil, nil
}
func (f *fakeSlurm) Requeue(context.Context, uint32) error { return errors.New("not here") }

func (f *fakeSlurm) Jobs(context.Context) ([]slurm.Job, error) {
	f.advance()
	var out []slurm.Job
	for _, id := range f.order {
		if j := f.jobs[id]; !j.ended {
			out = append(out, j.job)
		}
	}
	return out, nil
}

func (f *fakeSlurm) Job(_ context.Context, id uint32) (slurm.Job, bool, error) {
	j := f.jobs[id]
	if j == nil || j.ended {
		return slurm.Job{}, false, nil
	}
	return j.job, true, nil
}

func (f *fakeSlurm) Update(_ context.Context, id uint32, u slurm.JobUpdate) error {
	if u.Priority != nil {
		f.prio[id] = *u.Priority
		f.nudges[id]++
	}
	return nil
}

func (f *fakeSlurm) ShowJob(_ context.Context, id uint32) (slurm.JobSpec, bool, error) {
	j := f.jobs[id]
	if j == nil {
		return slurm.JobSpec{}, false, nil
	}
	s := slurm.JobSpec{ID: id, User: j.job.User, State: j.job.State, ExitCode: -1, Partition: j.job.Partition,
		TimeLimitMin: j.job.TimeLimitMin, TresPerNode: j.job.TresPerNode, NumNodes: 1, Start: j.job.Start}
	if j.ended {
		s.State, s.ExitCode, s.End = j.state, j.exitCode, j.end
	}
	return s, true, nil
}

func (f *fakeSlurm) BatchScript(context.Context, uint32) ([]byte, error) {
	return []byte("#!/bin/bash\nexec train\n"), nil
}

func (f *fakeSlurm) Submit(_ context.Context, s slurm.Submission) (uint32, error) {
	f.submits = append(f.submits, s)
	id := f.add(0)
	j := f.jobs[id]
	for _, a := range s.Args {
		if v, ok := strings.CutPrefix(a, "--dependency=afterok:"); ok {
			n, _ := strconv.Atoi(v)
			j.after = uint32(n)
		}
		if v, ok := strings.CutPrefix(a, "--time="); ok {
			n, _ := strconv.Atoi(v)
			j.job.TimeLimitMin = uint32(n)
		}
	}
	for _, e := range s.Env {
		if v, ok := strings.CutPrefix(e, "ROTA_CHAIN_ID="); ok {
			n, _ := strconv.Atoi(v)
			j.chain = uint32(n)
		}
	}
	return id, nil
}

func (f *fakeSlurm) Cancel(_ context.Context, id uint32) error {
	f.cancels = append(f.cancels, id)
	if j := f.jobs[id]; j != nil && !j.ended {
		f.end(j, "CANCELLED", 0)
	}
	return nil
}

func (f *fakeSlurm) Signal(_ context.Context, id uint32, sig string) error {
	f.signals = append(f.signals, id)
	j := f.jobs[id]
	if j == nil || j.ended || j.job.State != "RUNNING" {
		return fmt.Errorf("job %d not running", id)
	}
	f.advance()
	switch f.onSignal {
	case "ignore":
	case "die":
		f.end(j, "FAILED", 143)
	default:
		f.ckpt[j.chain] = j.step
		f.end(j, "COMPLETED", 0)
		f.advance() // a successor waiting on it starts now
	}
	return nil
}

func (f *fakeSlurm) ClearDependency(_ context.Context, id uint32) error {
	f.cleared = append(f.cleared, id)
	f.jobs[id].after = 0
	return nil
}

// ChainInfo: the round loop's view of the job.
func (f *fakeSlurm) ChainInfo(id uint32) (Info, bool) {
	j := f.jobs[id]
	if j == nil {
		return Info{}, false
	}
	f.advance()
	in := Info{Decision: f.dec, StepsLeft: float64(f.total - j.step), Rate: f.rate, Type: "v100",
		Rates: map[string]float64{"v100": f.rate}, Step: j.step, Total: f.total}
	if j.job.State == "RUNNING" && f.now.Sub(j.job.Start) < f.quiet {
		in.Step, in.Total, in.StepsLeft = 0, 0, float64(f.total)
	}
	in.LimitFollowed, in.Wants = f.limitFollowed, f.wants
	return in, true
}

func (f *fakeSlurm) Moving(id uint32) bool { return f.moving[id] }

// run ticks every 10 s for d.
func run(t *testing.T, m *Manager, f *fakeSlurm, d time.Duration) {
	t.Helper()
	for end := f.now.Add(d); f.now.Before(end); *f.now = f.now.Add(10 * time.Second) {
		if err := m.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		m.Wait()
	}
}

type fixedWait time.Duration

func (w fixedWait) PredictWait(WaitRequest) (time.Duration, bool) { return time.Duration(w), true }

func newManager(t *testing.T, f *fakeSlurm, mode string) *Manager {
	cfg := DefaultConfig()
	cfg.Mode = mode
	m, err := New(cfg, zerolog.Nop(), f, f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.now = func() time.Time { return *f.now }
	m.nudgeFor = 0 // the fake's clock does not move while it polls
	return m
}

// 9000 steps at 1 step/s is 2.5 hours: three segments of 60 minutes,
// each checkpointed 5 minutes before its limit.
func TestChainRunsToCompletion(t *testing.T) {
	for _, mode := range []string{ModeAhead, ModeAfterEnd} {
		t.Run(mode, func(t *testing.T) {
			now := t0
			f := newFakeSlurm(&now)
			m := newManager(t, f, mode)
			var gaps []time.Duration
			m.SetGapObserver(func(d time.Duration) { gaps = append(gaps, d) })
			id := f.add(60)
			if n := m.Running(); n != 0 {
				t.Errorf("%d chains running before the first tick", n)
			}
			run(t, m, f, 10*time.Second)
			if n := m.Running(); n != 1 {
				t.Errorf("%d chains running after the first tick, want 1", n)
			}
			run(t, m, f, 4*time.Hour)
			st, _ := m.Explain(id)
			if st == nil || st.State != StateDone {
				t.Fatalf("chain %+v", st)
			}
			if n := m.Running(); n != 0 {
				t.Errorf("%d chains running after it ended", n)
			}
			// One gap per successor, as status shows it.
			if len(gaps) != 2 {
				t.Errorf("gaps heard %v, want 2", gaps)
			}
			for i, g := range gaps {
				if gs := st.Segments[i+1].GapSeconds; gs == nil || g.Seconds() != *gs {
					t.Errorf("gap %d heard %v, status %v", i+1, g, gs)
				}
			}
			if len(st.Segments) != 3 || st.Planned != 3 {
				t.Fatalf("%d segments (planned %d), want 3: %+v", len(st.Segments), st.Planned, st.Segments)
			}
			if f.ckpt[id] != f.total {
				t.Errorf("checkpoint at %d, want %d", f.ckpt[id], f.total)
			}
			// Every segment resumed where the last one checkpointed.
			for i := 1; i < 3; i++ {
				if st.Segments[i].FirstStep < st.Segments[i-1].LastStep-10 || st.Segments[i].FirstStep > st.Segments[i-1].LastStep+10 {
					t.Errorf("segment %d starts at %d, the one before reached %d", i+1, st.Segments[i].FirstStep, st.Segments[i-1].LastStep)
				}
			}
			if len(f.signals) != 2 || len(f.submits) != 2 || len(f.cancels) != 0 {
				t.Errorf("signals %v submits %d cancels %v", f.signals, len(f.submits), f.cancels)
			}
			for i, s := range f.submits {
				dep := false
				for _, a := range s.Args {
					dep = dep || strings.HasPrefix(a, "--dependency=afterok:")
				}
				if dep != (mode == ModeAhead) {
					t.Errorf("submission %d: dependency %v in %s mode: %q", i, dep, mode, s.Args)
				}
				if s.User != "alice" || string(s.Script) != "#!/bin/bash\nexec train\n" {
					t.Errorf("submission %d as %q: %q", i, s.User, s.Script)
				}
			}
			for _, s := range st.Segments[1:] {
				if f.prio[s.JobID] != DefaultConfig().Priority {
					t.Errorf("segment %d priority %d", s.N, f.prio[s.JobID])
				}
				// Ahead: set at submission, then nudged when its
				// predecessor ended.
				if mode == ModeAhead && f.nudges[s.JobID] < 2 {
					t.Errorf("segment %d: %d priority updates, want at least 2", s.N, f.nudges[s.JobID])
				}
			}
			// Ahead: the successor starts in the tick the predecessor ends;
			// after the end: one tick later at least.
			g1 := st.Segments[1].GapSeconds
			if g1 == nil || (mode == ModeAhead) != (*g1 == 0) {
				t.Errorf("gap %+v in %s mode", st.Segments[1], mode)
			}
			if s := m.Stats(); s.Chains != 1 || s.Done != 1 || s.Submitted != 2 || s.Checkpoints != 2 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

// The successor goes to the type the policy gives the job most time on
// (a segment's end costs no checkpoint of its own), else stays on its
// predecessor's: a segment with a successor behind it is never migrated,
// so this is where a chain started on a slow type reaches the type the
// policy wants.
func TestSuccessorGoesWherePolicyWants(t *testing.T) {
	for _, c := range []struct{ wants, constraint string }{
		{"", "--constraint=v100"},
		{"v100", "--constraint=v100"},
		{"p100", "--constraint=p100"},
	} {
		t.Run("wants "+c.wants, func(t *testing.T) {
			now := t0
			f := newFakeSlurm(&now)
			f.wants = c.wants
			m := newManager(t, f, ModeAhead)
			f.add(60)
			run(t, m, f, 58*time.Minute)
			if len(f.submits) == 0 {
				t.Fatal("no successor submitted")
			}
			if args := f.submits[0].Args; !slices.Contains(args, c.constraint) {
				t.Errorf("successor's options %q, want %s", args, c.constraint)
			}
		})
	}
}

// The successor is submitted no earlier than the predicted wait (plus the
// margin) before its predecessor's checkpoint, and no later.
func TestSuccessorTimedByPredictedWait(t *testing.T) {
	for _, w := range []time.Duration{0, 10 * time.Minute, 30 * time.Minute} {
		now := t0
		f := newFakeSlurm(&now)
		m := newManager(t, f, ModeAhead)
		m.SetPredictor(fixedWait(w))
		f.add(60)
		var submitted time.Time
		for end := t0.Add(56 * time.Minute); now.Before(end) && submitted.IsZero(); now = now.Add(10 * time.Second) {
			if err := m.Tick(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(f.submits) > 0 {
				submitted = now
			}
		}
		want := t0.Add(55*time.Minute - w - time.Minute)
		if submitted.Before(want) || submitted.After(want.Add(10*time.Second)) {
			t.Errorf("wait %s: submitted at %s, want %s", w, submitted.Sub(t0), want.Sub(t0))
		}
	}
}

func TestChainEnds(t *testing.T) {
	cases := []struct {
		name string
		// act runs at 50 min into the first segment (successor pending).
		act         func(f *fakeSlurm, first, second uint32)
		onSignal    string
		every       uint64
		noResume    bool
		wantState   string
		wantCancels int // of the pending successor by Rota
		wantCleared int
		wantSegs    int
	}{
		{name: "user cancels the running segment", act: func(f *fakeSlurm, first, _ uint32) { f.end(f.jobs[first], "CANCELLED", 0) },
			wantState: StateCancelled, wantCancels: 1, wantSegs: 2},
		{name: "user cancels the pending successor", act: func(f *fakeSlurm, _, second uint32) { f.end(f.jobs[second], "CANCELLED", 0) },
			wantState: StateCancelled, wantSegs: 2},
		{name: "work finishes early", act: func(f *fakeSlurm, first, _ uint32) { f.ckpt[first] = f.total; f.end(f.jobs[first], "COMPLETED", 0) },
			wantState: StateDone, wantCancels: 1, wantSegs: 2},
		{name: "segment fails on its own", act: func(f *fakeSlurm, first, _ uint32) { f.end(f.jobs[first], "FAILED", 1) },
			wantState: StateFailed, wantCancels: 1, wantSegs: 2},
		{name: "checkpoint ignored: killed at the limit, successor released", onSignal: "ignore", every: 600,
			wantState: StateDone, wantCleared: 2, wantSegs: 3},
		{name: "grace ran out (SIGTERM): successor released", onSignal: "die", every: 600,
			wantState: StateDone, wantCleared: 2, wantSegs: 3},
		{name: "job does not resume: no third segment", noResume: true, wantState: StateDone, wantSegs: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := t0
			f := newFakeSlurm(&now)
			f.onSignal, f.noResume, f.every = c.onSignal, c.noResume, c.every
			f.rate = 1.2 // 9000 steps: 2.08 h, three segments
			m := newManager(t, f, ModeAhead)
			m.SetPredictor(fixedWait(10 * time.Minute))
			first := f.add(60)
			run(t, m, f, 50*time.Minute)
			if len(f.submits) != 1 {
				t.Fatalf("no successor pending at 50 min: %d submitted", len(f.submits))
			}
			if waiting, ok := m.Segment(first + 1); !waiting || !ok {
				t.Errorf("successor not reported waiting to the round loop")
			}
			if c.act != nil {
				c.act(f, first, first+1)
			}
			run(t, m, f, 4*time.Hour)
			st, _ := m.Explain(first)
			if st == nil || st.State != c.wantState || len(st.Segments) != c.wantSegs {
				t.Fatalf("chain %+v, want %s with %d segments", st, c.wantState, c.wantSegs)
			}
			if len(f.cancels) != c.wantCancels || len(f.cleared) != c.wantCleared {
				t.Errorf("cancels %v cleared %v", f.cancels, f.cleared)
			}
			if st.Why == "" {
				t.Error("no reason given")
			}
		})
	}
}

func TestNoChain(t *testing.T) {
	cases := []struct {
		name  string
		hints wire.Hints
		auto  bool
		steps uint64
		note  string
		// followed: the round loop follows the job's limit (one Rota
		// shortened below its ceiling).
		followed bool
		kind     string // the decision's kind
	}{
		{"asked without a checkpoint signal", wire.Hints{Chain: "on", Steps: 9000}, true, 9000, "no checkpoint signal", false, ""},
		{"opted out", wire.Hints{Chain: "off", Steps: 9000, CheckpointSignal: "USR1"}, true, 9000, "opted out", false, ""},
		{"fits its limit", wire.Hints{Steps: 3000, CheckpointSignal: "USR1"}, true, 3000, "", false, ""},
		{"needs one but auto is off", wire.Hints{Steps: 9000, CheckpointSignal: "USR1"}, false, 9000, "", false, ""},
		// Its limit is one Rota shortened: the round loop raises it, no
		// chain.
		{"limit followed by the round loop", wire.Hints{Steps: 9000, CheckpointSignal: "USR1"}, true, 9000, "", true, ""},
		// A person works in it: never checkpointed, even when asked.
		{"interactive", wire.Hints{Chain: "on", Steps: 9000, CheckpointSignal: "USR1"}, true, 9000, "an interactive job is never checkpointed", false, wire.KindInteractive},
		// A service rolls over instead (controller/serve).
		{"a service replica", wire.Hints{Chain: "on", Steps: 9000, CheckpointSignal: "USR1", Kind: wire.KindServe}, true, 9000, "", false, wire.KindServe},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := t0
			f := newFakeSlurm(&now)
			f.dec = &wire.Decision{Asked: wire.PlaceRequest{Hints: c.hints}, Given: wire.PlaceReply{Kind: c.kind}}
			f.limitFollowed = c.followed
			f.total = c.steps
			cfg := DefaultConfig()
			cfg.Auto = c.auto
			m, err := New(cfg, zerolog.Nop(), f, f, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			m.now = func() time.Time { return now }
			id := f.add(60)
			run(t, m, f, 2*time.Hour)
			st, note := m.Explain(id)
			if st != nil || len(f.submits) != 0 || len(f.signals) != 0 {
				t.Fatalf("a chain: %+v, %d submits", st, len(f.submits))
			}
			if !strings.Contains(note, c.note) {
				t.Errorf("note %q, want %q", note, c.note)
			}
		})
	}
}

// memStore is a state.Store in memory.
type memStore map[string][]byte

func (s memStore) Get(_ context.Context, k string) ([]byte, error) {
	if b, ok := s[k]; ok {
		return b, nil
	}
	return nil, state.ErrNotFound
}
func (s memStore) Put(_ context.Context, k string, b []byte) error { s[k] = b; return nil }

// A controller that restarts mid-chain carries on with the same chain.
func TestChainSurvivesRestart(t *testing.T) {
	now := t0
	f := newFakeSlurm(&now)
	store := memStore{}
	cfg := DefaultConfig()
	m, _ := New(cfg, zerolog.Nop(), f, f, nil, store)
	m.now = func() time.Time { return now }
	id := f.add(60)
	run(t, m, f, 70*time.Minute) // into the second segment
	m2, _ := New(cfg, zerolog.Nop(), f, f, nil, store)
	m2.now = m.now
	if err := m2.restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	run(t, m2, f, 3*time.Hour)
	st, _ := m2.Explain(id)
	if st == nil || st.State != StateDone || len(st.Segments) != 3 || len(f.submits) != 2 {
		t.Fatalf("after a restart: %+v, %d submits", st, len(f.submits))
	}
	if st, _ := m2.Explain(st.Segments[2].JobID); st == nil || st.ID != id {
		t.Errorf("explain of the last segment: %+v", st)
	}
}

// A segment that has not reported progress yet is judged by how far the
// chain got, not by the job's whole work: 1.5 segments of work make two
// segments, even when the predicted wait is longer than a segment (the
// successor is then due as soon as a segment starts).
func TestFreshSegmentJudgedByTheChainsProgress(t *testing.T) {
	now := t0
	f := newFakeSlurm(&now)
	f.quiet, f.total, f.rate = time.Minute, 4950, 1 // 82.5 min of work, 55 per segment
	m := newManager(t, f, ModeAhead)
	m.SetPredictor(fixedWait(2 * time.Hour))
	id := f.add(60)
	run(t, m, f, 3*time.Hour)
	st, _ := m.Explain(id)
	if st == nil || st.State != StateDone || len(st.Segments) != 2 || len(f.submits) != 1 || len(f.cancels) != 0 {
		t.Fatalf("chain %+v; %d submits, cancels %v", st, len(f.submits), f.cancels)
	}
}

// checkpointForMove is the round loop's move beginning: the job
// checkpoints and exits (COMPLETED, out of the queue) while the loop
// moves it; restart ends the move: requeued, it runs again from there.
func (f *fakeSlurm) checkpointForMove(id uint32) {
	f.advance()
	j := f.jobs[id]
	f.ckpt[j.chain] = j.step
	f.end(j, "COMPLETED", 0)
	if f.moving == nil {
		f.moving = map[uint32]bool{}
	}
	f.moving[id] = true
}

func (f *fakeSlurm) restart(id uint32) {
	j := f.jobs[id]
	delete(f.moving, id)
	j.ended, j.state = false, ""
	j.from, j.job.State, j.job.Start, j.job.RunSeconds = f.ckpt[j.chain], "RUNNING", *f.now, 0
}

// The round loop may move the chain's running last segment until its
// boundary begins (a successor submitted, or the checkpoint asked); while
// it is moved (checkpointed and exited, not yet requeued) the chain goes
// on; and a segment requeued and started again has its boundary timed from
// the new run, not the old: asked to checkpoint 55 minutes after its restart, not
// 55 after its first start.
func TestSegmentMovedByTheRound(t *testing.T) {
	t.Parallel()
	now := t0
	f := newFakeSlurm(&now)
	m := newManager(t, f, ModeAhead)
	id := f.add(60)
	run(t, m, f, 20*time.Second)
	if st, _ := m.Explain(id); st == nil {
		t.Fatal("no chain made")
	}
	if !m.Movable(id) {
		t.Error("the running first segment, its boundary far off: not movable")
	}
	run(t, m, f, 30*time.Minute)
	f.checkpointForMove(id)
	run(t, m, f, 30*time.Second) // checkpointed, exited, being requeued: not the chain's end
	if st, _ := m.Explain(id); st == nil || st.State != StateRunning || m.Running() != 1 {
		t.Fatalf("the chain while the round moves its segment: %+v", st)
	}
	f.restart(id)
	restarted := now
	run(t, m, f, 50*time.Minute)
	if len(f.signals) != 0 {
		t.Fatalf("signalled %v within 50 min of its restart (its boundary timed from its first start)", f.signals)
	}
	if len(f.submits) != 0 || !m.Movable(id) {
		t.Errorf("50 min into its new run: %d successors submitted, movable %v", len(f.submits), m.Movable(id))
	}
	run(t, m, f, 4*time.Minute+10*time.Second) // the successor is submitted at 54 min (a minute before 55)
	if len(f.submits) != 1 || m.Movable(id) {
		t.Fatalf("54 min into its new run: %d successors submitted, segment movable %v; want 1, not movable", len(f.submits), m.Movable(id))
	}
	succ := f.order[len(f.order)-1]
	if waiting, ok := m.Segment(succ); !ok || !waiting || m.Movable(succ) {
		t.Errorf("successor %d: segment %v waiting %v movable %v", succ, ok, waiting, m.Movable(succ))
	}
	run(t, m, f, 2*time.Minute)
	if len(f.signals) != 1 || f.signals[0] != id {
		t.Fatalf("signals %v, want the segment's checkpoint", f.signals)
	}
	if at := f.jobs[id].end.Sub(restarted); at < 55*time.Minute || at > 56*time.Minute {
		t.Errorf("the segment ended %v after its restart, want at its boundary, 55 min", at)
	}
	if st, _ := m.Explain(id); st == nil || st.Segments[0].Checkpoint == "" {
		t.Errorf("chain %+v", st)
	}
}
