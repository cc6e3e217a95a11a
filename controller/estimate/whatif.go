package estimate

import "github.com/rota-hpc/rota/wire/gputype"

// EstimateHinted estimates the steps/s on each of types of a job that has
// not run: one with these hints (per type) and this job name, completed
// from what the other jobs measured, exactly as Estimate would for such a
// job, without remembering it. `rota estimate` asks it before submission.
func (t *Throughputs) EstimateHinted(name string, hint map[string]float64, types []string) []Estimate {
	j := &tjob{name: name, rates: map[string]*rate{}, hint: map[string]float64{}}
	for ty, v := range hint {
		if ty != "" && validRate(v) {
			j.hint[ty] = v
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dirty {
		t.rebuild()
	}
	out := make([]Estimate, len(types))
	for i, ty := range types {
		if len(j.hint) == 0 {
			out[i] = Estimate{Source: SourceUnknown, Basis: "nothing measured or hinted for this job"}
		} else {
			out[i] = t.estimate(j, ty)
		}
		out[i].GPUType = ty
	}
	return out
}

// SpeedOf is the relative speed of a type and whether it is known: the
// admin's table names it, or it is a MIG slice of a type the table names
// (gputype.Speed; an unknown type counts as 1 in SourceTable numbers).
func (t *Throughputs) SpeedOf(ty string) (float64, bool) {
	s, src := gputype.Speed(t.cfg.Speed, ty)
	return s, src != gputype.FromDefault
}
