package estimate

// Measured is a job's smoothed throughput on one GPU type.
type Measured struct {
	StepsPerSec float64
	Samples     uint64
}

// Known returns what Throughputs holds of key: its measured rates per
// GPU type and the user's latest hint (copies; nil when none). An
// external estimator is asked with them (interfaces.go).
func (t *Throughputs) Known(key string) (measured map[string]Measured, hint map[string]float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.jobs[key]
	if j == nil {
		return nil, nil
	}
	if len(j.rates) > 0 {
		measured = make(map[string]Measured, len(j.rates))
		for ty, r := range j.rates {
			measured[ty] = Measured{StepsPerSec: r.V, Samples: r.N}
		}
	}
	if len(j.hint) > 0 {
		hint = copyMap(j.hint)
	}
	return measured, hint
}

// History returns key's latest run times in seconds, oldest first (a
// copy; nil when none).
func (w *Walltimes) History(key string) []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h := w.hist[key]; h != nil && len(h.Secs) > 0 {
		return append([]float64(nil), h.Secs...)
	}
	return nil
}
