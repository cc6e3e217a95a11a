package rounds

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/checkpoint"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
)

// fakeSched is Slurm in memory: three one-node types of 4 GPUs, unless
// nodes says otherwise.
type fakeSched struct {
	nodes     []slurm.Node
	mu        sync.Mutex
	jobs      map[uint32]*slurm.Job
	decisions map[uint32]string
	updates   []string
	failJobs  bool
	failOn    map[uint32]bool
	requeued  []uint32
	// niced: jobs Rota gave a nice; resets: priority hand-backs, in order.
	niced       map[uint32]bool
	niceUpdates int
	resets      []uint32
	// commentRead makes Jobs carry the decision ids, as squeue does when
	// it has an AdminComment field; idReads counts DecisionIDs calls.
	commentRead bool
	idReads     int
	// restricts: jobs that name their nodes (NodeRestrictions).
	restricts map[uint32]bool
}

func (f *fakeSched) RestrictsNodes(_ context.Context, id uint32) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restricts[id], nil
}

func newFake() *fakeSched {
	return &fakeSched{jobs: map[uint32]*slurm.Job{}, decisions: map[uint32]string{}, failOn: map[uint32]bool{}, niced: map[uint32]bool{}}
}

func (f *fakeSched) Nodes(context.Context) ([]slurm.Node, error) {
	if f.nodes != nil {
		return f.nodes, nil
	}
	var out []slurm.Node
	for _, t := range []string{"k80", "p100", "v100"} {
		out = append(out, slurm.Node{Name: "node-" + t, State: "mixed", Partitions: []string{"gpu"},
			GPUs: map[string]int{t: 4}, GPUsUsed: map[string]int{t: 0}, Features: []string{t}})
	}
	return out, nil
}

func (f *fakeSched) Partitions(context.Context) ([]slurm.Partition, error) {
	return []slurm.Partition{{Name: "gpu", Default: true, MaxTimeMin: 2880}}, nil
}

func (f *fakeSched) JobAdminComment(context.Context, uint32) (string, error) { return "", nil }

