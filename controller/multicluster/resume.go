package multicluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/rota-hpc/rota/controller/slurm"
)

// A move ends the job here at its checkpoint before the other cluster is
// asked for the copy. When that copy is then not taken (the other side
// refuses it, or the link stays down past mc_route_timeout and the route
// is aborted, which the other side confirms), releasing the job here, as
// a route does, would leave it run nowhere. It is submitted again here
// instead, as its user, from the checkpoint it wrote (ROTA_MC_RESUME):
// it runs where it was or where it went, never both, never neither.

// ResumeCommentPrefix marks the job resubmitted here in Slurm:
// "rota-mc-resume=<route id>", by which a retry after a crash between
// sbatch and its record finds it.
const ResumeCommentPrefix = "rota-mc-resume="

// keepJob reads the job to move once, while Slurm still knows it (before
// it is asked to checkpoint and end; an ended job's record goes after
// MinJobAge, a transfer may take longer): the request for its copy there
// (r.Req, finished by transfer) and what resubmitting it here takes, in
// its own partition (r.Here).
func (m *Manager) keepJob(ctx context.Context, r *Route) error {
	if r.Here != nil && r.Req != nil {
		return nil
	}
	spec, known, err := m.sl.ShowJob(ctx, r.FromJob)
	if err != nil {
		return err
	}
	if !known {
		return fmt.Errorf("slurm no longer knows job %d", r.FromJob)
	}
	script, err := m.sl.BatchScript(ctx, r.FromJob)
	if err != nil {
		return err
	}
	there := m.copyRequest(r, &spec, script)
	here := *there
	here.Args = CopyArgs(&spec, r.Name, m.local.Decision(r.FromJob), spec.Partition, there.Hints)
	m.mu.Lock()
	r.Req, r.Here = there, &here
	m.mu.Unlock()
	return nil
}

// resume submits the moved job again here from its checkpoint, once.
func (m *Manager) resume(ctx context.Context, r *Route) {
	if r.Here == nil {
		// Not recorded before the checkpoint (a route saved by an older
		// controller): nothing to resubmit it from.
		m.set(r, OutStayed, r.Why+"; its copy was not taken there and what it takes to resubmit it here was not kept: resubmit it by hand from its checkpoint")
		m.log.Error().Str("route", r.ID).Uint32("job", r.FromJob).Msg("moved job ended at its checkpoint and was neither taken there nor resubmittable here; resubmit it by hand")
		return
	}
	comment := ResumeCommentPrefix + r.ID
	id, found, err := m.sl.FindByComment(ctx, comment)
	if err != nil {
		m.log.Warn().Err(err).Str("route", r.ID).Msg("cannot tell whether the moved job was resubmitted here; trying again")
		return
	}
	if !found {
		args := append(append([]string{}, r.Here.Args...), "--comment="+comment)
		var env []string
		if r.CkptFile != "" {
			env = append(env, "ROTA_MC_RESUME="+r.CkptFile)
		}
		sub := slurm.Submission{User: r.Here.User, Script: r.Here.Script, Args: args, Env: env}
		id, err = m.sl.Submit(ctx, sub)
		if err != nil && strings.Contains(err.Error(), "rota") {
			sub.Args = withoutRota(args)
			id, err = m.sl.Submit(ctx, sub)
		}
		if err != nil {
			m.log.Warn().Err(err).Str("route", r.ID).Uint32("job", r.FromJob).Msg("cannot resubmit the moved job here from its checkpoint; trying again")
			return
		}
	}
	m.mu.Lock()
	r.HereJob = id
	m.mu.Unlock()
	m.set(r, OutResumed, fmt.Sprintf("%s; resumed here as job %d from its checkpoint", r.Why, id))
	m.log.Info().Str("route", r.ID).Uint32("job", r.FromJob).Uint32("resumed_as", id).Msg("move not taken by the other cluster; the job resumes here from its checkpoint")
}
