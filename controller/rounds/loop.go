package rounds

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/checkpoint"
	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/limits"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
	"github.com/rota-hpc/rota/wire/gputype"
)

// Config is the loop's configuration.
type Config struct {
	Policy   string        // policy name (policy.Names())
	Round    time.Duration // round length
	MinLease time.Duration // a job runs at least this long before Rota moves it
	// MoveCost is the checkpoint + restart time assumed for a job until
	// one of its moves has been measured.
	MoveCost time.Duration
	// GPUMemory (bytes per GPU by type, gpu_mem.<type>) and
	// SliceMinMemory (slice_min_gpu_mem) keep jobs off GPUs their memory
	// does not fit, as the submit-time rule does (wire/gputype).
	GPUMemory      map[string]uint64
	SliceMinMemory uint64
	// CheckpointGrace is how long the agent waits for a checkpoint before
	// SIGTERM.
	CheckpointGrace time.Duration
	PriorityBase    uint32
	// Order is how Rota's order of pending jobs reaches Slurm (OrderNice,
	// OrderPriority, OrderNone); OrderNiceSpan bounds the nice values.
	Order         string
	OrderNiceSpan uint32
	// Shares is where the hierarchical policy's entity weights come from:
	// SharesSlurm (the accounts' fair-share shares) or SharesNone (equal).
	Shares string
	// WalltimeMargin and WalltimeOverheadMin size walltimes as the
	// placement does.
	WalltimeMargin      float64
	WalltimeOverheadMin uint32
	// InteractiveReserve is, per GPU type, the GPUs training may not hold
	// (interactive_reserve.<type>; docs/kinds.md).
	InteractiveReserve map[string]int
	// Pace spreads a round's updates (pace.go).
	Pace Pace
	// AdoptUnplaced: a pending GPU job that carries no note of Rota's (it
	// passed a job_submit plugin that failed open, or was not loaded) is
	// given a decision and becomes Rota's, typed by the round like any
	// other (adopt.go). adopt_unplaced in controller.conf.
	AdoptUnplaced bool
	// SpaceSharing (space_sharing) lets the policy (las or ftf) run two
	// pending one-GPU jobs on one GPU offered as shards where the
	// throughput table says the pair gets more done together by
	// ShareMargin (share_margin; 0: policy.DefaultShareMargin) than one
	// after the other (share.go). ShareDefault (share_default) says
	// whether a job that did not say --rota-share may share: "no" (the
	// default) or "yes".
	SpaceSharing bool
	ShareMargin  float64
	ShareDefault string
}

// DefaultConfig are the production defaults: minutes-long rounds.
func DefaultConfig() Config {
	return Config{Policy: "las", Round: 5 * time.Minute, MinLease: 10 * time.Minute, MoveCost: 2 * time.Minute,
		CheckpointGrace: 60 * time.Second, SliceMinMemory: gputype.DefaultSliceMinMemory, PriorityBase: 1_000_000, WalltimeMargin: 1.5, WalltimeOverheadMin: 5,
		Order: OrderNice, OrderNiceSpan: 10000, Shares: SharesSlurm, Pace: DefaultPace(), AdoptUnplaced: true,
		ShareDefault: ShareDefaultNo}
}

// How Rota's order reaches Slurm (docs/rounds.md, "Order and fair share").
const (
	// OrderNice sets nice values within OrderNiceSpan: Slurm's multifactor
	// plugin keeps recalculating priorities (fair share, age, QOS).
	OrderNice = "nice"
	// OrderPriority sets admin priorities: Rota's order is Slurm's, and
	// multifactor no longer recalculates those jobs.
	OrderPriority = "priority"
	// OrderNone leaves the order to Slurm (Rota still retypes and sets
	// walltimes).
	OrderNone = "none"
)

// Where entity weights come from.
const (
	SharesSlurm = "slurm"
	SharesNone  = "none"
)

// sharesRefresh is how often the loop re-reads the site's shares: an
// admin's change, not something that moves per round.
const sharesRefresh = 5 * time.Minute

// Decisions finds a job's placement decision (hints, identity, what the
// user asked).
type Decisions interface {
	Get(ctx context.Context, id string) (*wire.Decision, error)
}

// Measurements are what the agents measured of a job.
type Measurements interface {
	Job(id uint32) (observe.Job, bool)
}

// Estimator turns what is known of a job into rates and walltimes. ctx is
// the round's, so an estimator that asks another process stops with it.
type Estimator interface {
	// Rates returns steps/s per type and where each figure came from
	// ("measured", "hint", "completed", "table", "unknown").
	Rates(ctx context.Context, key string, types []string) (rates []float64, sources []string)
	// Observe feeds a measurement; Hint the user's figures.
	Observe(ctx context.Context, key, gpuType string, stepsPerSec float64, at time.Time)
	Hint(ctx context.Context, key string, perType map[string]float64)
	// MemoryFits says whether a type with memBytes per GPU holds the job.
	MemoryFits(ctx context.Context, key string, memBytes uint64) bool
	ObserveMemory(ctx context.Context, key string, peakPerGPU uint64)
	// Walltime is the time limit in minutes for stepsLeft (0 unknown) at
	// rate (0 unknown) steps/s, capped by the user's limit and MaxTime (0
	// none); 0 means no estimate. basis says how, in words.
	Walltime(ctx context.Context, key string, stepsLeft, rate float64, userLimitMin, maxTimeMin uint32) (minutes uint32, basis string)
	// Finished records a job's run time against the limit Rota gave it.
	Finished(ctx context.Context, key string, jobID uint32, limitMin, actualSec float64)
}

// ChainSegments tells the loop which jobs are segments of chains
// (controller/chains): it leaves a successor that waits for its
// predecessor to the chain manager, which gave it its type and priority,
// and moves a running segment only where the manager says it may
// (Movable: the chain's last segment, its boundary not begun), so that a
// segment on a slow type does not run to its limit there beside idle
// faster GPUs; the others reach the type the policy wants at their
// boundary.
type ChainSegments interface {
	Segment(jobID uint32) (pendingSuccessor, ok bool)
	Movable(jobID uint32) bool
}

// Timings hears what the loop measures, as it measures it (the
// controller's Prometheus histograms).
type Timings interface {
	// Round is a round's duration: reading Slurm, solving, applying.
	Round(d time.Duration)
	// Solve is a round's policy solve time.
	Solve(d time.Duration)
	// Move is a migration's cost: from the checkpoint command to the job
	// running on its new type.
	Move(d time.Duration)
}

