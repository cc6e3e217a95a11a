package estimate

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/policy/workload"
)

// This file evaluates the completion of throughputs on GPU types a job has
// not run on, on Gavel's measured table (26 job types, 19 of them also at
// scale factors 2, 4, 8, on v100, p100, k80: 83 rows). Each row is a job; entries are
// hidden and predicted by several methods; errors are compared. The
// figures in docs/estimators.md come from
//
//	go test ./controller/estimate -run TestCompletionEvaluation -v -args -als
//
// (without -als the slow ALS baselines are left out).

var (
	evalALS   = flag.Bool("als", false, "TestCompletionEvaluation: compare with ALS matrix completion too (minutes)")
	evalIters = flag.Int("als-iters", 100, "ALS iterations")
)

const gavelTable = "../../../shared/data/gavel/simulation_throughputs.json"

var gavelTypes = []string{"v100", "p100", "k80"}

// contribSpeed is the speed table shipped in contrib/controller.conf: the
// admin's fallback the completion must beat.
var contribSpeed = map[string]float64{"v100": 3.36, "p100": 3.17, "k80": 1}

type evalRow struct {
	id    Identity
	rates []float64 // per gavelTypes; 0 = cannot run there
}

func loadGavelRows(t *testing.T) []evalRow {
	t.Helper()
	tab, err := workload.Load(gavelTable, gavelTypes)
	if err != nil {
		t.Fatalf("reading Gavel's table (tests read ../shared/data): %v", err)
	}
	var rows []evalRow
	for _, name := range tab.JobTypes {
		for _, sf := range []int{1, 2, 4, 8} {
			r := tab.Rates(name, sf)
			if r == nil {
				continue
			}
			// The model family is the job's name (users name jobs after
			// the model, not the batch size); batch size and scale make
			// different scripts.
			fam, bs, _ := strings.Cut(name, " (")
			rows = append(rows, evalRow{
				id:    Identity{User: "u", Name: fam, ScriptHash: fmt.Sprintf("%s-x%d", strings.TrimSuffix(bs, ")"), sf)},
				rates: r,
			})
		}
	}
	if len(rows) < 80 {
		t.Fatalf("Gavel's table: %d rows, want the 88 (job type, scale) rows", len(rows))
	}
	return rows
}

// evalCase: row i knows the types in known (the rest of its row is
// hidden); the others know what mask says; predict row i on target.
type evalCase struct {
	i      int
	known  []int
	target int
	mask   [][]bool // mask[r][g]: entry visible (for r != i)
}

// predictor returns the predicted steps/s of case c.
type predictor func(rows []evalRow, c evalCase) float64

func methodTable(speed map[string]float64) predictor {
	return func(rows []evalRow, c evalCase) float64 {
		var s float64
		for _, k := range c.known {
			s += math.Log(rows[c.i].rates[k] * speed[gavelTypes[c.target]] / speed[gavelTypes[k]])
		}
		return math.Exp(s / float64(len(c.known)))
	}
}

// methodThroughputs runs the production estimator: every visible entry is
// an observation (two samples, so it is trusted), row i is observed on its
// known types only.
func methodThroughputs(cfg ThroughputConfig) predictor {
	return func(rows []evalRow, c evalCase) float64 {
		cfg.Speed = contribSpeed
		tp := NewThroughputs(cfg)
		at := time.Unix(1e9, 0)
		obs := func(r evalRow, g int) {
			for n := 0; n < 2; n++ {
				if err := tp.Observe(r.id.Key(), gavelTypes[g], r.rates[g], at.Add(time.Duration(n)*time.Minute)); err != nil {
					panic(err)
				}
			}
		}
		for r := range rows {
			for g := range gavelTypes {
				if r != c.i && c.mask[r][g] && rows[r].rates[g] > 0 {
					obs(rows[r], g)
				}
			}
		}
		for _, k := range c.known {
			obs(rows[c.i], k)
		}
		e := tp.Estimate(rows[c.i].id.Key(), []string{gavelTypes[c.target]})[0]
		if e.Source == SourceMeasured || e.Source == SourceUnknown {
			panic("held-out entry estimated as " + e.Source)
		}
		return e.StepsPerSec
	}
}

// methodALS is low-rank matrix completion by alternating least squares,
// as Gavel does for unseen (job, type) pairs. log: on log throughputs with
// row and column biases (rank 0 = the additive model, i.e. a mean ratio
// fitted jointly); raw: on the throughputs themselves, no biases (Gavel's
// form).
func methodALS(rank int, logScale bool, lambda float64) predictor {
	return func(rows []evalRow, c evalCase) float64 {
		n, m := len(rows), len(gavelTypes)
		obs := make([][]float64, n) // NaN = hidden
		for r := range rows {
			obs[r] = make([]float64, m)
			for g := range obs[r] {
				v := rows[r].rates[g]
				vis := v > 0 && (r != c.i && c.mask[r][g])
				if r == c.i {
					vis = false
					for _, k := range c.known {
						vis = vis || k == g
					}
				}
				switch {
				case !vis:
					obs[r][g] = math.NaN()
				case logScale:
					obs[r][g] = math.Log(v)
				default:
					obs[r][g] = v
				}
			}
		}
		p := als(obs, rank, logScale, lambda)
		v := p(c.i, c.target)
		if logScale {
			return math.Exp(v)
		}
		return math.Max(v, 1e-6)
	}
}

