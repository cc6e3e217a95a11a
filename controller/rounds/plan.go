// Package rounds is the controller's round loop: each round it reads
// Slurm's queue, asks the policy for an allocation over the GPU jobs Rota
// manages, turns it into this round's placements with Gavel's mechanism,
// and realises them on Slurm: pending jobs get their GPU type (as a node
// constraint) and an order (admin priority); running jobs that should move
// and may be moved are checkpointed by their node's agent and requeued
// onto the new type.
//
// Deciding (plan.go: pure, table-tested) is kept apart from applying
// (loop.go, migrate.go: Slurm and NATS behind interfaces), as Nomad's
// scheduler keeps its plan apart from its planner.
package rounds

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/mechanism"
	"github.com/rota-hpc/rota/controller/policy"
)

// JobView is one managed job as the planner sees it.
type JobView struct {
	ID      uint32
	Key     string // identity across requeues and resubmissions
	Entity  string // account, else user (hierarchical policies)
	Running bool
	// Type is the GPU type the job runs on (running) or is constrained to
	// (pending); "" when none yet.
	Type string
	// UserTyped: the user named the type; Rota never changes it.
	UserTyped bool
	// Migratable: the job declared a checkpoint signal, so it may be
	// checkpointed and requeued; others are never preempted.
	Migratable bool
	GPUs       int
	Submit     time.Time
	// RunningFor is how long the current run has lasted.
	RunningFor time.Duration
	// SinceMove is how long since Rota last moved or placed it (lease).
	SinceMove time.Duration
	// Rates are steps/s per type (the planner's type order); 0 = cannot
	// run there or unknown. RateSource says where each came from.
	Rates      []float64
	RateSource []string
	// LearnAs is wire.LearnedKey of the user and job name it was
	// submitted with: where what is measured of it teaches the
	// submit-time placement (Plan.Learned); "" none.
	LearnAs string
	// StepsLeft is the remaining training steps (0 = unknown).
	StepsLeft float64
	// StepsUnreported: the job reports no progress, so StepsLeft is its
	// whole work (its hint) and what it has done this run is unknown.
	StepsUnreported bool
	// MoveCost is the measured (or default) checkpoint + restart time.
	MoveCost time.Duration
	// Fits[k] is false when type k cannot hold the job as asked
	// (rule.Holds: too few nodes, GPUs per node or in all, or features)
	// or its GPU memory is below the job's observed peak.
	Fits []bool
	// LimitNote says which types the site's typed limits left out ("" none).
	LimitNote string
	// ChoiceNote says which types the user allows (--rota-types, a
	// constraint "v100|p100"; "" any): Fits has only those.
	ChoiceNote string
	// Unfit says why no single type can hold the job as asked ("" when
	// one can): Rota leaves it as the user asked it, out of the policy.
	Unfit string
	// BasePriority is Slurm's priority of a pending job without the nice
	// Rota gave it (multifactor: fair share, age, QOS...); 0 unknown.
	BasePriority uint32
	// Target is the type Rota requeued the job onto (pending after a
	// migration): its preferred type until it runs.
	Target string
	// Interactive: a person waits for it (docs/kinds.md). Out of the
	// policy; never retyped or moved; first in Rota's order while it
	// waits; its GPUs are not the training jobs'.
	Interactive bool
	// SessionWaits: an interactive job waiting for GPUs (not for its
	// begin time, a dependency or a limit): no training job is moved
	// meanwhile.
	SessionWaits bool
	// Model is the job's type in the throughput table (--rota-model;
	// "" none or unknown there), MayShare whether it may share a GPU
	// (--rota-share, share_default), GPUMemNeed its --rota-gpu-mem (0
	// not given): what pairing it needs (share.go).
	Model      string
	MayShare   bool
	GPUMemNeed uint64
	// Sharing: Rota made it one of a pair on one GPU (gres/shard), and
	// it runs or waits to run there with job Partner (0 unknown). Out of
	// the policy: a running pair stays together, a pending one is started
	// by Slurm as it is; the pair holds one GPU of Type.
	Sharing bool
	Partner uint32
	// OnGPU is the node/GPU index a running sharer holds ("" unknown):
	// the jobs Slurm put on one GPU, which may be of two pairs Rota made
	// (Slurm fills a GPU's free shard with the next sharer it starts).
	OnGPU string
	// ShareMeasured is a running sharer's measured steps/s there, SoloRate
	// its estimate alone on that type (0 unknown or only relative); Split,
	// set by judgePairs, says the pair gets less done than the margin asks
	// (SplitWhy in words), so the sharer moves to a GPU of its own.
	ShareMeasured, SoloRate float64
	Split                   bool
	SplitWhy                string
	// ShareJudged: judgePairs knows what ShareMeasured is this round: the
	// rate beside its GPU-mate, both of the pair timed (so the pair was
	// judged, split or kept), or its rate alone on its GPU (its partner
	// gone). leaveForFree moves only such a sharer: half of a pair still
	// being timed waits for the split rule, which moves both.
	ShareJudged bool
	// ShareStep is the step a running sharer's agents last reported, at
	// ShareStepAt (zero: none), of the run Slurm started at Started: what
	// judgePairs times its rate beside its GPU-mate from.
	ShareStep   uint64
	ShareStepAt time.Time
	Started     time.Time
}

// PlanConfig are the rules the planner follows.
type PlanConfig struct {
	Round    time.Duration
	MinLease time.Duration
	// PriorityBase anchors the admin priorities Rota sets: jobs placed
	// this round get PriorityBase+100000-rank, the others
	// PriorityBase-rank.
	PriorityBase uint32
	// NiceSpan, when set (order = nice), makes the plan's order Slurm's:
	// its priority less Rota's nice within the span, which is the order
	// in which Slurm will start the jobs, so GPUs free now go to them.
	NiceSpan uint32
	// SlurmOrder: Slurm starts pending jobs in the plan's order (order =
	// nice or priority), so a job far from its head keeps its type
	// (keepWaitingTypes).
	SlurmOrder bool
	// InteractiveReserve is, per GPU type, the GPUs training may not
	// hold (interactive_reserve.<type>).
	InteractiveReserve map[string]int
}

