// Package workload reads Gavel's measured throughput table and draws jobs
// the way Gavel's simulator does, so that `rota solve` and `rota sim` run on
// workloads comparable with the paper's.
package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rota-hpc/rota/wire/gputype"
	"math"
	"math/rand"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Table holds isolated throughputs (steps/s) per (job type, scale factor)
// and GPU type, read from the "null" entries of simulation_throughputs.json.
type Table struct {
	GPUTypes []string
	// JobTypes lists the single-GPU job types in a fixed (sorted) order so a
	// seed always draws the same workload.
	JobTypes []string
	rates    map[key][]float64 // per GPUTypes index
	// pairs holds, per GPU type, the steps/s of a job and of the other job
	// when the two share one GPU (Gavel's space-sharing measurements);
	// [0, 0] where they cannot share (too much memory, for one).
	pairs map[pairKey][][2]float64
	// Derived says, for each GPU type the table did not measure, how its
	// rates were made ("a100 x 3/7 (its share of the a100)"); such a type
	// has no pair throughputs.
	Derived map[string]string
}

type pairKey struct{ A, B key }

type key struct {
	Name  string
	Scale int
}

var keyRE = regexp.MustCompile(`^\('(.*)', (\d+)\)$`)

// Derivation makes a GPU type the table never measured from one it did:
// every job type's rate on From times Factor (an assumption the caller
// states, e.g. a100 as twice a v100).
type Derivation struct {
	From   string
	Factor float64
}

// ParseDerivations reads derivations written TYPE=FROM*FACTOR (a100=v100*2:
// an A100 runs every job twice as fast as a V100), as `rota sim
// --derive-type` and rota-synthtrain's take them.
func ParseDerivations(items []string) (map[string]Derivation, error) {
	out := map[string]Derivation{}
	for _, it := range items {
		t, rest, ok := strings.Cut(it, "=")
		from, f, ok2 := strings.Cut(rest, "*")
		factor, err := strconv.ParseFloat(f, 64)
		if !ok || !ok2 || t == "" || from == "" || err != nil || !(factor > 0) || math.IsInf(factor, 0) {
			return nil, fmt.Errorf("--derive-type %q: want TYPE=FROM*FACTOR, e.g. a100=v100*2", it)
		}
		out[t] = Derivation{From: from, Factor: factor}
	}
	return out, nil
}

// Load reads Gavel's table for the given GPU types (e.g. v100, p100, k80).
// A MIG slice type the table lacks (a100_3g.20gb) is derived from its
// whole GPU's rates times its share of that GPU's compute (wire/gputype),
// when the whole GPU is among the types; anything else it lacks is an
// error (see LoadDerived).
func Load(path string, gpuTypes []string) (*Table, error) { return LoadDerived(path, gpuTypes, nil) }

