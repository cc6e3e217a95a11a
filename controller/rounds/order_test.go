package rounds

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/wire"
)

func TestNiceOrder(t *testing.T) {
	pending := func(id uint32) bool { return id != 9 } // 9 runs
	for _, c := range []struct {
		name    string
		actions []Action
		span    uint32
		want    map[uint32]int32
	}{
		{"none", nil, 100, map[uint32]int32{}},
		{"lone job sits at 0", []Action{{JobID: 1, Priority: 5}}, 100, map[uint32]int32{1: 0}},
		{"first gets -span/2, last +span/2", []Action{{JobID: 1, Priority: 5}, {JobID: 2, Priority: 7}, {JobID: 3, Priority: 6}},
			100, map[uint32]int32{2: -50, 3: 0, 1: 50}},
		{"running and unordered jobs left out", []Action{{JobID: 9, Priority: 8}, {JobID: 4}, {JobID: 1, Priority: 5}, {JobID: 2, Priority: 7}},
			10000, map[uint32]int32{2: -5000, 1: 5000}},
		{"rounded, evenly", []Action{{JobID: 1, Priority: 4}, {JobID: 2, Priority: 3}, {JobID: 3, Priority: 2}, {JobID: 4, Priority: 1}},
			10, map[uint32]int32{1: -5, 2: -2, 3: 2, 4: 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := NiceOrder(c.actions, pending, c.span); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// Each order mode reaches Slurm its own way: admin priorities, nice
// values on top of the user's own, or nothing; and an admin priority
// Rota set earlier (a restart from order = priority) is handed back
// unless the mode is priority.
func TestOrderModes(t *testing.T) {
	for _, c := range []struct {
		order                     string
		wantPrio, wantNice, reset bool
	}{
		{OrderPriority, true, false, false},
		{OrderNice, false, true, true},
		{OrderNone, false, false, true},
	} {
		t.Run(c.order, func(t *testing.T) {
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			for id := uint32(1); id <= 5; id++ {
				f.add(id, "PENDING", "", "k80", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3600 * uint64(id)}}}, decs)
			}
			f.jobs[5].Nice = 300 // its user's --nice=300
			cfg := DefaultConfig()
			cfg.Order, cfg.OrderNiceSpan = c.order, 1000
			l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{}, Checkpoint: nil})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			var nices []int32
			for id := uint32(1); id <= 5; id++ {
				j := f.jobs[id]
				if got := j.Priority > 1; got != c.wantPrio {
					t.Errorf("job %d: admin priority %d, want set %v", id, j.Priority, c.wantPrio)
				}
				if f.niced[id] != c.wantNice {
					t.Errorf("job %d: nice set %v, want %v", id, f.niced[id], c.wantNice)
				}
				if f.niced[id] {
					nices = append(nices, j.Nice)
				}
			}
			if c.wantNice {
				// Job 5's own nice stays under Rota's offset: within
				// 300 ± span/2; the others within ± span/2, all distinct.
				if n := f.jobs[5].Nice; n < 300-500 || n > 300+500 {
					t.Errorf("job 5: nice %d, want its user's 300 ± 500", n)
				}
				seen := map[int32]bool{}
				for id := uint32(1); id <= 4; id++ {
					n := f.jobs[id].Nice
					if n < -500 || n > 500 || seen[n] {
						t.Errorf("job %d: nice %d (others %v), want distinct, within ±500", id, n, nices)
					}
					seen[n] = true
				}
			}
			// Job 1 now carries an admin priority Rota set (as after a
			// restart from order = priority): handed back or kept.
			l.mu.Lock()
			l.known[1].prioFixed = true
			l.mu.Unlock()
			f.jobs[1].Priority = 2_000_000
			f.resets = nil
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := len(f.resets) == 1 && f.resets[0] == 1; got != c.reset {
				t.Errorf("resets %v, want job 1's: %v", f.resets, c.reset)
			}
			f.resets = nil
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(f.resets) != 0 {
				t.Errorf("handed back again: %v", f.resets)
			}
		})
	}
}

