package rounds

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/policy"
)

// fill: a pending job the mechanism sent to a full type starts now on a
// free one when it would finish sooner there than by waiting.
func TestFill(t *testing.T) {
	src := []string{"measured", "measured"}
	for _, c := range []struct {
		name        string
		runningLeft float64 // steps left of the job holding the only v100
		stepsLeft   float64 // the pending job's
		rel         bool    // rates only relative
		want        string
		migratable  bool
	}{
		{"v100 busy for long: start on the k80", 1000, 100, false, "k80", false},
		{"v100 frees soon: wait for it", 10, 100, false, "v100", false},
		{"unknown work, k80 under half as fast: wait", 1000, 0, true, "v100", false},
		{"unknown work but can be moved later: start now", 1000, 0, true, "k80", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := src
			if c.rel {
				s = []string{estimate.SourceRelative, estimate.SourceRelative}
			}
			jobs := []JobView{
				{ID: 1, Running: true, Type: "v100", GPUs: 1, Rates: []float64{0.5, 1}, RateSource: src, StepsLeft: c.runningLeft},
				{ID: 2, Type: "v100", GPUs: 1, Rates: []float64{0.3, 1}, RateSource: s, StepsLeft: c.stepsLeft, Submit: time.Unix(1, 0), Migratable: c.migratable},
			}
			plan := Plan{Types: []string{"k80", "v100"}, Capacity: []int{1, 1},
				Actions: []Action{{JobID: 1, Type: "v100"}, {JobID: 2, Type: "v100", Priority: 5}}}
			fill(&plan, jobs)
			if got := plan.Actions[1].Type; got != c.want {
				t.Errorf("pending job goes to %s, want %s (%s)", got, c.want, plan.Actions[1].Why)
			}
		})
	}
}

// keepWaitingTypes: a pending job behind a whole cluster's worth of
// GPUs keeps its type when it can; one nearer the head, or one whose
// type is too slow or not allowed, takes the plan's.
func TestKeepWaitingTypes(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "p100", "v100"}
	rates := []float64{1, 2, 4}
	for _, c := range []struct {
		name  string
		ahead int // GPUs the jobs before it ask for (the cluster has 4)
		has   string
		plan  string
		fits  []bool
		want  string
	}{
		{"deep, p100 half as fast as v100: keeps p100", 4, "p100", "v100", nil, "p100"},
		{"deep, k80 a quarter as fast: takes v100", 4, "k80", "v100", nil, "v100"},
		{"deep, v100 kept over p100", 6, "v100", "p100", nil, "v100"},
		{"near the head: takes the plan's", 3, "p100", "v100", nil, "v100"},
		{"deep, its type no longer allowed", 4, "p100", "v100", []bool{true, false, true}, "v100"},
		{"deep, untyped: takes the plan's", 4, "", "v100", nil, "v100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var jobs []JobView
			var actions []Action
			for i := 0; i < c.ahead; i++ {
				jobs = append(jobs, JobView{ID: uint32(10 + i), Type: "v100", GPUs: 1, Rates: rates})
				actions = append(actions, Action{JobID: uint32(10 + i), Type: "v100", Priority: uint32(1000 - i)})
			}
			jobs = append(jobs, JobView{ID: 1, Type: c.has, GPUs: 1, Rates: rates, Fits: c.fits},
				JobView{ID: 2, Running: true, Type: "v100", GPUs: 4, Rates: rates})
			actions = append(actions, Action{JobID: 1, Type: c.plan, Priority: 10}, Action{JobID: 2, Type: "v100", Running: true})
			plan := Plan{Types: types, Capacity: []int{1, 1, 2}, Actions: actions}
			keepWaitingTypes(&plan, jobs)
			if got := plan.Actions[c.ahead].Type; got != c.want {
				t.Errorf("job behind %d GPUs on %q, plan %s: %s, want %s (%s)", c.ahead, c.has, c.plan, got, c.want, plan.Actions[c.ahead].Why)
			}
			for i := 0; i < c.ahead; i++ {
				if plan.Actions[i].Type != "v100" {
					t.Errorf("job %d ahead of it retyped to %s", jobs[i].ID, plan.Actions[i].Type)
				}
			}
		})
	}
}

