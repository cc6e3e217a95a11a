package rounds

import (
	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
)

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
