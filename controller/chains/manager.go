package chains

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/checkpoint"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/internal/tick"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Slurm is what the manager drives: the round loop's reads and updates
// plus submission, cancel and signals.
type Slurm interface {
	slurm.Scheduler
	slurm.Submitter
}

// Info is what the round loop knows of a job it manages.
type Info struct {
	Decision *wire.Decision
	// StepsLeft (0 unknown) and Rate, steps/s on Type (0 unknown).
	StepsLeft float64
	Rate      float64
	Type      string
	// Wants is the type where the policy gives the job most of its time
	// ("" unknown): its next segment goes there, a segment's end being a
	// move that costs no checkpoint of its own.
	Wants string
	// Rates per GPU type, for development partitions of another type.
	Rates map[string]float64
	// Step and Total from the job's progress (0 unknown).
	Step, Total uint64
	// LimitFollowed: the job runs under a limit Rota shortened, below its
	// user's (or MaxTime), which the round loop raises as its progress
	// needs (rounds.FollowLimit).
	LimitFollowed bool
}

// JobInfo is the round loop (rounds.Loop.ChainInfo, Moving).
type JobInfo interface {
	ChainInfo(id uint32) (Info, bool)
	// Moving says the loop is moving the job (Movable): checkpointed, it
	// exits and shows ended until Slurm has requeued it.
	Moving(id uint32) bool
}

const (
	stateKey     = "chains"
	stateVersion = 1
	// keepEnded chains stay for explain this long after they end.
	keepEnded = 7 * 24 * time.Hour
	// maxRefused bounds the jobs remembered as running without a chain.
	maxRefused = 100_000
)

// Stats are the manager's counters.
type Stats struct {
	Chains, Submitted, Checkpoints, Done, Cancelled, Failed, Errors uint64
}

// Manager runs chains.
type Manager struct {
	cfg   Config
	log   zerolog.Logger
	sched Slurm
	info  JobInfo
	ckpt  checkpoint.Checkpointer
	store state.Store
	pred  WaitPredictor
	obs   *ObservedWaits
	now   func() time.Time
	// spank: pass Rota's options to the successor's sbatch; turned off
	// when the submit host has no spank_rota.so (sbatch refuses them).
	spank bool
	// nudgeFor is how long a checkpoint waits for its segment to end to
	// nudge the successor.
	nudgeFor time.Duration
	// onGap hears each gap between segments once both ends are known.
	onGap func(time.Duration)

	// chains and bySeg belong to the goroutine that ticks (one at a
	// time); readers get the view published after each change.
	chains map[uint32]*Chain // by chain id
	bySeg  map[uint32]uint32 // segment job id -> chain id
	// candidates are jobs that declare a checkpoint signal and may need a
	// chain once their rate is measured: judged again at every tick.
	candidates map[uint32]bool
	queue      slurm.TickQueue

	mu       sync.Mutex
	pub      map[uint32]*wire.ChainStatus // published: by chain id
	pubSeg   map[uint32]segRef            // published: by segment job id
	refused  map[uint32]refusal           // job id -> why it runs without a chain
	busy     map[uint32]bool              // checkpoints in flight, by job id
	ckptDone map[uint32]string            // checkpoint outcomes not applied yet
	stats    Stats
	wg       sync.WaitGroup
}

type refusal struct {
	why  string
	seen time.Time // last seen in the queue
}

type segRef struct {
	chain   uint32
	waiting bool // a successor that has not started
	movable bool // the running last segment, its boundary not begun (Movable)
}

// New makes a manager. ckpt and store may be nil (signals by scancel; no
// saved state).
func New(cfg Config, log zerolog.Logger, sched Slurm, info JobInfo, ckpt checkpoint.Checkpointer, store state.Store) (*Manager, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	obs := NewObservedWaits()
	return &Manager{cfg: cfg, log: log, sched: sched, info: info, ckpt: ckpt, store: store, pred: obs, obs: obs,
		now: time.Now, spank: true, nudgeFor: cfg.Grace + 30*time.Second, chains: map[uint32]*Chain{}, bySeg: map[uint32]uint32{},
		pub: map[uint32]*wire.ChainStatus{}, pubSeg: map[uint32]segRef{}, candidates: map[uint32]bool{},
		refused: map[uint32]refusal{}, busy: map[uint32]bool{}, ckptDone: map[uint32]string{}}, nil
}