// The policy's allocation flips between two rounds (pending jobs it
// treats alike; measured on a site-sized queue): only the jobs near the
// head of the queue follow it, the rest keep their types.
func TestWaitingTypesOutlastAFlippingAllocation(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "p100", "v100"}
	src := []string{"measured", "measured", "measured"}
	pol, err := policy.New("las", policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPlanner(PlanConfig{Round: time.Minute, MinLease: 10 * time.Minute, PriorityBase: 1000000, NiceSpan: 10000, SlurmOrder: true}, pol)
	var jobs []JobView
	for i := 0; i < 24; i++ {
		jobs = append(jobs, JobView{ID: uint32(1 + i), Running: true, Type: types[i/8], GPUs: 1, Rates: []float64{1, 2, 4}, RateSource: src,
			RunningFor: time.Hour})
	}
	for i := 0; i < 200; i++ {
		jobs = append(jobs, JobView{ID: uint32(100 + i), Type: "p100", GPUs: 1, Rates: []float64{1, 2, 4}, RateSource: src,
			Submit: time.Unix(int64(i), 0), BasePriority: 5000})
	}
	// Every waiting job's share on one type: v100 in the first round,
	// p100 in the second.
	flip := func(on int) func(*policy.Problem) (policy.Allocation, error) {
		return func(pr *policy.Problem) (policy.Allocation, error) {
			x := make([][]float64, len(pr.Jobs))
			for i := range x {
				x[i] = make([]float64, len(types))
				if jobs[i].Running {
					x[i][indexOf(types, jobs[i].Type)] = 1
				} else {
					x[i][on] = 0.01
				}
			}
			return policy.Allocation{Policy: "las", X: x}, nil
		}
	}
	for round, on := range []int{2, 1} {
		plan, err := p.Decide(types, []int{8, 8, 8}, jobs, flip(on))
		if err != nil {
			t.Fatal(err)
		}
		changed := 0
		for i, a := range plan.Actions {
			if !jobs[i].Running && a.Type != jobs[i].Type {
				changed++
				jobs[i].Type = a.Type // Slurm's job as the loop leaves it
			}
		}
		// 24 GPUs: the first 24 jobs of the queue may move.
		if changed > 24 {
			t.Errorf("round %d (shares on %s): %d of 200 waiting jobs retyped, want at most the 24 the cluster's GPUs reach",
				round+1, types[on], changed)
		}
	}
}

// A job keepWaitingTypes leaves on its type still starts now on a free
// GPU (fill), or takes one of the first GPUs to free up when the jobs
// ahead of it cannot (coverHead): both run after it.
func TestKeptTypesYieldToFillAndCoverHead(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "p100", "v100"}
	src := []string{"measured", "measured", "measured"}
	for _, c := range []struct {
		name  string
		free  bool // a v100 is free
		after func(*Plan, []JobView)
	}{
		{"fill starts it on the free v100", true, func(p *Plan, j []JobView) { fill(p, j) }},
		{"coverHead gives it the v100 that frees first", false, func(p *Plan, j []JobView) { coverHead(p, j, 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Two running p100 jobs; four pending jobs ahead of it, typed
			// by their users to p100 (neither fill nor coverHead types
			// them); it waits on p100, the plan says v100.
			var jobs []JobView
			var actions []Action
			for i := 0; i < 2; i++ {
				jobs = append(jobs, JobView{ID: uint32(1 + i), Running: true, Type: "p100", GPUs: 1, Rates: []float64{1, 2, 4}, RateSource: src,
					RunningFor: time.Hour})
				actions = append(actions, Action{JobID: uint32(1 + i), Type: "p100", Running: true})
			}
			if !c.free { // done in a minute
				jobs = append(jobs, JobView{ID: 3, Running: true, Type: "v100", GPUs: 1, Rates: []float64{1, 2, 4}, RateSource: src,
					RunningFor: time.Minute, StepsLeft: 240})
				actions = append(actions, Action{JobID: 3, Type: "v100", Running: true})
			}
			for i := 0; i < 4; i++ {
				jobs = append(jobs, JobView{ID: uint32(10 + i), Type: "p100", UserTyped: true, GPUs: 1, Rates: []float64{1, 2, 4}, RateSource: src})
				actions = append(actions, Action{JobID: uint32(10 + i), Type: "p100", Priority: uint32(100 - i)})
			}
			jobs = append(jobs, JobView{ID: 20, Type: "p100", GPUs: 1, Rates: []float64{1, 2, 4}, RateSource: src, StepsLeft: 100})
			actions = append(actions, Action{JobID: 20, Type: "v100", Priority: 10})
			plan := Plan{Types: types, Capacity: []int{0, 2, 1}, Actions: actions}
			last := &plan.Actions[len(actions)-1]
			keepWaitingTypes(&plan, jobs)
			if last.Type != "p100" {
				t.Fatalf("behind 4 GPUs' worth of jobs on a 3-GPU cluster it took %s, want p100 kept (%s)", last.Type, last.Why)
			}
			c.after(&plan, jobs)
			if last.Type != "v100" {
				t.Errorf("then %s, want v100 (%s)", last.Type, last.Why)
			}
		})
	}
}