// Action is what the loop should do to one job this round.
type Action struct {
	JobID uint32
	// Type for a pending job's constraint, or the target of a migration.
	Type string
	// Priority for a pending job (0: leave).
	Priority uint32
	// Nice is Rota's nice for a pending job when Niced (order = nice).
	Nice  int32
	Niced bool
	// Migrate: checkpoint and requeue this running job onto Type.
	Migrate bool
	// Placed: the mechanism gave the job GPUs this round.
	Placed bool
	// Share is the job's allocation row (fraction of time per type).
	Share []float64
	// Wants is the type where Share gives the job most of its time (""
	// none): where a chain's next segment goes (chains.Info.Wants).
	Wants string `json:"wants,omitempty"`
	// Why says in words why the job got this type (explain).
	Why string
	// Rates and RateSource are the throughputs the policy used.
	Rates      []float64
	RateSource []string
	LearnAs    string `json:"-"` // JobView.LearnAs
	StepsLeft  float64
	// WalltimeMin and WalltimeBasis: the limit for the rest of the work
	// on Type (0: no estimate), and how.
	WalltimeMin   uint32
	WalltimeBasis string
	Moves         int
	// Interactive: the job is an interactive one, which the plan leaves
	// where it is and puts first.
	Interactive bool `json:"interactive,omitempty"`
	// Partner is the job it shares a GPU of Type with, or is to (0 none);
	// ShareRate its steps/s there while it does (0 unknown).
	Partner   uint32  `json:"partner,omitempty"`
	ShareRate float64 `json:"share_rate,omitempty"`
	// Running jobs: GPUs held and seconds of work left on their type
	// (+Inf when unknown), for the submit-time placement's wait estimates.
	Running   bool    `json:"running,omitempty"`
	GPUs      int     `json:"gpus,omitempty"`
	Remaining float64 `json:"-"` // +Inf when unknown, which JSON cannot hold
}

// Busy lists, per GPU type, the seconds each running job's GPUs stay
// busy (one entry per GPU; unknown remainders left out).
func (p *Plan) Busy() map[string][]float64 {
	out := map[string][]float64{}
	for _, a := range p.Actions {
		if !a.Running || math.IsInf(a.Remaining, 1) || a.Type == "" {
			continue
		}
		for g := 0; g < max(a.GPUs, 1); g++ {
			out[a.Type] = append(out[a.Type], a.Remaining)
		}
	}
	return out
}

// Learned is, per wire.LearnedKey, the steps/s per type of the jobs
// measured on a type: measured there, or completed from jobs measured on
// both (no hint, no table, no other job's): what the submit-time
// placement takes for the same user's next job of the same name
// (wire.PlaceState.Learned). Of two jobs with one key, the one known on
// more types.
func (p *Plan) Learned() map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, a := range p.Actions {
		if a.LearnAs == "" || !slices.Contains(a.RateSource, estimate.SourceMeasured) {
			continue
		}
		r := map[string]float64{}
		for k, t := range p.Types {
			if k < len(a.Rates) && k < len(a.RateSource) && a.Rates[k] > 0 && !math.IsInf(a.Rates[k], 0) &&
				(a.RateSource[k] == estimate.SourceMeasured || a.RateSource[k] == estimate.SourceCompleted) {
				r[t] = a.Rates[k]
			}
		}
		if len(r) > len(out[a.LearnAs]) {
			out[a.LearnAs] = r
		}
	}
	return out
}

// InteractiveHeld is, per GPU type, the GPUs interactive jobs hold or
// are about to (waiting, typed): what of the interactive reserve is in
// use.
func (p *Plan) InteractiveHeld() map[string]int {
	out := map[string]int{}
	for _, a := range p.Actions {
		if a.Interactive && a.Type != "" {
			out[a.Type] += max(a.GPUs, 1)
		}
	}
	return out
}

// avail is Avail, or Capacity in a plan made without it.
func (p *Plan) avail() []int {
	if p.Avail == nil {
		return p.Capacity
	}
	return p.Avail
}

// Plan is one round's decision.
type Plan struct {
	Types    []string
	Capacity []int
	// Avail is, per type, the GPUs training may use this round: the
	// capacity less the interactive reserve, or less what interactive
	// jobs hold or are placed on when that is more.
	Avail      []int
	Policy     string
	Objective  float64
	SolveTime  time.Duration
	Actions    []Action // one per job, in the order given
	Migrations int
}

// Planner holds the mechanism's history between rounds.
type Planner struct {
	cfg    PlanConfig
	pol    policy.Policy
	mech   *mechanism.Mechanism
	types  []string
	capa   []int
	jobSet map[uint32]bool
	// weights are the entities' weights (hierarchical policies); nil:
	// every entity alike.
	weights map[string]float64
	// pairs are the pairs of pending jobs the next round may place on
	// one GPU (share.go); combos the mechanism's pair requests of the
	// last round, whose change resets it as the job set's does.
	pairs  []SharePair
	combos map[string]bool
}

// SetEntityWeights sets the entity weights the next rounds' problems
// carry.
func (p *Planner) SetEntityWeights(w map[string]float64) { p.weights = w }

// SetPairs sets the pairs of jobs the next round may place on one GPU.
func (p *Planner) SetPairs(ps []SharePair) { p.pairs = ps }

// NewPlanner makes a planner for one policy.
func NewPlanner(cfg PlanConfig, pol policy.Policy) *Planner {
	return &Planner{cfg: cfg, pol: pol, jobSet: map[uint32]bool{}}
}