func (f *fakeSched) Jobs(context.Context) ([]slurm.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failJobs {
		return nil, errors.New("squeue: slurm_load_jobs error: Unable to contact slurm controller")
	}
	var out []slurm.Job
	for id := uint32(1); id < 1000; id++ {
		if j, ok := f.jobs[id]; ok {
			c := *j
			if f.commentRead {
				c.Decision, c.DecisionRead = f.decisions[id], true
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeSched) DecisionIDs(context.Context) (map[uint32]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idReads++
	out := map[uint32]string{}
	for k, v := range f.decisions {
		out[k] = v
	}
	return out, nil
}

// UpdatePaced sends the changes one by one (pacedSched: through one
// client, as the command-line backend does).
func (f *fakeSched) UpdatePaced(ctx context.Context, ch []slurm.Change, gap func() bool) []error {
	return slurm.UpdateOneByOne(ctx, f.Update, ch, gap)
}

func (f *fakeSched) JobsAt(ctx context.Context) ([]slurm.Job, time.Time, error) {
	return slurm.JobsNow(ctx, f)
}

func (f *fakeSched) Update(_ context.Context, id uint32, u slurm.JobUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOn[id] {
		return fmt.Errorf("scontrol update: Job has already finished for job %d", id)
	}
	j := f.jobs[id]
	if j == nil {
		return errors.New("Invalid job id specified")
	}
	if u.Features != nil {
		j.Features = *u.Features
		f.updates = append(f.updates, fmt.Sprintf("%d features=%s", id, *u.Features))
	}
	if u.Priority != nil {
		j.Priority = *u.Priority
	}
	if u.Nice != nil {
		j.Nice = *u.Nice
		f.niced[id] = true
		f.niceUpdates++
	}
	if u.ResetPriority {
		// Slurm recalculates it; a stand-in for multifactor's figure.
		j.Priority = 1
		f.resets = append(f.resets, id)
	}
	if u.TimeLimitMin != nil {
		j.TimeLimitMin = *u.TimeLimitMin
		f.updates = append(f.updates, fmt.Sprintf("%d time=%d", id, *u.TimeLimitMin))
	}
	if u.AdminComment != nil {
		f.decisions[id] = wire.DecisionIDFromComment(*u.AdminComment)
		j.Noted = slurm.IsRotaNote(*u.AdminComment)
		f.updates = append(f.updates, fmt.Sprintf("%d comment=%s", id, *u.AdminComment))
	}
	return nil
}

// ordered says Rota gave the job its order, as a priority or a nice.
func (f *fakeSched) ordered(id uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs[id].Priority > 1 || f.niced[id]
}

func (f *fakeSched) Requeue(_ context.Context, id uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[id]
	j.State, j.Nodes, j.RunSeconds = "PENDING", nil, 0
	f.requeued = append(f.requeued, id)
	return nil
}

func (f *fakeSched) add(id uint32, state, node, features string, d *wire.Decision, decs *fakeDecisions) {
	j := &slurm.Job{ID: id, State: state, User: "u", Name: fmt.Sprint("job", id), Partition: "gpu",
		Submit: time.Unix(1000+int64(id), 0), TresPerNode: "gres:gpu:1", Features: features, NumNodes: 1, NumTasks: 1}
	if node != "" {
		j.Nodes, j.Start, j.RunSeconds = []string{node}, time.Now().Add(-time.Hour), 3600
	}
	f.jobs[id] = j
	did := fmt.Sprint("d", id)
	f.decisions[id] = did
	d.ID = did
	decs.m[did] = d
}

type fakeDecisions struct{ m map[string]*wire.Decision }

func (d *fakeDecisions) Get(_ context.Context, id string) (*wire.Decision, error) {
	if v, ok := d.m[id]; ok {
		return v, nil
	}
	return nil, errors.New("no such decision")
}

type noMeasurements struct{}

func (noMeasurements) Job(uint32) (observe.Job, bool) { return observe.Job{}, false }

// tableEst gives every job of a name the same rates.
type tableEst struct{ rates map[string][]float64 }

func (e *tableEst) Rates(_ context.Context, key string, types []string) ([]float64, []string) {
	src := make([]string, len(types))
	for k := range src {
		src[k] = "table"
	}
	r := e.rates[key]
	if r == nil {
		r = []float64{1, 2, 4} // k80 p100 v100
	}
	return r, src
}
func (e *tableEst) Observe(context.Context, string, string, float64, time.Time) {}
func (e *tableEst) Hint(context.Context, string, map[string]float64)            {}
func (e *tableEst) MemoryFits(context.Context, string, uint64) bool             { return true }
func (e *tableEst) ObserveMemory(context.Context, string, uint64)               {}
func (e *tableEst) Finished(context.Context, string, uint32, float64, float64)  {}

// Walltime: steps over rate x1.5 + 5 min, capped, as the real estimator.
func (e *tableEst) Walltime(_ context.Context, _ string, steps, rate float64, user, maxTime uint32) (uint32, string) {
	if steps <= 0 || rate <= 0 {
		return 0, "unknown"
	}
	m := uint32(math.Ceil(steps/rate*1.5/60 + 5))
	if maxTime > 0 && m > maxTime {
		m = maxTime
	}
	if user > 0 && m > user {
		m = user
	}
	return m, "steps"
}

type fakeCkpt struct {
	mu      sync.Mutex
	calls   []uint32
	outcome string
	err     error
}

func (c *fakeCkpt) Checkpoint(_ context.Context, _ []string, id uint32, _ time.Duration) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, id)
	return c.outcome, c.err
}

func newLoop(t *testing.T, f Slurm, decs *fakeDecisions, est Estimator, ck checkpoint.Checkpointer) *Loop {
	cfg := DefaultConfig()
	cfg.Round, cfg.MinLease, cfg.MoveCost = time.Minute, 10*time.Minute, 30*time.Second
	l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: est, Checkpoint: ck})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestPendingJobsRetypedAndOrdered(t *testing.T) {
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	// Six pending one-GPU jobs, all constrained to k80 by an old
	// decision; a user-typed one must stay.
	for id := uint32(1); id <= 6; id++ {
		f.add(id, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
	}
	f.add(7, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Features: "k80"}}, decs)
	l := newLoop(t, f, decs, &tableEst{rates: map[string][]float64{}}, nil)
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for id := uint32(1); id <= 6; id++ {
		got[f.jobs[id].Features]++
		if !f.ordered(id) {
			t.Errorf("job %d got no priority", id)
		}
	}
	// LAS on 4+4+4 GPUs with 7 jobs of rates 1/2/4: everyone gets GPUs;
	// the jobs Rota may retype spread over the types rather than queue on k80.
	if got["k80"] == 6 || got["v100"] == 0 {
		t.Errorf("constraints after the round: %v (updates %v)", got, f.updates)
	}
	if f.jobs[7].Features != "k80" {
		t.Errorf("user-typed job retyped to %q", f.jobs[7].Features)
	}
	// Retyped jobs got a walltime for their new type: 3600 steps at 4/s on
	// v100 is 15 min, x1.5 margin + 5 = 27.5 -> 28.
	for id := uint32(1); id <= 6; id++ {
		if f.jobs[id].Features == "v100" && f.jobs[id].TimeLimitMin != 28 {
			t.Errorf("job %d on v100: time limit %d, want 28", id, f.jobs[id].TimeLimitMin)
		}
	}
	if s := l.Stats(); s.Rounds != 1 || s.Retyped == 0 || s.Reprioritised == 0 {
		t.Errorf("stats %+v", s)
	}
}

// ctxEst is tableEst remembering whether each call carried the round's
// context (the value roundKey marks it with).
type ctxEst struct {
	tableEst
	calls, without int
}

type roundKey struct{}

func (e *ctxEst) saw(ctx context.Context) {
	e.calls++
	if ctx.Value(roundKey{}) == nil {
		e.without++
	}
}

