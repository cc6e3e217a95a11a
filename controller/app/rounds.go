package app

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/checkpoint"
	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/decisions"
	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/controller/faulttol"
	"github.com/rota-hpc/rota/controller/multicluster"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/controller/rounds"
	"github.com/rota-hpc/rota/controller/serve"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gputype"
)

// The decision store keeps the limit changes the round loop makes, for
// explain.
var _ rounds.LimitRecorder = (*decisions.Store)(nil)

// Each part takes the Slurm it needs as an interface of its own; the
// backend is all of them, checked here when app compiles, so no part is
// turned off at run time for want of a method.
var (
	_ rounds.LimitReader = slurm.Backend(nil)
	_ chains.Slurm       = slurm.Backend(nil)
	_ serve.Slurm        = slurm.Backend(nil)
	_ multicluster.Slurm = slurm.Backend(nil)
	_ faulttol.Slurm     = slurm.Backend(nil)
)

// startRounds runs the round loop while this controller leads: the
// policy then drives Slurm (retyping and ordering pending jobs, migrating
// running ones) with what the agents measure, and the submit path answers
// from the view each round leaves behind. Returns nil when rounds are off.
func (c *Controller) startRounds(ctx context.Context) *rounds.Loop {
	if c.cfg.RoundsOff {
		return nil
	}
	sched := c.slurm
	deps := rounds.Deps{Sched: sched, Shares: sched, Decisions: c.store, Measurements: c.obs, Estimator: c.estimator,
		Checkpoint: &checkpoint.NATS{NC: c.nc}, Hold: c.stateSaveHold(ctx)}
	var st *state.KV
	if js, err := jetstream.New(c.nc); err != nil {
		c.log.Warn().Err(err).Msg("no JetStream: the round loop's state is not saved")
	} else if st, err = state.Open(ctx, js, c.cfg.Replicas); err != nil {
		c.log.Warn().Err(err).Msg("the round loop's state is not saved")
	} else {
		deps.Store = st
	}
	if c.inst != nil {
		deps.Timings = c.inst
	}
	// Typed GPU limits (docs/rounds.md): read from accounting every
	// round; Slurm 24.11 and later retype a pending GPU request.
	major, minor, err := sched.Release(ctx)
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot tell the Slurm release; retyping by node constraint only")
	}
	deps.Limits, deps.RetypeGres, deps.GPUs = sched, major > 24 || (major == 24 && minor >= 11), sched
	if c.table != nil {
		deps.Pairs = c.table
	}
	if nodes, err := sched.Nodes(ctx); err == nil {
		if mig, shards := migAndShards(nodes); major == 22 && mig != "" && shards != "" {
			c.log.Warn().Str("mig_slice_nodes", mig).Str("shard_nodes", shards).
				Msg("Slurm 22.05 gives a job on a MIG slice no GPU at all while the cluster also offers gres/shard (its GRES shows gpu:<slice>:0; seen on 22.05.8, docs/fractions.md): offer shards or MIG slices, not both, until Slurm is upgraded")
		}
		if parts, err := sched.Partitions(ctx); err == nil {
			for _, why := range slurm.ShardBilling(parts, nodes) {
				c.log.Warn().Msg(why + " (fair share of shards: docs/fractions.md)")
			}
		}
	}
	if c.cfg.Rounds.SpaceSharing && !deps.RetypeGres {
		c.log.Warn().Int("slurm_major", major).Int("slurm_minor", minor).
			Msg("space_sharing is on but this Slurm keeps a pending job's whole GPU when asked to make it shards (22.05); no job is paired on a GPU")
	}
	loop, err := rounds.New(c.cfg.Rounds, c.log.With().Str("component", "rounds").Logger(), deps)
	if err != nil {
		c.log.Error().Err(err).Msg("cannot start the round loop; placement happens at submission only")
		return nil
	}
	c.startChains(ctx, sched, loop, st)
	c.startFaultTol(ctx, sched, loop, st)
	c.startServe(ctx, sched, loop, st)
	c.startMC(ctx, sched, loop, st)
	loop.OnSnapshot = func(s *cluster.Snapshot, p *rounds.Plan) {
		if p != nil {
			c.placer.SetBusy(p.Busy())
			c.placer.SetInteractiveHeld(p.InteractiveHeld())
			c.placer.SetHeadroom(loop.Headroom())
			c.placer.Learn(p.Learned(), time.Now())
		}
		c.snap.Store(s)
		c.placer.Update(s)
		c.states.Soon()
	}
	c.rounds.Store(loop)
	c.placer.SetName(loop.Policy())
	c.states.Soon()
	go loop.Run(ctx)
	c.log.Info().Str("policy", c.cfg.Rounds.Policy).Str("round", c.cfg.Rounds.Round.String()).
		Str("min_lease", c.cfg.Rounds.MinLease.String()).Msg("round loop started: the policy drives Slurm's GPU jobs")
	return loop
}