// Decide computes one round. types and capacity describe the usable GPUs;
// jobs are the managed jobs (pending and running). A job no single type
// can hold (Unfit) is left as the user asked it: the policy never sees
// it, and its action, with neither type nor priority to set, says why.
// An interactive job is left where it is too, and goes first in Rota's
// order while it waits; the training jobs get the GPUs the interactive
// reserve and the interactive jobs leave them, and none is moved while
// an interactive job waits (a moved job restarts at the front).
func (p *Planner) Decide(types []string, capacity []int, jobs []JobView, solve func(*policy.Problem) (policy.Allocation, error)) (Plan, error) {
	// The passes after the policy see the jobs it pairs this round as
	// sharers (JobView.Sharing): a copy, the caller's are left as read.
	jobs = slices.Clone(jobs)
	fit := make([]JobView, 0, len(jobs))
	interactive := make([]int, len(types)) // GPUs interactive jobs hold or will
	sharers := make([]int, len(types))     // jobs Rota made share a GPU, two a GPU
	waiting := false                       // an interactive job waits
	for _, j := range jobs {
		switch {
		case j.Interactive:
			if k := indexOf(types, j.Type); k >= 0 {
				interactive[k] += max(j.GPUs, 1)
			}
			waiting = waiting || j.SessionWaits
		case j.Sharing:
			if k := indexOf(types, j.Type); k >= 0 {
				sharers[k]++
			}
		case j.Unfit == "":
			fit = append(fit, j)
		}
	}
	// The policy shares what training may hold: a steady capacity, so
	// that sessions coming and going do not restart the mechanism. The
	// GPUs pairs hold or are about to are not the policy's.
	trainCap := make([]int, len(types))
	avail := make([]int, len(types))
	for k, t := range types {
		r := min(max(p.cfg.InteractiveReserve[t], 0), capacity[k])
		shared := (sharers[k] + 1) / 2
		trainCap[k] = max(capacity[k]-r-shared, 0)
		avail[k] = max(capacity[k]-max(r, interactive[k])-shared, 0)
	}
	plan, err := p.decide(types, trainCap, fit, solve, waiting)
	if err != nil {
		return plan, err
	}
	plan.Capacity, plan.Avail = capacity, avail
	if len(fit) < len(jobs) {
		actions, f := make([]Action, 0, len(jobs)), 0 // in the order given
		for _, j := range jobs {
			switch {
			case j.Interactive:
				a := Action{JobID: j.ID, Type: j.Type, Running: j.Running, GPUs: max(j.GPUs, 1), Remaining: math.Inf(1), Interactive: true,
					Why: "interactive job: placed at submission where it starts soonest; Rota never retypes, moves or requeues it"}
				if !j.Running {
					// Ahead of every training job Rota orders, below the
					// jobs Rota requeued (they ran already) and chains.
					a.Priority = p.cfg.PriorityBase + sessionPriority
					a.Why += ", and puts it first in its order"
				}
				actions = append(actions, a)
			case j.Sharing:
				a := Action{JobID: j.ID, Type: j.Type, Running: j.Running, GPUs: 1, Remaining: math.Inf(1), Partner: j.Partner,
					Why: fmt.Sprintf("shares a %s with job %d (gres/shard, as Rota paired them); Rota leaves a pair together", j.Type, j.Partner)}
				if j.Partner == 0 {
					a.Why = fmt.Sprintf("shares a %s with another job (gres/shard, as Rota paired it); Rota leaves it there", j.Type)
				}
				if !j.Running {
					// At the head of the jobs placed: the GPU it was paired
					// on is its.
					a.Priority = p.cfg.PriorityBase + 100000
				}
				if j.SplitWhy != "" {
					a.Why = j.SplitWhy
				}
				if j.Split {
					a.Migrate = true
					plan.Migrations++
				}
				actions = append(actions, a)
			case j.Unfit == "":
				actions = append(actions, plan.Actions[f])
				f++
			default:
				actions = append(actions, Action{JobID: j.ID, Type: j.Type, Why: j.Unfit, Running: j.Running, GPUs: max(j.GPUs, 1),
					Remaining: math.Inf(1)})
			}
		}
		plan.Actions = actions
	}
	// The pairs placed this round hold a GPU each from now on.
	paired := make([]int, len(types))
	for i := range plan.Actions {
		if a := &plan.Actions[i]; a.Partner != 0 && !jobs[i].Sharing {
			jobs[i].Sharing, jobs[i].Partner = true, a.Partner
			if k := indexOf(types, a.Type); k >= 0 {
				paired[k]++
			}
		}
	}
	for k := range avail {
		avail[k] = max(avail[k]-(paired[k]+1)/2, 0)
	}
	if p.cfg.NiceSpan > 0 {
		slurmOrder(&plan, jobs, p.cfg.NiceSpan)
	}
	if p.cfg.SlurmOrder {
		// Before fill and coverHead: a job either starts now or gets at
		// the head of the queue follows them.
		keepWaitingTypes(&plan, jobs)
	}
	free := fill(&plan, jobs)
	if !waiting {
		leaveForFree(&plan, jobs, free)
	}
	if p.cfg.NiceSpan > 0 {
		coverHead(&plan, jobs, p.cfg.Round)
	}
	if len(p.cfg.InteractiveReserve) > 0 {
		keepReserve(&plan, jobs, p.cfg.InteractiveReserve)
	}
	return plan, nil
}