// A job Rota migrated keeps its admin priority while it waits on its new
// type (it must restart at once) and has it handed back once it runs,
// unless the order is priority.
func TestMigratedJobPriorityHandedBack(t *testing.T) {
	for _, order := range []string{OrderNice, OrderPriority} {
		t.Run(order, func(t *testing.T) {
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			f.add(1, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{
				Hints: wire.Hints{Steps: 100000, CheckpointSignal: "USR1"}}}, decs)
			cfg := DefaultConfig()
			cfg.Order = order
			cfg.MinLease, cfg.MoveCost = 0, 1
			l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{}, Checkpoint: &fakeCkpt{outcome: wire.CheckpointAcknowledged}})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			l.wg.Wait()
			if len(f.requeued) != 1 || f.jobs[1].Priority <= cfg.PriorityBase {
				t.Fatalf("requeued %v, priority %d: want migrated with top priority", f.requeued, f.jobs[1].Priority)
			}
			// Pending on its new type: kept.
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(f.resets) != 0 {
				t.Errorf("pending migrated job's priority handed back: %v", f.resets)
			}
			f.mu.Lock()
			f.jobs[1].State, f.jobs[1].Nodes = "RUNNING", []string{"node-" + f.jobs[1].Features}
			f.mu.Unlock()
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := len(f.resets) == 1; got != (order != OrderPriority) {
				t.Errorf("order %s: resets %v after it runs", order, f.resets)
			}
		})
	}
}

// shareSched is a Slurm with accounting: it reads shares.
type shareSched struct {
	*fakeSched
	w     map[string]float64
	err   error
	reads int
}

func (s *shareSched) Shares(context.Context) (map[string]float64, error) {
	s.reads++
	return s.w, s.err
}

// The hierarchical policy weighs accounts by Slurm's shares, read once
// per sharesRefresh; other policies, shares = none, or Slurm without
// accounting leave every account alike.
func TestEntityWeightsFromShares(t *testing.T) {
	lab := map[string]float64{"lab-a": 1, "lab-b": 1.0 / 3}
	for _, c := range []struct {
		name, policy, shares string
		err                  error
		want                 map[string]float64
		reads                int
	}{
		{"hierarchical reads the shares", "hierarchical", SharesSlurm, nil, lab, 1},
		{"shares off", "hierarchical", SharesNone, nil, nil, 0},
		{"las needs none", "las", SharesSlurm, nil, nil, 0},
		{"no accounting", "hierarchical", SharesSlurm, errors.New("sshare: You are not running a supported accounting_storage plugin"), nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			for id := uint32(1); id <= 4; id++ {
				f.add(id, "PENDING", "", "k80", &wire.Decision{}, decs)
				f.jobs[id].Account = []string{"lab-a", "lab-b"}[id%2]
			}
			s := &shareSched{fakeSched: f, w: lab, err: c.err}
			cfg := DefaultConfig()
			cfg.Policy, cfg.Shares = c.policy, c.shares
			l, err := New(cfg, zerolog.Nop(), Deps{Sched: s, Shares: s, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{}, Checkpoint: nil})
			if err != nil {
				t.Fatal(err)
			}
			for r := 0; r < 3; r++ {
				if err := l.Round(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(l.planner.weights, c.want) || s.reads != c.reads {
				t.Errorf("weights %v after %d reads, want %v after %d", l.planner.weights, s.reads, c.want, c.reads)
			}
		})
	}
}

// With order = nice the plan ranks pending jobs as Slurm will (its
// priority less Rota's nice), so the GPUs handed out now go to the jobs
// Slurm starts first: a job ahead by more than the span keeps its lead,
// Rota's order decides within it.
func TestSlurmOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		base []uint32 // Slurm's priority without Rota's nice, per job 1..3
		want []uint32 // job ids, first to last
	}{
		{"unknown priorities: Rota's order", []uint32{0, 0, 0}, []uint32{1, 2, 3}},
		{"equal priorities: Rota's order", []uint32{500, 500, 500}, []uint32{1, 2, 3}},
		{"fair share ahead by more than the span wins", []uint32{1000, 1000, 70000}, []uint32{3, 1, 2}},
		{"ahead by less than the span: Rota's order", []uint32{1000, 1000, 1400}, []uint32{1, 2, 3}},
		{"running job left out", []uint32{1000, 0, 1000}, []uint32{1, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var jobs []JobView
			plan := Plan{}
			for k, b := range c.base {
				id := uint32(k + 1)
				jobs = append(jobs, JobView{ID: id, BasePriority: b, Running: c.name == "running job left out" && id == 2})
				// Rota's own order: 1, 2, 3.
				plan.Actions = append(plan.Actions, Action{JobID: id, Priority: uint32(100 - k)})
			}
			slurmOrder(&plan, jobs, 1000)
			var got []uint32
			idx := []int{}
			for i, a := range plan.Actions {
				if a.Niced {
					idx = append(idx, i)
				}
			}
			sort.Slice(idx, func(x, y int) bool { return plan.Actions[idx[x]].Priority > plan.Actions[idx[y]].Priority })
			for _, i := range idx {
				got = append(got, plan.Actions[i].JobID)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("order %v, want %v (actions %+v)", got, c.want, plan.Actions)
			}
			// Nices follow Rota's order whatever Slurm's.
			if n := plan.Actions[0].Nice; n != -500 {
				t.Errorf("job 1 nice %d, want -500", n)
			}
		})
	}
}