// SetPredictor replaces the fallback (recent observed waits) with a
// queue-wait model, e.g. controller/estimate/queuewait's. Call before Run.
func (m *Manager) SetPredictor(p WaitPredictor) {
	if p != nil {
		m.pred = p
	}
}

// SetGapObserver makes the manager tell f the gap between a segment's end
// and its successor's start, once per pair (metrics). Call before Run.
func (m *Manager) SetGapObserver(f func(time.Duration)) { m.onGap = f }

// gapKnown tells onGap of the gap before segment i, which just became
// known: its start or its predecessor's end was the other half.
func (m *Manager) gapKnown(c *Chain, i int) {
	if g, ok := c.Gap(i); ok && m.onGap != nil {
		m.onGap(g)
	}
}

// Running counts the chains that are running.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.pub {
		if c.State == StateRunning {
			n++
		}
	}
	return n
}

// Predictor is the wait predictor in use (the fallback until
// SetPredictor), so a replacement can fall back to it.
func (m *Manager) Predictor() WaitPredictor { return m.pred }

// Run ticks until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	tick.Loop{Every: m.cfg.Tick, Restore: m.restore, Tick: m.Tick, Log: m.log,
		RestoreFailed: "could not restore saved chains; running chains are not followed until their jobs are seen again",
		TickFailed:    "chain tick failed; the next one tries again"}.Run(ctx)
	m.wg.Wait()
}

// Wait waits for checkpoints in flight (tests).
func (m *Manager) Wait() { m.wg.Wait() }

// Segment implements the round loop's view of chains: whether job id is a
// chain segment, and whether it is a successor still waiting for its
// predecessor (the loop leaves those alone: their priority and type are
// the chain's).
func (m *Manager) Segment(id uint32) (pendingSuccessor, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.pubSeg[id]
	return r.waiting, ok
}

// Movable says whether the round loop may move segment id to another
// type (checkpoint it, requeue it there: the same job, a new run with its
// own limit): it runs, it is its chain's last segment (no successor
// submitted behind it yet) and its boundary has not begun (not asked to
// checkpoint). A segment on a slow type would otherwise run to its limit
// there with faster GPUs idle; the manager times the new run from its own
// start (observe).
func (m *Manager) Movable(id uint32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pubSeg[id].movable
}

// publish makes the chains' current state what readers see.
func (m *Manager) publish() {
	pub := make(map[uint32]*wire.ChainStatus, len(m.chains))
	seg := make(map[uint32]segRef, len(m.bySeg))
	for id, c := range m.chains {
		st := c.Status(m.cfg.Mode)
		pub[id] = &st
		for i, s := range c.Segments {
			seg[s.JobID] = segRef{chain: id, waiting: i > 0 && s.Started.IsZero() && !s.Ended,
				movable: c.State == StateRunning && i == len(c.Segments)-1 && s.State == "RUNNING" && !s.Ended && s.Signalled.IsZero()}
		}
	}
	m.mu.Lock()
	m.pub, m.pubSeg = pub, seg
	m.mu.Unlock()
}

// Wake has the next tick look at the queue, taking the read that began at
// readAt or a later one: the round loop calls it once a round has bound
// its jobs, which may include new chains.
func (m *Manager) Wake(readAt time.Time) { m.queue.Wake(readAt) }

// following says whether a tick has work whatever the round loop does:
// running chains, or jobs that may need one soon.
func (m *Manager) following() bool {
	if len(m.candidates) > 0 {
		return true
	}
	for _, c := range m.chains {
		if c.State == StateRunning {
			return true
		}
	}
	return false
}

