package lp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// MaxMin is the block-structured LP behind every max-min policy (las,
// makespan, the water-filling levels of hierarchical, the inner problems of
// ftf):
//
//	maximise t
//	s.t.  sum_k A[j][k] x[j][k] >= C[j] + D[j] t   for each job j  (requirement)
//	      sum_k x[j][k]        <= 1               for each job j  (time)
//	      sum_j S[j] x[j][k]   <= Cap[k]          for each type k (capacity)
//	      x >= 0, and x[j][k] = 0 wherever A[j][k] == 0
//
// Jobs are many and types few (3 in Gavel's clusters), so only K rows couple
// the jobs. SolveMaxMin exploits that: it prices the K capacities, fixes
// every job whose best use of the cluster is unambiguous at those prices to
// its cheapest type, solves the small LP left over exactly, and then proves
// the combined solution optimal by checking each fixed job's reduced costs
// against the exact prices. Jobs that fail the check join the small LP and
// it is solved again, so the result is an exact optimum, not an estimate.
type MaxMin struct {
	Cap  []float64
	Jobs []BlockJob
}

// BlockJob is one job's block of a MaxMin or Linear problem.
type BlockJob struct {
	A    []float64 // per type: coefficient in the requirement row; 0 = cannot run there
	S    float64   // GPUs the job occupies while running (scale factor)
	C, D float64   // requirement C + D t; D = 0 freezes the job at C
	V    []float64 // Linear only: objective value per unit of x
}

// MaxMinResult is an exact optimum of a MaxMin.
type MaxMinResult struct {
	T     float64
	X     [][]float64
	Price []float64 // capacity duals
	Y     []float64 // requirement duals: > 0 means the job is a bottleneck
	// Reduced is the number of jobs the final small LP carried in full and
	// Rounds the number of small LPs solved.
	Reduced, Rounds int
}

// perturbPrices, set only by tests, spoils the price estimate to check
// that the exact phase recovers from a poor start.
var perturbPrices func(p []float64, t *float64)

// ErrUnbounded is returned when no job's requirement grows with t.
var ErrUnbounded = errors.New("lp: max-min value is unbounded (no job depends on t)")

// ratio is the price of one unit of job j's requirement on type k.
func ratio(j *BlockJob, p []float64, k int) float64 { return j.S * p[k] / j.A[k] }

// FullLP writes the whole problem as a Problem: variable 0 is t, then x in
// job-major order over the allowed types. It is what --emit-mps exports and
// what tests solve densely to cross-check SolveMaxMin.
func (mm *MaxMin) FullLP() *Problem {
	p := &Problem{}
	p.AddVar("t", 1)
	K := len(mm.Cap)
	capRows := make([]Row, K)
	for k := range capRows {
		capRows[k] = Row{Name: "cap" + strconv.Itoa(k), Sense: LE, RHS: mm.Cap[k]}
	}
	var rows []Row
	for j := range mm.Jobs {
		b := &mm.Jobs[j]
		req := Row{Name: "req" + strconv.Itoa(j), Sense: GE, RHS: b.C, Idx: []int{0}, Val: []float64{-b.D}}
		tim := Row{Name: "time" + strconv.Itoa(j), Sense: LE, RHS: 1}
		for k, a := range b.A {
			if a <= 0 {
				continue
			}
			v := p.AddVar(fmt.Sprintf("x%d_%d", j, k), 0)
			req.Idx, req.Val = append(req.Idx, v), append(req.Val, a)
			tim.Idx, tim.Val = append(tim.Idx, v), append(tim.Val, 1)
			capRows[k].Idx, capRows[k].Val = append(capRows[k].Idx, v), append(capRows[k].Val, b.S)
		}
		rows = append(rows, req, tim)
	}
	p.Rows = append(capRows, rows...)
	return p
}

// fix is a job's block held at one vertex: x[k1] = a1 + b1 t and, for a
// split between a slow cheap type and a fast dear one (the job's time limit
// binding), x[k2] = a2 + b2 t. k1 < 0 means the job is solved in full.
type fix struct {
	k1, k2         int
	a1, b1, a2, b2 float64
}

var free = fix{k1: -1, k2: -1}

// vertex builds the fix for job b on type k1 alone (k2 < 0) or split.
func vertex(b *BlockJob, k1, k2 int) fix {
	if k2 < 0 {
		return fix{k1: k1, k2: -1, a1: b.C / b.A[k1], b1: b.D / b.A[k1]}
	}
	d := b.A[k2] - b.A[k1]
	a2, b2 := (b.C-b.A[k1])/d, b.D/d
	return fix{k1: k1, k2: k2, a1: 1 - a2, b1: -b2, a2: a2, b2: b2}
}