func (e *ctxEst) Rates(ctx context.Context, key string, types []string) ([]float64, []string) {
	e.saw(ctx)
	return e.tableEst.Rates(ctx, key, types)
}

func (e *ctxEst) Walltime(ctx context.Context, key string, steps, rate float64, user, maxTime uint32) (uint32, string) {
	e.saw(ctx)
	return e.tableEst.Walltime(ctx, key, steps, rate, user, maxTime)
}

// The estimator is asked with the round's context, so an external one's
// calls end with the round.
func TestEstimatorGetsTheRoundsContext(t *testing.T) {
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	for id := uint32(1); id <= 3; id++ {
		f.add(id, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
	}
	est := &ctxEst{tableEst: tableEst{rates: map[string][]float64{}}}
	l := newLoop(t, f, decs, est, nil)
	if err := l.Round(context.WithValue(context.Background(), roundKey{}, true)); err != nil {
		t.Fatal(err)
	}
	if est.calls == 0 || est.without > 0 {
		t.Fatalf("%d estimator calls, %d without the round's context", est.calls, est.without)
	}
}

// Jobs whose users allow only some types are retyped among those only:
// --rota-types, or a constraint of alternatives (which Rota narrows to
// the chosen type), and rota explain says so.
func TestRoundsKeepToTheTypesTheUserAllows(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	// All on v100 by an old decision; v100 is the fastest, and free.
	for id := uint32(1); id <= 3; id++ {
		f.add(id, "PENDING", "", "v100", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600, Types: []string{"k80", "p100"}}}}, decs)
	}
	f.add(4, "PENDING", "", "v100", &wire.Decision{Asked: wire.PlaceRequest{Features: "k80|p100", Hints: wire.Hints{Steps: 3600}}}, decs)
	f.add(5, "PENDING", "", "v100", &wire.Decision{Asked: wire.PlaceRequest{Features: "k80|p100", Hints: wire.Hints{Steps: 3600, Types: []string{"k80"}}}}, decs)
	l := newLoop(t, f, decs, &tableEst{rates: map[string][]float64{}}, nil)
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	for id := uint32(1); id <= 5; id++ {
		want := []string{"k80", "p100"}
		if id == 5 {
			want = want[:1]
		}
		if got := f.jobs[id].Features; !slices.Contains(want, got) {
			t.Errorf("job %d retyped to %q, want one of %v (updates %v)", id, got, want, f.updates)
		}
		a, _, ok := l.Explain(id)
		if !ok || !strings.Contains(a.Why, "chosen among the types the user allows") {
			t.Errorf("job %d: explain %+v does not say what its user allows", id, a)
		}
	}
}