// decide solves the policy for jobs, the training jobs a type can hold,
// on capacity, and ranks them; holdMoves keeps every running job where
// it is.
func (p *Planner) decide(types []string, capacity []int, jobs []JobView, solve func(*policy.Problem) (policy.Allocation, error), holdMoves bool) (Plan, error) {
	K := len(types)
	plan := Plan{Types: types, Capacity: capacity, Policy: p.pol.Name(), Actions: make([]Action, len(jobs))}
	if !slices.Equal(types, p.types) || !slices.Equal(capacity, p.capa) || p.mech == nil {
		// A new cluster shape starts the mechanism's history over.
		gpn := 1
		for _, c := range capacity {
			gpn = max(gpn, c)
		}
		p.mech = mechanism.New(append([]int(nil), capacity...), gpn, p.cfg.Round.Seconds(), 1)
		p.types, p.capa = append([]string(nil), types...), append([]int(nil), capacity...)
		p.jobSet = map[uint32]bool{}
	}
	prob := &policy.Problem{Types: types, Capacity: capacity, EntityWeights: p.weights}
	for _, j := range jobs {
		rates := make([]float64, K)
		for k := range rates {
			if k < len(j.Rates) && (j.Fits == nil || j.Fits[k]) {
				rates[k] = j.Rates[k]
			}
		}
		prob.Jobs = append(prob.Jobs, policy.Job{ID: fmt.Sprint(j.ID), Throughput: rates, Scale: max(j.GPUs, 1),
			Steps: j.StepsLeft, Entity: j.Entity, Arrival: float64(j.Submit.Unix())})
	}
	pos := make(map[uint32]int, len(jobs))
	for i, j := range jobs {
		pos[j.ID] = i
	}
	var pairs []SharePair // p.pairs whose members are both here, as prob.Pairs
	for _, sp := range p.pairs {
		a, okA := pos[sp.A]
		b, okB := pos[sp.B]
		if okA && okB && a != b && !jobs[a].Running && !jobs[b].Running && len(sp.Rates) == K {
			prob.Pairs = append(prob.Pairs, policy.Pair{A: a, B: b, Throughput: sp.Rates})
			pairs = append(pairs, sp)
		}
	}
	start := time.Now()
	alloc, err := solve(prob)
	plan.SolveTime = time.Since(start)
	if err != nil {
		return plan, fmt.Errorf("policy %s: %w", p.pol.Name(), err)
	}
	plan.Objective = alloc.Objective

	// The allocation is reset when the set of jobs changes (arrivals,
	// completions), as Gavel recomputes it then, or the pairs it places.
	changed := len(jobs) != len(p.jobSet)
	for _, j := range jobs {
		changed = changed || !p.jobSet[j.ID]
	}
	reqs := make([]mechanism.Request, len(jobs), len(jobs)+len(alloc.PairX))
	for i, j := range jobs {
		reqs[i] = mechanism.Request{ID: fmt.Sprint(j.ID), Scale: max(j.GPUs, 1), X: alloc.X[i], Rates: prob.Jobs[i].Throughput}
		if pinned(j, p.cfg.MinLease) {
			// A running job Rota may not move can only stay where it is.
			only := make([]float64, K)
			if k := indexOf(types, j.Type); k >= 0 {
				only[k] = 1
			}
			reqs[i].Rates = only
		}
	}
	// A pair the solve gives time becomes one request of its two
	// members, placed as one on one GPU (Gavel's space sharing).
	combos := map[string]bool{}
	pairOf := map[int]int{} // request index -> pairs index
	for q, row := range alloc.PairX {
		tot := 0.0
		for _, y := range row {
			tot += y
		}
		if q >= len(pairs) || tot <= 1e-6 {
			continue
		}
		pr := prob.Pairs[q]
		rates := make([]float64, K)
		for k, r := range pr.Throughput {
			if r[0] > 0 && r[1] > 0 {
				rates[k] = r[0] + r[1]
			}
		}
		id := fmt.Sprintf("pair:%d+%d", pairs[q].A, pairs[q].B)
		combos[id] = true
		pairOf[len(reqs)] = q
		reqs = append(reqs, mechanism.Request{ID: id, Scale: 1, X: row, Rates: rates, Members: []int{pr.A, pr.B}})
	}
	changed = changed || !maps.Equal(combos, p.combos)
	if changed {
		for id := range p.jobSet {
			p.mech.Forget(fmt.Sprint(id))
		}
		for id := range p.combos {
			p.mech.Forget(id)
		}
		p.combos = combos
		p.jobSet = map[uint32]bool{}
		for _, j := range jobs {
			p.jobSet[j.ID] = true
		}
		p.mech.Reset(reqs)
	}
	res := p.mech.Round(reqs)
	for i := range reqs {
		if (i >= len(jobs) || !jobs[i].Running) && res.Placed[i].Type >= 0 {
			// Slurm starts it when it can; until then the head of the
			// queue stays put instead of taking turns.
			p.mech.Unplace(reqs[i].ID)
		}
	}

	// Order: placed jobs by priority of their share, then the rest by
	// their best share; earlier submission breaks ties.
	type ranked struct {
		i     int
		score float64
	}
	var placed, waiting []ranked
	for i, j := range jobs {
		a := &plan.Actions[i]
		a.JobID, a.Share = j.ID, alloc.X[i]
		a.Rates, a.RateSource, a.StepsLeft, a.LearnAs = prob.Jobs[i].Throughput, j.RateSource, j.StepsLeft, j.LearnAs
		a.Running, a.GPUs, a.Remaining = j.Running, max(j.GPUs, 1), math.Inf(1)
		if k := indexOf(types, j.Type); j.Running && k >= 0 && j.StepsLeft > 0 && prob.Jobs[i].Throughput[k] > 0 &&
			k < len(j.RateSource) && j.RateSource[k] != estimate.SourceRelative {
			if left, ok := workLeft(j, j.StepsLeft/prob.Jobs[i].Throughput[k]); ok {
				a.Remaining = left
			}
		}
		best, bestScore := -1, -1.0
		for k := 0; k < K; k++ {
			if s := alloc.X[i][k] * prob.Jobs[i].Throughput[k]; s > bestScore && prob.Jobs[i].Throughput[k] > 0 {
				best, bestScore = k, s
			}
		}
		if k := mostTime(alloc.X[i], prob.Jobs[i].Throughput); k >= 0 {
			a.Wants = types[k]
		}
		// A pending job the mechanism hands GPUs of a type where it has no
		// share only fills a gap for one round in Gavel (it is preempted
		// next round); here it would stay there to the end, so it waits
		// for its share's type instead, and fill decides whether starting
		// now elsewhere finishes sooner.
		if v := res.Via[i]; v >= 0 && res.Placed[i].Type >= 0 {
			// One of a pair the policy runs on one GPU.
			q, t := pairOf[v], res.Placed[i].Type
			pr := prob.Pairs[q]
			side, other := 0, pairs[q].B
			if pr.B == i {
				side, other = 1, pairs[q].A
			}
			rates := [2]float64{pr.Throughput[t][0], pr.Throughput[t][1]}
			solo := [2]float64{prob.Jobs[pr.A].Throughput[t], prob.Jobs[pr.B].Throughput[t]}
			a.Placed, a.Type, a.Partner, a.ShareRate = true, types[t], other, pr.Throughput[t][side]
			a.Why = shareWhy(plan.Policy, types[t], other, rates, solo)
			placed = append(placed, ranked{i, finishScore(j, alloc.X[i], prob.Jobs[i].Throughput)})
		} else if t := res.Placed[i].Type; t >= 0 && (j.Running || alloc.X[i][t] > 1e-6) {
			a.Placed = true
			a.Type = types[t]
			a.Why = fmt.Sprintf("%s gives it GPUs this round on %s (share %s)", plan.Policy, types[t], shareString(types, alloc.X[i]))
			placed = append(placed, ranked{i, finishScore(j, alloc.X[i], prob.Jobs[i].Throughput)})
		} else {
			if best >= 0 {
				a.Type = types[best]
			}
			a.Why = fmt.Sprintf("%s has no GPUs for it this round; waits for %s (share %s)", plan.Policy, a.Type, shareString(types, alloc.X[i]))
			waiting = append(waiting, ranked{i, finishScore(j, alloc.X[i], prob.Jobs[i].Throughput)})
		}
		if j.UserTyped {
			a.Type = j.Type
		}
		if j.Target != "" && !j.Running {
			a.Type = j.Target
			a.Why = fmt.Sprintf("requeued by Rota onto %s, which it prefers", j.Target)
		}
		if j.Running {
			a.Migrate = a.Placed && a.Type != j.Type && !pinned(j, p.cfg.MinLease) && worthMoving(j, types, a.Type, p.cfg.Round)
			if a.Migrate && holdMoves {
				a.Migrate = false
				a.Why = fmt.Sprintf("%s would move it from %s to %s, but not while an interactive job waits for a GPU", plan.Policy, j.Type, a.Type)
			}
			if a.Migrate {
				plan.Migrations++
				a.Why = fmt.Sprintf("%s moves it from %s to %s: %s", plan.Policy, j.Type, a.Type, gainWords(j, types, a.Type))
			} else {
				a.Type = j.Type
			}
		}
	}
	for _, group := range []struct {
		rs   []ranked
		base uint32
	}{{placed, p.cfg.PriorityBase + 100000}, {waiting, p.cfg.PriorityBase}} {
		sort.SliceStable(group.rs, func(a, b int) bool {
			ja, jb := jobs[group.rs[a].i], jobs[group.rs[b].i]
			if group.rs[a].score != group.rs[b].score {
				return group.rs[a].score > group.rs[b].score
			}
			return ja.Submit.Before(jb.Submit)
		})
		for rank, r := range group.rs {
			if !jobs[r.i].Running {
				plan.Actions[r.i].Priority = group.base - uint32(min(rank, 99999))
			}
		}
	}
	return plan, nil
}