// blockDuals returns the job's requirement dual y and time dual u at the
// vertex f for capacity prices p.
func blockDuals(b *BlockJob, p []float64, f fix) (y, u float64) {
	c1 := b.S * p[f.k1]
	if f.k2 < 0 {
		return c1 / b.A[f.k1], 0
	}
	c2 := b.S * p[f.k2]
	y = (c2 - c1) / (b.A[f.k2] - b.A[f.k1])
	return y, b.A[f.k1]*y - c1
}

// optimalAt reports whether vertex f is an optimal solution of job b's
// block (cheapest way to reach its requirement at prices p and value t),
// by checking primal feasibility and dual feasibility of its block duals.
func optimalAt(b *BlockJob, p []float64, t float64, f fix, tol float64) bool {
	x1 := f.a1 + f.b1*t
	if x1 < -tol || x1 > 1+tol {
		return false
	}
	if f.k2 >= 0 {
		if x2 := f.a2 + f.b2*t; x2 < -tol || x2 > 1+tol {
			return false
		}
	}
	y, u := blockDuals(b, p, f)
	scale := 0.0
	for k := range p {
		scale = math.Max(scale, b.S*p[k])
	}
	dt := tol * (scale + 1e-300)
	if y < -dt || u < -dt {
		return false
	}
	for k, a := range b.A {
		if a > 0 && a*y-u > b.S*p[k]+dt*(1+a) {
			return false
		}
	}
	return true
}

// SolveMaxMin returns an exact optimum of mm (see MaxMin). Identical jobs
// are solved as one (see groupJobs); Reduced then counts groups.
//
// It honours ctx: the price search, the exact phase's rounds and the dense
// simplex's pivots all look at it, so a cancelled solve returns ctx.Err()
// after at most one pass over the jobs or 16 pivots.
func SolveMaxMin(ctx context.Context, mm *MaxMin) (MaxMinResult, error) {
	return SolveMaxMinFrom(ctx, mm, nil, 0)
}

// SolveMaxMinFrom is SolveMaxMin started from an estimate of the capacity
// prices (any positive scale) and of t*, such as PathMaxMin.Estimate's for
// the piece of a path that holds t*, instead of its own price search. The
// result is exact whatever the estimate; a poor one only costs rounds of
// the exact phase. A nil price means no estimate.
func SolveMaxMinFrom(ctx context.Context, mm *MaxMin, price []float64, t float64) (MaxMinResult, error) {
	var est *estimate
	if price != nil {
		est = &estimate{p: append([]float64(nil), price...), t: t}
	}
	merged, of, size := groupJobs(mm.Jobs)
	if merged == nil {
		return solveMaxMin(ctx, mm, est)
	}
	res, err := solveMaxMin(ctx, &MaxMin{Cap: mm.Cap, Jobs: merged}, est)
	if err != nil {
		return res, err
	}
	res.X = expandRows(res.X, of)
	y := make([]float64, len(of))
	for j, g := range of {
		y[j] = res.Y[g] / size[g]
	}
	res.Y = y
	return res, nil
}

// estimate is a price estimate handed to solveMaxMin.
type estimate struct {
	p []float64
	t float64
}