// Tick looks at the queue once and acts.
func (m *Manager) Tick(ctx context.Context) error {
	if m.cfg.Off {
		return nil
	}
	now := m.now()
	defer m.queue.Ticked()
	jobs, read, err := m.queue.Read(ctx, m.sched, m.cfg.Tick, m.following())
	if err != nil {
		return fmt.Errorf("reading the queue: %w", err)
	}
	if !read {
		return nil // nothing followed, no round since the last look
	}
	byID := make(map[uint32]*slurm.Job, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	// A successor's wait is its dependency's, not the queue's.
	m.obs.Observe(jobs, func(id uint32) bool { cid, ok := m.bySeg[id]; return ok && cid != id })
	m.mu.Lock()
	done := m.ckptDone
	m.ckptDone = map[uint32]string{}
	m.mu.Unlock()
	var active []*Chain
	for _, c := range m.chains {
		for i := range c.Segments {
			if o, ok := done[c.Segments[i].JobID]; ok {
				c.Segments[i].Checkpoint = o
			}
		}
		if c.State == StateRunning {
			active = append(active, c)
		}
	}
	sort.Slice(active, func(a, b int) bool { return active[a].ID < active[b].ID })
	for _, c := range active {
		m.follow(ctx, c, byID, now)
	}
	clear(m.candidates)
	for i := range jobs {
		m.consider(ctx, &jobs[i], now)
	}
	m.forget(now, byID)
	m.publish()
	return m.save(ctx)
}

// consider makes a chain of a job that needs (or asked for) one.
func (m *Manager) consider(ctx context.Context, j *slurm.Job, now time.Time) {
	_, seg := m.bySeg[j.ID]
	m.mu.Lock()
	_, refused := m.refused[j.ID]
	m.mu.Unlock()
	if seg || refused || m.info == nil || (!j.Pending() && !j.Running()) {
		return
	}
	in, ok := m.info.ChainInfo(j.ID)
	if !ok || in.Decision == nil {
		return // not Rota's, or not bound yet
	}
	if in.Decision.Given.Kind == wire.KindServe {
		return // a service rolls over instead (controller/serve)
	}
	h := in.Decision.Asked.Hints
	if in.Decision.Given.Kind == wire.KindInteractive {
		// A person works in it: Rota never checkpoints or requeues it.
		m.refuse(j.ID, "no chain: an interactive job is never checkpointed or requeued by Rota", h.Chain == "on")
		return
	}
	if h.Chain == "off" {
		m.refuse(j.ID, "the job opted out of chains (--rota-chain=off)", false)
		return
	}
	if j.TimeLimitMin == 0 {
		if h.Chain == "on" {
			m.refuse(j.ID, "no chain: the job has no time limit to run past", true)
		}
		return
	}
	if h.Chain != "on" && in.LimitFollowed {
		// The round loop raises a limit Rota shortened as the job's
		// progress needs (rounds.FollowLimit), up to the user's own; a
		// chain is for work the user's own limit will not hold, judged
		// once that limit is back.
		return
	}
	remaining, known := estimate(in)
	ran := time.Duration(j.RunSeconds * float64(time.Second))
	segEnd := time.Duration(j.TimeLimitMin)*time.Minute - ran - m.cfg.CheckpointLead
	needs := known && remaining > segEnd
	if h.Chain != "on" && !(m.cfg.Auto && needs) {
		// May change as its rate is measured: asked again next tick
		// (next round for a job that could not checkpoint anyway).
		if m.cfg.Auto && h.CheckpointSignal != "" {
			m.candidates[j.ID] = true
		}
		return
	}
	if h.CheckpointSignal == "" {
		m.refuse(j.ID, "no chain: the job declares no checkpoint signal (--rota-checkpoint-signal), so a segment could not save its work before its time limit", true)
		return
	}
	c := &Chain{ID: j.ID, User: j.User, Name: j.Name, Hints: h, Features: in.Decision.Asked.Features, State: StateRunning,
		Created: now, Total: h.Steps,
		Segments: []Segment{{JobID: j.ID, N: 1, Partition: j.Partition, LimitMin: j.TimeLimitMin, State: j.State, Submitted: j.Submit}}}
	if known {
		c.Planned = PlannedSegments(remaining, j.TimeLimitMin, m.cfg.CheckpointLead, ran)
	}
	why := "asked with --rota-chain"
	if h.Chain != "on" {
		why = fmt.Sprintf("its remaining work (%s) exceeds its time limit (%d min)", remaining.Round(time.Second), j.TimeLimitMin)
	}
	c.Why = why
	m.chains[c.ID] = c
	m.bySeg[j.ID] = c.ID
	m.mu.Lock()
	m.stats.Chains++
	m.mu.Unlock()
	m.log.Info().Uint32("chain", c.ID).Int("planned_segments", c.Planned).Str("why", why).Msg("running the job as a chain of segments")
	if b, err := m.sched.BatchScript(ctx, j.ID); err == nil {
		c.script = b
	} else {
		m.log.Info().Err(err).Uint32("chain", c.ID).Msg("cannot read the batch script yet; retried before the next segment is submitted")
	}
}

func (m *Manager) refuse(id uint32, why string, warn bool) {
	m.mu.Lock()
	m.refused[id] = refusal{why: why, seen: m.now()}
	m.mu.Unlock()
	if warn {
		m.log.Warn().Uint32("job", id).Msg(why)
	}
}

// estimate is the job's remaining run time on its type.
func estimate(in Info) (time.Duration, bool) {
	if in.StepsLeft <= 0 || in.Rate <= 0 {
		return 0, false
	}
	return secs(in.StepsLeft / in.Rate), true
}

// follow updates one chain from the queue and acts on it.
func (m *Manager) follow(ctx context.Context, c *Chain, byID map[uint32]*slurm.Job, now time.Time) {
	for i := range c.Segments {
		s := &c.Segments[i]
		if s.Ended {
			continue
		}
		if j, ok := byID[s.JobID]; ok && j.State != "COMPLETING" {
			m.observe(c, i, j, now)
			continue
		}
		if m.info != nil && m.info.Moving(s.JobID) {
			continue // the round moves it: requeued, not ended
		}
		if !m.ended(ctx, c, i, now) {
			continue
		}
		if c.State != StateRunning {
			return
		}
	}
	if c.State != StateRunning {
		return
	}
	k := c.alive()
	if k < 0 {
		// Every segment ended and none is left to run: the last one
		// ended by the chain's rules (NoMore) or the work is done.
		m.finish(ctx, c, StateDone, "the last segment ended")
		return
	}
	cur := &c.Segments[k]
	j := byID[cur.JobID]
	if j == nil || !j.Running() {
		return // the first segment or a successor still waiting
	}
	in, _ := m.info.ChainInfo(cur.JobID)
	remaining, known := c.remaining(&in)
	wait, wknown := m.pred.PredictWait(WaitRequest{Partition: cur.Partition, GPUType: cur.Type, TimeLimitMin: cur.LimitMin})
	t := m.cfg.SegmentTimes(cur.Started, cur.LimitMin, wait, wknown)
	needs := NeedsSuccessor(now, t.CheckpointAt, remaining, known) && !c.NoMore
	if in.Total > 0 && in.Step >= in.Total {
		needs = false // finishing: it exits on its own
	}
	hasNext := k < len(c.Segments)-1
	if needs && !hasNext && len(c.Segments) >= m.cfg.MaxSegments {
		c.NoMore = true
		c.Why = fmt.Sprintf("reached chain_max_segments (%d): the last segment runs to its limit", m.cfg.MaxSegments)
		m.log.Warn().Uint32("chain", c.ID).Msg(c.Why)
		needs = false
	}
	if needs && !hasNext && m.cfg.Mode == ModeAhead && !now.Before(t.SubmitAt) {
		if m.submit(ctx, c, k, cur.JobID, in, remaining, known, wait) {
			hasNext = true
		}
	}
	if (needs || hasNext) && cur.Signalled.IsZero() && !now.Before(t.CheckpointAt) {
		var succ uint32
		if hasNext {
			if n := c.Segments[k+1]; !n.Ended && n.Started.IsZero() {
				succ = n.JobID
			}
		}
		m.checkpoint(ctx, c, cur, j.Nodes, succ)
	}
}

// observe records what the queue says of a live segment.
func (m *Manager) observe(c *Chain, i int, j *slurm.Job, now time.Time) {
	s := &c.Segments[i]
	s.State = j.State
	if j.Running() && !s.Started.IsZero() && !j.Start.IsZero() && j.Start.After(s.Started) {
		// Requeued and started again (the round moved it, or its node
		// failed): a new run, with its own limit and boundary.
		m.log.Info().Uint32("chain", c.ID).Int("segment", s.N).Uint32("job", s.JobID).
			Time("started", j.Start).Msg("chain segment started again (requeued): its boundary is timed from this run")
		s.Started, s.Signalled, s.Checkpoint = j.Start, time.Time{}, ""
	}
	if j.Running() && s.Started.IsZero() {
		s.Started = j.Start
		if s.Started.IsZero() {
			s.Started = now
		}
		if i > 0 {
			if g, ok := c.Gap(i); ok {
				m.log.Info().Uint32("chain", c.ID).Int("segment", s.N).Uint32("job", s.JobID).Dur("gap", g).Msg("next segment started")
			}
			m.gapKnown(c, i)
		}
	}
	if s.LimitMin == 0 || j.TimeLimitMin != s.LimitMin {
		s.LimitMin = j.TimeLimitMin
	}
	in, ok := m.info.ChainInfo(j.ID)
	if !ok {
		return
	}
	if in.Type != "" && j.Running() {
		s.Type = in.Type
	}
	if in.Step > 0 && j.Running() {
		if s.FirstStep == 0 {
			s.FirstStep = in.Step
			if i > 0 && !Resumed(c.Segments[i-1].LastStep, in.Step) && !c.NoMore {
				c.NoMore = true
				c.Why = fmt.Sprintf("segment %d started at step %d although segment %d reached step %d: the job does not resume from its checkpoint (key it by $ROTA_CHAIN_ID); no further segments",
					s.N, in.Step, s.N-1, c.Segments[i-1].LastStep)
				m.log.Warn().Uint32("chain", c.ID).Msg(c.Why)
			}
		}
		s.LastStep = max(s.LastStep, in.Step)
		c.Step = in.Step
	}
	if in.Total > 0 {
		c.Total = in.Total
	}
	if in.Rate > 0 && j.Running() {
		c.Rate = in.Rate
	}
}

// ended handles a segment that left the queue; false when Slurm could not
// be asked (tried again next tick).
func (m *Manager) ended(ctx context.Context, c *Chain, i int, now time.Time) bool {
	s := &c.Segments[i]
	spec, known, err := m.sched.ShowJob(ctx, s.JobID)
	if err != nil {
		m.log.Info().Err(err).Uint32("job", s.JobID).Msg("cannot read how a chain segment ended; tried again next tick")
		return false
	}
	if known && !spec.Ended() {
		return false // COMPLETING, or between squeue and scontrol
	}
	s.Ended, s.EndedAt = true, now
	if known {
		s.State, s.ExitCode = spec.State, spec.ExitCode
		if !spec.End.IsZero() {
			s.EndedAt = spec.End
		}
	} else {
		s.State = "GONE"
	}
	if i+1 < len(c.Segments) && !c.Segments[i+1].Started.IsZero() {
		m.gapKnown(c, i+1) // its successor was seen starting first
	}
	if s.CancelledByRota {
		return true
	}
	if s.Started.IsZero() && i > 0 {
		// A successor that never ran: its user cancelled it, or Slurm
		// dropped it.
		s.Why = "ended before it started (" + s.State + ")"
		m.finish(ctx, c, StateCancelled, fmt.Sprintf("segment %d (job %d) was %s before it started; the chain stops", s.N, s.JobID, strings.ToLower(s.State)))
		return true
	}
	f := EndFacts{Known: known, State: spec.State, ExitCode: spec.ExitCode, Signalled: !s.Signalled.IsZero(),
		StepsDone: c.Total > 0 && s.LastStep >= c.Total}
	out, why := Judge(f)
	s.Why = why
	m.log.Info().Uint32("chain", c.ID).Int("segment", s.N).Uint32("job", s.JobID).Str("state", s.State).Str("outcome", out.String()).Str("why", why).Msg("chain segment ended")
	switch out {
	case Done:
		m.finish(ctx, c, StateDone, why)
	case Cancelled:
		m.finish(ctx, c, StateCancelled, why)
	case Failed:
		m.finish(ctx, c, StateFailed, why)
	case Continue, Rescue:
		if i+1 < len(c.Segments) {
			next := &c.Segments[i+1]
			if !next.Ended && next.Started.IsZero() {
				if out == Rescue {
					if err := m.sched.ClearDependency(ctx, next.JobID); err != nil {
						m.log.Warn().Err(err).Uint32("job", next.JobID).Msg("cannot release the chain's next segment from its dependency; it may never start")
					}
				}
				m.nudge(ctx, next.JobID)
			}
			return true
		}
		if c.NoMore {
			m.finish(ctx, c, StateDone, c.Why)
			return true
		}
		in, _ := m.info.ChainInfo(s.JobID)
		remaining, known := c.remaining(&in)
		m.submit(ctx, c, i, 0, in, remaining, known, 0)
	}
	return true
}

// submit submits the segment after c.Segments[k], depending on after (0:
// none). It reports whether one was submitted.
func (m *Manager) submit(ctx context.Context, c *Chain, k int, after uint32, in Info, remaining time.Duration, known bool, wait time.Duration) bool {
	prev := c.Segments[k]
	spec, ok, err := m.sched.ShowJob(ctx, prev.JobID)
	if err != nil || !ok {
		m.errorf(c, err, "cannot read segment %d (job %d) to copy it", prev.N, prev.JobID)
		return false
	}
	if c.script == nil {
		for _, s := range c.Segments {
			if b, err := m.sched.BatchScript(ctx, s.JobID); err == nil {
				c.script = b
				break
			}
		}
		if c.script == nil {
			m.errorf(c, nil, "cannot read the batch script of any segment")
			return false
		}
	}
	succ := Successor{Chain: c.ID, N: prev.N + 1, Name: c.Name, Partition: prev.Partition, LimitMin: prev.LimitMin,
		After: after, Features: c.Features, Hints: c.Hints}
	pin := prev.Type
	if in.Wants != "" { // "" where the job has no one type (ChainInfo)
		pin = in.Wants
	}
	if pin != "" {
		if f, ok := gpureq.WithTypeFeature(c.Features, pin); ok {
			succ.Features = f
		}
	}
	// The last segment may go to an idle development partition when that
	// finishes the work sooner.
	if known && len(m.cfg.DevPartitions) > 0 && in.StepsLeft > 0 {
		if p, why := m.chooseDev(ctx, c, prev, in, remaining, wait); p != "" {
			succ.Partition, succ.Features = p, c.Features
			m.log.Info().Uint32("chain", c.ID).Str("partition", p).Str("why", why).Msg("the chain's last segment goes to a development partition")
		}
	}
	args, env := SuccessorArgs(&spec, succ, m.spank)
	id, err := m.sched.Submit(ctx, slurm.Submission{User: spec.User, Script: c.script, Args: args, Env: env})
	if err != nil && m.spank && strings.Contains(err.Error(), "--rota") {
		// sbatch on this host has no spank_rota.so: submit without Rota's
		// options (the chain keeps its hints itself).
		m.spank = false
		m.log.Warn().Err(err).Msg("sbatch here does not know Rota's options (spank_rota.so not in plugstack.conf on the controller host); chain segments are submitted without them")
		args, env = SuccessorArgs(&spec, succ, false)
		id, err = m.sched.Submit(ctx, slurm.Submission{User: spec.User, Script: c.script, Args: args, Env: env})
	}
	if err != nil {
		m.errorf(c, err, "cannot submit %s", succ.describe())
		return false
	}
	now := m.now()
	c.Segments = append(c.Segments, Segment{JobID: id, N: succ.N, Partition: succ.Partition, LimitMin: succ.LimitMin, State: "PENDING", Submitted: now})
	m.bySeg[id] = c.ID
	m.mu.Lock()
	m.stats.Submitted++
	m.mu.Unlock()
	// Published at once: the round loop must leave the successor's
	// priority alone from its next round on.
	m.publish()
	p := m.cfg.Priority
	if err := m.sched.Update(ctx, id, slurm.JobUpdate{Priority: &p}); err != nil {
		m.log.Info().Err(err).Uint32("job", id).Msg("cannot raise the chain segment's priority; it queues as a new job")
	}
	m.log.Info().Uint32("chain", c.ID).Uint32("job", id).Str("segment", succ.describe()).Dur("predicted_wait", wait).Msg("submitted the chain's next segment")
	return true
}

func (m *Manager) chooseDev(ctx context.Context, c *Chain, prev Segment, in Info, remaining time.Duration, wait time.Duration) (string, string) {
	parts, err := m.sched.Partitions(ctx)
	if err != nil {
		return "", ""
	}
	nodes, err := m.sched.Nodes(ctx)
	if err != nil {
		return "", ""
	}
	jobs, err := m.sched.Jobs(ctx)
	if err != nil {
		return "", ""
	}
	// Work left after this segment, at its rate.
	steps := in.StepsLeft
	if in.Rate > 0 && !prev.Started.IsZero() {
		t := m.cfg.SegmentTimes(prev.Started, prev.LimitMin, 0, false)
		steps -= in.Rate * t.CheckpointAt.Sub(m.now()).Seconds()
	}
	if steps <= 0 {
		return "", ""
	}
	var devs []DevQueue
	for _, p := range parts {
		if !slices.Contains(m.cfg.DevPartitions, p.Name) {
			continue
		}
		d := DevQueue{Partition: p.Name, MaxTimeMin: p.MaxTimeMin, Idle: true}
		for i := range jobs {
			if jobs[i].Partition == p.Name && jobs[i].Pending() {
				d.Idle = false
			}
		}
		free := 0
		for _, n := range nodes {
			if !slices.Contains(n.Partitions, p.Name) {
				continue
			}
			for t, g := range n.GPUs {
				if f := g - n.GPUsUsed[t]; f > 0 {
					free += f
					if r := in.Rates[t]; r > 0 && (d.Rate == 0 || r < d.Rate) {
						d.Rate = r // the slowest type it may land on
					}
				}
			}
		}
		if free == 0 {
			d.Idle = false
		}
		devs = append(devs, d)
	}
	mainWait := wait
	if m.cfg.Mode == ModeAhead {
		mainWait = 0 // the successor takes over its predecessor's GPUs
	}
	return ChooseDev(steps, in.Rate, mainWait, 1.2, devs)
}

// checkpoint asks the segment to save before its limit: through its node
// agents (which confirm the checkpoint), else by scancel --signal.
// A waiting successor (succ, 0 none) is nudged as soon as its predecessor
// has ended (see nudge).
func (m *Manager) checkpoint(ctx context.Context, c *Chain, s *Segment, nodes []string, succ uint32) {
	m.mu.Lock()
	if m.busy[s.JobID] {
		m.mu.Unlock()
		return
	}
	m.busy[s.JobID] = true
	m.stats.Checkpoints++
	m.mu.Unlock()
	s.Signalled = m.now()
	id, sig := s.JobID, c.Hints.CheckpointSignal
	m.log.Info().Uint32("chain", c.ID).Uint32("job", id).Int("segment", s.N).Msg("asking the chain segment to checkpoint before its limit")
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		outcome := ""
		if m.ckpt != nil && len(nodes) > 0 {
			o, err := m.ckpt.Checkpoint(ctx, nodes, id, m.cfg.Grace)
			if err != nil {
				m.log.Info().Err(err).Uint32("job", id).Msg("the node agents could not checkpoint the segment; signalling it through Slurm")
			} else if o != wire.CheckpointNoProcesses {
				outcome = o
			}
		}
		if outcome == "" {
			if err := m.sched.Signal(ctx, id, sig); err != nil {
				m.log.Warn().Err(err).Uint32("job", id).Msg("cannot signal the chain segment to checkpoint; it runs to its limit and the next segment resumes from its last checkpoint")
			}
			outcome = "signal"
		}
		m.mu.Lock()
		delete(m.busy, id)
		m.ckptDone[id] = outcome
		m.mu.Unlock()
		if succ != 0 {
			m.nudgeWhenEnded(ctx, id, succ)
		}
	}()
}