// A cluster where nothing changes: every GPU busy with jobs of unknown
// length that started seconds apart, and pending jobs the policy treats
// alike. After the first round has typed and ordered them, a round
// retypes none: which of the first GPUs to free up a job at the head of
// the queue waits for, when they free within a round of each other, is
// not worth an update of Slurm's job (measured on the 12-GPU dev cluster:
// the same ten head jobs retyped back and forth every round).
func TestSteadyQueueKeepsItsTypes(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "p100", "v100"}
	rel := []string{estimate.SourceRelative, estimate.SourceRelative, estimate.SourceRelative}
	pol, err := policy.New("las", policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPlanner(PlanConfig{Round: 5 * time.Minute, MinLease: 10 * time.Minute, PriorityBase: 1000000, NiceSpan: 10000, SlurmOrder: true}, pol)
	var jobs []JobView
	id := uint32(1)
	for k, typ := range types { // per type: two one-GPU jobs, one of two GPUs
		for _, g := range []int{1, 1, 2} {
			jobs = append(jobs, JobView{ID: id, Running: true, Type: typ, GPUs: g, Rates: []float64{1, 2, 4}, RateSource: rel,
				RunningFor: time.Hour - time.Duration(3*k+int(id))*time.Second, StepsLeft: 5000})
			id++
		}
	}
	for i := 0; i < 40; i++ {
		jobs = append(jobs, JobView{ID: 100 + uint32(i), Type: types[i%3], GPUs: 1 + i%2, Rates: []float64{1, 2, 4}, RateSource: rel,
			Submit: time.Unix(int64(i), 0), BasePriority: 5000, StepsLeft: float64(1000 + (i*7919)%200000)})
	}
	for round := 1; round <= 6; round++ {
		plan, err := p.Decide(types, []int{4, 4, 4}, jobs, func(pr *policy.Problem) (policy.Allocation, error) {
			return pol.Allocate(context.Background(), pr)
		})
		if err != nil {
			t.Fatal(err)
		}
		var changed []string
		for i, a := range plan.Actions {
			if !jobs[i].Running && a.Type != jobs[i].Type {
				changed = append(changed, fmt.Sprintf("%d %s->%s (%s)", jobs[i].ID, jobs[i].Type, a.Type, a.Why))
				jobs[i].Type = a.Type // Slurm's job as the loop leaves it
			}
			if jobs[i].Running {
				jobs[i].RunningFor += 5 * time.Minute
			}
		}
		if round > 1 && len(changed) > 0 {
			t.Errorf("round %d retyped %d jobs in a queue where nothing changed:\n%s", round, len(changed), strings.Join(changed, "\n"))
		}
	}
}

