package rounds

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/wire"
)

func interactiveDecision() *wire.Decision {
	return &wire.Decision{Asked: wire.PlaceRequest{NoScript: true}, Given: wire.PlaceReply{Kind: wire.KindInteractive}}
}

// The loop never retypes, moves or requeues an interactive job, puts a
// waiting one first in its order, and moves no training job while one
// waits (a moved job restarts at the front of the queue).
func TestInteractiveJobsStayAndGoFirst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		order   string
		waiting bool   // job 1, interactive, is pending (else running)
		reason  string // why it is pending
		moves   bool   // job 6 moves
	}{
		{"nice, a session waits", OrderNice, true, "Resources", false},
		{"priority, a session waits", OrderPriority, true, "Priority", false},
		{"nice, a session waits for its begin time", OrderNice, true, "BeginTime", true},
		{"nice, every session runs", OrderNice, false, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			if c.waiting {
				f.add(1, "PENDING", "", "k80", interactiveDecision(), decs)
			} else {
				f.add(1, "RUNNING", "node-p100", "p100", interactiveDecision(), decs)
			}
			// A session with a checkpoint signal, on the slowest type for
			// an hour: a training job there would be moved.
			d := interactiveDecision()
			d.Asked.Hints = wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}
			f.add(2, "RUNNING", "node-k80", "k80", d, decs)
			for id := uint32(3); id <= 5; id++ {
				f.add(id, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
			}
			f.add(6, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{
				Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}}}, decs)
			for _, j := range f.jobs {
				j.Priority = 5000 // multifactor's, alike
			}
			f.jobs[1].Reason = c.reason
			cfg := DefaultConfig()
			cfg.Round, cfg.MinLease, cfg.MoveCost, cfg.Order = time.Minute, 10*time.Minute, 30*time.Second, c.order
			ck := &fakeCkpt{outcome: wire.CheckpointAcknowledged}
			l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{}, Checkpoint: ck})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			l.wg.Wait()
			for _, id := range f.requeued {
				if id == 1 || id == 2 {
					t.Fatalf("interactive job %d requeued", id)
				}
			}
			if !c.moves && len(f.requeued) > 0 {
				t.Fatalf("job %v moved while a session waits for a GPU", f.requeued)
			}
			if c.moves && len(f.requeued) != 1 {
				t.Fatalf("requeued %v: with no session waiting for a GPU, job 6 moves as before", f.requeued)
			}
			if len(ck.calls) > len(f.requeued) {
				t.Fatalf("checkpoints %v", ck.calls)
			}
			if f.jobs[1].Features != map[bool]string{true: "k80", false: "p100"}[c.waiting] {
				t.Fatalf("interactive job retyped to %q", f.jobs[1].Features)
			}
			if c.waiting {
				for id := uint32(3); id <= 5; id++ {
					first := f.jobs[1].Nice < f.jobs[id].Nice
					if c.order == OrderPriority {
						first = f.jobs[1].Priority > f.jobs[id].Priority
					}
					if !first {
						t.Errorf("%s: session nice %d priority %d, job %d nice %d priority %d", c.order,
							f.jobs[1].Nice, f.jobs[1].Priority, id, f.jobs[id].Nice, f.jobs[id].Priority)
					}
				}
			}
			held := map[string]int{"k80": 2} // a waiting session typed k80 counts
			if !c.waiting {
				held = map[string]int{"k80": 1, "p100": 1}
			}
			if got := l.Last().InteractiveHeld(); !maps.Equal(got, held) {
				t.Errorf("interactive held %v, want %v", got, held)
			}
		})
	}
}

