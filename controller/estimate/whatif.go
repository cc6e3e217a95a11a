package estimate

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

// SpeedOf is the admin's relative speed of a type and whether the table
// names it (a type it does not name counts as 1 in SourceTable numbers).
func (t *Throughputs) SpeedOf(ty string) (float64, bool) {
	s, ok := t.cfg.Speed[ty]
	return s, ok && s > 0
}
