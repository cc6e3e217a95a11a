package estimate

import (
	"encoding/json"
	"fmt"
	"github.com/rota-hpc/rota/wire/gputype"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Where an Estimate's number comes from.
const (
	// SourceMeasured: the agents measured the job on this type.
	SourceMeasured = "measured"
	// SourceHint: the user's --rota-throughput for this type, corrected
	// by how wrong the user's hint was on a type the job has run on.
	SourceHint = "hint"
	// SourceCompleted: from the job's rate on another type times the
	// ratio between the two types seen in other jobs that ran on both.
	SourceCompleted = "completed"
	// SourceTable: from the job's rate on another type scaled by the
	// admin's relative-speed table (no job ran on both types yet).
	SourceTable = "table"
	// SourceUnknown: nothing is known; StepsPerSec is 0.
	SourceUnknown = "unknown"
	// SourceRelative: only the admin's relative speeds (nothing is known
	// of the job): fit for comparing types, not for walltimes.
	SourceRelative = "relative"
)

// ThroughputConfig tunes Throughputs. Zero values take the defaults.
type ThroughputConfig struct {
	// Speed is the admin's relative speed per GPU type for a typical job
	// (placement.Config.Speed); a type missing from it counts as 1. It is
	// the last resort for a type neither the job nor any of its peers ran
	// on.
	Speed map[string]float64
	// Smoothing is the time constant of the average of a (job, type)'s
	// measurements. The agents and the Observer already smooth over a
	// minute; this one rides over the rounds (and over requeues), so a
	// single odd round does not swing the policy. Default 5 minutes.
	Smoothing time.Duration
	// MinSamples: a measurement overrides the user's hint (and counts in
	// hint errors and as a peer for other jobs) once it has this many
	// samples. A job with no hint at all uses its first sample. Default 2.
	MinSamples int
	// MinPeers: completion between two types needs this many other jobs
	// measured on both; with fewer, the speed table is used. Default 1.
	MinPeers int
	// GroupWeight is the weight, counted in jobs, of the ratio seen over
	// all peers against the ratio seen in peers with the same job name
	// (partial pooling): n same-name peers with median ratio r_g and the
	// pooled median r give (n*r_g + GroupWeight*r)/(n + GroupWeight).
	// Default 0.5: on Gavel's table (docs/estimators.md) 0.25 to 1 are
	// within 0.01 of each other in median error and all beat no
	// preference; 0.5 leans less on a single same-name job than 0.25,
	// since a cluster's job names are less telling than Gavel's model
	// families. Negative disables the same-name preference.
	GroupWeight float64
	// MaxKeys bounds the jobs remembered; beyond it the least recently
	// touched tenth is forgotten. Default 100,000.
	MaxKeys int
}

func (c ThroughputConfig) withDefaults() ThroughputConfig {
	if c.Smoothing <= 0 {
		c.Smoothing = 5 * time.Minute
	}
	if c.MinSamples <= 0 {
		c.MinSamples = 2
	}
	if c.MinPeers <= 0 {
		c.MinPeers = 1
	}
	if c.GroupWeight == 0 {
		c.GroupWeight = 0.5
	}
	if c.MaxKeys <= 0 {
		c.MaxKeys = 100_000
	}
	return c
}

func (c *ThroughputConfig) speed(t string) float64 {
	s, _ := gputype.Speed(c.Speed, t)
	return s
}

// Estimate is a job's throughput on one GPU type, with where it came from.
type Estimate struct {
	GPUType     string
	StepsPerSec float64 // 0 when Source is SourceUnknown
	Source      string
	Basis       string // words for `rota explain`
}

// HintError compares a user's hint with what the agents measured.
type HintError struct {
	Key      string
	GPUType  string
	Hinted   float64
	Measured float64
	// Ratio is Measured/Hinted: 0.5 means the user claimed twice the
	// speed the job reached.
	Ratio float64
}

type rate struct {
	V  float64   `json:"sps"`
	N  uint64    `json:"n"`
	At time.Time `json:"at"`
}

type tjob struct {
	name  string // Identity.Name, for the same-name preference
	rates map[string]*rate
	hint  map[string]float64
	touch uint64
}

// Throughputs estimates each job's steps/s on every GPU type. It is safe
// for concurrent use.
type Throughputs struct {
	cfg ThroughputConfig

	mu    sync.Mutex
	jobs  map[string]*tjob
	clock uint64 // bumped on every change, orders jobs for forgetting
	// pairs caches, per (from, to) type pair, the log ratios of the jobs
	// measured on both; rebuilt on the first Estimate after a change, so
	// a round of Observe calls then Estimate calls rebuilds once.
	pairs map[[2]string]*pairStat
	dirty bool
}

// NewThroughputs returns an empty estimator.
func NewThroughputs(cfg ThroughputConfig) *Throughputs {
	return &Throughputs{cfg: cfg.withDefaults(), jobs: map[string]*tjob{}, dirty: true}
}

func validRate(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// job returns key's entry, creating it (and making room) if needed.
// Callers hold mu.
func (t *Throughputs) job(key string) *tjob {
	t.clock++
	j, ok := t.jobs[key]
	if !ok {
		if len(t.jobs) >= t.cfg.MaxKeys {
			t.forgetOldest()
		}
		id, _ := ParseKey(key)
		j = &tjob{name: id.Name, rates: map[string]*rate{}, hint: map[string]float64{}}
		t.jobs[key] = j
	}
	j.touch = t.clock
	t.dirty = true
	return j
}

// forgetOldest drops the least recently touched tenth of the jobs: a
// sort per 10% of MaxKeys new jobs rather than a scan per new job.
func (t *Throughputs) forgetOldest() {
	type kt struct {
		k string
		t uint64
	}
	all := make([]kt, 0, len(t.jobs))
	for k, j := range t.jobs {
		all = append(all, kt{k, j.touch})
	}
	sort.Slice(all, func(a, b int) bool { return all[a].t < all[b].t })
	for _, e := range all[:max(len(all)/10, 1)] {
		delete(t.jobs, e.k)
	}
}

// Observe folds in one measurement of the job's aggregate steps/s on
// gpuType, taken at at (the Observer's smoothed rate, once per round).
// The first measurement is taken as is; each later one weighs
// 1-exp(-dt/Smoothing), dt being the time since the previous one.
func (t *Throughputs) Observe(key, gpuType string, stepsPerSec float64, at time.Time) error {
	if key == "" || gpuType == "" {
		return fmt.Errorf("throughput observation without key or GPU type (key %q, type %q)", key, gpuType)
	}
	if !validRate(stepsPerSec) {
		return fmt.Errorf("throughput observation of %s on %s: %v steps/s is not a positive number", key, gpuType, stepsPerSec)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.job(key)
	r, ok := j.rates[gpuType]
	if !ok {
		j.rates[gpuType] = &rate{V: stepsPerSec, N: 1, At: at}
		return nil
	}
	dt := max(at.Sub(r.At), 0)
	a := 1 - math.Exp(-dt.Seconds()/t.cfg.Smoothing.Seconds())
	r.V += a * (stepsPerSec - r.V)
	r.N++
	if at.After(r.At) {
		r.At = at
	}
	return nil
}

// Hint records the user's --rota-throughput for the job, replacing any
// earlier hint (a resubmission's hint is the user's latest belief).
// Entries that are not positive numbers are left out and reported.
func (t *Throughputs) Hint(key string, perType map[string]float64) error {
	if key == "" {
		return fmt.Errorf("throughput hint without a key")
	}
	var bad []string
	h := make(map[string]float64, len(perType))
	for ty, v := range perType {
		if ty == "" || !validRate(v) {
			bad = append(bad, fmt.Sprintf("%q=%v", ty, v))
			continue
		}
		h[ty] = v
	}
	t.mu.Lock()
	t.job(key).hint = h
	t.mu.Unlock()
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("throughput hint of %s: ignored %s (need a GPU type and positive steps/s)", key, strings.Join(bad, ", "))
	}
	return nil
}

// Forget drops what is known of key.
func (t *Throughputs) Forget(key string) {
	t.mu.Lock()
	delete(t.jobs, key)
	t.dirty = true
	t.mu.Unlock()
}

// trusted is j's measured rate on ty if it may be used: enough samples,
// or no hint at all to prefer to it.
func (t *Throughputs) trusted(j *tjob, ty string) (float64, bool) {
	r, ok := j.rates[ty]
	if !ok || (r.N < uint64(t.cfg.MinSamples) && len(j.hint) > 0) {
		return 0, false
	}
	return r.V, true
}

// Estimate returns the job's steps/s on each of types, in that order.
// Per type, in order of preference:
//  1. measured on that type;
//  2. the user's hint for that type, corrected by the hint's error on the
//     types the job was measured on (when it hinted those too);
//  3. completed from the job's measured rates on other types and the
//     ratios seen in jobs measured on both (same-name jobs weigh more);
//  4. the user's hint for that type as given;
//  5. the job's measured rates scaled by the speed table;
//  6. with nothing measured: the user's hints for other types, completed
//     or scaled as in 3 and 5;
//  7. unknown.
func (t *Throughputs) Estimate(key string, types []string) []Estimate {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dirty {
		t.rebuild()
	}
	out := make([]Estimate, len(types))
	j := t.jobs[key]
	for i, ty := range types {
		out[i] = t.estimate(j, ty)
		out[i].GPUType = ty
	}
	return out
}

func (t *Throughputs) estimate(j *tjob, ty string) Estimate {
	if j == nil {
		return Estimate{Source: SourceUnknown, Basis: "nothing measured or hinted for this job"}
	}
	if v, ok := t.trusted(j, ty); ok {
		return Estimate{StepsPerSec: v, Source: SourceMeasured,
			Basis: fmt.Sprintf("measured %.4g steps/s on %s (%d samples)", v, ty, j.rates[ty].N)}
	}
	measured := map[string]float64{}
	for s := range j.rates {
		if v, ok := t.trusted(j, s); ok && s != ty {
			measured[s] = v
		}
	}
	hint, hinted := j.hint[ty]
	if len(measured) > 0 {
		if hinted {
			// The user's hint for ty, corrected by how far off their hints
			// were where the job has run: the hint's ratios between types
			// are the user's knowledge, its scale is checked by measurement.
			var sum float64
			var on []string
			for _, s := range slices.Sorted(maps.Keys(measured)) {
				if h, ok := j.hint[s]; ok {
					sum += math.Log(measured[s] / h)
					on = append(on, s)
				}
			}
			if len(on) > 0 {
				c := math.Exp(sum / float64(len(on)))
				return Estimate{StepsPerSec: hint * c, Source: SourceHint,
					Basis: fmt.Sprintf("hint %.4g steps/s on %s x %.3g (measured/hinted on %s)", hint, ty, c, strings.Join(on, ","))}
			}
		}
		if v, basis, ok := t.complete(j, ty, measured, "measured"); ok {
			return Estimate{StepsPerSec: v, Source: SourceCompleted, Basis: basis}
		}
		if hinted {
			return Estimate{StepsPerSec: hint, Source: SourceHint,
				Basis: fmt.Sprintf("hint %.4g steps/s on %s (no peers to complete from, hint not checkable)", hint, ty)}
		}
		v, basis := t.table(ty, measured, "measured")
		return Estimate{StepsPerSec: v, Source: SourceTable, Basis: basis}
	}
	if hinted {
		basis := fmt.Sprintf("hint %.4g steps/s on %s", hint, ty)
		if r, ok := j.rates[ty]; ok {
			basis += fmt.Sprintf(" (measured %.4g, %d of %d samples needed to override)", r.V, r.N, t.cfg.MinSamples)
		}
		return Estimate{StepsPerSec: hint, Source: SourceHint, Basis: basis}
	}
	if len(j.hint) > 0 {
		if v, basis, ok := t.complete(j, ty, j.hint, "hinted"); ok {
			return Estimate{StepsPerSec: v, Source: SourceCompleted, Basis: basis}
		}
		v, basis := t.table(ty, j.hint, "hinted")
		return Estimate{StepsPerSec: v, Source: SourceTable, Basis: basis}
	}
	return Estimate{Source: SourceUnknown, Basis: "nothing measured or hinted for this job"}
}

// table scales the job's known rates to ty by the admin's speed table
// (geometric mean over the known types).
func (t *Throughputs) table(ty string, known map[string]float64, what string) (float64, string) {
	var sum float64
	ks := slices.Sorted(maps.Keys(known))
	for _, s := range ks {
		sum += math.Log(known[s] * t.cfg.speed(ty) / t.cfg.speed(s))
	}
	v := math.Exp(sum / float64(len(ks)))
	return v, fmt.Sprintf("%s %.4g steps/s on %s x speed table %.3g/%.3g", what, known[ks[0]], ks[0], t.cfg.speed(ty), t.cfg.speed(ks[0]))
}

// pairStat is what jobs measured on both types say about their ratio.
type pairStat struct {
	n   int
	med float64 // median of log(rate on to / rate on from)
	// byName: the same, per job name (Identity.Name).
	byName map[string]groupStat
}

type groupStat struct {
	n   int
	med float64
}

// rebuild recomputes the pair ratios from every job's trusted rates.
// Callers hold mu.
func (t *Throughputs) rebuild() {
	all := map[[2]string][]float64{}
	named := map[[2]string]map[string][]float64{}
	for _, j := range t.jobs {
		var tys []string
		var vs []float64
		for ty := range j.rates {
			if v, ok := t.trusted(j, ty); ok {
				tys = append(tys, ty)
				vs = append(vs, v)
			}
		}
		for a := range tys {
			for b := range tys {
				if a == b {
					continue
				}
				p := [2]string{tys[a], tys[b]}
				lr := math.Log(vs[b] / vs[a])
				all[p] = append(all[p], lr)
				if j.name != "" {
					if named[p] == nil {
						named[p] = map[string][]float64{}
					}
					named[p][j.name] = append(named[p][j.name], lr)
				}
			}
		}
	}
	t.pairs = make(map[[2]string]*pairStat, len(all))
	for p, lrs := range all {
		ps := &pairStat{n: len(lrs), med: median(lrs), byName: map[string]groupStat{}}
		for name, g := range named[p] {
			ps.byName[name] = groupStat{n: len(g), med: median(g)}
		}
		t.pairs[p] = ps
	}
	t.dirty = false
}

// complete estimates j's rate on ty from its known rates on other types:
// per known type s, rate_s x exp(r), r the median log ratio ty/s over
// the jobs measured on both, pulled toward the median of the jobs with
// j's name (partial pooling); the per-type results are averaged in log
// space weighted by their number of peers. Medians on a log scale: a
// ratio of throughputs is multiplicative, and one odd job (a wrong
// measurement, a job bound by I/O) must not drag the others.
func (t *Throughputs) complete(j *tjob, ty string, known map[string]float64, what string) (float64, string, bool) {
	var sum, wsum float64
	var best string
	var bestN, bestG int
	var bestR float64
	for _, s := range slices.Sorted(maps.Keys(known)) {
		ps := t.pairs[[2]string{s, ty}]
		if ps == nil || ps.n < t.cfg.MinPeers {
			continue
		}
		r := ps.med
		g := 0
		if gs, ok := ps.byName[j.name]; ok && j.name != "" && t.cfg.GroupWeight > 0 {
			g = gs.n
			r = (float64(gs.n)*gs.med + t.cfg.GroupWeight*ps.med) / (float64(gs.n) + t.cfg.GroupWeight)
		}
		w := float64(ps.n)
		sum += w * (math.Log(known[s]) + r)
		wsum += w
		if ps.n > bestN {
			best, bestN, bestG, bestR = s, ps.n, g, r
		}
	}
	if wsum == 0 {
		return 0, "", false
	}
	v := math.Exp(sum / wsum)
	basis := fmt.Sprintf("%s %.4g steps/s on %s x %.3g (median %s/%s ratio of %d jobs run on both, %d with the same name)",
		what, known[best], best, math.Exp(bestR), ty, best, bestN, bestG)
	return v, basis, true
}

// HintErrors lists, per job and GPU type with both a hint and a trusted
// measurement, how the hint compares; sorted by key and type.
func (t *Throughputs) HintErrors() []HintError {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []HintError
	for k, j := range t.jobs {
		for ty, h := range j.hint {
			r, ok := j.rates[ty]
			if !ok || r.N < uint64(t.cfg.MinSamples) {
				continue
			}
			out = append(out, HintError{Key: k, GPUType: ty, Hinted: h, Measured: r.V, Ratio: r.V / h})
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Key != out[b].Key {
			return out[a].Key < out[b].Key
		}
		return out[a].GPUType < out[b].GPUType
	})
	return out
}

const stateVersion = 1

type throughputState struct {
	V    int             `json:"v"`
	Jobs []throughputJob `json:"jobs"`
}

type throughputJob struct {
	Key   string             `json:"key"`
	Rates map[string]*rate   `json:"rates,omitempty"`
	Hint  map[string]float64 `json:"hint,omitempty"`
	Touch uint64             `json:"touch"`
}

// Export returns the state as versioned JSON, jobs sorted by key.
func (t *Throughputs) Export() ([]byte, error) {
	t.mu.Lock()
	st := throughputState{V: stateVersion, Jobs: make([]throughputJob, 0, len(t.jobs))}
	for k, j := range t.jobs {
		rs := make(map[string]*rate, len(j.rates))
		for ty, r := range j.rates {
			c := *r
			rs[ty] = &c
		}
		st.Jobs = append(st.Jobs, throughputJob{Key: k, Rates: rs, Hint: copyMap(j.hint), Touch: j.touch})
	}
	t.mu.Unlock()
	sort.Slice(st.Jobs, func(a, b int) bool { return st.Jobs[a].Key < st.Jobs[b].Key })
	return json.Marshal(st)
}

// Import replaces the state with one Export wrote. On error the state is
// unchanged.
func (t *Throughputs) Import(data []byte) error {
	var st throughputState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("throughput state: %w", err)
	}
	if st.V != stateVersion {
		return fmt.Errorf("throughput state: version %d, want %d", st.V, stateVersion)
	}
	jobs := make(map[string]*tjob, len(st.Jobs))
	var clock uint64
	for _, e := range st.Jobs {
		if e.Key == "" {
			return fmt.Errorf("throughput state: a job without a key")
		}
		if _, dup := jobs[e.Key]; dup {
			return fmt.Errorf("throughput state: job %s twice", e.Key)
		}
		j := &tjob{rates: map[string]*rate{}, hint: map[string]float64{}, touch: e.Touch}
		id, _ := ParseKey(e.Key)
		j.name = id.Name
		for ty, r := range e.Rates {
			if ty == "" || r == nil || !validRate(r.V) || r.N == 0 {
				return fmt.Errorf("throughput state: job %s: bad rate on %q", e.Key, ty)
			}
			c := *r
			j.rates[ty] = &c
		}
		for ty, h := range e.Hint {
			if ty == "" || !validRate(h) {
				return fmt.Errorf("throughput state: job %s: bad hint on %q", e.Key, ty)
			}
			j.hint[ty] = h
		}
		jobs[e.Key] = j
		clock = max(clock, e.Touch)
	}
	t.mu.Lock()
	t.jobs, t.clock, t.dirty = jobs, max(t.clock, clock), true
	t.mu.Unlock()
	return nil
}

func copyMap(m map[string]float64) map[string]float64 {
	c := make(map[string]float64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// median of xs (sorted in place); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// quantile is the nearest-rank q-quantile of xs (q in [0, 1]; sorts a
// copy); 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[min(max(i, 0), len(c)-1)]
}