// The reserve: the policy shares what training may hold, and fill hands
// out only GPUs neither the reserve nor sessions take.
func TestPlanKeepsTheInteractiveReserve(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "v100"}
	for _, c := range []struct {
		name      string
		sessions  int // running on v100, 1 GPU each
		wantAvail []int
	}{
		{"reserve unused", 0, []int{4, 2}},
		{"reserve in use", 2, []int{4, 2}},
		{"sessions beyond the reserve", 3, []int{4, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pol, err := policy.New("las", policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := NewPlanner(PlanConfig{Round: time.Minute, MinLease: time.Minute, PriorityBase: 1000000, NiceSpan: 10000,
				InteractiveReserve: map[string]int{"v100": 2}}, pol)
			var jobs []JobView
			src := []string{"measured", "measured"}
			for i := 0; i < c.sessions; i++ {
				jobs = append(jobs, JobView{ID: uint32(100 + i), Running: true, Type: "v100", GPUs: 1, Interactive: true})
			}
			for i := 0; i < 8; i++ {
				jobs = append(jobs, JobView{ID: uint32(i + 1), Type: "v100", GPUs: 1, Rates: []float64{1, 4}, RateSource: src,
					StepsLeft: 1000, Submit: time.Unix(int64(i), 0), BasePriority: 5000})
			}
			var capSeen []int
			plan, err := p.Decide(types, []int{4, 4}, jobs, func(pr *policy.Problem) (policy.Allocation, error) {
				capSeen = pr.Capacity
				return pol.Allocate(context.Background(), pr)
			})
			if err != nil {
				t.Fatal(err)
			}
			if capSeen[1] != 2 || !equalInts(plan.Avail, c.wantAvail) {
				t.Fatalf("policy capacity %v, avail %v; want v100 2 and %v", capSeen, plan.Avail, c.wantAvail)
			}
			// Training jobs the policy gives v100 this round: never more
			// than the cap, whatever the sessions hold.
			onV100 := 0
			for i, a := range plan.Actions {
				if !jobs[i].Interactive && a.Type == "v100" && a.Placed {
					onV100++
				}
				if jobs[i].Interactive && (a.Type != "v100" || a.Priority != 0 || a.Migrate) {
					t.Errorf("running session %d: %+v", a.JobID, a)
				}
			}
			if onV100 > 2 {
				t.Errorf("%d training jobs placed on v100, which training may hold 2 of", onV100)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A waiting session whose type has no free GPU gets its request back
// untyped (any GPU that frees starts it), unless its user chose the type.
func TestWaitingSessionUntyped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		asked    wire.PlaceRequest
		k80Used  int
		want     string // Features after the round
		untyping bool
	}{
		{"its type is full", wire.PlaceRequest{NoScript: true}, 4, "", true},
		{"its type has room: it is about to start", wire.PlaceRequest{NoScript: true}, 3, "k80", false},
		{"its user named the type", wire.PlaceRequest{NoScript: true, Features: "k80"}, 4, "k80", false},
		{"its user limited the types", wire.PlaceRequest{NoScript: true, Hints: wire.Hints{Types: []string{"k80", "p100"}}}, 4, "k80", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			f.nodes, _ = f.Nodes(context.Background())
			f.nodes[0].GPUsUsed["k80"] = c.k80Used // node-k80 first
			d := interactiveDecision()
			d.Asked = c.asked
			f.add(1, "PENDING", "", "k80", d, decs)
			l := newLoop(t, f, decs, &tableEst{}, nil)
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if f.jobs[1].Features != c.want {
				t.Fatalf("features %q, want %q (updates %v)", f.jobs[1].Features, c.want, f.updates)
			}
			a, _, _ := l.Explain(1)
			if strings.Contains(a.Why, "given back untyped") != c.untyping {
				t.Errorf("why %q", a.Why)
			}
		})
	}
}

// A sessions pass (after a Kick, between rounds) puts a new waiting
// session first as the round would, and nothing else.
func TestSessionsPass(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		order    string
		nice     int32
		priority uint32
	}{
		{OrderNice, -5000, 5000},
		{OrderPriority, 0, 1_150_000},
		{OrderNone, 0, 5000},
	} {
		t.Run(c.order, func(t *testing.T) {
			t.Parallel()
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			f.add(1, "PENDING", "", "", interactiveDecision(), decs)
			f.add(2, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600}}}, decs)
			f.add(3, "RUNNING", "node-v100", "v100", interactiveDecision(), decs)
			for _, j := range f.jobs {
				j.Priority = 5000
			}
			cfg := DefaultConfig()
			cfg.Order = c.order
			l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{}, Checkpoint: nil})
			if err != nil {
				t.Fatal(err)
			}
			l.Kick()
			l.Kick() // coalesced: one pass
			if len(l.kick) != 1 {
				t.Fatalf("%d kicks pending, want 1", len(l.kick))
			}
			l.sessionsPass(context.Background())
			if j := f.jobs[1]; j.Nice != c.nice || j.Priority != c.priority {
				t.Errorf("session: nice %d priority %d, want %d %d", j.Nice, j.Priority, c.nice, c.priority)
			}
			if f.niced[2] || f.jobs[2].Priority != 5000 || f.niced[3] || f.jobs[3].Priority != 5000 {
				t.Errorf("a training job or a running session changed: %+v %+v", f.jobs[2], f.jobs[3])
			}
			before := l.Stats().Reprioritised
			l.sessionsPass(context.Background())
			if l.Stats().Reprioritised != before {
				t.Errorf("a second pass updated the session again")
			}
		})
	}
}