// als fits obs (NaN = missing) and returns the predictor of entry (i, j).
func als(obs [][]float64, rank int, bias bool, lambda float64) func(i, j int) float64 {
	n, m := len(obs), len(obs[0])
	rng := rand.New(rand.NewSource(1))
	d := rank
	if bias {
		d++ // a constant feature carries the bias
	}
	// Row i: parameters a[i] (bias first, then factors); column j: b[j].
	a := make([][]float64, n)
	b := make([][]float64, m)
	for i := range a {
		a[i] = make([]float64, d)
	}
	for j := range b {
		b[j] = make([]float64, d)
		for k := range b[j] {
			b[j][k] = 0.5 + rng.Float64()
		}
	}
	var mu float64
	if bias {
		var s float64
		var cnt int
		for i := range obs {
			for _, v := range obs[i] {
				if !math.IsNaN(v) {
					s += v
					cnt++
				}
			}
		}
		mu = s / float64(cnt)
	}
	// With biases: pred = mu + a0 + b0 + sum a[k]b[k] (k >= 1). Solving
	// for a row: features (1, b[1:]), target v - mu - b0.
	feat := func(other []float64) []float64 {
		if !bias {
			return other
		}
		f := append([]float64{1}, other[1:]...)
		return f
	}
	offset := func(other []float64) float64 {
		if !bias {
			return 0
		}
		return mu + other[0]
	}
	solve := func(xs [][]float64, ys []float64) []float64 {
		A := make([][]float64, d)
		rhs := make([]float64, d)
		for k := range A {
			A[k] = make([]float64, d)
			A[k][k] = lambda
		}
		for r, x := range xs {
			for p := range d {
				rhs[p] += x[p] * ys[r]
				for q := range d {
					A[p][q] += x[p] * x[q]
				}
			}
		}
		return gauss(A, rhs)
	}
	for range *evalIters {
		for i := range obs {
			var xs [][]float64
			var ys []float64
			for j, v := range obs[i] {
				if !math.IsNaN(v) {
					xs = append(xs, feat(b[j]))
					ys = append(ys, v-offset(b[j]))
				}
			}
			a[i] = solve(xs, ys)
		}
		for j := range m {
			var xs [][]float64
			var ys []float64
			for i := range obs {
				if v := obs[i][j]; !math.IsNaN(v) {
					xs = append(xs, feat(a[i]))
					ys = append(ys, v-offset(a[i]))
				}
			}
			b[j] = solve(xs, ys)
		}
	}
	return func(i, j int) float64 {
		s := offset(b[j])
		if bias {
			s += a[i][0]
			for k := 1; k < d; k++ {
				s += a[i][k] * b[j][k]
			}
			return s
		}
		for k := range d {
			s += a[i][k] * b[j][k]
		}
		return s
	}
}

// gauss solves A x = b (A symmetric positive definite, small).
func gauss(A [][]float64, b []float64) []float64 {
	n := len(b)
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(A[r][c]) > math.Abs(A[p][c]) {
				p = r
			}
		}
		A[c], A[p] = A[p], A[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < n; r++ {
			f := A[r][c] / A[c][c]
			for k := c; k < n; k++ {
				A[r][k] -= f * A[c][k]
			}
			b[r] -= f * b[c]
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := b[r]
		for k := r + 1; k < n; k++ {
			s -= A[r][k] * x[k]
		}
		x[r] = s / A[r][r]
	}
	return x
}

type evalResult struct {
	n                   int
	median, mean, p90   float64 // absolute relative error
	medianLog, worstLog float64 // |log(pred/true)|
}

func evaluate(rows []evalRow, cases []evalCase, p predictor) evalResult {
	var rel, lg []float64
	for _, c := range cases {
		truth := rows[c.i].rates[c.target]
		pred := p(rows, c)
		rel = append(rel, math.Abs(pred-truth)/truth)
		lg = append(lg, math.Abs(math.Log(pred/truth)))
	}
	var sum float64
	for _, e := range rel {
		sum += e
	}
	r := evalResult{n: len(rel), mean: sum / float64(len(rel)), median: median(rel), medianLog: median(lg)}
	r.p90 = quantile(rel, 0.9)
	r.worstLog = quantile(lg, 1)
	return r
}

