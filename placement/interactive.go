package placement

import (
	"fmt"
	"slices"

	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// placeInteractive places a job a person is waiting for (docs/kinds.md,
// "Interactive sessions"). Of the types that can hold it as asked (and
// that its user allows), those with room for it now come first; among
// them the one where the cluster's training jobs lose least: GPUs of the
// type's interactive reserve cost training nothing, any other free GPU
// costs it that GPU at the type's speed. When no type has room now, an
// untyped request stays untyped, so that the first GPU of any type to
// free up starts it; a request limited to some types waits where a GPU
// of them frees first. It gets no walltime: a session lasts as long as
// its user wants, up to the user's own limit.
func placeInteractive(v *View, req *wire.PlaceRequest, explain bool) Result {
	var num notes
	if explain {
		num = notes{}
	}
	s := v.s
	if s == nil || s.Cluster == nil {
		return Result{Reason: "no view of the cluster yet (first Slurm refresh pending); request kept", Numbers: num}
	}
	cv, r := s.Cluster, &s.Rule
	need := gpureq.NeedOf(req.GPU)
	total := need.Total
	num.set("need.total", float64(total))
	parts := req.Partition
	if parts == "" {
		parts = cv.DefaultPartition
	}
	var res Result
	if _, why, ok := userKeeps(req, cv, r); ok {
		res.Reason = why
		return withNumbers(res, num)
	}

	cons := readConstraint(req.Features)
	roomKey := s.RoomKey(req.UID, req.Account, req.QOS)
	allowed, restricted := AllowedTypes(req.Hints, req.Features, func(f string) bool { _, ok := cv.Types[f]; return ok })
	type icand struct {
		t          string
		free, kept int
		loss       float64 // GPUs training loses, times their speed
	}
	var now, later, limited []icand
	limitWhy := ""
	for _, t := range v.types {
		tc := cv.Types[t]
		if restricted && !slices.Contains(allowed, t) || !holds(&tc, need, parts, cons) {
			continue
		}
		if ok, _ := FitsMemory(r, t, req.Hints.GPUMemBytes, nil); !ok {
			num.set2("memory_fits.", t, 0)
			continue
		}
		free := max(tc.Free()-v.taken(t), 0)
		kept := min(v.reserveLeft(t), free) // free GPUs training may not take
		c := icand{t: t, free: free, kept: kept, loss: float64(max(total-kept, 0)) * Speed(r, t)}
		num.set2("free.", t, float64(free))
		num.set2("reserve_free.", t, float64(kept))
		if left, why, lim := v.room(req, roomKey, t); lim && left < total {
			num.set2("limit_left.", t, float64(left))
			if explain {
				limitWhy += "; " + t + " left out: " + why + " reached"
			}
			limited = append(limited, c)
			continue
		}
		if free >= total {
			num.set2("training_loss.", t, c.loss)
			now = append(now, c)
		} else {
			later = append(later, c)
		}
	}
	if len(now) == 0 && len(later) == 0 {
		// Every type that holds it is at one of the user's limits: it
		// waits at one, as a batch job would.
		later = limited
	}
	if len(now) > 0 {
		best := now[0]
		for _, c := range now[1:] {
			// Least lost to training; then the GPU training values least;
			// then the most room.
			if c.loss < best.loss || c.loss == best.loss && (Speed(r, c.t) < Speed(r, best.t) ||
				Speed(r, c.t) == Speed(r, best.t) && c.free > best.free) {
				best = c
			}
		}
		if explain {
			lost := max(total-best.kept, 0)
			res.Reason = fmt.Sprintf("%s has %d GPUs free now (of %d types with room); training loses %d GPUs of speed %.3g there (%d of its interactive reserve free)",
				best.t, best.free, len(now), lost, Speed(r, best.t), best.kept)
		}
		return withRoom(interactiveOn(v, req, best.t, total, res, num), req, roomKey, limitWhy)
	}
	if len(later) == 0 {
		res.Reason = "no single GPU type can hold the job as asked; left as asked"
		switch {
		case restricted:
			res.Reason = "none of the GPU types the user allows (" + ChoiceWords(allowed, req.Hints, req.Features) + ") can hold the job as asked; left as asked"
		case explain:
			res.Reason = NoTypeReason(need, parts, req.Features)
		}
		return withNumbers(res, num)
	}
	if !restricted && req.GPU.Type == "" {
		res.Reason = fmt.Sprintf("no type has %d GPUs free now; left untyped, so that the first GPU of any type to free up starts it", total)
		return withNumbers(res, num)
	}
	// Limited to some types, none with room now: where a GPU frees
	// first (the round loop's estimates), else the type with the most
	// GPUs, which free up most often.
	best, bestStart := later[0], -1.0
	for _, c := range later {
		if sl := v.slotsOf(c.t); len(sl) >= total {
			num.set2("start_s.", c.t, sl[total-1])
			if bestStart < 0 || sl[total-1] < bestStart {
				best, bestStart = c, sl[total-1]
			}
		}
	}
	if bestStart < 0 {
		for _, c := range later {
			if cv.Types[c.t].Total > cv.Types[best.t].Total {
				best = c
			}
		}
	}
	if explain {
		if bestStart >= 0 {
			res.Reason = fmt.Sprintf("no allowed type has %d GPUs free now; %s has them soonest (in about %.0f s)", total, best.t, bestStart)
		} else {
			res.Reason = fmt.Sprintf("no allowed type has %d GPUs free now; %s has the most GPUs (%d)", total, best.t, cv.Types[best.t].Total)
		}
		if restricted {
			res.Reason += "; chosen among the types the user allows (" + ChoiceWords(allowed, req.Hints, req.Features) + ")"
		}
	}
	return withRoom(interactiveOn(v, req, best.t, total, res, num), req, roomKey, limitWhy)
}

// interactiveOn gives res type t and the reservation of an interactive
// job's GPUs.
func interactiveOn(v *View, req *wire.PlaceRequest, t string, total int, res Result, num notes) Result {
	res.Reserve = &wire.Reservation{Type: t, GPUs: total, Interactive: true}
	if t != req.GPU.Type {
		res.GPUType = t
		res.ByFeature = v.s.Cluster.TypeByFeature(t)
	}
	return withNumbers(res, num)
}

// reserveLeft is what of type t's interactive reserve interactive jobs
// do not hold yet: GPUs batch jobs may not take.
func (v *View) reserveLeft(t string) int {
	return max(v.s.Rule.InteractiveReserve[t]-v.s.InteractiveHeld[t]-v.iTaken[t], 0)
}

// batchFree is how many of type t's free GPUs a batch job may take: the
// free ones less the part of the interactive reserve not in use.
func (v *View) batchFree(t string) int {
	return max(v.s.Cluster.Types[t].Free()-v.taken(t)-v.reserveLeft(t), 0)
}

// awayFromFreeReserve is fits without the types where part of the
// interactive reserve is free, unless that leaves none: a batch job that
// waits for a type is started by Slurm on any free GPU of it, reserved
// or not.
func (v *View) awayFromFreeReserve(fits []cand) []cand {
	var out []cand
	for _, c := range fits {
		if v.reserveLeft(c.t) == 0 {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return fits
	}
	return out
}
