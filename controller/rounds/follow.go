package rounds

import (
	"context"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

// LimitRecorder keeps every change of a job's limit with its decision
// (decisions.Store), so explain shows them after the job ended.
type LimitRecorder interface {
	AddLimit(ctx context.Context, id string, jobID uint32, c wire.LimitChange) (*wire.Decision, error)
}

// followLimits applies FollowLimit to the running jobs whose limit Rota
// set: one Slurm update for each job whose limit must change, none for
// the others.
func (l *Loop) followLimits(ctx context.Context, jobs []slurm.Job, snap *cluster.Snapshot, nodeType map[string]string, now time.Time) {
	for i := range jobs {
		j := &jobs[i]
		tr, in, ok := l.limitInput(j, snap, nodeType, now)
		limit := in.LimitMin
		if d := FollowLimit(in); ok && d.NewMin != 0 && l.changeLimit(ctx, j, tr, in, d, now) {
			limit = d.NewMin
		}
		l.mu.Lock()
		if t := l.known[j.ID]; t != nil {
			t.limitFollowed = ok && (in.CeilingMin == 0 || limit < in.CeilingMin)
		}
		l.mu.Unlock()
	}
}

// limitInput is what FollowLimit needs of a job; ok false for a job whose
// limit is not Rota's to follow: not running, not Rota's, moving, a chain
// segment (the chain manager times those), or a limit someone else set.
func (l *Loop) limitInput(j *slurm.Job, snap *cluster.Snapshot, nodeType map[string]string, now time.Time) (*tracked, LimitInput, bool) {
	if !j.Running() || j.TimeLimitMin == 0 || len(j.Nodes) == 0 {
		return nil, LimitInput{}, false
	}
	l.mu.Lock()
	tr, moving, chains := l.known[j.ID], l.moving[j.ID], l.chains
	var d *wire.Decision
	var ours bool
	if tr != nil && tr.decision != nil {
		d = tr.decision
		ours = j.TimeLimitMin == d.Given.TimeLimitMin || j.TimeLimitMin == tr.limitMin || j.TimeLimitMin == tr.followed ||
			(tr.sentLimit != 0 && j.TimeLimitMin == tr.sentLimit)
	}
	l.mu.Unlock()
	if !ours || moving {
		return nil, LimitInput{}, false
	}
	if chains != nil {
		if _, seg := chains.Segment(j.ID); seg {
			return nil, LimitInput{}, false
		}
	}
	in := LimitInput{Elapsed: time.Duration(j.RunSeconds * float64(time.Second)), LimitMin: j.TimeLimitMin,
		CeilingMin: d.Asked.TimeLimitMin, Total: d.Asked.Hints.Steps, Round: l.cfg.Round}
	if p, ok := snap.Partitions[j.Partition]; ok && p.MaxTimeMin > 0 && (in.CeilingMin == 0 || in.CeilingMin > p.MaxTimeMin) {
		in.CeilingMin, in.CeilingMaxTime = p.MaxTimeMin, true
	}
	if m, ok := l.meas.Job(j.ID); ok {
		in.Step = m.Step
		if m.Total > 0 {
			in.Total = m.Total
		}
		typ := j.GPUType(nodeType, nil)
		for _, r := range m.Rates {
			if r.GPUType == typ {
				in.Rate, in.Spread, in.Samples, in.RateAge = r.StepsPerSec, r.Spread(), r.Samples, now.Sub(r.Updated)
			}
		}
	}
	return tr, in, true
}

// changeLimit sets the job's new limit, keeps the change with its
// decision and logs it; false when Slurm refused it.
func (l *Loop) changeLimit(ctx context.Context, j *slurm.Job, tr *tracked, in LimitInput, d LimitDecision, now time.Time) bool {
	to := d.NewMin
	log := l.log.With().Uint32("job", j.ID).Str("from", slurmtime.Format(j.TimeLimitMin)).Str("to", slurmtime.Format(to)).
		Dur("ran", in.Elapsed.Round(time.Second)).Logger()
	if err := l.sched.Update(ctx, j.ID, slurm.JobUpdate{TimeLimitMin: &to}); err != nil {
		l.mu.Lock()
		l.stats.SlurmErrors++
		l.mu.Unlock()
		log.Info().Err(err).Msg("could not raise the time limit Rota had shortened (the job may have ended meanwhile); the next round tries again")
		return false
	}
	l.mu.Lock()
	tr.followed = to // tr.limitMin stays Rota's estimate: its error feeds the walltime estimator
	l.stats.LimitsRaised++
	id := tr.decision.ID
	hint := tr.decision.Asked.Hints.Throughput
	l.mu.Unlock()
	ev := log.Info().Str("why", d.Why)
	switch {
	case d.Short:
		ev.Dur("finish", d.Finish.Round(time.Second)).Msg("raised the time limit Rota had shortened up to the job's own ceiling, which its measured progress says is too short: it will likely be killed there, as without Rota (the user's --time, or the partition's MaxTime, is the limit to look at)")
	case d.Measured:
		ev.Dur("finish", d.Finish.Round(time.Second)).Float64("steps_per_s", in.Rate).Interface("hint_steps_per_s", hint).Msg("raised the time limit Rota had shortened: the job runs slower than its --rota-throughput hint said, and its measured progress needs longer")
	default:
		ev.Msg("gave the job back its own time limit: nothing measured of its progress shows that the shorter one Rota gave it holds (a progress file with step and total, ROTA_PROGRESS_FILE, lets Rota judge)")
	}
	rec, ok := l.dec.(LimitRecorder)
	if !ok {
		return true
	}
	c := wire.LimitChange{At: now.UTC(), FromMin: j.TimeLimitMin, ToMin: to, RanSeconds: j.RunSeconds, Measured: d.Measured, Why: d.Why}
	nd, err := rec.AddLimit(ctx, id, j.ID, c)
	if err != nil {
		log.Warn().Err(err).Msg("the time limit changed but the change could not be kept with the job's decision; rota explain will not show it")
		return true
	}
	l.mu.Lock()
	tr.decision = nd
	l.mu.Unlock()
	return true
}