// scenarios builds the held-out cases: "one" — the job ran on one type,
// predict each other type; "two" — it ran on two, predict the third. The
// other jobs see their whole rows (dense) or, per seed, each entry with
// probability 1/2 (sparse: many jobs ran on one type only).
func scenarios(rows []evalRow, sparseSeeds int) map[string][]evalCase {
	full := make([][]bool, len(rows))
	for r := range full {
		full[r] = []bool{true, true, true}
	}
	masks := map[string][][][]bool{"dense": {full}}
	for s := range sparseSeeds {
		rng := rand.New(rand.NewSource(int64(s + 1)))
		mk := make([][]bool, len(rows))
		for r := range mk {
			mk[r] = make([]bool, len(gavelTypes))
			for g := range mk[r] {
				mk[r][g] = rng.Float64() < 0.5
			}
		}
		masks["sparse"] = append(masks["sparse"], mk)
	}
	out := map[string][]evalCase{}
	for mname, ms := range masks {
		for _, mask := range ms {
			for i, row := range rows {
				for tg := range gavelTypes {
					if row.rates[tg] <= 0 {
						continue
					}
					var others []int
					for g := range gavelTypes {
						if g != tg && row.rates[g] > 0 {
							others = append(others, g)
						}
					}
					for _, k := range others {
						out["one/"+mname] = append(out["one/"+mname], evalCase{i: i, known: []int{k}, target: tg, mask: mask})
					}
					if len(others) == 2 {
						out["two/"+mname] = append(out["two/"+mname], evalCase{i: i, known: others, target: tg, mask: mask})
					}
				}
			}
		}
	}
	return out
}

// oracleSpeed is the best fixed speed table in hindsight: each type's
// geometric-mean throughput over the rows that ran everywhere. No admin
// has it; it shows what per-job information adds over any fixed table.
func oracleSpeed(rows []evalRow) map[string]float64 {
	sp := map[string]float64{}
	for g, ty := range gavelTypes {
		var s float64
		var n int
		for _, r := range rows {
			if r.rates[0] > 0 && r.rates[1] > 0 && r.rates[2] > 0 {
				s += math.Log(r.rates[g])
				n++
			}
		}
		sp[ty] = math.Exp(s / float64(n))
	}
	return sp
}

func TestCompletionEvaluation(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluation on Gavel's table")
	}
	rows := loadGavelRows(t)
	methods := []struct {
		name string
		p    predictor
	}{
		{"table (contrib speed)", methodTable(contribSpeed)},
		{"table (oracle, hindsight)", methodTable(oracleSpeed(rows))},
		{"ratio median, pooled", methodThroughputs(ThroughputConfig{GroupWeight: -1})},
		{"ratio median, same-name w=0.25", methodThroughputs(ThroughputConfig{GroupWeight: 0.25})},
		{"ratio median, same-name w=0.5 (default)", methodThroughputs(ThroughputConfig{})},
		{"ratio median, same-name w=1", methodThroughputs(ThroughputConfig{GroupWeight: 1})},
		{"ratio median, same-name w=4", methodThroughputs(ThroughputConfig{GroupWeight: 4})},
	}
	if *evalALS {
		methods = append(methods, []struct {
			name string
			p    predictor
		}{
			{"ALS log, bias only (rank 0)", methodALS(0, true, 1e-3)},
			{"ALS log, bias + rank 1, l=0.1", methodALS(1, true, 0.1)},
			{"ALS log, bias + rank 1, l=1", methodALS(1, true, 1)},
			{"ALS log, bias + rank 2, l=1", methodALS(2, true, 1)},
			{"ALS raw, rank 1 (Gavel-like)", methodALS(1, false, 1e-3)},
			{"ALS raw, rank 2 (Gavel-like), l=1", methodALS(2, false, 1)},
		}...)
	}
	sc := scenarios(rows, 3)
	names := make([]string, 0, len(sc))
	for n := range sc {
		names = append(names, n)
	}
	sort.Strings(names)
	results := map[string]map[string]evalResult{}
	for _, s := range names {
		results[s] = map[string]evalResult{}
		t.Logf("scenario %s: %d held-out entries (abs relative error; |ln ratio|)", s, len(sc[s]))
		t.Logf("  %-40s %8s %8s %8s %8s %8s", "method", "median", "mean", "p90", "med|ln|", "max|ln|")
		for _, m := range methods {
			r := evaluate(rows, sc[s], m.p)
			results[s][m.name] = r
			t.Logf("  %-40s %8.3f %8.3f %8.3f %8.3f %8.3f", m.name, r.median, r.mean, r.p90, r.medianLog, r.worstLog)
		}
	}
	// The method Throughputs uses must beat the admin's table on held-out
	// entries in every scenario, on the median and the mean error.
	for _, s := range names {
		got, base := results[s]["ratio median, same-name w=0.5 (default)"], results[s]["table (contrib speed)"]
		if !(got.median < base.median && got.mean < base.mean) {
			t.Errorf("%s: completion (median %.3f, mean %.3f) does not beat the speed table (median %.3f, mean %.3f)",
				s, got.median, got.mean, base.median, base.mean)
		}
	}
}