// coverHead: a job at the head keeps its type when that type's GPU frees
// within a round of the first; later than that, or with no round to
// judge by, it takes the first. When its type's time is a guess (the job
// there has run an hour: as long again), only half of it counts.
func TestCoverHeadKeepsATypeThatFreesWithinARound(t *testing.T) {
	t.Parallel()
	types := []string{"p100", "v100"}
	src := []string{"measured", "measured"}
	for _, c := range []struct {
		name     string
		p100Left time.Duration // the running p100 job's work left (0: unknown, it has run p100Ran)
		p100Ran  time.Duration
		tie      time.Duration
		want     string
	}{
		{"p100 frees 10 s after the v100, round 5 min: keeps p100", time.Hour + 10*time.Second, time.Hour, 5 * time.Minute, "p100"},
		{"p100 frees 10 min after the v100: v100", time.Hour + 10*time.Minute, time.Hour, 5 * time.Minute, "v100"},
		{"no round to judge by: the first, v100", time.Hour + 10*time.Second, time.Hour, 0, "v100"},
		{"p100 guessed to free an hour after the v100: half of it, keeps p100", 0, 2 * time.Hour, 5 * time.Minute, "p100"},
		{"p100 guessed to free three hours after the v100: v100", 0, 4 * time.Hour, 5 * time.Minute, "v100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			jobs := []JobView{
				{ID: 1, Running: true, Type: "p100", GPUs: 1, Rates: []float64{2, 4}, RateSource: src, RunningFor: c.p100Ran, StepsLeft: 2 * c.p100Left.Seconds()},
				{ID: 2, Running: true, Type: "v100", GPUs: 1, Rates: []float64{2, 4}, RateSource: src, RunningFor: time.Hour, StepsLeft: 4 * 3600},
				{ID: 3, Type: "p100", GPUs: 1, Rates: []float64{2, 4}, RateSource: src},
			}
			plan := Plan{Types: types, Capacity: []int{1, 1}, Actions: []Action{
				{JobID: 1, Type: "p100", Running: true}, {JobID: 2, Type: "v100", Running: true}, {JobID: 3, Type: "v100", Priority: 5}}}
			coverHead(&plan, jobs, c.tie)
			if got := plan.Actions[2].Type; got != c.want {
				t.Errorf("%s, want %s (%s)", got, c.want, plan.Actions[2].Why)
			}
		})
	}
}

// A chain's next segment goes where the share gives the job most time;
// on a tie, to the faster type; nowhere without a share.
func TestMostTime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		share, rate []float64
		want        int
	}{
		{[]float64{0.2, 0.8}, []float64{3, 1}, 1},
		{[]float64{0.5, 0.5}, []float64{1, 3}, 1},
		{[]float64{0.5, 0.5}, []float64{3, 1}, 0},
		{[]float64{0, 0}, []float64{3, 1}, -1},
	} {
		if got := mostTime(c.share, c.rate); got != c.want {
			t.Errorf("mostTime(%v, %v) = %d, want %d", c.share, c.rate, got, c.want)
		}
	}
}

// The job at the head of the queue does not chase GPUs that were just
// taken. Every GPU is held by a job of unknown length (15 s, as
// TestDifferential's); the head job wants two GPUs of one type. As Slurm
// does, a GPU that frees on its type waits for it (the job's
// reservation), and one that frees on another type goes to a job behind
// it. Judged by "as long again as it has run" alone, a type whose GPU
// was just taken looked the first to free: the head job went after it
// and left the GPU that waited for it to the jobs behind, round after
// round (seen on real Slurm: TestDifferential's two-GPU job waited
// 2m11s, 29 s without Rota).
func TestHeadDoesNotChaseJobsThatJustStarted(t *testing.T) {
	t.Parallel()
	const round, length = 3, 15 // seconds
	// Every start: per type, the age of the job on each of 4 GPUs.
	rng := rand.New(rand.NewSource(1))
	worst, chased := 0, 0
	for n := 0; n < 200; n++ {
		ages := make([][]float64, 2)
		for k := range ages {
			for g := 0; g < 4; g++ {
				ages[k] = append(ages[k], float64(rng.Intn(length)))
			}
		}
		start := fmt.Sprint(ages)
		waited, flips := headWaits(ages, round, length)
		if flips > 1 {
			chased++
			t.Logf("from %s: the head job changed type %d times and waited %d rounds", start, flips, waited)
		}
		worst = max(worst, waited)
	}
	t.Logf("200 starts: the head job waited at most %d rounds; %d starts where it changed type more than once", worst, chased)
	// Two GPUs of its type free within a job's length of its first round.
	if chased > 0 || worst > length/round+1 {
		t.Errorf("the head job waited up to %d rounds (want at most %d) and changed type more than once from %d of 200 starts, chasing the GPUs the jobs behind it had just taken", worst, length/round+1, chased)
	}
}