func solveMaxMin(ctx context.Context, mm *MaxMin, est *estimate) (MaxMinResult, error) {
	if err := ctx.Err(); err != nil {
		return MaxMinResult{}, err
	}
	n := len(mm.Jobs)
	tmax := math.Inf(1)
	active := 0
	for j := range mm.Jobs {
		b := &mm.Jobs[j]
		best := 0.0
		for _, a := range b.A {
			best = math.Max(best, a)
		}
		if b.D > 0 {
			active++
			tmax = math.Min(tmax, (best-b.C)/b.D)
		} else if b.C > best*(1+1e-12) {
			return MaxMinResult{}, fmt.Errorf("lp: job %d needs %g, at most %g is reachable", j, b.C, best)
		}
	}
	if active == 0 {
		return MaxMinResult{}, ErrUnbounded
	}
	if tmax < 0 {
		return MaxMinResult{}, fmt.Errorf("lp: max-min problem infeasible (t bound %g)", tmax)
	}
	var p []float64
	var that float64
	if est != nil {
		p, that = est.p, math.Min(math.Max(est.t, 0), tmax)
	} else if K := len(mm.Cap); K == 2 || K == 3 {
		var err error
		if p, that, err = cutPrices(mm, tmax, ctx.Err); err != nil {
			return MaxMinResult{}, err
		}
	} else {
		var err error
		if p, that, err = approxPrices(ctx, mm, tmax); err != nil {
			return MaxMinResult{}, err
		}
	}
	if perturbPrices != nil {
		perturbPrices(p, &that)
	}

	// Classify at the approximate prices, solve the small LP exactly and
	// prove the result; jobs that fail the proof are released into the
	// small LP. That is all it takes when the estimate is good (one round
	// at 2,048 jobs). A poor estimate misclassifies hundreds of jobs, and
	// releasing them all would hand the dense simplex an LP of thousands
	// of rows (minutes), so past maxFree released jobs the exact phase
	// reclassifies instead: at the small LP's exact prices when those hold
	// all but maxFree jobs (they are the optimum's prices whenever the
	// held structure is right; at most 3 times, as they could cycle), else
	// at the estimate with a wider margin, which frees every job whose
	// choice the estimate's error could flip.
	// The margin grows each time, so this ends; at margin 1 every job is
	// free and the small LP is the whole LP.
	margin := 1e-3
	maxFree := 64 + n/16
	fixed := make([]fix, n)
	classifyAll := func(p []float64, t, margin float64) int {
		nfree := 0
		for j := range mm.Jobs {
			fixed[j] = mm.classify(j, p, t, margin)
			if fixed[j].k1 < 0 {
				nfree++
			}
		}
		return nfree
	}
	classifyAll(p, that, margin)
	res := MaxMinResult{}
	var lastGood []fix // the last feasible structure, its violators freed
	trial := make([]fix, n)
	reclass := 0 // reclassifications at the small LP's prices (bounded: they could cycle)
	for round := 1; ; round++ {
		res.Rounds = round
		if err := ctx.Err(); err != nil {
			return res, err
		}
		sol, red, atLimit, err := mm.solveReduced(ctx, fixed)
		if err != nil {
			return res, err
		}
		if sol.Price == nil { // restricted problem infeasible
			if lastGood != nil {
				copy(fixed, lastGood)
				lastGood = nil
			}
			for _, j := range atLimit {
				fixed[j] = free
			}
			continue
		}
		copy(trial, fixed)
		bad := len(atLimit)
		for _, j := range atLimit {
			trial[j] = free
		}
		for j := range mm.Jobs {
			if trial[j].k1 >= 0 && !optimalAt(&mm.Jobs[j], sol.Price, sol.T, trial[j], 1e-10) {
				trial[j] = free
				bad++
			}
		}
		if bad == 0 {
			res.T, res.X, res.Price, res.Y, res.Reduced = sol.T, sol.X, sol.Price, sol.Y, red
			return res, nil
		}
		if red+bad <= maxFree || margin >= 1 {
			copy(fixed, trial)
			continue
		}
		lastGood = append(lastGood[:0], trial...)
		if reclass < 3 {
			reclass++
			if classifyAll(sol.Price, sol.T, 1e-3) <= maxFree {
				continue
			}
		}
		margin = math.Min(1, margin*4)
		classifyAll(p, that, margin)
	}
}