// TestRoundsKeepJobsWhereTheirMemoryFits: a job that needs 20 GiB of GPU
// memory (--rota-gpu-mem) is never retyped onto the 16 GiB V100s and
// P100s however fast they are; its neighbour that needs 8 GiB is.
func TestRoundsKeepJobsWhereTheirMemoryFits(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	f.add(1, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600, GPUMemBytes: 20 << 30}}}, decs)
	f.add(2, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600, GPUMemBytes: 8 << 30}}}, decs)
	cfg := DefaultConfig()
	cfg.Round, cfg.MinLease, cfg.MoveCost = time.Minute, 10*time.Minute, 30*time.Second
	cfg.GPUMemory = map[string]uint64{"v100": 16 << 30, "p100": 16 << 30}
	l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{rates: map[string][]float64{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.jobs[1].Features; got != "k80" {
		t.Errorf("the 20 GiB job was retyped to %q (updates %v)", got, f.updates)
	}
	if got := f.jobs[2].Features; got == "k80" {
		t.Errorf("the 8 GiB job stayed on k80: the test no longer shows a retype (updates %v)", f.updates)
	}
}

// New jobs are bound to their decisions from the queue read when it
// carries AdminComment, with no second read of Slurm; from
// DecisionIDs when it does not. Jobs without a decision stay unmanaged.
func TestBindReadsDecisionsOnce(t *testing.T) {
	for _, commentRead := range []bool{true, false} {
		t.Run(fmt.Sprint("comment_read=", commentRead), func(t *testing.T) {
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			f.commentRead = commentRead
			f.add(1, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
			f.add(2, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
			delete(f.decisions, 2) // submitted while no controller answered
			l := newLoop(t, f, decs, &tableEst{rates: map[string][]float64{}}, nil)
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if l.known[1] == nil || l.known[1].decision.ID != "d1" {
				t.Errorf("job 1 not bound to d1: %+v", l.known[1])
			}
			if tr, ok := l.known[2]; !ok || tr != nil {
				t.Errorf("job 2 without a decision: known %v %+v, want known and unmanaged", ok, tr)
			}
			if want := map[bool]int{true: 0, false: 1}[commentRead]; f.idReads != want {
				t.Errorf("%d DecisionIDs reads, want %d", f.idReads, want)
			}
		})
	}
}

// Each round tells AfterBind's listeners, once its jobs are bound, when
// its queue read began: a manager woken then finds the round's jobs
// bound.
func TestAfterBindHearsEachRound(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	f.add(1, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
	l := newLoop(t, f, decs, &tableEst{rates: map[string][]float64{}}, nil)
	var heard []time.Time
	l.AfterBind(func(readAt time.Time) {
		if l.Decision(1) == nil {
			t.Error("told before job 1 was bound")
		}
		heard = append(heard, readAt)
	})
	for range 2 {
		before := time.Now()
		if err := l.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := len(heard); n == 0 || heard[n-1].Before(before) || heard[n-1].After(time.Now()) {
			t.Fatalf("after a round begun at %s: heard %v", before, heard)
		}
	}
	if len(heard) != 2 {
		t.Errorf("heard %d times in two rounds, want 2", len(heard))
	}
}

func TestMigrationRules(t *testing.T) {
	for _, c := range []struct {
		name       string
		signal     string
		running    time.Duration // how long since it started
		stepsLeft  uint64
		wantMove   bool
		wantCkpted bool
	}{
		{"migratable, lease over, worth it", "USR1", time.Hour, 100000, true, true},
		{"no checkpoint signal: never preempted", "", time.Hour, 100000, false, false},
		{"lease not over", "USR1", time.Minute, 100000, false, false},
		{"gain below the move cost", "USR1", time.Hour, 10, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			f.add(1, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{
				Hints: wire.Hints{Steps: c.stepsLeft, CheckpointSignal: c.signal}}}, decs)
			f.jobs[1].Start = time.Now().Add(-c.running)
			ck := &fakeCkpt{outcome: wire.CheckpointAcknowledged}
			l := newLoop(t, f, decs, &tableEst{}, ck)
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			l.wg.Wait()
			moved := len(f.requeued) == 1
			if moved != c.wantMove || (len(ck.calls) > 0) != c.wantCkpted {
				t.Fatalf("requeued %v checkpoints %v (plan %+v)", f.requeued, ck.calls, l.Last().Actions)
			}
			if moved {
				j := f.jobs[1]
				if j.Features != "v100" || !j.Pending() || l.Stats().Migrations != 1 {
					t.Errorf("after move: features %q state %s stats %+v", j.Features, j.State, l.Stats())
				}
			}
		})
	}
}

// TestMigrationWithoutResult: the agents took the checkpoint command (so
// the job was signalled and stops) but their result never came: the job
// is requeued all the same, or it would end and leave the queue
// unfinished (seen in the site-sized replay). An agent that did not take
// the command leaves the job running where it is.
func TestMigrationWithoutResult(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		err       error
		wantMoved bool
	}{
		{"accepted, no result in time", fmt.Errorf("%w from 1 of 1 nodes within 30s", checkpoint.ErrNoResult), true},
		{"not accepted", errors.New("node node-k80's agent did not answer the checkpoint command"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			f.add(1, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{
				Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}}}, decs)
			f.jobs[1].Start = time.Now().Add(-time.Hour)
			l := newLoop(t, f, decs, &tableEst{}, &fakeCkpt{err: c.err})
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			l.wg.Wait()
			if moved := len(f.requeued) == 1; moved != c.wantMoved {
				t.Fatalf("requeued %v, want moved %v", f.requeued, c.wantMoved)
			}
		})
	}
}

// Service replicas are never retyped, reordered or migrated, even when
// they declare a checkpoint signal and a faster type is free; the loop
// still knows their decisions (controller/serve reads them).
func TestRoundsLeaveServiceReplicasAlone(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	serve := func() *wire.Decision {
		return &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1", Kind: wire.KindServe, Service: "llm"}},
			Given: wire.PlaceReply{Kind: wire.KindServe}}
	}
	f.add(1, "RUNNING", "node-k80", "k80", serve(), decs)
	f.jobs[1].Start = time.Now().Add(-time.Hour)
	for id := uint32(2); id <= 3; id++ {
		f.add(id, "PENDING", "", "k80", serve(), decs)
	}
	f.add(4, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
	ck := &fakeCkpt{outcome: wire.CheckpointAcknowledged}
	l := newLoop(t, f, decs, &tableEst{rates: map[string][]float64{}}, ck)
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wg.Wait()
	for id := uint32(1); id <= 3; id++ {
		for _, u := range f.updates {
			if strings.HasPrefix(u, fmt.Sprint(id, " ")) {
				t.Errorf("service job %d updated: %s", id, u)
			}
		}
		if f.jobs[id].Features != "k80" || f.ordered(id) {
			t.Errorf("service job %d retyped or ordered: features %q priority %d", id, f.jobs[id].Features, f.jobs[id].Priority)
		}
		if _, _, ok := l.Explain(id); ok {
			t.Errorf("service job %d in the round's plan", id)
		}
		if d := l.Decision(id); d == nil || d.Given.Kind != wire.KindServe {
			t.Errorf("job %d: decision %+v", id, d)
		}
	}
	if len(f.requeued)+len(ck.calls) != 0 {
		t.Errorf("service moved: requeued %v checkpoints %v", f.requeued, ck.calls)
	}
	if !f.ordered(4) {
		t.Error("the batch job beside them was not scheduled")
	}
}

