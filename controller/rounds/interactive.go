package rounds

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
)

// sessionPriority is, above PriorityBase, the admin priority a waiting
// session gets with order = priority: above every training job Rota
// orders (up to PriorityBase+100000), below a job Rota requeued
// (PriorityBase+200000), which ran already.
const sessionPriority = 150000

// rotaTypedSession says whether Rota chose a waiting interactive job's
// type: its user named none, and left every type open. Only such a type
// may Rota give back.
func rotaTypedSession(asked *wire.PlaceRequest, types []string) bool {
	isType := func(f string) bool { return indexOf(types, f) >= 0 }
	_, restricted := placement.AllowedTypes(asked.Hints, asked.Features, isType)
	return asked.GPU.Type == "" && featureType(asked.Features, types) == "" && !restricted
}

// untypeSession gives a waiting interactive job its GPU request back as
// its user wrote it (untyped) when the type Rota gave it at submission
// has no free GPU for it now: the view it was placed from was stale, or
// others took the GPUs. Untyped, it starts on the first GPU of any type
// to free up, which is never later than on its own type. u gets the
// update; false: nothing to give back, or no way to write it.
func (l *Loop) untypeSession(u *slurm.JobUpdate, j *slurm.Job, v *JobView, tr *tracked, snap *cluster.Snapshot) bool {
	if !v.Interactive || v.Running || v.Type == "" || !rotaTypedSession(&tr.decision.Asked, snap.TypeNames()) {
		return false
	}
	if tc := snap.Types[v.Type]; tc != nil && tc.Free() >= max(v.GPUs, 1) {
		return false // about to start where Rota put it
	}
	req, _ := j.GPURequest()
	switch {
	case featureType(j.Features, snap.TypeNames()) != "":
		f := tr.decision.Asked.Features // the user's own constraint, if any
		u.Features = &f
	default:
		l.mu.Lock()
		gres := l.retypeGres
		l.mu.Unlock()
		if !gres {
			return false // a typed request on 22.05 cannot be retyped
		}
		req.SetType("")
		u.GPU = &slurm.GPURequest{PerJob: req.PerJob.String(), PerNode: req.PerNode.String(),
			PerSocket: req.PerSocket.String(), PerTask: req.PerTask.String()}
	}
	return true
}

// sessionsPassDelay is how long after a session's placement the loop
// reads the queue for it: slurmctld creates the job right after the
// plugin returns, and the plugin sends its decision within 20 ms.
const sessionsPassDelay = 250 * time.Millisecond

// Kick asks for a sessions pass before the next round: an interactive
// job was just placed, and a person should not wait up to a round (5
// minutes by default) for Rota to put it first in its order. Kicks that
// come while one is pending are one pass. Safe for concurrent use.
func (l *Loop) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// sessionsPass puts every waiting interactive job first in Rota's order
// as the next round would (the most negative nice Rota gives, or its
// admin priority), without a solve: one queue read and one update per
// new session.
func (l *Loop) sessionsPass(ctx context.Context) {
	if l.cfg.Order == OrderNone {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(sessionsPassDelay):
	}
	// Fresh: the session was submitted a moment ago, after any shared read.
	jobs, err := l.sched.Jobs(slurm.Fresh(ctx))
	if err != nil {
		l.log.Info().Err(err).Msg("cannot read the queue for new interactive jobs; the next round orders them")
		return
	}
	if err := l.bind(ctx, jobs); err != nil {
		l.log.Info().Err(err).Msg("cannot read new jobs' Rota annotations; the next round orders them")
	}
	for i := range jobs {
		j := &jobs[i]
		l.mu.Lock()
		tr := l.known[j.ID]
		var u slurm.JobUpdate
		if tr != nil && j.Pending() && tr.decision.Given.Kind == wire.KindInteractive && !tr.niceSet && !tr.prioFixed &&
			!strings.HasPrefix(j.Reason, "JobHeld") {
			switch l.cfg.Order {
			case OrderNice:
				n := clampNice(int64(tr.baseNice) - int64(l.cfg.OrderNiceSpan/2))
				u.Nice = &n
			case OrderPriority:
				p := l.cfg.PriorityBase + sessionPriority
				u.Priority = &p
			}
		}
		l.mu.Unlock()
		if u.Nice == nil && u.Priority == nil {
			continue
		}
		if err := l.sched.Update(ctx, j.ID, u); err != nil {
			l.log.Info().Err(err).Uint32("job", j.ID).Msg("could not put the interactive job first (it may have started); the next round tries again")
			continue
		}
		l.mu.Lock()
		tr.niceSet = tr.niceSet || u.Nice != nil
		tr.prioFixed = tr.prioFixed || u.Priority != nil
		l.stats.Reprioritised++
		l.mu.Unlock()
		l.log.Debug().Uint32("job", j.ID).Msg("interactive job put first in Rota's order")
	}
}

// waitsForGPUs says whether a pending job's Slurm reason is a wait for
// resources (or just submitted), not for its begin time, a dependency or
// a limit.
func waitsForGPUs(reason string) bool {
	switch reason {
	case "", "None", "Resources", "Priority":
		return true
	}
	return false
}

// keepReserve keeps the interactive reserve from training where Slurm
// would break it: Slurm starts a waiting job typed t on any GPU of t
// that frees, reserved or not (a session's that ended too). So of the
// waiting training jobs typed t, in Slurm's order, only as many as
// training's room on t (its total less the reserve, less what training
// runs there) keep t; Rota moves the others it typed to the type where
// they run fastest among those without a reserve or with room left. A
// training GPU of t that frees between two rounds may then idle until
// the next one: the price of the reserve.
func keepReserve(plan *Plan, jobs []JobView, reserve map[string]int) {
	K := len(plan.Types)
	room := make([]int, K) // training GPUs that may still be typed k; -1 any
	for k, t := range plan.Types {
		r := min(reserve[t], plan.Capacity[k])
		if r <= 0 {
			room[k] = -1
			continue
		}
		room[k] = plan.Capacity[k] - r
	}
	for _, j := range jobs {
		if k := indexOf(plan.Types, j.Type); j.Running && !j.Interactive && k >= 0 && room[k] >= 0 {
			room[k] = max(room[k]-max(j.GPUs, 1), 0)
		}
	}
	for _, i := range plan.pendingInOrder(jobs, func(j JobView, a *Action) bool { return !j.Interactive && a.Type != "" }) {
		j, a := jobs[i], &plan.Actions[i]
		g := max(j.GPUs, 1)
		k := indexOf(plan.Types, a.Type)
		if k < 0 || room[k] < 0 || room[k] >= g || j.UserTyped || j.Unfit != "" {
			if k >= 0 && room[k] >= 0 {
				room[k] = max(room[k]-g, 0)
			}
			continue
		}
		best := -1
		for u := 0; u < K; u++ {
			if u == k || u >= len(j.Rates) || j.Rates[u] <= 0 || (j.Fits != nil && !j.Fits[u]) || (room[u] >= 0 && room[u] < g) {
				continue
			}
			if best < 0 || j.Rates[u] > j.Rates[best] {
				best = u
			}
		}
		if best < 0 {
			continue // nowhere else: it may take a reserved GPU, as Slurm decides
		}
		a.Why = fmt.Sprintf("%s; %s's free GPUs are its interactive reserve: it waits for %s", a.Why, a.Type, plan.Types[best])
		a.Type = plan.Types[best]
		if room[best] >= 0 {
			room[best] -= g
		}
	}
}
