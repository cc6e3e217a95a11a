package app

import (
	"context"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/placement"
	"github.com/rota-hpc/rota/controller/rounds"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// startRounds runs the round loop while this controller leads: the
// policy then drives Slurm (retyping and ordering pending jobs, migrating
// running ones) with what the agents measure, and the submit path answers
// from the view each round leaves behind. Returns nil when rounds are off
// or Slurm cannot be driven (a read-only Client in tests).
func (c *Controller) startRounds(ctx context.Context) *rounds.Loop {
	if c.cfg.RoundsOff {
		return nil
	}
	sched, ok := c.slurm.(slurm.Scheduler)
	if !ok {
		c.log.Info().Msg("the Slurm client cannot change jobs; rounds are off, placement happens at submission only")
		return nil
	}
	loop, err := rounds.New(c.cfg.Rounds, c.log.With().Str("component", "rounds").Logger(), sched, c.store, c.obs,
		c.estimator, &rounds.NATSCheckpointer{NC: c.nc})
	if err != nil {
		c.log.Error().Err(err).Msg("cannot start the round loop; placement happens at submission only")
		return nil
	}
	loop.OnSnapshot = func(s *cluster.Snapshot, _ *rounds.Plan) {
		c.snap.Store(s)
		c.placer.Update(s)
	}
	c.rounds.Store(loop)
	if in, ok := c.placer.(*placement.Interim); ok {
		in.SetName(loop.Policy())
	}
	go loop.Run(ctx)
	c.log.Info().Str("policy", c.cfg.Rounds.Policy).Str("round", c.cfg.Rounds.Round.String()).
		Str("min_lease", c.cfg.Rounds.MinLease.String()).Msg("round loop started: the policy drives Slurm's GPU jobs")
	return loop
}

// roundsStatus is the loop's counters and, with jobs, its last plan.
func roundsStatus(l *rounds.Loop, jobs bool) *wire.RoundsStatus {
	s := l.Stats()
	st := &wire.RoundsStatus{Policy: l.Policy(), Rounds: s.Rounds, RoundErrors: s.RoundErrors, SlurmErrors: s.SlurmErrors,
		Retyped: s.Retyped, Migrations: s.Migrations, MigrationFailures: s.MigrationFailures,
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
		rj := wire.RoundJob{JobID: a.JobID, Type: a.Type, Placed: a.Placed, Why: a.Why, StepsLeft: a.StepsLeft,
			Share: map[string]float64{}, Rates: map[string]float64{}, RateSource: map[string]string{}}
		for k, t := range p.Types {
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
		st.Jobs = append(st.Jobs, rj)
	}
	return st
}