// stateSaveHold has the round's apply leave slurmctld's job state
// saves alone (slurm.StateSaves; docs/rounds.md, "Slurm's state saves"),
// where this controller can read the file slurmctld saves them to: on
// slurmctld's host, as root or SlurmUser. nil: it cannot, or may not.
func (c *Controller) stateSaveHold(ctx context.Context) rounds.Hold {
	if !c.cfg.ApplyAroundSaves {
		return nil
	}
	dir, err := c.slurm.StateSaveDir(ctx)
	if err == nil {
		s := slurm.NewStateSaves(dir)
		if err = s.Check(); err == nil {
			c.log.Info().Str("state_save_location", dir).Msg("a round's updates wait while slurmctld's job state save is due")
			return s.Hold
		}
	}
	c.log.Info().Err(err).Msg("cannot read slurmctld's job state file here; a round's updates do not wait for its state saves (round_apply_around_saves)")
	return nil
}

// startChains runs the chain manager beside the round loop
// (docs/chains.md), when Slurm can take submissions.
func (c *Controller) startChains(ctx context.Context, cs chains.Slurm, loop *rounds.Loop, st *state.KV) {
	if c.cfg.Chains.Off {
		return
	}
	var store state.Store
	if st != nil {
		store = st
	}
	m, err := chains.New(c.cfg.Chains, c.log.With().Str("component", "chains").Logger(), cs, loop,
		&checkpoint.NATS{NC: c.nc}, store)
	if err != nil {
		c.log.Error().Err(err).Msg("cannot start the chain manager; jobs past MaxTime are killed at their limit")
		return
	}
	// The queue-wait model (or estimator_queuewait) times successors when
	// one is configured; the waits the manager sees answer otherwise.
	m.SetPredictor(chainWaits{site: &live.SiteWaits{Waits: c.waits, Site: c.siteKB}, fallback: m.Predictor()})
	if c.inst != nil {
		m.SetGapObserver(c.inst.ChainGap)
	}
	loop.AfterBind(m.Wake)
	loop.SetChains(m)
	c.chains.Store(m)
	go m.Run(ctx)
}

// startFaultTol runs the fault tolerance manager beside the round loop
// (docs/faulttolerance.md): periodic checkpoints, node failures.
func (c *Controller) startFaultTol(ctx context.Context, sched slurm.Scheduler, loop *rounds.Loop, st *state.KV) {
	var store state.Store
	if st != nil {
		store = st
	}
	m, err := faulttol.New(c.cfg.FaultTol, c.log.With().Str("component", "faulttol").Logger(), sched, faultInfo{loop},
		&checkpoint.NATS{NC: c.nc}, store)
	if err != nil {
		c.log.Error().Err(err).Msg("cannot start the fault tolerance manager; no periodic checkpoints")
		return
	}
	loop.AfterBind(m.Wake)
	c.faulttol.Store(m)
	go m.Run(ctx)
}

// faultInfo is the round loop as the fault tolerance manager reads it.
type faultInfo struct{ l *rounds.Loop }

func (f faultInfo) FaultInfo(id uint32) (faulttol.Info, bool) {
	in, ok := f.l.ChainInfo(id)
	if !ok || in.Decision == nil {
		return faulttol.Info{}, false
	}
	// Only batch jobs: a session is never checkpointed (a person works in
	// it), and a service rolls over instead (docs/kinds.md).
	batch := in.Decision.Given.Kind == "" || in.Decision.Given.Kind == wire.KindBatch
	return faulttol.Info{Checkpointable: batch && in.Decision.Asked.Hints.CheckpointSignal != "", Step: in.Step}, true
}