func TestSlurmErrorsDoNotStopTheLoop(t *testing.T) {
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	for id := uint32(1); id <= 3; id++ {
		f.add(id, "PENDING", "", "k80", &wire.Decision{}, decs)
	}
	f.failOn[1] = true // finished meanwhile
	l := newLoop(t, f, decs, &tableEst{}, nil)
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.Stats().SlurmErrors == 0 || !f.ordered(2) || !f.ordered(3) {
		t.Errorf("stats %+v; other jobs ordered: %v %v", l.Stats(), f.ordered(2), f.ordered(3))
	}
	f.failJobs = true
	if err := l.Round(context.Background()); err == nil {
		t.Error("squeue failing: no round error")
	}
	f.failJobs = false
	if err := l.Round(context.Background()); err != nil {
		t.Errorf("recovered round: %v", err)
	}
	if s := l.Stats(); s.Rounds != 3 || s.RoundErrors != 1 {
		t.Errorf("stats %+v", s)
	}
}

type memState struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memState) Get(_ context.Context, k string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.m[k]; ok {
		return b, nil
	}
	return nil, state.ErrNotFound
}

func (s *memState) Put(_ context.Context, k string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = append([]byte(nil), b...)
	return nil
}

// A new loop (a restarted controller) picks up the jobs, their moves and
// the counters where the last saved round left them.
func TestStateSurvivesRestart(t *testing.T) {
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	f.add(1, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{
		Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}}}, decs)
	st := &memState{m: map[string][]byte{}}
	l := newLoop(t, f, decs, &tableEst{}, &fakeCkpt{outcome: wire.CheckpointAcknowledged})
	l.store = st // as Deps.Store would
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wg.Wait()
	if err := l.save(context.Background()); err != nil { // the migration finished after the round
		t.Fatal(err)
	}
	before := l.Stats()
	if before.Migrations != 1 {
		t.Fatalf("stats %+v", before)
	}
	// What space sharing knows: a pair's partners and what they kept.
	l.mu.Lock()
	l.known[1].partner, l.known[1].noShare = 7, true
	l.pairSeen[pairKey{"a", "b", "v100"}] = 0.3
	l.mu.Unlock()
	if err := l.save(context.Background()); err != nil {
		t.Fatal(err)
	}

	l2 := newLoop(t, f, decs, &tableEst{}, &fakeCkpt{outcome: wire.CheckpointAcknowledged})
	l2.store = st // as Deps.Store would
	if err := l2.restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := l2.Stats(); s.Migrations != 1 || s.Rounds != before.Rounds {
		t.Errorf("restored stats %+v, want %+v", s, before)
	}
	tr := l2.known[1]
	if tr == nil || tr.moves != 1 || tr.moved.IsZero() || tr.decision.ID != "d1" || l2.Last() == nil {
		t.Fatalf("restored job %+v, plan %v", tr, l2.Last())
	}
	if tr.partner != 7 || !tr.noShare || l2.pairSeen[pairKey{"a", "b", "v100"}] != 0.3 {
		t.Errorf("restored sharing: partner %d, no share %v, learnt %v", tr.partner, tr.noShare, l2.pairSeen)
	}
	// The job is back running on the V100: the restored lease keeps the
	// new loop from moving it again at once.
	f.jobs[1].State, f.jobs[1].Nodes, f.jobs[1].Start = "RUNNING", []string{"node-v100"}, time.Now()
	if err := l2.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	l2.wg.Wait()
	if len(f.requeued) != 1 {
		t.Errorf("requeued %v after the restart", f.requeued)
	}
	// A corrupt saved state is reported, not trusted.
	st.m[stateLoop] = []byte("{")
	if err := newLoop(t, f, decs, &tableEst{}, nil).restoreWith(st); err == nil {
		t.Error("corrupt state: no error")
	}
}

func (l *Loop) restoreWith(s state.Store) error {
	l.store = s // as Deps.Store would
	return l.restore(context.Background())
}

func (f *fakeSched) Job(_ context.Context, id uint32) (slurm.Job, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return slurm.Job{}, false, nil
	}
	return *j, true, nil
}

// fakeChains marks chain segments for the loop; none movable.
type fakeChains map[uint32]bool // job id -> a successor waiting for its predecessor

func (c fakeChains) Segment(id uint32) (bool, bool) { w, ok := c[id]; return w, ok }
func (c fakeChains) Movable(uint32) bool            { return false }

// movableChains: fakeChains with the running segments the manager lets
// the loop move.
type movableChains struct {
	fakeChains
	movable map[uint32]bool
}

func (c movableChains) Movable(id uint32) bool { return c.movable[id] }