// coverHead (order = nice) gives the jobs at the head of Slurm's order
// the GPUs that free first, whatever their type: each GPU of the cluster,
// in the order it is expected to free (now, or when its job is done:
// steps over rate, else as long again as it has run but no less than
// the average such job has run), goes to the next
// job in Slurm's order that can use it, on the type where that job would
// finish first when its work is known, else where it starts first. So
// whichever GPU frees between two rounds, the job Slurm starts there is
// one of the first in its order, as if jobs were not typed at all: the
// site's fair share decides who runs, Rota on which type. Without it,
// the types the policy hands out (blind to accounts) decide, and an
// account below its share overtakes (measured: lab-a 0.52 of GPU time
// for a 0.75 share). Jobs beyond the cluster's GPUs keep their type.
//
// A job keeps the type it has when that type's GPU frees within tie of
// the first (tie: a round, below which the plan cannot tell), and when no
// GPU is left for it, so that a queue where nothing changes sees no
// update: the policy's shares among pending jobs it treats alike turn
// from round to round, and the head of the queue followed them (on the
// 12-GPU dev cluster, the same ten jobs retyped back and forth every
// round; TestSteadyQueueKeepsItsTypes).
func coverHead(plan *Plan, jobs []JobView, tie time.Duration) {
	K := len(plan.Types)
	// Per type, when each GPU frees (seconds from now), and whether that
	// is a guess (its job's work is unknown).
	type slot struct {
		at    float64
		guess bool
	}
	guessed := func(s slot) float64 {
		if s.guess {
			return s.at
		}
		return 0
	}
	slots := make([][]slot, K)
	used := make([]int, K)
	left := remaining(plan, jobs)
	for i, j := range jobs {
		a := &plan.Actions[i]
		if !j.Running || !policyJob(j) {
			continue
		}
		k := indexOf(plan.Types, j.Type)
		if k < 0 {
			continue
		}
		_, when, guess := left(j, k)
		if a.Migrate {
			when, guess = 0, false // it leaves its GPUs now
		}
		for g := 0; g < max(j.GPUs, 1); g++ {
			slots[k] = append(slots[k], slot{when, guess})
		}
		used[k] += max(j.GPUs, 1)
	}
	for k := range slots {
		for n := used[k]; n < plan.avail()[k]; n++ {
			slots[k] = append(slots[k], slot{})
		}
		sort.Slice(slots[k], func(a, b int) bool { return slots[k][a].at < slots[k][b].at })
	}
	order := plan.pendingInOrder(jobs, func(j JobView, a *Action) bool { return !j.UserTyped && policyJob(j) && a.Type != "" })
	keys := make([]float64, K) // per type, when the job would start (or finish); reused
	for _, i := range order {
		j, a := jobs[i], &plan.Actions[i]
		g := max(j.GPUs, 1)
		known := j.StepsLeft > 0
		for k := range j.RateSource {
			known = known && j.RateSource[k] != estimate.SourceRelative
		}
		first := math.Inf(1)
		for k := 0; k < K; k++ {
			keys[k] = math.Inf(1)
			if len(slots[k]) < g || k >= len(j.Rates) || j.Rates[k] <= 0 || (j.Fits != nil && !j.Fits[k]) {
				continue
			}
			keys[k] = slots[k][g-1].at
			if known {
				keys[k] += j.StepsLeft / j.Rates[k]
			}
			first = min(first, keys[k])
		}
		// Within tie of the first: the type it has, else the fastest
		// (a type without a GPU for it has an infinite key). The type it
		// has, when its GPU's time is a guess, only half of that counts:
		// such a guess is good to a factor of two at best, and a job that
		// leaves its type leaves the GPUs that freed there for it to the
		// jobs behind (TestHeadDoesNotChaseJobsThatJustStarted).
		best, within := -1, first+tie.Seconds()
		if cur := indexOf(plan.Types, j.Type); cur >= 0 && j.Target == "" && !math.IsInf(keys[cur], 1) && keys[cur]-guessed(slots[cur][g-1])/2 <= within {
			best = cur
		} else {
			for k := 0; k < K; k++ {
				if !math.IsInf(keys[k], 1) && keys[k] <= within && (best < 0 || j.Rates[k] > j.Rates[best] || (j.Rates[k] == j.Rates[best] && keys[k] < keys[best])) {
					best = k
				}
			}
		}
		if best < 0 {
			if keepable(plan, j, a) {
				a.Why = fmt.Sprintf("%s; it keeps %s: the first GPUs to free up go to the jobs ahead of it", a.Why, j.Type)
				a.Type = j.Type
			}
			continue
		}
		if t := plan.Types[best]; t != a.Type {
			a.Why = fmt.Sprintf("%s; at the head of Slurm's order, it takes a GPU of %s, the first to free up", a.Why, t)
			a.Type = t
		}
		// Booked until it is done (unknown: for good, this round).
		slots[best] = slots[best][g:]
	}
}