// Loop drives Slurm round by round.
type Loop struct {
	cfg   Config
	log   zerolog.Logger
	sched Slurm
	// shareReader reads Slurm's fair-share tree (nil: none).
	shareReader slurm.ShareReader
	dec         Decisions
	meas        Measurements
	est         Estimator
	ckpt        checkpoint.Checkpointer
	store       state.Store
	planner     *Planner
	pol         policy.Policy
	chains      ChainSegments
	timings     Timings
	// hold keeps the apply's updates away from slurmctld's own heavy
	// moments (SetHold); nil: none.
	hold Hold

	// OnSnapshot, when set, gets each round's cluster picture (the submit
	// path answers from it).
	OnSnapshot func(*cluster.Snapshot, *Plan)
	// onBound hear, once a round has bound its jobs, when its queue read
	// began (AfterBind).
	onBound []func(readAt time.Time)

	// kick asks Run for a sessions pass between rounds (Kick).
	kick chan struct{}

	mu      sync.Mutex
	known   map[uint32]*tracked // by job id
	moving  map[uint32]bool     // migrations in flight
	last    *Plan
	lastErr error
	stats   Stats
	wg      sync.WaitGroup
	// shares are the entity weights last read from Slurm, at sharesAt.
	shares   map[string]float64
	sharesAt time.Time

	// Typed GPU limits (typedlimits.go).
	limitReader   LimitReader
	retypeGres    bool
	limitSet      *limits.Set
	limitsFailing bool
	noAccounting  bool
	headroom      map[uint32]wire.UserHeadroom
	headroomAt    time.Time

	// pairTable says what jobs sharing a GPU get done (nil: no pairs);
	// pairSeen what sharers were measured to keep of their speed.
	pairTable PairTable
	pairSeen  map[pairKey]float64
	gpus      slurm.GPUIndexer
	// nodeType is the last round's node -> GPU type ("" several).
	nodeType map[string]string
}

// tracked is what the loop remembers of a job between rounds.
type tracked struct {
	decision *wire.Decision
	key      string
	moved    time.Time // last time Rota placed or moved it
	moves    int
	lastType string
	moveCost time.Duration // measured; 0 until one move was timed
	moveAt   time.Time     // when the current move began
	target   string        // the type it was requeued onto, until it runs
	// What the last round saw, to judge the walltime when the job is gone:
	// a job last seen running with all its steps done finished.
	running     bool
	runSec      float64
	step, total uint64
	limitMin    uint32 // the job's time limit when Rota set it, else 0
	// sentLimit is a limit Rota sent in an update Slurm refused: Slurm
	// applies an update's fields one by one, so a job that started
	// meanwhile takes the new limit and refuses the new type (22.05
	// seen: a job typed k80 ran under the 7 min meant for a v100).
	sentLimit uint32
	// followed is the limit FollowLimit last raised it to (0 none);
	// limitMin stays the estimate, whose error the estimator learns.
	followed uint32
	// prioFixed: Rota set the job an admin priority that the loop hands
	// back to Slurm's priority plugin when the order is not "priority"
	// (a migrated job, once it runs again).
	prioFixed bool
	// baseNice is the job's nice before Rota's ordering (its user's
	// --nice), which Rota's offset adds to; niceRead says it was read,
	// niceSet that Rota has set a nice since.
	baseNice          int32
	niceRead, niceSet bool
	// limitFollowed: at the last round the job ran under a limit Rota
	// set below its ceiling, which followLimits raises as it needs (the
	// chain manager leaves such a job alone: chains.Info.LimitFollowed).
	limitFollowed bool
	// The last round's estimate, for chains: steps left (0 unknown), the
	// type it is on or given, steps/s per type (relative-only rates left
	// out).
	stepsLeft float64
	typ       string
	rates     map[string]float64
	// wants is the type where the last plan gave it most of its time.
	wants string
	// note, when set, is the AdminComment of a decision the loop made for
	// a job it adopted (adopt.go), still to be written into the job.
	note string
	// sameNode: Rota requeued it onto a type a node it ran on holds, where
	// it must wait out Slurm's requeue delay (migrate.go).
	sameNode bool
	// partner is the job Rota made it share a GPU with (share.go);
	// noShare: split from a pair that did not pay, it never shares again.
	partner uint32
	noShare bool
	// onGPU is the node/GPU index the job's current run holds ("" not
	// read yet), read once a run (onGPUStart) by readGPUs.
	onGPU      string
	onGPUStart time.Time
	// mate marks the step this sharer's run had when the loop first saw
	// it beside its GPU-mate (share.go, rateBeside).
	mate mateMark
}

// Stats are the loop's counters (metrics, status).
type Stats struct {
	Rounds, RoundErrors, Retyped, Reprioritised, Migrations, MigrationFailures uint64
	LastRound, LastSolve                                                       time.Duration
	// LastRead and LastApply split the last round: reading Slurm (nodes,
	// partitions, the queue, annotations, limits) and changing it (the
	// pending jobs' updates, migrations, limits followed). The solve is
	// LastSolve; the rest, building the jobs' views, is small.
	LastRead, LastApply time.Duration
	// LastEnd is when the last round ended.
	LastEnd time.Time
	// LastUpdates counts the pending jobs the last round updated (one RPC
	// each); Updates, every round's.
	LastUpdates int
	Updates     uint64
	SlurmErrors uint64
	// LimitsRaised counts running jobs' limits raised to follow progress.
	LimitsRaised uint64
	// Unannotated counts GPU jobs in the queue the last round saw without
	// a Rota decision (the plugin failed open, or the job opted out).
	Unannotated uint64
	// Adopted counts pending GPU jobs that passed the plugin unchanged
	// and the loop made Rota's (adopt.go).
	Adopted uint64
}

// SetChains makes the loop leave chain segments to the chain manager.
func (l *Loop) SetChains(c ChainSegments) {
	l.mu.Lock()
	l.chains = c
	l.mu.Unlock()
}

// AfterBind has f told, once each round has bound its jobs to their
// decisions, when that round's queue read began: the managers (chains,
// fault tolerance, services) act only on bound jobs, so one that follows
// none looks at the queue after a round only, taking the round's read.
// Call before Run.
func (l *Loop) AfterBind(f func(readAt time.Time)) {
	l.mu.Lock()
	l.onBound = append(l.onBound, f)
	l.mu.Unlock()
}

// Moving implements chains.JobInfo: the loop is migrating the job.
func (l *Loop) Moving(id uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.moving[id]
}

