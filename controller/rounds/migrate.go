package rounds

import (
	"context"
	"errors"
	"time"

	"github.com/rota-hpc/rota/controller/checkpoint"
	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// migrate moves a running job to type to: its node agents checkpoint it
// (signal, wait for the job to say it saved), then Slurm requeues it (same
// job id) constrained to the new type with a walltime for what is left.
// It runs in the background; the job is out of the planner's hands until
// it is pending again.
func (l *Loop) migrate(ctx context.Context, j *slurm.Job, v *JobView, tr *tracked, a *Action, snap *cluster.Snapshot) {
	to, why, limit := a.Type, a.Why, a.WalltimeMin
	if l.ckpt == nil {
		return
	}
	// The update that retypes it once requeued (a sharer split off its
	// pair: its GPU back, whole): none, no move.
	var u slurm.JobUpdate
	if v.Sharing && !l.unshare(&u, j, tr, to, snap) || !v.Sharing && !l.retype(&u, j, tr, to, snap) {
		return
	}
	l.mu.Lock()
	if l.moving[j.ID] {
		l.mu.Unlock()
		return
	}
	l.moving[j.ID] = true
	tr.moveAt = time.Now()
	// Back on a node it ran on, a requeued job started before its old
	// credential expires is killed by slurmd ("Job credential revoked",
	// and it ends FAILED): there it waits out Slurm's requeue delay (the
	// credential lifetime, 121 s by default) instead of starting at once.
	// Seen on 24.11 when a sharer split off its pair went back to its node.
	tr.sameNode = backOnItsNode(j.Nodes, l.nodeType, to)
	startNow := !tr.sameNode
	l.mu.Unlock()
	id, nodes, from, sharer := j.ID, append([]string(nil), j.Nodes...), v.Type, v.Sharing
	l.log.Info().Uint32("job", id).Str("from", from).Str("to", to).Str("why", why).Msg("migrating: asking the node agents to checkpoint the job")
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ok := l.doMigrate(ctx, id, nodes, from, to, u, limit, startNow)
		l.mu.Lock()
		delete(l.moving, id)
		if ok {
			l.stats.Migrations++
			tr.moved = time.Now()
			tr.moves++
			tr.target = to
			if sharer {
				tr.partner, tr.noShare = 0, true
			}
		} else {
			l.stats.MigrationFailures++
			tr.moveAt = time.Time{}
		}
		l.mu.Unlock()
	}()
}

func (l *Loop) doMigrate(ctx context.Context, id uint32, nodes []string, from, to string, u slurm.JobUpdate, limit uint32, startNow bool) bool {
	outcome, err := l.ckpt.Checkpoint(ctx, nodes, id, l.cfg.CheckpointGrace)
	log := l.log.With().Uint32("job", id).Str("from", from).Str("to", to).Logger()
	late := errors.Is(err, checkpoint.ErrNoResult)
	if late {
		// The agents signalled the job (or may yet: an answer came late)
		// and stop it when its grace ends:
		// left alone it would end (its script exits after saving) and
		// leave the queue unfinished. Requeued, it resumes from its last
		// checkpoint.
		log.Warn().Err(err).Msg("the node agents took the checkpoint command (or may yet act on it) but did not report in time; requeued to resume from its last checkpoint")
		outcome, err = wire.CheckpointTimedOut, nil
	}
	if err != nil {
		log.Warn().Err(err).Msg("checkpoint failed; the job keeps running where it is")
		return false
	}
	if outcome == wire.CheckpointNoProcesses {
		log.Info().Msg("the agents found no process of the job (it may have ended); not requeued")
		return false
	}
	if outcome == wire.CheckpointTimedOut && !late {
		log.Warn().Msg("the job did not confirm its checkpoint in time and was stopped; requeued to resume from its last checkpoint")
	}
	if err := l.sched.Requeue(ctx, id); err != nil {
		log.Warn().Err(err).Msg("requeue failed after the checkpoint; the job may have ended")
		return false
	}
	p := l.cfg.PriorityBase + 200000 // a moved job goes first on its new type
	u.Priority, u.StartNow = &p, startNow
	if limit > 0 {
		u.TimeLimitMin = &limit
	}
	// Slurm finishes the requeue after the command returns (the job
	// passes through COMPLETING), and only then sets the begin time that
	// StartNow clears: wait for the job to be pending again.
	var uerr error
	for i := 0; i < 80 && ctx.Err() == nil; i++ {
		time.Sleep(250 * time.Millisecond)
		j, ok, err := l.sched.Job(ctx, id)
		if err != nil || !ok || !j.Pending() {
			continue
		}
		if uerr = l.sched.Update(ctx, id, u); uerr != nil {
			l.mu.Lock()
			tr := l.known[id]
			l.mu.Unlock()
			l.refused(tr, u)
			continue
		}
		l.mu.Lock()
		if tr := l.known[id]; tr != nil {
			if u.TimeLimitMin != nil {
				tr.limitMin = *u.TimeLimitMin
			}
			// Handed back to Slurm once it runs (order nice, none).
			tr.prioFixed = true
		}
		l.mu.Unlock()
		log.Info().Str("outcome", outcome).Msg("job checkpointed and requeued onto its new type")
		return true
	}
	log.Warn().Err(uerr).Msg("job requeued but its new type could not be set; the next rounds retry")
	return true
}

// requeueDelay is how long a job requeued onto a node it ran on waits
// before Slurm starts it again: the credential lifetime (120 s by
// default), and a second of slurmctld's.
const requeueDelay = 121 * time.Second

// backOnItsNode says whether a job that ran on nodes may run on type to on
// one of them again: a node of that type, or of several or unknown types.
func backOnItsNode(nodes []string, nodeType map[string]string, to string) bool {
	for _, n := range nodes {
		if t, ok := nodeType[n]; !ok || t == "" || t == to {
			return true
		}
	}
	return false
}