// remaining returns how long, in seconds, a running job of jobs will go
// on holding its GPUs of type k (plan.Types' index): steps over rate when
// both are known. Else it is a guess (guessed), made two ways: soon, as
// long again as it has run (the expected remainder of a run whose length
// is unknown), at least a second; and late, that but no less than the
// average run so far of the running jobs whose work is unknown.
//
// coverHead takes late: a job that just started is not about to end, and
// with soon each GPU just taken looked the first to free, so the job at
// the head was sent after it from type to type every round while the GPUs
// that did free went to the jobs behind it (TestDifferential on a loaded
// host: a two-GPU job waited 2m11s, 29 s under plain Slurm;
// TestHeadDoesNotChaseJobsThatJustStarted). fill takes soon: there the
// guess decides whether a pending job waits for its type or starts now on
// a slower one, and a wait misjudged costs a round (the next decides
// again) where a start misjudged costs the run at the slower speed or a
// migration (TestFillWaitsOnAJobThatJustStarted; with late, the no-hint
// replay's average JCT was 111.4 s, with soon 102.2 s:
// docs/measurements/replays.md).
func remaining(plan *Plan, jobs []JobView) func(j JobView, k int) (soon, late float64, guessed bool) {
	known := func(j JobView, k int) bool {
		return j.StepsLeft > 0 && k < len(j.Rates) && j.Rates[k] > 0 && j.RateSource[k] != estimate.SourceRelative
	}
	var ran float64
	var n int
	for _, j := range jobs {
		if k := indexOf(plan.Types, j.Type); j.Running && policyJob(j) && k >= 0 && !known(j, k) {
			ran += j.RunningFor.Seconds()
			n++
		}
	}
	floor := 1.0
	if n > 0 {
		floor = math.Max(ran/float64(n), 1)
	}
	return func(j JobView, k int) (float64, float64, bool) {
		if known(j, k) {
			if left, ok := workLeft(j, j.StepsLeft/j.Rates[k]); ok {
				return left, left, false
			}
		}
		soon := math.Max(j.RunningFor.Seconds(), 1)
		return soon, math.Max(soon, floor), true
	}
}

// workLeft is how long running job j goes on when its work takes run
// seconds: all of it where j reports its progress (StepsLeft is what is
// left); else, StepsLeft being its whole work, run less what it has run.
// false when that has run out: the job outlived its hint, which is then
// no estimate at all. Taken as exact, such a job's GPU looked about to
// free every round for as long as it ran on (TestDifferential's 90 s
// sleep with a hint ten times too fast: 9 s left, round after round;
// TestOutlivedHintIsAGuess).
func workLeft(j JobView, run float64) (float64, bool) {
	if !j.StepsUnreported {
		return run, true
	}
	left := run - j.RunningFor.Seconds()
	return left, left > 0
}

// pendingInOrder lists the pending jobs (indexes into jobs and
// plan.Actions) that take says to, highest priority first: the order in
// which Slurm starts them (Action.Priority is Rota's order, or with order
// = nice Slurm's own after slurmOrder).
func (p *Plan) pendingInOrder(jobs []JobView, take func(JobView, *Action) bool) []int {
	var order []int
	for i, j := range jobs {
		if !j.Running && take(j, &p.Actions[i]) {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return p.Actions[order[a]].Priority > p.Actions[order[b]].Priority })
	return order
}

// keepWaitingTypes leaves a pending job far from the head of Slurm's
// order on the type it has, when that type holds it and runs it at least
// half as fast as the plan's: it cannot start before the jobs ahead of it
// have taken every GPU of the cluster, and a later round types it when it
// nears the head. It runs before fill and coverHead, which still type a
// job that starts now or that the first GPUs to free up reach. Among
// pending jobs the policy treats alike (none has run yet), the type it
// hands each one flips from round to round as the queue changes, and
// every flip is an update of Slurm's job: at 10,000 pending, 320 of the
// 1,700 updates of a round that retyped 1,000 jobs were such flips, and
// 640 of the 1,600 of a round after 1,000 new jobs (docs/rounds.md,
// "Waiting jobs keep their type").
func keepWaitingTypes(plan *Plan, jobs []JobView) {
	order := plan.pendingInOrder(jobs, func(_ JobView, a *Action) bool { return a.Priority > 0 })
	room := 0
	for _, c := range plan.avail() {
		room += c
	}
	ahead := 0 // GPUs the pending jobs before it ask for
	for _, i := range order {
		j, a := jobs[i], &plan.Actions[i]
		before := ahead
		ahead += max(j.GPUs, 1)
		if before < room || !keepable(plan, j, a) {
			continue
		}
		a.Why = fmt.Sprintf("%s; it keeps %s while it waits behind %d GPUs' worth of jobs (the cluster has %d): a round types it again when it nears the head",
			a.Why, j.Type, before, room)
		a.Type = j.Type
	}
}