// ChainInfo implements chains.JobInfo: what the last round knew of a
// managed job.
func (l *Loop) ChainInfo(id uint32) (chains.Info, bool) {
	var m observe.Job
	var measured bool
	if l.meas != nil {
		m, measured = l.meas.Job(id)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tr := l.known[id]
	if tr == nil || tr.decision == nil || l.moving[id] {
		return chains.Info{}, false // a job being moved is judged once it is requeued
	}
	// A job requeued onto a new type is judged on that type, where its
	// new limit was reckoned: on the old one's rate, jobs moved off a K80
	// were made chains whose work their V100 did well within the limit.
	typ := tr.typ
	if tr.target != "" {
		typ = tr.target
	}
	in := chains.Info{Decision: tr.decision, StepsLeft: tr.stepsLeft, Type: typ, Rates: tr.rates,
		Rate: tr.rates[typ], Step: tr.step, Total: tr.total, LimitFollowed: tr.limitFollowed}
	if typ != "" {
		// A type the job could not run on alone (Unfit) pins nothing.
		in.Wants = tr.wants
	}
	if measured {
		in.Step, in.Total = m.Step, m.Total
	}
	return in, true
}

// Decision is the placement decision the loop bound to job id, nil
// when none (not Rota's, or not bound yet).
func (l *Loop) Decision(id uint32) *wire.Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tr := l.known[id]; tr != nil {
		return tr.decision
	}
	return nil
}

// Slurm is what the loop drives: the queue, and the jobs' changes, a
// round's updates sent in order with the pace's gaps between them.
type Slurm interface {
	slurm.JobsAter
	slurm.PacedUpdater
}

// Deps are what the loop works through. Sched, Decisions, Measurements
// and Estimator are needed; the rest may be nil, and then the loop does
// without.
type Deps struct {
	Sched        Slurm
	Decisions    Decisions
	Measurements Measurements
	Estimator    Estimator
	// Checkpoint asks a job's agents for a checkpoint (nil: no job is
	// moved).
	Checkpoint checkpoint.Checkpointer
	// Store keeps the loop's state across restarts (nil: not saved).
	Store state.Store
	// Timings is told what each round's phases took (nil: not timed).
	Timings Timings
	// Hold makes each round's apply wait, between updates, for as long as
	// it says (slurmctld's job state saves: slurm.StateSaves.Hold).
	Hold Hold
	// Limits reads the site's typed GPU limits every round; the loop
	// treats them as constraints of the policy (docs/rounds.md, "Typed
	// limits"). RetypeGres says Slurm accepts a new GPU type in a pending
	// job's GPU request (24.11 and later; 22.05 merges it with the old
	// one and the job never runs): then Rota types jobs in their GPU
	// request, where typed limits count them, not by node constraint.
	Limits     LimitReader
	RetypeGres bool
	// Shares reads the accounts' fair-share shares that the hierarchical
	// policy weighs them by (shares = slurm); nil: every account alike.
	Shares slurm.ShareReader
	// Pairs is the throughput table's pairs of jobs sharing a GPU, which
	// Config.SpaceSharing needs (nil: no job shares).
	Pairs PairTable
	// GPUs says which GPU of its node a running sharer holds, so that
	// the loop weighs the jobs Slurm put on one GPU together, whichever
	// pair Rota made of them (nil: it weighs the pairs it made).
	GPUs slurm.GPUIndexer
}

// New makes a loop.
func New(cfg Config, log zerolog.Logger, d Deps) (*Loop, error) {
	if d.Sched == nil || d.Decisions == nil || d.Estimator == nil {
		return nil, fmt.Errorf("rounds: a loop needs Slurm, the decisions and an estimator")
	}
	switch cfg.ShareDefault {
	case ShareDefaultNo, ShareDefaultYes:
	case "":
		cfg.ShareDefault = ShareDefaultNo
	default:
		return nil, fmt.Errorf("share_default = %q: want %s or %s", cfg.ShareDefault, ShareDefaultNo, ShareDefaultYes)
	}
	if cfg.SpaceSharing && d.Pairs == nil {
		return nil, fmt.Errorf("space_sharing needs the throughput table (throughput_table), whose pairs say what sharing a GPU gives")
	}
	pol, err := policy.New(cfg.Policy, policy.Options{SpaceSharing: cfg.SpaceSharing, ShareMargin: cfg.ShareMargin})
	if err != nil {
		return nil, err
	}
	if cfg.Round <= 0 {
		return nil, fmt.Errorf("round length must be positive, got %s", cfg.Round)
	}
	switch cfg.Order {
	case OrderNice, OrderPriority, OrderNone:
	default:
		return nil, fmt.Errorf("order = %q: want %s, %s or %s", cfg.Order, OrderNice, OrderPriority, OrderNone)
	}
	if cfg.Order == OrderNice && (cfg.OrderNiceSpan < 2 || cfg.OrderNiceSpan > maxNiceSpan) {
		return nil, fmt.Errorf("order_nice_span = %d: want 2 to %d", cfg.OrderNiceSpan, maxNiceSpan)
	}
	switch cfg.Shares {
	case SharesSlurm, SharesNone:
	default:
		return nil, fmt.Errorf("shares = %q: want %s or %s", cfg.Shares, SharesSlurm, SharesNone)
	}
	if err := cfg.Pace.Check(); err != nil {
		return nil, err
	}
	l := &Loop{cfg: cfg, log: log, sched: d.Sched, shareReader: d.Shares, dec: d.Decisions, meas: d.Measurements, est: d.Estimator, ckpt: d.Checkpoint, pol: pol,
		store: d.Store, timings: d.Timings, hold: d.Hold, limitReader: d.Limits, retypeGres: d.RetypeGres, pairTable: d.Pairs, gpus: d.GPUs,
		planner: NewPlanner(PlanConfig{Round: cfg.Round, MinLease: cfg.MinLease, PriorityBase: cfg.PriorityBase, NiceSpan: niceSpan(cfg),
			SlurmOrder: cfg.Order != OrderNone, InteractiveReserve: cfg.InteractiveReserve}, pol),
		known: map[uint32]*tracked{}, moving: map[uint32]bool{}, kick: make(chan struct{}, 1), pairSeen: map[pairKey]float64{}}
	return l, nil
}

// Run runs rounds until ctx ends; a failed round is logged and the next
// one tries again.
func (l *Loop) Run(ctx context.Context) {
	if err := l.restore(ctx); err != nil {
		l.log.Warn().Err(err).Msg("could not restore the round loop's saved state; starting afresh (jobs are bound again from their annotations)")
	}
	t := time.NewTicker(l.cfg.Round)
	defer t.Stop()
	for {
		if err := l.Round(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn().Err(err).Msg("round failed; Slurm is left as it is and the next round tries again")
		}
		for next := false; !next; {
			select {
			case <-ctx.Done():
				l.wg.Wait()
				return
			case <-t.C:
				next = true
			case <-l.kick:
				l.sessionsPass(ctx)
			}
		}
	}
}