// LoadDerived is Load with the whole GPU types the table lacks made by
// derive (type -> derivation from a type the table has); Derived says how
// each derived type was made.
func LoadDerived(path string, gpuTypes []string, derive map[string]Derivation) (*Table, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t := &Table{GPUTypes: gpuTypes, rates: map[key][]float64{}, pairs: map[pairKey][][2]float64{}, Derived: map[string]string{}}
	// Types the table lacks: derived from one it has (derive), or a MIG
	// slice from its whole GPU's (itself measured or derived).
	base := map[string]string{} // derived type -> measured type
	factor := map[string]float64{}
	for _, g := range gpuTypes {
		if _, ok := doc[g]; ok {
			continue
		}
		from, f := "", 0.0
		if d, ok := derive[g]; ok && d.Factor > 0 {
			from, f = d.From, d.Factor
			t.Derived[g] = fmt.Sprintf("%s x %g (given)", d.From, d.Factor)
		} else if sl, ok := gputype.ParseSlice(g); ok {
			from, f = sl.Whole, sl.Share()
			if d, ok := derive[sl.Whole]; ok && d.Factor > 0 {
				from, f = d.From, d.Factor*sl.Share()
				t.Derived[g] = fmt.Sprintf("%s x %g (given) x %d/%d (its share of the %s)", d.From, d.Factor, sl.Compute, sl.Of, sl.Whole)
			} else {
				t.Derived[g] = fmt.Sprintf("%s x %d/%d (its share of the %s)", sl.Whole, sl.Compute, sl.Of, sl.Whole)
			}
		}
		if _, ok := doc[from]; !ok {
			return nil, fmt.Errorf("%s: no GPU type %q (derive it from a measured one, or give its whole GPU)", path, g)
		}
		base[g], factor[g] = from, f
	}
	for gi, g := range gpuTypes {
		if _, ok := base[g]; ok {
			continue // filled below, from the measured type's rows
		}
		entries := doc[g]
		for ks, v := range entries {
			m := keyRE.FindStringSubmatch(ks)
			if m == nil {
				return nil, fmt.Errorf("%s: bad job key %q", path, ks)
			}
			sf, _ := strconv.Atoi(m[2])
			var rate float64
			if err := json.Unmarshal(v["null"], &rate); err != nil {
				return nil, fmt.Errorf("%s: %s/%s: null: %w", path, g, ks, err)
			}
			k := key{m[1], sf}
			if t.rates[k] == nil {
				t.rates[k] = make([]float64, len(gpuTypes))
			}
			t.rates[k][gi] = rate
			for os, pv := range v {
				if os == "null" {
					continue
				}
				om := keyRE.FindStringSubmatch(os)
				if om == nil {
					return nil, fmt.Errorf("%s: %s/%s: bad job key %q", path, g, ks, os)
				}
				var both [2]float64
				if err := json.Unmarshal(pv, &both); err != nil {
					return nil, fmt.Errorf("%s: %s/%s/%s: want [this job, other job] steps/s: %w", path, g, ks, os, err)
				}
				if both[0] < 0 || both[1] < 0 {
					return nil, fmt.Errorf("%s: %s/%s/%s: negative throughput %v", path, g, ks, os, both)
				}
				osf, _ := strconv.Atoi(om[2])
				pk := pairKey{k, key{om[1], osf}}
				if t.pairs[pk] == nil {
					t.pairs[pk] = make([][2]float64, len(gpuTypes))
				}
				t.pairs[pk][gi] = both
			}
		}
	}
	for gi, g := range gpuTypes {
		from, ok := base[g]
		if !ok {
			continue
		}
		for ks, v := range doc[from] {
			m := keyRE.FindStringSubmatch(ks)
			if m == nil {
				return nil, fmt.Errorf("%s: bad job key %q", path, ks)
			}
			var rate float64
			if err := json.Unmarshal(v["null"], &rate); err != nil {
				return nil, fmt.Errorf("%s: %s/%s: null: %w", path, from, ks, err)
			}
			sf, _ := strconv.Atoi(m[2])
			k := key{m[1], sf}
			if t.rates[k] == nil {
				t.rates[k] = make([]float64, len(gpuTypes))
			}
			t.rates[k][gi] = rate * factor[g]
		}
	}
	for k := range t.rates {
		if k.Scale == 1 {
			t.JobTypes = append(t.JobTypes, k.Name)
		}
	}
	sort.Strings(t.JobTypes)
	return t, nil
}

// Rates returns the isolated throughput per GPU type of a job type at a
// scale factor, or nil if the table has no such entry.
func (t *Table) Rates(name string, scale int) []float64 {
	r := t.rates[key{name, scale}]
	if r == nil {
		return nil
	}
	return append([]float64(nil), r...)
}

// PairRates returns, per GPU type, the steps/s of job type a and of job
// type b (both at scale) when one of each shares a GPU; nil if the table
// never measured the pair. An entry of [0, 0] means they cannot share that
// type.
func (t *Table) PairRates(a, b string, scale int) [][2]float64 {
	r := t.pairs[pairKey{key{a, scale}, key{b, scale}}]
	if r == nil {
		return nil
	}
	return append([][2]float64(nil), r...)
}

// typesWithScale lists the job types measured at a scale factor.
func (t *Table) typesWithScale(sf int) []string {
	var out []string
	for _, n := range t.JobTypes {
		if t.rates[key{n, sf}] != nil {
			out = append(out, n)
		}
	}
	return out
}

// Job is one drawn job.
type Job struct {
	ID       int
	Type     string
	Scale    int
	Steps    float64   // total steps to run
	Rates    []float64 // isolated steps/s per GPU type (aggregate over Scale GPUs)
	Arrival  float64   // seconds
	Duration float64   // seconds on a V100 (the generator's draw)
}