// The loop moves a running chain segment on a slow type to a free faster
// one only where the chain manager says it may (its last segment, its
// boundary not begun), and then like any job: checkpointed, requeued onto
// the new type with a limit for the rest of its work.
func TestLoopMovesMovableSegment(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		movable bool
	}{{"the manager lets it move: moved to the free v100", true}, {"its boundary has begun: left on its k80", false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			f.add(1, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{
				Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}}}, decs)
			l := newLoop(t, f, decs, &tableEst{}, &fakeCkpt{outcome: wire.CheckpointAcknowledged})
			l.SetChains(movableChains{fakeChains{1: false}, map[uint32]bool{1: c.movable}})
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			l.wg.Wait()
			moved := len(f.requeued) == 1 && f.requeued[0] == 1
			if moved != c.movable {
				t.Fatalf("requeued %v, want the segment moved: %v", f.requeued, c.movable)
			}
			if a, _, _ := l.Explain(1); moved && (a.Type != "v100" || a.WalltimeMin == 0) {
				t.Errorf("moved to %q with limit %d min, want v100 with a limit for the rest", a.Type, a.WalltimeMin)
			}
		})
	}
}

// The loop never migrates a chain segment the manager keeps, leaves a
// waiting successor's priority and type to the chain manager, and tells
// the manager what it knows of the jobs.
func TestLoopLeavesChainSegments(t *testing.T) {
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	for id := uint32(1); id <= 2; id++ {
		f.add(id, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{
			Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}}}, decs)
	}
	f.add(3, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
	f.add(4, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
	ck := &fakeCkpt{outcome: wire.CheckpointAcknowledged}
	l := newLoop(t, f, decs, &tableEst{}, ck)
	l.SetChains(fakeChains{1: false, 3: true}) // 1 a running segment, 3 its successor
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wg.Wait()
	for _, id := range f.requeued {
		if id == 1 {
			t.Errorf("chain segment 1 migrated")
		}
	}
	if len(f.requeued) != 1 {
		t.Errorf("requeued %v, want job 2 alone", f.requeued)
	}
	if f.ordered(3) || f.jobs[3].Features != "k80" || !f.ordered(4) {
		t.Errorf("successor ordered %v features %q; other pending job ordered %v", f.ordered(3), f.jobs[3].Features, f.ordered(4))
	}
	in, ok := l.ChainInfo(4)
	if !ok || in.Decision == nil || in.StepsLeft != 3600 || in.Rates["v100"] != 4 {
		t.Errorf("ChainInfo(4) = %+v %v", in, ok)
	}
	if _, ok := l.ChainInfo(99); ok {
		t.Error("info for an unknown job")
	}
	// The running segment's next one goes where the plan gives the job
	// most of its time, not to the K80 it runs on because segments are
	// not migrated.
	a1, _, _ := l.Explain(1)
	if in, ok := l.ChainInfo(1); !ok || in.Type != "k80" || in.Wants != "v100" || a1.Wants != "v100" {
		t.Errorf("ChainInfo(1) type %q wants %q (plan: %q, share %v), want k80 wanting v100", in.Type, in.Wants, a1.Wants, a1.Share)
	}
	// Job 2, requeued onto its new type, is judged there (its new limit
	// was reckoned for it), not on the K80 it left; while it is being
	// moved, not at all.
	l.mu.Lock()
	target := l.known[2].target
	l.mu.Unlock()
	if in, ok := l.ChainInfo(2); target == "" || target == "k80" || !ok || in.Type != target || in.Rate != in.Rates[target] || in.Rate == 0 {
		t.Errorf("ChainInfo(2) after its move to %q = type %q rate %v (rates %v), %v", target, in.Type, in.Rate, in.Rates, ok)
	}
	l.mu.Lock()
	l.moving[2] = true
	l.mu.Unlock()
	if _, ok := l.ChainInfo(2); ok {
		t.Error("info for a job being moved")
	}
}

// The round loop retypes a job only onto a type that can hold it as the
// user asked it (the plugin's check, rule.Holds), and leaves a job no
// single type holds as asked: no constraint, no priority, no migration,
// and its round explains why.
func TestRoundsRetypeOnlyWhereTheJobHolds(t *testing.T) {
	t.Parallel()
	node := func(name, typ string) slurm.Node {
		return slurm.Node{Name: name, State: "mixed", Partitions: []string{"gpu"}, GPUs: map[string]int{typ: 4},
			GPUsUsed: map[string]int{typ: 0}, Features: []string{typ}}
	}
	perType := []slurm.Node{node("node-k80", "k80"), node("node-p100", "p100"), node("node-v100", "v100")}
	twoV100 := append([]slurm.Node{node("node-v100b", "v100")}, perType...)
	n2 := wire.GPUAsk{PerNode: 2, Nodes: 2, MaxNodes: 2}
	gpus8 := wire.GPUAsk{PerJob: 8, Nodes: 2, MaxNodes: 2}
	for _, tc := range []struct {
		name        string
		nodes       []slurm.Node
		state, node string // the job's state, and its first node when running
		tres        string
		ask         wire.GPUAsk
		want        string // the constraint after the round
		why         string
		moved       bool
	}{
		{"-N2 --gres=gpu:2, one node per type", perType, "PENDING", "", "gres:gpu:2", n2, "",
			"no single GPU type has 2 nodes with 2 GPUs each in partition gpu; left as asked", false},
		{"-N2 --gres=gpu:2, two v100 nodes", twoV100, "PENDING", "", "gres:gpu:2", n2, "v100", "", false},
		{"--gpus=8 -N2, one node per type", perType, "PENDING", "", "gres:gpu:8", gpus8, "",
			"no single GPU type has 2 nodes with 8 GPUs in all in partition gpu; left as asked", false},
		{"--gpus=8 -N2, two v100 nodes", twoV100, "PENDING", "", "gres:gpu:8", gpus8, "v100", "", false},
		{"one GPU: any type", perType, "PENDING", "", "gres:gpu:1", wire.GPUAsk{PerNode: 1}, "v100", "", false},
		// Slurm ran it on a p100 and a v100 node: Rota must not requeue
		// it onto one type, where it would never run again.
		{"running across types is never moved", perType, "RUNNING", "node-p100", "gres:gpu:2", n2, "",
			"no single GPU type has 2 nodes", false},
		{"running on one type is moved where it holds", perType, "RUNNING", "node-k80", "gres:gpu:2", wire.GPUAsk{PerNode: 2}, "v100", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			f.nodes = tc.nodes
			f.add(1, tc.state, tc.node, "", &wire.Decision{Asked: wire.PlaceRequest{GPU: tc.ask,
				Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}}}, decs)
			j := f.jobs[1]
			j.TresPerNode, j.NumNodes = tc.tres, int(max(tc.ask.Nodes, 1))
			if tc.ask.PerJob > 0 {
				j.TresPerNode, j.TresPerJob = "", tc.tres
			}
			if tc.node == "node-p100" {
				j.Nodes = []string{"node-p100", "node-v100"}
			}
			l := newLoop(t, f, decs, &tableEst{}, &fakeCkpt{outcome: wire.CheckpointAcknowledged})
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			l.wg.Wait()
			if moved := len(f.requeued) > 0; moved != tc.moved || j.Features != tc.want {
				t.Errorf("constraint %q, requeued %v; want %q, moved %v (updates %v)", j.Features, f.requeued, tc.want, tc.moved, f.updates)
			}
			a, _, ok := l.Explain(1)
			if !ok || !strings.Contains(a.Why, tc.why) {
				t.Errorf("round explains %q (%v), want %q", a.Why, ok, tc.why)
			}
			if tc.why != "" && (j.Priority != 0 || a.Priority != 0 || a.Migrate) {
				t.Errorf("a job left as asked got priority %d (action %+v)", j.Priority, a)
			}
			// A chain's next segment is pinned to the type ChainInfo
			// gives for the running one: none for a job no type holds.
			if in, ok := l.ChainInfo(1); tc.state == "RUNNING" && (!ok || (in.Type == "") != (tc.why != "")) {
				t.Errorf("ChainInfo type %q (%v)", in.Type, ok)
			}
		})
	}
}