// Policy is the policy's name.
func (l *Loop) Policy() string { return l.pol.Name() }

// Last returns the last round's plan (nil before the first).
func (l *Loop) Last() *Plan {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Stats returns the counters.
func (l *Loop) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Round runs one round.
func (l *Loop) Round(ctx context.Context) error {
	start := time.Now()
	err := l.round(ctx, start)
	l.mu.Lock()
	l.stats.Rounds++
	l.stats.LastEnd = time.Now()
	l.stats.LastRound = l.stats.LastEnd.Sub(start)
	if l.timings != nil {
		l.timings.Round(l.stats.LastRound)
	}
	if err != nil {
		l.stats.RoundErrors++
	}
	l.lastErr = err
	l.mu.Unlock()
	if err == nil {
		if serr := l.save(ctx); serr != nil && ctx.Err() == nil {
			l.log.Warn().Err(serr).Msg("round done but its state was not saved; a restart now would redo its decisions")
		}
	}
	return err
}

func (l *Loop) round(ctx context.Context, now time.Time) error {
	nodes, err := l.sched.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("reading nodes: %w", err)
	}
	parts, err := l.sched.Partitions(ctx)
	if err != nil {
		return fmt.Errorf("reading partitions: %w", err)
	}
	jobs, readAt, err := l.sched.JobsAt(ctx)
	if err != nil {
		return fmt.Errorf("reading the queue: %w", err)
	}
	snap := cluster.Build(now, nodes, parts)
	types := snap.TypeNames()
	lim := l.readLimits(ctx)
	readTime := time.Since(now)
	if l.TypeByGres() {
		// Typed in the GPU request, where limits count it (typedlimits.go).
		snap.GresOnly()
	}
	capacity := make([]int, len(types))
	for k, t := range types {
		capacity[k] = snap.Types[t].Total
	}
	nodeType := slurm.NodeTypes(nodes)
	l.mu.Lock()
	l.nodeType = nodeType
	l.mu.Unlock()
	memPerGPU := map[string]uint64{}
	for _, n := range nodes {
		if l.meas != nil {
			if mn, ok := l.measNode(n.Name); ok && len(mn.GPUs) > 0 && mn.GPUs[0].MemoryTotalBytes > 0 {
				t := nodeType[n.Name]
				if t == "" {
					continue // several types (MIG slices): no one size
				}
				if m := memPerGPU[t]; m == 0 || mn.GPUs[0].MemoryTotalBytes < m {
					memPerGPU[t] = mn.GPUs[0].MemoryTotalBytes
				}
			}
		}
	}

	bindStart := time.Now()
	if err := l.bind(ctx, jobs); err != nil {
		l.log.Warn().Err(err).Msg("cannot read jobs' Rota annotations; jobs already known are still scheduled")
	}
	readTime += time.Since(bindStart)
	l.mu.Lock()
	onBound := l.onBound
	l.mu.Unlock()
	for _, f := range onBound {
		f(readAt)
	}

	var usage *limits.Usage
	var counted map[uint32]bool
	if lim.Typed() {
		shardsPer := map[string]int{}
		for t, tc := range snap.Types {
			shardsPer[t] = tc.ShardsPerGPU
		}
		usage, counted = typedUsage(lim, jobs, types, nodeType, shardsPer)
	}
	l.planner.SetEntityWeights(l.entityWeights(ctx, now))
	views, byID := l.views(ctx, jobs, types, snap.View(), nodeType, memPerGPU, now, usage, counted)
	l.mu.Lock()
	l.headroom, l.headroomAt = nil, now
	if usage != nil {
		l.headroom = headroomOf(lim, usage, types)
	}
	l.mu.Unlock()
	var unannotated uint64
	l.mu.Lock()
	for i := range jobs {
		if _, gpu := jobs[i].GPURequest(); gpu && l.known[jobs[i].ID] == nil {
			unannotated++
		}
	}
	l.stats.Unannotated = unannotated
	l.mu.Unlock()
	heldElsewhere(capacity, types, jobs, byID, nodeType)
	l.readGPUs(ctx, views, byID)
	l.judgePairs(views)
	l.planner.SetPairs(l.sharePairs(views, types, snap))
	plan, err := l.planner.Decide(types, capacity, views, func(p *policy.Problem) (policy.Allocation, error) {
		return l.pol.Allocate(ctx, p)
	})
	if err != nil {
		return err
	}
	for i := range plan.Actions { // one per view, in order
		if n := views[i].LimitNote; n != "" {
			plan.Actions[i].Why += "; " + n
		}
		if n := views[i].ChoiceNote; n != "" {
			plan.Actions[i].Why += "; " + n
		}
	}
	applyStart := time.Now()
	l.realise(ctx, &plan, views, byID, snap, now)
	l.followLimits(ctx, jobs, snap, nodeType, now)
	applyTime := time.Since(applyStart)
	l.mu.Lock()
	l.last = &plan
	l.stats.LastSolve = plan.SolveTime
	l.stats.LastRead, l.stats.LastApply = readTime, applyTime
	updates := l.stats.LastUpdates
	l.mu.Unlock()
	if l.timings != nil {
		l.timings.Solve(plan.SolveTime)
	}
	if l.OnSnapshot != nil {
		l.OnSnapshot(snap, &plan)
	}
	l.log.Debug().Int("jobs", len(views)).Int("updates", updates).Int("migrations", plan.Migrations).
		Dur("read", readTime).Dur("solve", plan.SolveTime).Dur("apply", applyTime).
		Float64("objective", plan.Objective).Msg("round done")
	return nil
}

func (l *Loop) measNode(name string) (observe.Node, bool) {
	type nodeSource interface {
		Node(string) (observe.Node, bool)
	}
	if ns, ok := l.meas.(nodeSource); ok {
		return ns.Node(name)
	}
	return observe.Node{}, false
}