// headWaits runs TestHeadDoesNotChaseJobsThatJustStarted's cluster from
// ages until the head job starts: the rounds it waited and how often it
// changed type.
func headWaits(ages [][]float64, round, length float64) (waited, flips int) {
	types := []string{"p100", "v100"}
	src := []string{"measured", "measured"}
	head := "p100"
	for ; waited < 20; waited++ {
		h := indexOf(types, head)
		free := 0
		for _, age := range ages[h] {
			if age < 0 {
				free++
			}
		}
		if free >= 2 {
			break // Slurm starts it
		}
		var jobs []JobView
		var actions []Action
		for k, typ := range types {
			for _, age := range ages[k] {
				if age < 0 {
					continue
				}
				id := uint32(len(jobs) + 1)
				jobs = append(jobs, JobView{ID: id, Running: true, Type: typ, GPUs: 1, Rates: []float64{2, 4}, RateSource: src,
					RunningFor: time.Duration(age * float64(time.Second))})
				actions = append(actions, Action{JobID: id, Type: typ, Running: true})
			}
		}
		jobs = append(jobs, JobView{ID: 100, Type: head, GPUs: 2, Rates: []float64{2, 4}, RateSource: src})
		actions = append(actions, Action{JobID: 100, Type: head, Priority: 5})
		plan := Plan{Types: types, Capacity: []int{4, 4}, Actions: actions}
		coverHead(&plan, jobs, time.Duration(round*float64(time.Second)))
		if got := plan.Actions[len(actions)-1].Type; got != head {
			flips++
			head = got
		}
		// A round on: jobs age, those done end; a GPU that frees waits
		// for the head job on its type, else a job behind takes it.
		h = indexOf(types, head)
		for k := range ages {
			for g, age := range ages[k] {
				switch {
				case age >= 0 && age+round < length:
					ages[k][g] = age + round
				case k == h:
					ages[k][g] = -1
				default:
					ages[k][g] = math.Mod(math.Max(age, 0)+round, length)
				}
			}
		}
	}
	return waited, flips
}

// fill waits for a job's own type when the GPU there is held by a job of
// unknown work that just started, however long other such jobs have run:
// a wait misjudged costs the pending job a round (the next round decides
// again), a start on a slower type misjudged costs it the whole run there
// or a migration.
func TestFillWaitsOnAJobThatJustStarted(t *testing.T) {
	t.Parallel()
	rel := []string{estimate.SourceRelative, estimate.SourceRelative}
	jobs := []JobView{
		{ID: 1, Running: true, Type: "v100", GPUs: 1, Rates: []float64{0.5, 1}, RateSource: rel, RunningFor: 5 * time.Second},
		{ID: 2, Running: true, Type: "k80", GPUs: 1, Rates: []float64{0.5, 1}, RateSource: rel, RunningFor: 10 * time.Minute},
		{ID: 3, Type: "v100", GPUs: 1, Rates: []float64{0.3, 1}, RateSource: []string{"measured", "measured"}, StepsLeft: 100, Submit: time.Unix(1, 0)},
	}
	plan := Plan{Types: []string{"k80", "v100"}, Capacity: []int{2, 1},
		Actions: []Action{{JobID: 1, Type: "v100"}, {JobID: 2, Type: "k80"}, {JobID: 3, Type: "v100", Priority: 5}}}
	fill(&plan, jobs)
	if got := plan.Actions[2].Type; got != "v100" {
		t.Errorf("pending job goes to %s, want v100: 100 s there after a wait of about 5 s, 333 s on the k80 (%s)", got, plan.Actions[2].Why)
	}
}

// TestOutlivedHintIsAGuess: a running job that reports no progress ends
// when its hint says, counted from its start; once it has run longer, the
// hint was wrong and its end is a guess like any job's of unknown work,
// never "now" round after round.
func TestOutlivedHintIsAGuess(t *testing.T) {
	t.Parallel()
	plan := &Plan{Types: []string{"v100"}}
	hinted := func(ran time.Duration, unreported bool) JobView {
		return JobView{ID: 1, Running: true, Type: "v100", GPUs: 1, StepsLeft: 900, StepsUnreported: unreported,
			Rates: []float64{100}, RateSource: []string{"hint"}, RunningFor: ran}
	}
	for _, c := range []struct {
		name        string
		job         JobView
		soon, late  float64
		wantGuessed bool
	}{
		{"progress reported: what is left", hinted(30*time.Second, false), 9, 9, false},
		{"no progress, within its hint", hinted(3*time.Second, true), 6, 6, false},
		{"no progress, past its hint: a guess", hinted(30*time.Second, true), 30, 30, true},
	} {
		soon, late, guessed := remaining(plan, []JobView{c.job})(c.job, 0)
		if math.Abs(soon-c.soon) > 1e-9 || math.Abs(late-c.late) > 1e-9 || guessed != c.wantGuessed {
			t.Errorf("%s: soon %v late %v guessed %v; want %v %v %v", c.name, soon, late, guessed, c.soon, c.late, c.wantGuessed)
		}
	}
}