// nudge makes slurmctld look at the queue now. On the dev cluster under
// load (Slurm 22.05.8) a successor whose afterok dependency had just been
// satisfied did not start when its predecessor ended but at the next
// event that ran the scheduler (its gaps were whole multiples of the round
// loop's 3 s, whose scontrol updates are such events); an update of the
// successor itself is one, and re-setting its priority changes nothing.
func (m *Manager) nudge(ctx context.Context, succ uint32) {
	p := m.cfg.Priority
	if err := m.sched.Update(ctx, succ, slurm.JobUpdate{Priority: &p}); err != nil {
		m.log.Debug().Err(err).Uint32("job", succ).Msg("nudging the chain's next segment failed (it may have started)")
	}
}

// nudgeWhenEnded waits (briefly) for a checkpointed segment to end, then
// nudges its successor, so the gap does not wait for the next tick.
func (m *Manager) nudgeWhenEnded(ctx context.Context, pred, succ uint32) {
	deadline := time.Now().Add(m.nudgeFor)
	for ctx.Err() == nil {
		if spec, ok, err := m.sched.ShowJob(ctx, pred); err == nil && (!ok || spec.Ended()) {
			m.nudge(ctx, succ)
			return
		}
		if !time.Now().Before(deadline) {
			return // the tick that sees it end nudges it
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// finish ends a chain, cancelling segments that have not run.
func (m *Manager) finish(ctx context.Context, c *Chain, state, why string) {
	for i := range c.Segments {
		s := &c.Segments[i]
		if s.Ended || !s.Started.IsZero() || i == 0 {
			continue
		}
		if err := m.sched.Cancel(ctx, s.JobID); err != nil {
			m.log.Warn().Err(err).Uint32("job", s.JobID).Msg("cannot cancel the chain's pending segment; cancel it by hand (scancel)")
			continue
		}
		s.CancelledByRota, s.Ended, s.EndedAt, s.State, s.Why = true, true, m.now(), "CANCELLED", "not needed: "+state
	}
	c.State, c.Why, c.Ended = state, why, m.now()
	m.mu.Lock()
	switch state {
	case StateDone:
		m.stats.Done++
	case StateCancelled:
		m.stats.Cancelled++
	case StateFailed:
		m.stats.Failed++
	}
	m.mu.Unlock()
	m.log.Info().Uint32("chain", c.ID).Str("state", state).Str("why", why).Int("segments", len(c.Segments)).Msg("chain ended")
}

func (m *Manager) errorf(c *Chain, err error, format string, a ...any) {
	m.mu.Lock()
	m.stats.Errors++
	m.mu.Unlock()
	m.log.Warn().Err(err).Uint32("chain", c.ID).Msg(fmt.Sprintf(format, a...) + "; tried again next tick")
}

// forget drops chains ended long ago, and refusals of jobs gone.
func (m *Manager) forget(now time.Time, byID map[uint32]*slurm.Job) {
	for id, c := range m.chains {
		if c.State != StateRunning && now.Sub(c.Ended) > keepEnded {
			for _, s := range c.Segments {
				delete(m.bySeg, s.JobID)
			}
			delete(m.chains, id)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Refusals are kept a while after the job left, for explain.
	for id, r := range m.refused {
		if byID[id] != nil {
			r.seen = now
			m.refused[id] = r
		} else if now.Sub(r.seen) > keepEnded || len(m.refused) > maxRefused {
			delete(m.refused, id)
		}
	}
}

// Stats returns the counters.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Status lists the chains, running ones first, newest first.
func (m *Manager) Status() []wire.ChainStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]wire.ChainStatus, 0, len(m.pub))
	for _, c := range m.pub {
		out = append(out, *c)
	}
	sort.Slice(out, func(a, b int) bool {
		ra, rb := out[a].State == StateRunning, out[b].State == StateRunning
		if ra != rb {
			return ra
		}
		return out[a].ID > out[b].ID
	})
	if len(out) > wire.MaxStatusJobs {
		out = out[:wire.MaxStatusJobs]
	}
	return out
}

// Explain is the chain a job (any of its segments) belongs to, or why the
// job runs without one.
func (m *Manager) Explain(id uint32) (*wire.ChainStatus, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.pubSeg[id]; ok {
		st := *m.pub[r.chain]
		return &st, ""
	}
	return nil, m.refused[id].why
}

type saved struct {
	V      int      `json:"v"`
	Chains []*Chain `json:"chains"`
	Stats  Stats    `json:"stats"`
}

func (m *Manager) save(ctx context.Context) error {
	if m.store == nil {
		return nil
	}
	m.mu.Lock()
	st := saved{V: stateVersion, Stats: m.stats}
	m.mu.Unlock()
	for _, c := range m.chains {
		st.Chains = append(st.Chains, c)
	}
	sort.Slice(st.Chains, func(a, b int) bool { return st.Chains[a].ID < st.Chains[b].ID })
	if err := state.PutJSON(ctx, m.store, stateKey, st); err != nil {
		return fmt.Errorf("saving chains: %w", err)
	}
	return nil
}

func (m *Manager) restore(ctx context.Context) error {
	if m.store == nil {
		return nil
	}
	var st saved
	if found, err := state.GetJSON(ctx, m.store, stateKey, &st); err != nil || !found {
		return err
	}
	if st.V != stateVersion {
		return fmt.Errorf("saved chains have version %d; this controller reads %d", st.V, stateVersion)
	}
	for _, c := range st.Chains {
		m.chains[c.ID] = c
		for _, s := range c.Segments {
			m.bySeg[s.JobID] = c.ID
		}
	}
	m.mu.Lock()
	m.stats = st.Stats
	m.mu.Unlock()
	m.publish()
	return nil
}