// bind ties new jobs to their decisions (once per job), and forgets jobs
// that left the queue.
func (l *Loop) bind(ctx context.Context, jobs []slurm.Job) error {
	inQueue := map[uint32]bool{}
	unknown := false
	l.mu.Lock()
	for _, j := range jobs {
		inQueue[j.ID] = true
		if _, ok := l.known[j.ID]; !ok {
			unknown = true
		}
	}
	for id, tr := range l.known {
		if !inQueue[id] && !l.moving[id] {
			if tr != nil && tr.running && tr.limitMin > 0 && l.est != nil {
				// Its last step as measured now: it may have come after the
				// round that last saw the job run (a job that ends soon
				// after its last step, on a loaded host).
				step, total := tr.step, tr.total
				if l.meas != nil {
					if m, ok := l.meas.Job(id); ok && m.Total > 0 {
						step, total = max(step, m.Step), m.Total
					}
				}
				if total > 0 && step >= total {
					l.est.Finished(ctx, tr.key, id, float64(tr.limitMin), tr.runSec)
				}
			}
			delete(l.known, id)
		}
	}
	l.mu.Unlock()
	if !unknown {
		return nil
	}
	ids, err := l.decisionIDs(ctx, jobs)
	if err != nil {
		return err
	}
	adopted := 0
	defer func() {
		if adopted > 0 { // one line, however many a restart's gap let through
			l.log.Info().Int("jobs", adopted).Msg("adopted pending GPU jobs that passed the job_submit plugin unchanged (it failed open, or was not loaded); the rounds choose their types")
		}
	}()
	for _, j := range jobs {
		l.mu.Lock()
		_, ok := l.known[j.ID]
		l.mu.Unlock()
		if ok {
			continue
		}
		did, has := ids[j.ID]
		if !has {
			if tr := l.adopt(ctx, &j); tr != nil {
				l.mu.Lock()
				l.known[j.ID] = tr
				l.stats.Adopted++
				l.mu.Unlock()
				adopted++
				continue
			}
			// Not Rota's: no GPUs, left as asked on purpose (its note
			// says why), or running already. Rota leaves it alone.
			l.mu.Lock()
			l.known[j.ID] = nil
			l.mu.Unlock()
			continue
		}
		d, err := l.dec.Get(ctx, did)
		if err != nil {
			l.log.Debug().Err(err).Uint32("job", j.ID).Msg("decision not found; the job is left alone")
			continue // retried next round
		}
		key := estimate.Identity{User: j.User, Name: j.Name, ScriptHash: d.Asked.ScriptHash}.Key()
		if len(d.Asked.Hints.Throughput) > 0 && l.est != nil {
			l.est.Hint(ctx, key, d.Asked.Hints.Throughput)
		}
		l.mu.Lock()
		l.known[j.ID] = &tracked{decision: d, key: key, baseNice: j.Nice, niceRead: true}
		l.mu.Unlock()
	}
	return nil
}

// decisionIDs maps the queue's jobs to their decision ids: from the
// queue read itself when it carried AdminComment, else from one
// Scheduler.DecisionIDs call.
func (l *Loop) decisionIDs(ctx context.Context, jobs []slurm.Job) (map[uint32]string, error) {
	ids := make(map[uint32]string, len(jobs))
	for _, j := range jobs {
		if !j.DecisionRead {
			return l.sched.DecisionIDs(ctx)
		}
		if j.Decision != "" {
			ids[j.ID] = j.Decision
		}
	}
	return ids, nil
}

// heldElsewhere takes out of capacity the GPUs that running jobs the
// planner does not schedule hold: jobs Rota did not place (--rota=off, a
// plugin that failed open, jobs from before Rota) and service replicas.
// Counted as free, the policy would hand them out again, and a job moved
// onto a type they fill would wait there.
func heldElsewhere(capacity []int, types []string, jobs []slurm.Job, planned map[uint32]*slurm.Job, nodeType map[string]string) {
	for i := range jobs {
		j := &jobs[i]
		if !j.Running() || len(j.Nodes) == 0 || planned[j.ID] != nil {
			continue
		}
		if _, gpu := j.GPURequest(); !gpu {
			continue
		}
		if k := indexOf(types, j.GPUType(nodeType, types)); k >= 0 {
			capacity[k] = max(capacity[k]-j.GPUs(), 0)
		}
	}
}