// recTimings records what the loop reports to Timings.
type recTimings struct {
	mu                  sync.Mutex
	rounds, solves, mvs []time.Duration
}

func (r *recTimings) Round(d time.Duration) {
	r.mu.Lock()
	r.rounds = append(r.rounds, d)
	r.mu.Unlock()
}
func (r *recTimings) Solve(d time.Duration) {
	r.mu.Lock()
	r.solves = append(r.solves, d)
	r.mu.Unlock()
}
func (r *recTimings) Move(d time.Duration) { r.mu.Lock(); r.mvs = append(r.mvs, d); r.mu.Unlock() }

// Timings hears every round and solve as measured, a failed round's
// duration but no solve, and a migration's cost once, when the moved job
// runs again: from the checkpoint command to its start.
func TestTimings(t *testing.T) {
	f, l, rec := movedOnce(t)
	moveAt := l.known[1].moveAt
	start := moveAt.Add(7 * time.Second)
	f.jobs[1].State, f.jobs[1].Nodes, f.jobs[1].Start = "RUNNING", []string{"node-v100"}, start
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wg.Wait()
	f.failJobs = true
	if err := l.Round(context.Background()); err == nil {
		t.Fatal("a round without squeue did not fail")
	}
	f.failJobs = false
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wg.Wait()
	tests := []struct {
		what      string
		got, want int
	}{
		{"rounds", len(rec.rounds), 4},
		{"solves", len(rec.solves), 3},
		{"moves", len(rec.mvs), 1},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s heard %d times, want %d", tc.what, tc.got, tc.want)
		}
	}
	if len(rec.mvs) == 1 && rec.mvs[0] != 7*time.Second {
		t.Errorf("move cost %v, want 7s", rec.mvs[0])
	}
	for _, d := range rec.rounds {
		if d <= 0 {
			t.Errorf("round duration %v", d)
		}
	}
}