// classify returns the vertex a job can be fixed to at prices p and value
// t: the cheapest way to meet its requirement, provided no other vertex is
// within the relative margin and the requirement is not near a breakpoint.
func (mm *MaxMin) classify(j int, p []float64, t, margin float64) fix {
	b := &mm.Jobs[j]
	R := b.C + b.D*t
	// A frozen requirement (D = 0) does not move with t, so its breakpoints
	// are exact: no margin around them. A frozen job that needs nothing is
	// held at zero on its cheapest type (dual feasible whatever the ties).
	rm := margin
	if b.D == 0 {
		rm = 0
		if R <= 0 {
			kb := -1
			for k, a := range b.A {
				if a > 0 && (kb < 0 || ratio(b, p, k) < ratio(b, p, kb)) {
					kb = k
				}
			}
			if kb < 0 {
				return free
			}
			return vertex(b, kb, -1)
		}
	}
	// The candidate vertices; a job is held at the cheapest only if every
	// other one costs more by a margin of the cost of the difference
	// between the two allocations, sum_k S p_k |x_k - x'_k|: that is how
	// much a relative error of the prices can move the comparison. (A
	// margin on the total cost instead freed every job that water-filling
	// had frozen at almost its whole time on its best type, where a
	// near-full split costs nearly the same as the single type: most of
	// the small LP at 64 entities.)
	type cand struct {
		cost float64
		f    fix
	}
	var buf [16]cand
	cands := buf[:0]
	for k1, a1 := range b.A {
		if a1 <= 0 {
			continue
		}
		c1 := b.S * p[k1]
		if R <= a1*(1-rm) {
			cands = append(cands, cand{c1 * R / a1, vertex(b, k1, -1)})
		} else if R < a1*(1+rm) {
			return free // at a breakpoint
		}
		for k2, a2 := range b.A {
			if a2 > a1*(1+margin) && R > a1*(1+rm) && R < a2*(1-rm) {
				x2 := (R - a1) / (a2 - a1)
				cands = append(cands, cand{c1*(1-x2) + b.S*p[k2]*x2, vertex(b, k1, k2)})
			}
		}
	}
	bi := -1
	for i, c := range cands {
		if bi < 0 || c.cost < cands[bi].cost {
			bi = i
		}
	}
	if bi < 0 || !(cands[bi].cost > 0) {
		return free
	}
	bf := cands[bi].f
	for i, c := range cands {
		if i == bi {
			continue
		}
		diff := 0.0
		for k := range b.A {
			diff += p[k] * math.Abs(shareAt(c.f, k, t)-shareAt(bf, k, t))
		}
		if !(c.cost-cands[bi].cost > margin*b.S*diff) {
			return free
		}
	}
	return bf
}

// shareAt is the share of type k at t under fix f.
func shareAt(f fix, k int, t float64) float64 {
	switch k {
	case f.k1:
		return f.a1 + f.b1*t
	case f.k2:
		return f.a2 + f.b2*t
	}
	return 0
}

// blockCost is the cheapest way (at prices p) for job b to reach
// requirement R within its time limit, and the derivative of that cost in
// R; +Inf when R is out of reach. It is convex and piecewise linear in R.
//
// Where two ways tie, the slope is the larger of theirs: at a kink that is
// the derivative from the right, and at R = max_k A_k (the end of reach)
// the derivative from the left, so Newton's method from above (valueAt)
// never steps past the root. Taking whichever tied way came first broke
// that at t = tmax, where the job that sets tmax is exactly at its best
// rate: the single-type way and the split ending on that type tie there,
// and the split's smaller slope sent valueAt from t* = 0.030 to 0.0004 on
// a water-filling level (the exact phase then carried 2,047 of 2,048 jobs
// in full, 4.4 s).
func blockCost(b *BlockJob, p []float64, R float64) (cost, slope float64) {
	if R <= 0 {
		return 0, 0
	}
	cost, slope = math.Inf(1), 0
	take := func(c, s float64) {
		switch {
		case c < cost*(1-1e-12):
			cost, slope = c, s
		case c <= cost*(1+1e-12) && s > slope:
			cost, slope = math.Min(cost, c), s
		}
	}
	for k1, a1 := range b.A {
		if a1 <= 0 {
			continue
		}
		c1 := b.S * p[k1]
		if R <= a1 {
			take(c1*R/a1, c1/a1)
			continue
		}
		for k2, a2 := range b.A {
			if a2 >= R {
				x2 := (R - a1) / (a2 - a1)
				c2 := b.S * p[k2]
				take(c1*(1-x2)+c2*x2, (c2-c1)/(a2-a1))
			}
		}
	}
	return cost, slope
}

// valueAt is the Lagrangian bound t*(p): the largest t whose cheapest
// requirements fit the priced capacity, found by Newton's method from
// above (exact for a convex piecewise-linear function in a few steps).
func (mm *MaxMin) valueAt(p []float64, hi float64) float64 {
	budget := 0.0
	for k, c := range mm.Cap {
		budget += c * p[k]
	}
	t := hi
	for it := 0; it < 30; it++ {
		g, dg := -budget, 0.0
		for j := range mm.Jobs {
			b := &mm.Jobs[j]
			c, s := blockCost(b, p, b.C+b.D*t)
			g += c
			dg += s * b.D
		}
		if math.IsInf(g, 1) {
			t *= 1 - 1e-9 // just past some job's reach; step inside
			continue
		}
		if math.Abs(g) <= budget*1e-12 || dg <= 0 {
			return t
		}
		nt := t - g/dg
		if g < 0 || !(nt < t) {
			return t
		}
		t = math.Max(nt, 0)
	}
	return t
}