// views builds the planner's picture of the managed jobs.
func (l *Loop) views(ctx context.Context, jobs []slurm.Job, types []string, cv *wire.ClusterView, nodeType map[string]string, memPerGPU map[string]uint64, now time.Time,
	usage *limits.Usage, counted map[uint32]bool) ([]JobView, map[uint32]*slurm.Job) {
	var out []JobView
	byID := map[uint32]*slurm.Job{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		tr := l.known[j.ID]
		if tr == nil || l.moving[j.ID] {
			continue
		}
		if tr.decision.Given.Kind == wire.KindServe {
			// A service replica is never retyped, reordered or moved:
			// controller/serve spreads and rolls it over (docs/serve.md).
			continue
		}
		chainSeg := false // a segment the loop may not move
		if l.chains != nil {
			waiting, ok := l.chains.Segment(j.ID)
			if waiting && j.Pending() {
				continue
			}
			chainSeg = ok && !l.chains.Movable(j.ID)
		}
		if strings.HasPrefix(j.Reason, "JobHeld") {
			// Held by its user or an admin: not Rota's to schedule until
			// released (setting its priority would release it).
			continue
		}
		req, err := j.Request()
		if err != nil || !req.HasGPU() {
			if err == nil && rotaShared(req, tr.decision.Asked.GPU) {
				// Half a GPU Rota gave it: out of the policy, holding its
				// pair's GPU.
				v := JobView{ID: j.ID, Key: tr.key, Entity: j.Account, Running: j.Running(), GPUs: 1, Submit: j.Submit,
					Sharing: true, Partner: tr.partner, Type: j.GPUTypeOf(req, nodeType, types)}
				v.Migratable = tr.decision.Asked.Hints.CheckpointSignal != "" && !chainSeg // a segment the chain manager keeps
				v.MoveCost = l.cfg.MoveCost
				if tr.moveCost > 0 {
					v.MoveCost = tr.moveCost
				}
				if l.pairTable != nil {
					v.Model, _ = l.pairTable.Model(tr.decision.Asked.Hints.Model)
				}
				if v.Running && tr.onGPU != "" && tr.onGPUStart.Equal(j.Start) {
					v.OnGPU = tr.onGPU // read this run (readGPUs)
				}
				if m, ok := l.meas.Job(j.ID); ok && v.Running {
					// Its rate beside its partner: not its speed alone, so
					// not the estimator's (judgePairs weighs it).
					for _, r := range m.Rates {
						if r.GPUType == v.Type && r.StepsPerSec > 0 && r.Samples >= 2 {
							v.ShareMeasured = r.StepsPerSec
						}
					}
					v.ShareStep, v.ShareStepAt, v.Started = m.Step, m.Seen, j.Start
					if m.Total > m.Step {
						v.StepsLeft = float64(m.Total - m.Step) // what a split would weigh
					}
				}
				if k := indexOf(types, v.Type); k >= 0 && l.est != nil {
					rates, src := l.est.Rates(ctx, tr.key, types)
					if k < len(rates) && k < len(src) && src[k] != estimate.SourceRelative && src[k] != estimate.SourceUnknown {
						v.SoloRate = rates[k]
					}
					// Alone on each type: where it may go once GPUs
					// idle (leaveForFree).
					v.Rates, v.RateSource = rates, src
					v.Fits = l.sharerFits(ctx, cv, types, tr, j.Partition, memPerGPU)
				}
				if v.Entity == "" {
					v.Entity = j.User
				}
				out = append(out, v)
				byID[j.ID] = j
			}
			continue
		}
		// The GPUs it holds or will: Slurm's node and task counts now.
		v := JobView{ID: j.ID, Key: tr.key, Entity: j.Account, Running: j.Running(), GPUs: max(j.GPUs(), 1),
			Submit: j.Submit, Migratable: tr.decision.Asked.Hints.CheckpointSignal != "" && !chainSeg, MoveCost: l.cfg.MoveCost}
		if v.Entity == "" {
			v.Entity = j.User
		}
		if tr.moveCost > 0 {
			v.MoveCost = tr.moveCost
		}
		asked := tr.decision.Asked
		// An adopted job's uid is looked up by its user's name; 0 from a
		// lookup that failed would teach root's jobs.
		if asked.Name != "" && (asked.UID != 0 || j.User == "root") {
			v.LearnAs = wire.LearnedKey(asked.UID, asked.Name)
		}
		if tr.decision.Given.Kind == wire.KindInteractive {
			// Where it was placed, it stays; the planner only orders it.
			v.Interactive, v.Migratable = true, false
			v.SessionWaits = j.Pending() && waitsForGPUs(j.Reason)
			v.Type = j.GPUTypeOf(req, nodeType, types)
			if j.Pending() && j.Priority > 0 {
				v.BasePriority = uint32(max(1, int64(j.Priority)+int64(j.Nice)-int64(tr.baseNice)))
			}
			out = append(out, v)
			byID[j.ID] = j
			continue
		}
		v.UserTyped = asked.GPU.Type != "" || featureType(asked.Features, types) != ""
		if l.pairTable != nil && asked.Hints.Model != "" && tr.decision.Given.Kind != wire.KindInteractive {
			v.Model, _ = l.pairTable.Model(asked.Hints.Model)
			v.MayShare = mayShare(asked.Hints, l.cfg.ShareDefault) && !tr.noShare && oneGPUByGres(req)
			v.GPUMemNeed = asked.Hints.GPUMemBytes
		}
		if !v.UserTyped {
			// Rota may choose its type: only among those that hold it
			// and its user allows.
			v.Fits, v.Unfit, v.ChoiceNote = fitTypes(cv, types, req, &asked, j.Partition)
		}
		v.Type = j.GPUTypeOf(req, nodeType, types)
		if v.Running {
			v.RunningFor = time.Duration(j.RunSeconds * float64(time.Second))
		}
		if usage != nil && !v.UserTyped && v.Fits != nil {
			// What it holds (running) or will (counted) is its own to keep.
			self := ""
			if v.Running || counted[j.ID] {
				self = v.Type
			}
			v.LimitNote = limitFits(usage, j, self, v.GPUs, types, v.Fits)
		}
		if j.Pending() && j.Priority > 0 {
			// Slurm's priority less the nice Rota gave: multifactor's own.
			v.BasePriority = uint32(max(1, int64(j.Priority)+int64(j.Nice)-int64(tr.baseNice)))
		}
		if v.Running && tr.lastType != v.Type {
			tr.lastType = v.Type
			if tr.moved.IsZero() {
				tr.moved = j.Start
			}
		}
		// Slurm's start times are whole seconds: a restart within the
		// second of the request (a requeue can take 0.6 s) starts "before" it.
		if v.Running && !tr.moveAt.IsZero() && !j.Start.Before(tr.moveAt.Truncate(time.Second)) {
			// Checkpoint request to restart: this job's measured move cost.
			tr.moveCost, tr.moveAt = max(0, j.Start.Sub(tr.moveAt)), time.Time{}
			if l.timings != nil {
				l.timings.Move(tr.moveCost)
			}
		}
		if v.Running {
			tr.target = ""
		}
		v.Target = tr.target
		v.SinceMove = now.Sub(tr.moved)
		if tr.moved.IsZero() {
			v.SinceMove = time.Duration(math.MaxInt64)
		}
		tr.running, tr.runSec = v.Running, j.RunSeconds
		if tr.limitMin == 0 && tr.decision.Given.TimeLimitMin > 0 && j.TimeLimitMin == tr.decision.Given.TimeLimitMin {
			tr.limitMin = j.TimeLimitMin
		}
		if m, ok := l.meas.Job(j.ID); ok && l.est != nil {
			tr.step, tr.total = m.Step, m.Total
			for _, r := range m.Rates {
				if r.StepsPerSec > 0 {
					l.est.Observe(ctx, tr.key, r.GPUType, r.StepsPerSec, r.Updated)
				}
			}
			if m.PeakGPUMemoryPerGPU > 0 {
				l.est.ObserveMemory(ctx, tr.key, m.PeakGPUMemoryPerGPU)
			}
			total := float64(m.Total)
			if total == 0 {
				total = float64(asked.Hints.Steps)
			}
			if total > 0 {
				v.StepsLeft = math.Max(total-float64(m.Step), 1)
			}
		} else if asked.Hints.Steps > 0 {
			v.StepsLeft, v.StepsUnreported = float64(asked.Hints.Steps), true
		}
		if l.est != nil {
			v.Rates, v.RateSource = l.est.Rates(ctx, tr.key, types)
			tr.stepsLeft, tr.typ, tr.rates = v.StepsLeft, v.Type, map[string]float64{}
			if v.Unfit != "" {
				// No type to pin its chain's next segment to: its first
				// node's type may not hold it (it may run across types).
				tr.typ = ""
			}
			for k, t := range types {
				if k < len(v.Rates) && v.RateSource[k] != estimate.SourceRelative && v.Rates[k] > 0 {
					tr.rates[t] = v.Rates[k]
				}
			}
			if v.Fits == nil {
				v.Fits = make([]bool, len(types))
				for k := range v.Fits {
					v.Fits[k] = true
				}
			}
			for k, t := range types {
				v.Fits[k] = v.Fits[k] && l.memoryFits(ctx, t, tr, memPerGPU)
			}
		}
		out = append(out, v)
		byID[j.ID] = j
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, byID
}

// memoryFits says whether a GPU of type t has memory enough for the job:
// the rule the plugin applied at submission (the user's --rota-gpu-mem,
// the site's minimum on MIG slices), then what the job was seen to use.
func (l *Loop) memoryFits(ctx context.Context, t string, tr *tracked, memPerGPU map[string]uint64) bool {
	mem, _ := gputype.Memory(t, l.cfg.GPUMemory, memPerGPU)
	fits, _ := gputype.Fits(t, mem, tr.decision.Asked.Hints.GPUMemBytes, l.cfg.SliceMinMemory)
	return fits && (mem == 0 || l.est.MemoryFits(ctx, tr.key, mem))
}

// sharerFits are the types a sharer may go to alone (leaveForFree): its
// one GPU judged as a job on a GPU of its own is (allowedHolding, then
// memoryFits).
func (l *Loop) sharerFits(ctx context.Context, cv *wire.ClusterView, types []string, tr *tracked, partition string, memPerGPU map[string]uint64) []bool {
	fit, _, _ := allowedHolding(cv, types, gpureq.NeedOf(tr.decision.Asked.GPU), &tr.decision.Asked, partition)
	for k, t := range types {
		fit[k] = fit[k] && l.memoryFits(ctx, t, tr, memPerGPU)
	}
	return fit
}

// fitTypes says which types can hold the job as the user asked it
// (placement.Holds, the plugin's check at submission), and why none can: its
// GPU counts as Slurm has them now, its node and task shape and its
// constraint as the plugin recorded them (squeue shows a pending job's
// node count as Slurm's estimate, not as asked).
//
// choice says which types the user allows, when not all ("" otherwise).
func fitTypes(cv *wire.ClusterView, types []string, req gpureq.Request, asked *wire.PlaceRequest, partition string) (fit []bool, why, choice string) {
	a := req.Ask(asked.GPU.Nodes, asked.GPU.Tasks)
	a.MaxNodes, a.TasksPerNode, a.SocketsPerNode = asked.GPU.MaxNodes, asked.GPU.TasksPerNode, asked.GPU.SocketsPerNode
	need := gpureq.NeedOf(a)
	fit, allowed, restricted := allowedHolding(cv, types, need, asked, partition)
	some := slices.Contains(fit, true)
	switch {
	case !some && restricted:
		why = "none of the GPU types the user allows (" + placement.ChoiceWords(allowed, asked.Hints, asked.Features) + ") can hold the job as asked; left as asked"
	case !some:
		why = placement.NoTypeReason(need, partition, asked.Features)
	case restricted:
		choice = "chosen among the types the user allows (" + placement.ChoiceWords(allowed, asked.Hints, asked.Features) + ")"
	}
	return fit, why, choice
}

// allowedHolding says, per type, whether the user allows it (--rota-types,
// a constraint "v100|p100": allowed, restricted) and it holds need in
// partition (placement.Holds, the plugin's check at submission).
func allowedHolding(cv *wire.ClusterView, types []string, need gpureq.Need, asked *wire.PlaceRequest, partition string) (fit []bool, allowed []string, restricted bool) {
	allowed, restricted = placement.AllowedTypes(asked.Hints, asked.Features, func(f string) bool { return indexOf(types, f) >= 0 })
	fit = make([]bool, len(types))
	for k, t := range types {
		fit[k] = (!restricted || slices.Contains(allowed, t)) && placement.Holds(cv, t, need, partition, asked.Features)
	}
	return fit, allowed, restricted
}

// featureType finds a GPU type named in a constraint ("ib&v100" -> v100).
func featureType(features string, types []string) string {
	return gpureq.FeatureType(features, func(f string) bool { return indexOf(types, f) >= 0 })
}

// realise applies a plan: constraints, priorities and walltimes of
// pending jobs, migrations of running ones. Each Slurm call stands alone:
// a job that finished meanwhile fails its own update only.
func (l *Loop) realise(ctx context.Context, plan *Plan, views []JobView, byID map[uint32]*slurm.Job, snap *cluster.Snapshot, now time.Time) {
	viewOf := map[uint32]*JobView{}
	for i := range views {
		viewOf[views[i].ID] = &views[i]
	}
	var pend []pendingUpdate
	for i := range plan.Actions {
		a := &plan.Actions[i]
		j, v := byID[a.JobID], viewOf[a.JobID]
		l.mu.Lock()
		tr := l.known[a.JobID]
		if tr != nil {
			tr.wants = a.Wants
		}
		l.mu.Unlock()
		if j == nil || v == nil || tr == nil {
			continue
		}
		a.WalltimeMin, a.WalltimeBasis = l.walltimeBasis(ctx, v, tr, a.Type, a.ShareRate, snap, j.Partition)
		a.Moves = tr.moves
		if a.Migrate {
			l.migrate(ctx, j, v, tr, a, snap)
			continue
		}
		if !j.Pending() {
			l.unfix(ctx, j, v, tr)
			continue
		}
		var u slurm.JobUpdate
		untyped := l.untypeSession(&u, j, v, tr, snap)
		if untyped {
			a.Why += "; " + v.Type + " has no free GPU for it now: its request is given back untyped, so that the first GPU of any type to free up starts it"
			a.Type = ""
		}
		shares := false
		switch {
		case a.Partner != 0 && !v.Sharing:
			// Newly paired: its GPU becomes half a GPU's shards of a.Type.
			if shares = l.share(&u, j, tr, a.Type, snap); shares {
				if m := a.WalltimeMin; m > 0 {
					u.TimeLimitMin = &m
				}
			}
		case v.Sharing:
			// Its pair's: Slurm starts it as it is.
		case a.Type != "" && a.Type != v.Type && !v.UserTyped && !v.Interactive && l.retype(&u, j, tr, a.Type, snap):
			if m := a.WalltimeMin; m > 0 {
				u.TimeLimitMin = &m
			}
		}
		if p, ok := snap.Partitions[j.Partition]; ok && u.TimeLimitMin == nil {
			d := tr.decision
			if m, ok := UnderMaxTime(j.Reason, j.TimeLimitMin, d.Given.TimeLimitMin, d.Asked.TimeLimitMin, p.MaxTimeMin); ok {
				u.TimeLimitMin = &m
				l.log.Info().Uint32("job", j.ID).Uint32("limit_min", j.TimeLimitMin).Uint32("max_time_min", m).
					Msg("lowering the time limit Rota gave a pending job to its partition's MaxTime, lowered since it was placed (else it would wait for ever)")
			}
		}
		if j.Reason == "BeginTime" && tr.moves > 0 && j.Restarts > 0 && !tr.sameNode {
			// Rota requeued it; Slurm's requeue delay (the credential
			// lifetime) would idle its GPUs for two minutes.
			u.StartNow = true
		}
		l.order(&u, a, j, tr)
		if tr.note != "" {
			note := tr.note
			u.AdminComment = &note
		}
		if u.IsZero() {
			continue
		}
		pend = append(pend, pendingUpdate{j: j, tr: tr, a: a, from: v.Type, u: u, untyped: untyped, shares: shares})
	}
	errs := l.updateMany(ctx, pend)
	if ctx.Err() != nil && len(pend) > 0 {
		// Stopping (or no longer leading): one line, not one per job.
		l.log.Info().Int("updates", len(pend)).Msg("the round stopped while updating Slurm's jobs; the next round (here or on the new leader) sends what did not go")
		return
	}
	for i, p := range pend {
		l.applied(p, errs[i], now)
	}
	l.mu.Lock()
	l.stats.LastUpdates = len(pend)
	l.stats.Updates += uint64(len(pend))
	l.mu.Unlock()
}

// pendingUpdate is one pending job's change in a round, sent with the
// round's others (updateMany) and then recorded (applied).
type pendingUpdate struct {
	j       *slurm.Job
	tr      *tracked
	a       *Action
	from    string
	u       slurm.JobUpdate
	untyped bool
	shares  bool // the update makes it one of a pair on one GPU
}

// updateMany sends a round's changes in order, paced (pace.go).
func (l *Loop) updateMany(ctx context.Context, pend []pendingUpdate) []error {
	ch := make([]slurm.Change, len(pend))
	for i, p := range pend {
		ch[i] = slurm.Change{JobID: p.j.ID, Update: p.u}
	}
	gap := l.cfg.Pace.gaps(ctx, l.hold)
	return l.sched.UpdatePaced(ctx, ch, gap)
}

// refused keeps the limit of an update Slurm refused: the job may have
// taken it alone (tracked.sentLimit), and it is Rota's to follow then.
func (l *Loop) refused(tr *tracked, u slurm.JobUpdate) {
	if tr == nil || u.TimeLimitMin == nil {
		return
	}
	l.mu.Lock()
	tr.sentLimit = *u.TimeLimitMin
	l.mu.Unlock()
}

// applied records one change's outcome in the job's tracking.
func (l *Loop) applied(p pendingUpdate, err error, now time.Time) {
	j, tr, u := p.j, p.tr, p.u
	if err != nil {
		l.mu.Lock()
		l.stats.SlurmErrors++
		l.mu.Unlock()
		l.log.Info().Err(err).Uint32("job", j.ID).Msg("could not update the job (it may have started or ended meanwhile); next round tries again")
		l.refused(tr, u)
		return
	}
	l.mu.Lock()
	if u.Retypes() {
		l.stats.Retyped++
		tr.moved = now
	}
	if u.TimeLimitMin != nil {
		tr.limitMin = *u.TimeLimitMin
	}
	if u.Priority != nil {
		l.stats.Reprioritised++
		tr.prioFixed = true
	}
	if u.Nice != nil {
		l.stats.Reprioritised++
		tr.niceSet = true
	}
	if u.ResetPriority {
		tr.prioFixed = false
	}
	if u.AdminComment != nil {
		tr.note = "" // written: rota explain and a restarted controller find the decision
	}
	if p.shares {
		tr.partner = p.a.Partner
	}
	l.mu.Unlock()
	switch {
	case p.shares:
		l.log.Info().Uint32("job", j.ID).Uint32("partner", p.a.Partner).Str("type", p.a.Type).Str("why", p.a.Why).
			Msg("pending job made one of a pair sharing a GPU (gres/shard)")
	case p.untyped:
		l.log.Info().Uint32("job", j.ID).Str("type", p.from).Msg("interactive job waits for a busy GPU type Rota gave it; given back untyped so that any free GPU starts it")
	case u.Retypes():
		l.log.Info().Uint32("job", j.ID).Str("from", p.from).Str("to", p.a.Type).Str("why", p.a.Why).Msg("retyped pending job")
	}
}

// retype sets in u the update that gives pending job j type t, the way
// t is written (cluster.TypeCap.ByFeature): a node constraint on an
// untyped GPU request (the job's, or one Rota's constraint left
// untyped), else its GPU request where Slurm can retype one (24.11 and
// later), giving back the user's own constraint when it held Rota's.
// false: no way to retype it here (on 22.05: a typed request, or a type
// chosen by constraint onto one that is not, such as a MIG slice).
func (l *Loop) retype(u *slurm.JobUpdate, j *slurm.Job, tr *tracked, t string, snap *cluster.Snapshot) bool {
	req, _ := j.GPURequest()
	// A type in its constraint is Rota's: a job whose user named one is
	// never retyped.
	constrained := featureType(j.Features, snap.TypeNames()) != ""
	l.mu.Lock()
	gres := l.retypeGres
	l.mu.Unlock()
	switch {
	case snap.TypeByFeature(t) && (constrained || len(req.Types()) == 0):
		f, ok := gpureq.WithTypeFeature(tr.decision.Asked.Features, t)
		if ok {
			u.Features = &f
		}
		return ok
	case gres:
		req.SetType(t)
		u.GPU = &slurm.GPURequest{PerJob: req.PerJob.String(), PerNode: req.PerNode.String(),
			PerSocket: req.PerSocket.String(), PerTask: req.PerTask.String()}
		if constrained {
			f := tr.decision.Asked.Features
			u.Features = &f
		}
		return true
	}
	return false
}

// walltimeBasis is the limit for the job's remaining work on type t (see
// Estimator.Walltime; 0: no estimate) and how it was reckoned.
// shareRate, when set, is its rate sharing a GPU of t with another job.
func (l *Loop) walltimeBasis(ctx context.Context, v *JobView, tr *tracked, t string, shareRate float64, snap *cluster.Snapshot, part string) (uint32, string) {
	k := indexOf(snap.TypeNames(), t)
	if k < 0 || k >= len(v.Rates) || l.est == nil {
		return 0, ""
	}
	rate := v.Rates[k]
	if v.RateSource[k] == estimate.SourceRelative {
		rate = 0
	} else if shareRate > 0 {
		rate = shareRate
	}
	var maxTime uint32
	if p, ok := snap.Partitions[part]; ok {
		maxTime = p.MaxTimeMin
	}
	return l.est.Walltime(ctx, tr.key, v.StepsLeft, rate, tr.decision.Asked.TimeLimitMin, maxTime)
}

// Explain returns the last plan's action for a job.
func (l *Loop) Explain(jobID uint32) (Action, []string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		return Action{}, nil, false
	}
	for _, a := range l.last.Actions {
		if a.JobID == jobID {
			return a, l.last.Types, true
		}
	}
	return Action{}, nil, false
}