// startServe runs the service manager beside the round loop
// (docs/serve.md), when Slurm can take submissions.
func (c *Controller) startServe(ctx context.Context, ss serve.Slurm, loop *rounds.Loop, st *state.KV) {
	if c.cfg.Serve.Off {
		return
	}
	var store state.Store
	if st != nil {
		store = st
	}
	m, err := serve.New(c.cfg.Serve, c.log.With().Str("component", "serve").Logger(), ss, serveJobs{loop: loop, obs: c.obs}, store)
	if err != nil {
		c.log.Error().Err(err).Msg("cannot start the service manager; service replicas are neither spread nor rolled over")
		return
	}
	loop.AfterBind(m.Wake)
	c.services.Store(m)
	go m.Run(ctx)
}

// serveJobs is what the service manager reads of a job: its decision
// from the round loop, its readiness from the agents' reports.
type serveJobs struct {
	loop *rounds.Loop
	obs  *observe.Observer
}

func (s serveJobs) Decision(id uint32) *wire.Decision { return s.loop.Decision(id) }

func (s serveJobs) Ready(id uint32) bool {
	if s.obs == nil {
		return false
	}
	j, ok := s.obs.Job(id)
	return ok && j.Ready
}

// roundsStatus is the loop's counters and, with jobs, its last plan.
func roundsStatus(l *rounds.Loop, jobs bool) *wire.RoundsStatus {
	s := l.Stats()
	st := &wire.RoundsStatus{Policy: l.Policy(), Rounds: s.Rounds, RoundErrors: s.RoundErrors, SlurmErrors: s.SlurmErrors,
		Retyped: s.Retyped, Migrations: s.Migrations, MigrationFailures: s.MigrationFailures, LimitsRaised: s.LimitsRaised,
		LastRoundSeconds: s.LastRound.Seconds(), SolveSeconds: s.LastSolve.Seconds()}
	p := l.Last()
	if p == nil {
		return st
	}
	st.Objective = p.Objective
	if !jobs {
		return st
	}
	for i, a := range p.Actions {
		if i >= wire.MaxStatusJobs {
			break
		}
		st.Jobs = append(st.Jobs, roundJob(a, p.Types))
	}
	return st
}

// roundJob is one plan action as the CLI shows it.
func roundJob(a rounds.Action, types []string) wire.RoundJob {
	rj := wire.RoundJob{JobID: a.JobID, Type: a.Type, Placed: a.Placed, Why: a.Why, StepsLeft: a.StepsLeft,
		WalltimeMin: a.WalltimeMin, WalltimeBasis: a.WalltimeBasis, Moves: a.Moves,
		Share: map[string]float64{}, Rates: map[string]float64{}, RateSource: map[string]string{}}
	for k, t := range types {
		if k < len(a.Share) && a.Share[k] > 1e-9 {
			rj.Share[t] = a.Share[k]
		}
		if k < len(a.Rates) {
			rj.Rates[t] = a.Rates[k]
		}
		if k < len(a.RateSource) {
			rj.RateSource[t] = a.RateSource[k]
		}
	}
	return rj
}

// The running controller's estimator is the round loop's, state and all.
var (
	_ rounds.Estimator = (*live.Estimator)(nil)
	_ rounds.Exporter  = (*live.Estimator)(nil)
)

// chainWaits times a chain successor by the site's queue-wait predictor
// when it answers, else by the chain manager's observed waits.
type chainWaits struct {
	site     *live.SiteWaits
	fallback chains.WaitPredictor
}

func (w chainWaits) PredictWait(r chains.WaitRequest) (time.Duration, bool) {
	q := forecast.WaitQuery{Partition: r.Partition, GPUType: r.GPUType, Nodes: 1, GPUs: max(r.GPUs, 1), LimitMin: r.TimeLimitMin}
	if d, ok := w.site.Wait(q); ok {
		return d, true
	}
	return w.fallback.PredictWait(r)
}

// migAndShards lists the nodes with MIG slice types and the nodes that
// offer shards (comma-separated; "" none).
func migAndShards(nodes []slurm.Node) (mig, shards string) {
	var ms, sh []string
	for _, n := range nodes {
		for t, c := range n.GPUs {
			if _, ok := gputype.ParseSlice(t); ok && c > 0 {
				ms = append(ms, n.Name)
				break
			}
		}
		if n.Shards > 0 {
			sh = append(sh, n.Name)
		}
	}
	return strings.Join(ms, ","), strings.Join(sh, ",")
}