// Only as many waiting training jobs as training has room for stay
// typed where there is a reserve: Slurm would start any of them on a
// reserved GPU that frees.
func TestKeepReserve(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		running int // training jobs on k80
		reserve map[string]int
		k80Only bool // jobs 4 and 5 hold only on k80
		want    []string
	}{
		{"no room left: away", 3, map[string]int{"k80": 1}, false, []string{"v100", "v100", "k80"}},
		{"room for one", 2, map[string]int{"k80": 1}, false, []string{"k80", "v100", "k80"}},
		{"no reserve", 3, map[string]int{"v100": 0}, false, []string{"k80", "k80", "k80"}},
		{"no other type holds them", 3, map[string]int{"k80": 1}, true, []string{"k80", "k80", "k80"}},
		{"the other type's room is short too", 3, map[string]int{"k80": 1, "v100": 3}, false, []string{"v100", "k80", "k80"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			src := []string{"measured", "measured"}
			var jobs []JobView
			plan := Plan{Types: []string{"k80", "v100"}, Capacity: []int{4, 4}}
			for i := 0; i < c.running; i++ {
				jobs = append(jobs, JobView{ID: uint32(100 + i), Running: true, Type: "k80", GPUs: 1, Rates: []float64{1, 2}, RateSource: src})
				plan.Actions = append(plan.Actions, Action{JobID: uint32(100 + i), Type: "k80", Running: true})
			}
			// A session on k80: the count is training's alone.
			jobs = append(jobs, JobView{ID: 200, Running: true, Type: "k80", GPUs: 1, Interactive: true})
			plan.Actions = append(plan.Actions, Action{JobID: 200, Type: "k80", Running: true, Interactive: true})
			for i, id := range []uint32{4, 5, 6} {
				j := JobView{ID: id, Type: "k80", GPUs: 1, Rates: []float64{1, 2}, RateSource: src, UserTyped: id == 6}
				if c.k80Only {
					j.Fits = []bool{true, false}
				}
				jobs = append(jobs, j)
				plan.Actions = append(plan.Actions, Action{JobID: id, Type: "k80", Priority: uint32(10 - i)})
			}
			keepReserve(&plan, jobs, c.reserve)
			var got []string
			for _, a := range plan.Actions[c.running+1:] {
				got = append(got, a.Type)
			}
			if !slicesEqual(got, c.want) {
				t.Fatalf("types %v, want %v", got, c.want)
			}
		})
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