// The head of Slurm's order takes the GPUs that free first, whatever type
// the policy gave it; the next job takes the next one.
func TestCoverHead(t *testing.T) {
	t.Parallel()
	rates := []float64{3, 1}
	src := []string{estimate.SourceRelative, estimate.SourceRelative}
	jobs := []JobView{
		{ID: 1, Running: true, Type: "v100", GPUs: 1, RunningFor: 10 * time.Second, Rates: rates, RateSource: src},
		{ID: 2, Running: true, Type: "k80", GPUs: 1, RunningFor: 100 * time.Second, Rates: rates, RateSource: src},
		{ID: 3, GPUs: 1, Rates: rates, RateSource: src}, // first in Slurm's order
		{ID: 4, GPUs: 1, Rates: rates, RateSource: src},
		{ID: 5, GPUs: 1, Rates: rates, RateSource: src}, // beyond the cluster's GPUs
		{ID: 6, GPUs: 1, Rates: rates, RateSource: src, UserTyped: true, Type: "k80"},
	}
	plan := &Plan{Types: []string{"v100", "k80"}, Capacity: []int{1, 1}, Actions: []Action{
		{JobID: 1, Type: "v100", Running: true}, {JobID: 2, Type: "k80", Running: true},
		{JobID: 3, Type: "k80", Priority: 9}, {JobID: 4, Type: "v100", Priority: 8},
		{JobID: 5, Type: "k80", Priority: 7}, {JobID: 6, Type: "k80", Priority: 10},
	}}
	coverHead(plan, jobs, 0)
	for id, want := range map[uint32]string{3: "v100", 4: "k80", 5: "k80", 6: "k80"} {
		if got := plan.Actions[id-1].Type; got != want {
			t.Errorf("job %d: %s, want %s", id, got, want)
		}
	}
}

// A queue that does not change costs Slurm no update: 30 jobs alike wait
// for 12 GPUs that never free (Slurm starts none of them), and after the
// first round orders them, later rounds set no nice. Before the
// mechanism took back the rounds it gave pending jobs (Unplace), the 12
// it named took turns with the others, and each round re-niced about 24.
func TestIdleRoundsUpdateNothing(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	for id := uint32(1); id <= 30; id++ {
		f.add(id, "PENDING", "", "", &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 36000}}}, decs)
	}
	cfg := DefaultConfig()
	cfg.Order, cfg.OrderNiceSpan = OrderNice, 10000
	l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{}, Checkpoint: nil})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.niceUpdates == 0 {
		t.Fatal("the first round ordered nothing: the test shows nothing")
	}
	f.niceUpdates = 0
	for range 6 {
		if err := l.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if f.niceUpdates != 0 {
		t.Fatalf("%d nice updates in 6 rounds of an unchanged queue", f.niceUpdates)
	}
}