// keepable says whether pending job j may keep the type it has instead
// of the plan's (a): Rota types it, it is not being moved to a target,
// its type may still hold it, and runs it at least half as fast.
func keepable(plan *Plan, j JobView, a *Action) bool {
	if j.UserTyped || !policyJob(j) || j.Target != "" || a.Type == j.Type {
		return false
	}
	k, m := indexOf(plan.Types, j.Type), indexOf(plan.Types, a.Type)
	return k >= 0 && m >= 0 && k < len(j.Rates) && m < len(j.Rates) && j.Rates[k] > 0 && j.Rates[k] >= j.Rates[m]/2 &&
		(j.Fits == nil || j.Fits[k])
}

// slurmOrder gives pending jobs their nice from Rota's order and then
// ranks them as Slurm will: by their priority less that nice. Types are
// handed out (fill) in this order: Slurm starts whichever job leads among
// those constrained to a type that frees, so a type handed out in Rota's
// own order would let a job of an account below its fair share overtake
// the others (measured: lab-a got 0.53 of GPU time for its 0.75 share).
func slurmOrder(plan *Plan, jobs []JobView, span uint32) {
	pending := map[uint32]bool{}
	for _, j := range jobs {
		pending[j.ID] = !j.Running
	}
	nices := NiceOrder(plan.Actions, func(id uint32) bool { return pending[id] }, span)
	type keyed struct {
		i   int
		key int64
	}
	var ks []keyed
	for i := range plan.Actions {
		a := &plan.Actions[i]
		n, ok := nices[a.JobID]
		if !ok {
			continue
		}
		a.Nice, a.Niced = n, true
		ks = append(ks, keyed{i, int64(jobs[i].BasePriority) - int64(n)})
	}
	sort.SliceStable(ks, func(x, y int) bool {
		if ks[x].key != ks[y].key {
			return ks[x].key > ks[y].key
		}
		return plan.Actions[ks[x].i].Priority > plan.Actions[ks[y].i].Priority
	})
	for rank, k := range ks {
		plan.Actions[k.i].Priority = uint32(max(int64(1), int64(len(ks))+1-int64(rank)))
	}
}

// fill keeps the cluster busy. Gavel's mechanism assumes it can preempt
// every job every round; Rota only moves jobs that can checkpoint, after
// their lease, when it pays. So GPUs held by running jobs are not free,
// and a pending job the mechanism sends to a full type would wait there
// while another type idles. In priority order, each pending job takes its
// type when a GPU is free there; otherwise the free type where it would
// finish first, counting the wait for a GPU of its own type (the
// remaining time of the jobs running there) against running slower now.
// With its remaining work unknown, a job that can be checkpointed takes
// any free type (it moves later when that pays), another only a type at
// least half as fast as its own. A job that waits books the GPU it waits for, so the
// next one in line sees a longer wait.
// It returns the GPUs per type still free after.
func fill(plan *Plan, jobs []JobView) []int {
	K := len(plan.Types)
	free := append([]int(nil), plan.avail()...)
	// frees[k]: when each GPU-holding job on k will be done (seconds from
	// now).
	frees := make([][]float64, K)
	left := remaining(plan, jobs)
	for i, j := range jobs {
		a := &plan.Actions[i]
		k := indexOf(plan.Types, a.Type)
		if !j.Running || k < 0 || !policyJob(j) {
			continue
		}
		if a.Migrate {
			k = indexOf(plan.Types, j.Type) // still there until it moves
		}
		free[k] -= max(j.GPUs, 1)
		soon, _, _ := left(j, k) // a wait misjudged costs a round (remaining)
		frees[k] = append(frees[k], soon)
	}
	for k := range frees {
		sort.Float64s(frees[k])
	}
	// A job requeued onto a target type prefers it too, but if another
	// job took the GPU it was moved for, it does not wait longer than
	// starting elsewhere would take.
	order := plan.pendingInOrder(jobs, func(j JobView, _ *Action) bool { return !j.UserTyped && policyJob(j) })
	for _, i := range order {
		j, a := jobs[i], &plan.Actions[i]
		g := max(j.GPUs, 1)
		m := indexOf(plan.Types, a.Type)
		if m >= 0 && free[m] >= g {
			free[m] -= g
			continue
		}
		// Finish times need the remaining steps and rates in steps/s.
		known := j.StepsLeft > 0
		for k := range j.RateSource {
			known = known && j.RateSource[k] != estimate.SourceRelative
		}
		finish := func(k int) float64 {
			if j.Rates[k] <= 0 || (j.Fits != nil && !j.Fits[k]) {
				return math.Inf(1)
			}
			if !known {
				return 1 / j.Rates[k]
			}
			return j.StepsLeft / j.Rates[k]
		}
		wait := math.Inf(1)
		if m >= 0 && len(frees[m]) > 0 {
			wait = frees[m][0]
		}
		best, bestFinish := -1, math.Inf(1)
		for k := 0; k < K; k++ {
			if free[k] < g {
				continue
			}
			if f := finish(k); f < bestFinish {
				best, bestFinish = k, f
			}
		}
		if best >= 0 && m >= 0 {
			own := finish(m)
			take := bestFinish < wait+own
			if !known {
				// Nothing to compare finish times with: a job that can be
				// checkpointed starts now and moves when its type frees
				// up (if that pays); one that cannot only takes a type at
				// least half as fast as its own.
				take = j.Migratable || j.Rates[best] >= j.Rates[m]/2
			}
			if !take {
				best = -1
			}
		}
		if best >= 0 {
			if m >= 0 {
				a.Why = fmt.Sprintf("%s; %s has no free GPU, %s has: it starts there now", a.Why, plan.Types[m], plan.Types[best])
			}
			a.Type = plan.Types[best]
			free[best] -= g
			continue
		}
		if m >= 0 && len(frees[m]) > 0 {
			// Book the first GPU to free up on m.
			frees[m][0] = wait + finish(m)
			sort.Float64s(frees[m])
		}
	}
	return free
}