// TestMoveTimedWithinTheSecond: a job that restarts within the second of
// its checkpoint request has, in Slurm's whole seconds, a start before the
// request; its move is still timed (as 0 s), not waited for forever.
func TestMoveTimedWithinTheSecond(t *testing.T) {
	f, l, rec := movedOnce(t)
	moveAt := l.known[1].moveAt
	f.jobs[1].State, f.jobs[1].Nodes, f.jobs[1].Start = "RUNNING", []string{"node-v100"}, moveAt.Truncate(time.Second)
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wg.Wait()
	if len(rec.mvs) != 1 || rec.mvs[0] != 0 {
		t.Errorf("moves timed %v, want one of 0s", rec.mvs)
	}
}

// movedOnce runs one round over a checkpointable K80 job that the policy
// moves: the job is requeued, and the round and solve timed, no move yet.
func movedOnce(t *testing.T) (*fakeSched, *Loop, *recTimings) {
	t.Helper()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	f.add(1, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{
		Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}}}, decs)
	l := newLoop(t, f, decs, &tableEst{}, &fakeCkpt{outcome: wire.CheckpointAcknowledged})
	rec := &recTimings{}
	l.timings = rec // as Deps.Timings would
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wg.Wait()
	if len(f.requeued) != 1 || len(rec.rounds) != 1 || len(rec.solves) != 1 || len(rec.mvs) != 0 {
		t.Fatalf("after the first round: requeued %v, timings %+v", f.requeued, rec)
	}
	return f, l, rec
}

func TestHeldElsewhere(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "v100"}
	nodeType := map[string]string{"n-k80": "k80", "n-v100": "v100"}
	run := func(id uint32, node, tres string) slurm.Job {
		return slurm.Job{ID: id, State: "RUNNING", Nodes: []string{node}, NumNodes: 1, NumTasks: 1, TresPerNode: tres}
	}
	jobs := []slurm.Job{
		run(1, "n-v100", "gres:gpu:3"),                       // not Rota's: holds 3 v100
		run(2, "n-v100", "gres:gpu:v100:1"),                  // planned: counted by the planner
		run(3, "n-k80", "gres:gpu:8"),                        // more than the type has: capacity stops at 0
		run(4, "n-v100", ""),                                 // no GPU
		{ID: 5, State: "PENDING", TresPerNode: "gres:gpu:2"}, // holds nothing yet
	}
	capacity := []int{4, 4}
	heldElsewhere(capacity, types, jobs, map[uint32]*slurm.Job{2: &jobs[1]}, nodeType)
	if capacity[0] != 0 || capacity[1] != 1 {
		t.Fatalf("capacity %v, want [0 1]", capacity)
	}
}

// pacedSched is fakeSched sending a round's updates one at a time
// through one client, as the command-line backend does.
type pacedSched struct {
	*fakeSched
	calls, gaps int
}

func (p *pacedSched) UpdatePaced(ctx context.Context, ch []slurm.Change, gap func() bool) []error {
	p.calls++
	errs := make([]error, len(ch))
	for i, c := range ch {
		errs[i] = p.Update(ctx, c.JobID, c.Update)
		p.gaps++
		if !gap() {
			break
		}
	}
	return errs
}

// A round's updates go to Slurm in one paced call, with the same
// outcome, a failed job included, whether the backend sends them through
// one client or one by one.
func TestRoundUpdatesPaced(t *testing.T) {
	t.Parallel()
	run := func(paced bool) (*fakeSched, Stats, *pacedSched) {
		f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
		for id := uint32(1); id <= 6; id++ {
			f.add(id, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
		}
		f.failOn[2] = true
		var sched Slurm = f
		p := &pacedSched{fakeSched: f}
		if paced {
			sched = p
		}
		l := newLoop(t, sched, decs, &tableEst{rates: map[string][]float64{}}, nil)
		if err := l.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		return f, l.Stats(), p
	}
	one, oneStats, _ := run(false)
	paced, pacedStats, p := run(true)
	if pacedStats.LastUpdates != 6 || p.calls != 1 || p.gaps != 6 {
		t.Errorf("%d updates in %d calls with %d gaps, want 6 in one call with a gap after each", pacedStats.LastUpdates, p.calls, p.gaps)
	}
	for id := uint32(1); id <= 6; id++ {
		a, b := one.jobs[id], paced.jobs[id]
		if a.Features != b.Features || a.Nice != b.Nice || a.TimeLimitMin != b.TimeLimitMin {
			t.Errorf("job %d: one by one %s/%d/%d, paced %s/%d/%d", id, a.Features, a.Nice, a.TimeLimitMin, b.Features, b.Nice, b.TimeLimitMin)
		}
	}
	if oneStats.SlurmErrors != 1 || pacedStats.SlurmErrors != 1 || oneStats.Retyped != pacedStats.Retyped || oneStats.Reprioritised != pacedStats.Reprioritised {
		t.Errorf("stats one by one %+v, paced %+v", oneStats, pacedStats)
	}
}