// Generator draws Gavel-style jobs from a seeded source.
type Generator struct {
	T        *Table
	MultiGPU bool
	rng      *rand.Rand
	next     int
	clock    float64
	v100     int
}

// NewGenerator makes a generator; GPU type "v100" (if present) anchors the
// duration draw, as in Gavel, otherwise the first type does.
func NewGenerator(t *Table, seed int64, multiGPU bool) *Generator {
	g := &Generator{T: t, MultiGPU: multiGPU, rng: rand.New(rand.NewSource(seed))}
	for i, n := range t.GPUTypes {
		if n == "v100" {
			g.v100 = i
		}
	}
	return g
}

// Next draws one job; arrivals advance by an exponential gap of mean
// 3600/rate seconds when rate > 0, and stay at 0 otherwise (static trace).
func (g *Generator) Next(rate float64) Job {
	if rate > 0 {
		g.clock += g.rng.ExpFloat64() * 3600 / rate
	}
	sf := 1
	if g.MultiGPU {
		switch u := g.rng.Float64(); {
		case u < 0.70:
			sf = 1
		case u < 0.80:
			sf = 2
		case u < 0.95:
			sf = 4
		default:
			sf = 8
		}
	}
	types := g.T.typesWithScale(sf)
	name := types[g.rng.Intn(len(types))]
	var dur float64
	if g.rng.Float64() < 0.8 {
		dur = 60 * math.Pow(10, 1.5+1.5*g.rng.Float64())
	} else {
		dur = 60 * math.Pow(10, 3+g.rng.Float64())
	}
	rates := g.T.Rates(name, sf)
	j := Job{ID: g.next, Type: name, Scale: sf, Rates: rates, Arrival: g.clock, Duration: dur,
		Steps: dur * rates[g.v100]}
	g.next++
	return j
}

// Jitter scales each rate by an independent factor in [1-j, 1+j]; measured
// throughputs of real jobs are never identical, and a solver must not rely
// on duplicate rows.
func Jitter(rng *rand.Rand, rates []float64, j float64) []float64 {
	out := make([]float64, len(rates))
	for i, r := range rates {
		out[i] = r * (1 - j + 2*j*rng.Float64())
	}
	return out
}

// LoadAll reads a Gavel-format table with every GPU type it holds (the
// *_unconsolidated duplicates aside).
func LoadAll(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	var types []string
	for t := range top {
		if !strings.HasSuffix(t, "_unconsolidated") {
			types = append(types, t)
		}
	}
	if len(types) == 0 {
		return nil, errors.New("no GPU types in it")
	}
	sort.Strings(types)
	return Load(path, types)
}

// Model is the table's name of a single-GPU job type, matched without
// regard to case ("resnet-50 (batch size 64)" finds "ResNet-50 (batch
// size 64)"); ok false when the table has none.
func (t *Table) Model(name string) (string, bool) {
	if t.rates[key{name, 1}] != nil {
		return name, true
	}
	for _, n := range t.JobTypes {
		if strings.EqualFold(n, name) {
			return n, true
		}
	}
	return "", false
}

// Shared returns, on GPU type gpuType, the steps/s of single-GPU job
// types a and b while one of each shares one GPU, and each one's steps/s
// alone there; ok is false when the table never measured the pair on that
// type, or either cannot run there (Gavel's [0, 0]: their memory does not
// fit one GPU together).
func (t *Table) Shared(a, b, gpuType string) (ra, rb, soloA, soloB float64, ok bool) {
	k := -1
	for i, g := range t.GPUTypes {
		if g == gpuType {
			k = i
		}
	}
	a, okA := t.Model(a)
	b, okB := t.Model(b)
	if k < 0 || !okA || !okB {
		return 0, 0, 0, 0, false
	}
	pr := t.PairRates(a, b, 1)
	sa, sb := t.Rates(a, 1), t.Rates(b, 1)
	if pr == nil || sa == nil || sb == nil {
		return 0, 0, 0, 0, false
	}
	ra, rb, soloA, soloB = pr[k][0], pr[k][1], sa[k], sb[k]
	return ra, rb, soloA, soloB, ra > 0 && rb > 0 && soloA > 0 && soloB > 0
}