// leaveForFree moves a running sharer to a GPU of its own that no pending
// job takes this round (free, per type) on a type it fits (Fits: its
// user's choice, its partition, its GPU memory), where alone it ends sooner than
// sharing where it is, its checkpoint and restart (and Slurm's requeue
// delay, back on its own type's nodes) counted, by a tenth at least: a
// pair stays together while it pays, but once the queue drains, a pair on
// a slow type would otherwise run on at half speed beside idle fast GPUs
// (seen in scripts/trace-replay's share mode: K80 pairs running for ten
// minutes with the V100s idle). One of a pair a round, the one that gains
// most: the other then runs alone where it is.
func leaveForFree(plan *Plan, jobs []JobView, free []int) {
	type move struct {
		i, k      int
		stay, end float64
	}
	var moves []move
	for i, j := range jobs {
		a := &plan.Actions[i]
		if !j.Sharing || !j.Running || !j.ShareJudged || !j.Migratable || a.Migrate || j.StepsLeft <= 0 || j.ShareMeasured <= 0 {
			continue
		}
		stay := j.StepsLeft / j.ShareMeasured
		best := move{i: i, k: -1, stay: stay, end: math.Inf(1)}
		for k, t := range plan.Types {
			if free[k] < 1 || k >= len(j.Rates) || j.Rates[k] <= 0 || k >= len(j.RateSource) ||
				j.RateSource[k] == estimate.SourceRelative || j.RateSource[k] == estimate.SourceUnknown ||
				(j.Fits != nil && (k >= len(j.Fits) || !j.Fits[k])) {
				continue
			}
			end := j.MoveCost.Seconds() + j.StepsLeft/j.Rates[k]
			if t == j.Type {
				end += requeueDelay.Seconds()
			}
			if end < best.end {
				best.k, best.end = k, end
			}
		}
		if best.k >= 0 && best.end < stay*0.9 {
			moves = append(moves, best)
		}
	}
	sort.SliceStable(moves, func(a, b int) bool { return moves[a].stay-moves[a].end > moves[b].stay-moves[b].end })
	moved := map[uint32]bool{}
	for _, m := range moves {
		j, a := jobs[m.i], &plan.Actions[m.i]
		if free[m.k] < 1 || moved[j.Partner] {
			continue
		}
		free[m.k]--
		moved[j.ID] = true
		a.Type, a.Migrate = plan.Types[m.k], true
		a.Why = fmt.Sprintf("sharing a %s with job %d it ends in about %.0f s; a %s is free, where alone it ends in about %.0f s (its checkpoint and restart included): moved there",
			j.Type, j.Partner, m.stay, plan.Types[m.k], m.end)
		plan.Migrations++
	}
}

// finishScore orders jobs within a priority band: the fraction of its
// remaining work a job would do per second at its allocation (1 over its
// expected time to finish), so that among jobs the policy treats alike the
// one that finishes first starts first, which lowers the average JCT. A
// job the allocation gives nothing is ranked as if it had a millionth of
// its best type. Jobs whose remaining work is unknown (no --rota-steps, no
// progress) rank after those whose work is known: a negative score, their
// share of their best rate, so they keep the policy's order among
// themselves.
func finishScore(j JobView, x, rates []float64) float64 {
	best, s := 0.0, 0.0
	for k := range rates {
		best = math.Max(best, rates[k])
		if k < len(x) {
			s += x[k] * rates[k]
		}
	}
	if best <= 0 {
		return -2
	}
	known := j.StepsLeft > 0
	for _, src := range j.RateSource {
		known = known && src != estimate.SourceRelative
	}
	if !known {
		return s/best - 1.5 // in [-1.5, -0.5): after every known job
	}
	if s <= 0 {
		s = 1e-6 * best
	}
	return s / j.StepsLeft
}

// policyJob: a job the policy schedules (not interactive, and one type
// can hold it).
func policyJob(j JobView) bool { return !j.Interactive && j.Unfit == "" && !j.Sharing }

// pinned: a running job that must stay where it is (no checkpoint
// support, the user chose its type, or its lease has not run out).
func pinned(j JobView, minLease time.Duration) bool {
	return j.Running && (!j.Migratable || j.UserTyped || j.SinceMove < minLease)
}

// minGain is how much faster the new type must be for a move.
const minGain = 1.2

// worthMoving: the time saved on the new type must exceed the measured
// cost of a checkpoint and restart. With the remaining steps unknown, the
// saving over one round stands in for it.
func worthMoving(j JobView, types []string, to string, round time.Duration) bool {
	from, dst := indexOf(types, j.Type), indexOf(types, to)
	if from < 0 || dst < 0 || j.Rates[dst] <= 0 {
		return false
	}
	rFrom, rTo := j.Rates[from], j.Rates[dst]
	if rFrom <= 0 {
		return true // cannot make progress where it is
	}
	if rTo < minGain*rFrom {
		// A move to a slower type would only make room for others; a
		// checkpoint and restart is not worth that (the job keeps running
		// where it is and the others wait for its GPUs). Nor is a gain
		// within the noise of measured rates: without this margin two
		// types of nearly equal speed would trade a job back and forth.
		return false
	}
	var saved float64
	if j.StepsLeft > 0 && j.RateSource[from] != estimate.SourceRelative && j.RateSource[dst] != estimate.SourceRelative {
		saved = j.StepsLeft/rFrom - j.StepsLeft/rTo
	} else {
		saved = round.Seconds() * (1 - rFrom/rTo)
	}
	return saved > j.MoveCost.Seconds()
}

func gainWords(j JobView, types []string, to string) string {
	from, dst := indexOf(types, j.Type), indexOf(types, to)
	if from < 0 || dst < 0 {
		return "its type is unusable"
	}
	return fmt.Sprintf("%.3g -> %.3g steps/s (%s), move cost %s", j.Rates[from], j.Rates[dst], j.RateSource[dst], j.MoveCost.Round(time.Second))
}

func shareString(types []string, x []float64) string {
	s := ""
	for k, v := range x {
		if v > 1e-9 {
			if s != "" {
				s += " "
			}
			s += fmt.Sprintf("%s=%.2f", types[k], math.Round(v*100)/100)
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// mostTime is the type where share gives a job most of its time, the
// faster on a tie; -1 where it gives it none.
func mostTime(share, rate []float64) int {
	most := -1
	for k, x := range share {
		if x <= 1e-6 {
			continue
		}
		if most < 0 || x > share[most]+1e-9 || (x > share[most]-1e-9 && rate[k] > rate[most]) {
			most = k
		}
	}
	return most
}