// approxPrices minimises the Lagrangian bound t*(p) over the price
// simplex. It is quasi-convex, so golden-section searches along the
// simplex's edge directions converge; the estimate only has to be good,
// since the exact phase corrects any job it misclassifies. The bound
// accounts for time limits, which bind for many jobs when the cluster is
// not heavily oversubscribed.
func approxPrices(ctx context.Context, mm lagrangian, tmax float64) ([]float64, float64, error) {
	K := len(mm.capacities())
	p := make([]float64, K)
	for k := range p {
		p[k] = 1 / float64(K)
	}
	// Warm-start Newton at the last value: g is convex, so from below the
	// first step overshoots above the root and it converges from there.
	warm := tmax
	h := func(p []float64) float64 {
		// start a little above the last value found, but never below
		// the root: fall back to tmax if the start is already feasible
		v := mm.valueAt(p, math.Min(tmax, warm*1.02))
		if v >= math.Min(tmax, warm*1.02)*(1-1e-12) {
			v = mm.valueAt(p, tmax)
		}
		warm = v
		return v
	}
	best := h(p)
	if K == 1 {
		return p, best, ctx.Err()
	}
	q := make([]float64, K)
	for sweep := 0; sweep < 4; sweep++ {
		start := best
		for i := 0; i < K; i++ {
			for k := i + 1; k < K; k++ {
				f := func(d float64) float64 {
					copy(q, p)
					q[i] += d
					q[k] -= d
					return h(q)
				}
				if err := ctx.Err(); err != nil {
					return nil, 0, err
				}
				lo, hi := goldenSection(f, -p[i], p[k], 28)
				d := (lo + hi) / 2
				if v := f(d); v < best {
					best = v
					p[i] += d
					p[k] -= d
				}
			}
		}
		if !(best < start*(1-1e-7)) {
			break
		}
	}
	return p, best, nil
}

type reducedSol struct {
	T     float64
	X     [][]float64
	Price []float64
	Y     []float64
}

// solveReduced solves the problem with every fixed job held at its vertex,
// which makes its use of capacity linear in t; only the free jobs are
// carried in full. It returns the fixed jobs whose vertex validity range
// is what limits t, so that the caller frees them.
func (mm *MaxMin) solveReduced(ctx context.Context, fixed []fix) (reducedSol, int, []int, error) {
	K := len(mm.Cap)
	p := &Problem{}
	p.AddVar("t", 1)
	capRows := make([]Row, K)
	tcoef := make([]float64, K)
	for k := range capRows {
		capRows[k] = Row{Sense: LE, RHS: mm.Cap[k]}
	}
	tHi, tLo := math.Inf(1), math.Inf(-1)
	// bound on t from keeping x = a + b t within [0, hiX]
	bound := func(a, b, hiX float64) {
		switch {
		case b > 0:
			tLo = math.Max(tLo, -a/b)
			if hiX < math.Inf(1) {
				tHi = math.Min(tHi, (hiX-a)/b)
			}
		case b < 0:
			tHi = math.Min(tHi, -a/b)
		}
	}
	type amb struct {
		j      int
		vars   []int
		types  []int
		reqRow int
	}
	var ambs []amb
	var jobRows []Row
	for j := range mm.Jobs {
		b := &mm.Jobs[j]
		if f := fixed[j]; f.k1 >= 0 {
			capRows[f.k1].RHS -= b.S * f.a1
			tcoef[f.k1] += b.S * f.b1
			if f.k2 >= 0 {
				capRows[f.k2].RHS -= b.S * f.a2
				tcoef[f.k2] += b.S * f.b2
				bound(f.a1, f.b1, math.Inf(1))
				bound(f.a2, f.b2, math.Inf(1))
			} else {
				bound(f.a1, f.b1, 1)
			}
			continue
		}
		a := amb{j: j, reqRow: K + len(jobRows)}
		req := Row{Sense: GE, RHS: b.C, Idx: []int{0}, Val: []float64{-b.D}}
		tim := Row{Sense: LE, RHS: 1}
		for k, av := range b.A {
			if av <= 0 {
				continue
			}
			v := p.AddVar("", 0)
			a.vars, a.types = append(a.vars, v), append(a.types, k)
			req.Idx, req.Val = append(req.Idx, v), append(req.Val, av)
			tim.Idx, tim.Val = append(tim.Idx, v), append(tim.Val, 1)
			capRows[k].Idx, capRows[k].Val = append(capRows[k].Idx, v), append(capRows[k].Val, b.S)
		}
		jobRows = append(jobRows, req, tim)
		ambs = append(ambs, a)
	}
	for k := range capRows {
		if tcoef[k] != 0 {
			capRows[k].Idx = append(capRows[k].Idx, 0)
			capRows[k].Val = append(capRows[k].Val, tcoef[k])
		}
	}
	p.Rows = append(capRows, jobRows...)
	hiRow, loRow := -1, -1
	if !math.IsInf(tHi, 1) {
		hiRow = p.AddRow(Row{Sense: LE, RHS: tHi, Idx: []int{0}, Val: []float64{1}})
	}
	// Lower limits (a split job's fast share must not go negative) are
	// left out on purpose: as hard rows they can make the restricted
	// problem infeasible, while left out a violation just shows up as a
	// negative share that the optimality check rejects.
	_ = tLo
	r, err := SolveDenseContext(ctx, p)
	if err != nil {
		return reducedSol{}, len(ambs), nil, err
	}
	if r.Status == Infeasible && len(ambs) < len(mm.Jobs) {
		// The fixed vertices do not fit together: free every fixed job with
		// a lower limit on t (splits, frozen requirements), or failing
		// that, everyone.
		var out []int
		for j, f := range fixed {
			if f.k1 >= 0 && (f.k2 >= 0 || mm.Jobs[j].C > 0) {
				out = append(out, j)
			}
		}
		if len(out) == 0 {
			for j, f := range fixed {
				if f.k1 >= 0 {
					out = append(out, j)
				}
			}
		}
		return reducedSol{}, len(ambs), out, nil
	}
	if r.Status != Optimal {
		return reducedSol{}, len(ambs), nil, ErrNotOptimal{r.Status}
	}
	sol := reducedSol{T: r.X[0], X: make([][]float64, len(mm.Jobs)), Price: make([]float64, K), Y: make([]float64, len(mm.Jobs))}
	for k := range sol.Price {
		sol.Price[k] = math.Max(0, r.Dual[k])
	}
	for j := range mm.Jobs {
		sol.X[j] = make([]float64, K)
		if f := fixed[j]; f.k1 >= 0 {
			sol.X[j][f.k1] = math.Max(0, f.a1+f.b1*sol.T)
			if f.k2 >= 0 {
				sol.X[j][f.k2] = math.Max(0, f.a2+f.b2*sol.T)
			}
			sol.Y[j], _ = blockDuals(&mm.Jobs[j], sol.Price, f)
		}
	}
	for _, a := range ambs {
		for i, v := range a.vars {
			sol.X[a.j][a.types[i]] = math.Max(0, r.X[v])
		}
		sol.Y[a.j] = math.Max(0, -r.Dual[a.reqRow])
	}
	// A binding validity bound means some fixed job's vertex is what stops
	// t; those jobs go back to the caller to be solved in full.
	var atLimit []int
	if (hiRow >= 0 && r.Dual[hiRow] > 1e-12) || (loRow >= 0 && r.Dual[loRow] < -1e-12) {
		for j := range mm.Jobs {
			if f := fixed[j]; f.k1 >= 0 && atBound(f, sol.T) {
				atLimit = append(atLimit, j)
			}
		}
	}
	return sol, len(ambs), atLimit, nil
}

// atBound reports whether a fixed vertex sits at the edge of its validity
// range at t.
func atBound(f fix, t float64) bool {
	const eps = 1e-9
	x1 := f.a1 + f.b1*t
	if x1 < eps || (f.k2 < 0 && x1 > 1-eps) {
		return true
	}
	return f.k2 >= 0 && f.a2+f.b2*t < eps
}

// goldenSection narrows [lo, hi] around the minimum of a unimodal f by
// iters golden-section steps and returns the final bracket. The price
// searches of the max-min and linear solvers both use it.
func goldenSection(f func(float64) float64, lo, hi float64, iters int) (float64, float64) {
	const gr = 0.6180339887498949 // (sqrt(5)-1)/2
	x1, x2 := hi-gr*(hi-lo), lo+gr*(hi-lo)
	f1, f2 := f(x1), f(x2)
	for it := 0; it < iters; it++ {
		if f1 <= f2 {
			hi, x2, f2 = x2, x1, f1
			x1 = hi - gr*(hi-lo)
			f1 = f(x1)
		} else {
			lo, x1, f1 = x1, x2, f2
			x2 = lo + gr*(hi-lo)
			f2 = f(x2)
		}
	}
	return lo, hi
}
