package lp

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// Linear is the block-structured LP behind max-throughput, min-cost and
// min-cost-slo:
//
//	maximise sum_jk V[j][k] x[j][k]
//	s.t.  sum_k A[j][k] x[j][k] >= C[j]   (only where C[j] > 0: an SLO)
//	      sum_k x[j][k] <= 1,   sum_j S[j] x[j][k] <= Cap[k],   x >= 0
//
// x[j][k] exists only where A[j][k] > 0. SolveLinear uses the same
// price-then-verify scheme as SolveMaxMin.
type Linear struct {
	Cap  []float64
	Jobs []BlockJob
}

// LinearResult is an exact optimum of a Linear.
type LinearResult struct {
	Objective       float64
	X               [][]float64
	Price           []float64
	Reduced, Rounds int
}

// FullLP writes the whole problem; x columns in job-major order over the
// allowed types.
func (l *Linear) FullLP() *Problem {
	p := &Problem{}
	K := len(l.Cap)
	capRows := make([]Row, K)
	for k := range capRows {
		capRows[k] = Row{Name: "cap" + strconv.Itoa(k), Sense: LE, RHS: l.Cap[k]}
	}
	var rows []Row
	for j := range l.Jobs {
		b := &l.Jobs[j]
		req := Row{Name: "req" + strconv.Itoa(j), Sense: GE, RHS: b.C}
		tim := Row{Name: "time" + strconv.Itoa(j), Sense: LE, RHS: 1}
		for k, a := range b.A {
			if a <= 0 {
				continue
			}
			v := p.AddVar(fmt.Sprintf("x%d_%d", j, k), b.V[k])
			req.Idx, req.Val = append(req.Idx, v), append(req.Val, a)
			tim.Idx, tim.Val = append(tim.Idx, v), append(tim.Val, 1)
			capRows[k].Idx, capRows[k].Val = append(capRows[k].Idx, v), append(capRows[k].Val, b.S)
		}
		if b.C > 0 {
			rows = append(rows, req)
		}
		rows = append(rows, tim)
	}
	p.Rows = append(capRows, rows...)
	return p
}

// lfix is a job of a Linear held at one vertex of its block: x[k1] = x1
// and, where k2 >= 0, x[k2] = x2. k1 = lzero: held at x = 0. k1 = lfree:
// solved in the small LP, over all its types (mask 0) or only the types
// in mask (the types of its vertices that tie at the estimated prices;
// such a job is checked like a held one and freed in full if it fails).
type lfix struct {
	k1, k2 int
	x1, x2 float64
	mask   uint64
}

const (
	lfree = -1
	lzero = -2
)

// value is the fix's objective at prices p: sum over its types of
// (V_k - S p_k) x_k, the job's term of the Lagrangian.
func (f lfix) value(b *BlockJob, p []float64) float64 {
	v := 0.0
	if f.k1 >= 0 {
		v += (b.V[f.k1] - b.S*p[f.k1]) * f.x1
	}
	if f.k2 >= 0 {
		v += (b.V[f.k2] - b.S*p[f.k2]) * f.x2
	}
	return v
}

// blockVertices calls visit for every vertex of job b's block
// {x >= 0, sum_k x_k <= 1, sum_k A_k x_k >= C}. Without a requirement
// (C <= 0) they are 0 and each e_k. With one, a vertex has at most two
// non-zeros: one type alone with its time binding (x_k = 1, needs
// A_k >= C) or its requirement binding (x_k = C/A_k), or a slow and a
// fast type with both binding (A_k1 < C < A_k2).
func blockVertices(b *BlockJob, visit func(lfix)) {
	if b.C <= 0 {
		visit(lfix{k1: lzero, k2: -1})
		for k, a := range b.A {
			if a > 0 {
				visit(lfix{k1: k, k2: -1, x1: 1})
			}
		}
		return
	}
	for k1, a1 := range b.A {
		if a1 <= 0 {
			continue
		}
		if a1 >= b.C {
			visit(lfix{k1: k1, k2: -1, x1: 1})
			if a1 > b.C {
				visit(lfix{k1: k1, k2: -1, x1: b.C / a1})
			}
			continue
		}
		for k2, a2 := range b.A {
			if a2 > b.C {
				x2 := (b.C - a1) / (a2 - a1)
				visit(lfix{k1: k1, k2: k2, x1: 1 - x2, x2: x2})
			}
		}
	}
}

// blockBest is the best vertex of job b's block at prices p, its value
// and the value of the runner-up (-Inf if none). ok is false when the
// block is empty (an SLO no type can meet).
func blockBest(b *BlockJob, p []float64) (best lfix, v1, v2 float64, ok bool) {
	v1, v2 = math.Inf(-1), math.Inf(-1)
	blockVertices(b, func(f lfix) {
		v := f.value(b, p)
		if !ok || v > v1 {
			if ok {
				v2 = v1
			}
			best, v1, ok = f, v, true
		} else if v > v2 {
			v2 = v
		}
	})
	return best, v1, v2, ok
}

// SolveLinear returns an exact optimum of l. Identical jobs are solved as
// one (see groupJobs); Reduced then counts groups. It honours ctx as
// SolveMaxMin does.
func SolveLinear(ctx context.Context, l *Linear) (LinearResult, error) {
	merged, of, _ := groupJobs(l.Jobs)
	if merged == nil {
		return solveLinear(ctx, l)
	}
	res, err := solveLinear(ctx, &Linear{Cap: l.Cap, Jobs: merged})
	if err != nil {
		return res, err
	}
	res.X = expandRows(res.X, of)
	return res, nil
}

// solveLinear prices the capacities (approxPrices), holds every job whose
// best block vertex at those prices is clear by a margin at that vertex,
// solves the LP over the remaining jobs exactly, and proves the result:
// with the small LP's exact prices p, every held job's vertex must still
// be a best vertex of its block. Then x and (p, the blocks' own duals)
// satisfy complementary slackness for the full LP, so x is optimal. Jobs
// that fail are released and the small LP solved again.
//
// SLO jobs (C > 0) are held like the others: at a given price their best
// use of the cluster is one of a handful of vertices (blockVertices), so
// they need not be carried in full (before, they always were, and
// min-cost-slo's small LP was the whole LP: 512 jobs took seconds).
func solveLinear(ctx context.Context, l *Linear) (LinearResult, error) {
	n := len(l.Jobs)
	for j := range l.Jobs {
		if _, _, _, ok := blockBest(&l.Jobs[j], make([]float64, len(l.Cap))); !ok {
			return LinearResult{}, fmt.Errorf("lp: job %d needs %g, at most %g is reachable: %w", j, l.Jobs[j].C, maxAbs(l.Jobs[j].A), ErrNotOptimal{Infeasible})
		}
	}
	p, err := l.linePrices(ctx)
	if err != nil {
		return LinearResult{}, err
	}
	fixed := make([]lfix, n)
	for j := range l.Jobs {
		fixed[j] = l.classify(j, p, 1e-4)
	}
	res := LinearResult{}
	for round := 1; ; round++ {
		res.Rounds = round
		if err := ctx.Err(); err != nil {
			return res, err
		}
		obj, X, price, red, err := l.solveReduced(ctx, fixed)
		if err != nil {
			return res, err
		}
		l.repairPrices(price, p, X, fixed)
		bad := 0
		for j := range l.Jobs {
			f := fixed[j]
			if f.k1 == lfree && f.mask == 0 {
				continue
			}
			b := &l.Jobs[j]
			_, best, _, _ := blockBest(b, price)
			scale := 1e-10 * (1 + maxAbs(b.V))
			cur := f.value(b, price)
			if f.k1 == lfree {
				cur = 0
				for k, x := range X[j] {
					cur += (b.V[k] - b.S*price[k]) * x
				}
			}
			if best > cur+scale {
				fixed[j] = lfix{k1: lfree, k2: -1}
				bad++
			}
		}
		if bad == 0 {
			res.Objective, res.X, res.Price, res.Reduced = obj, X, price, red
			return res, nil
		}
		if round > 50 {
			for j := range fixed {
				fixed[j] = lfix{k1: lfree, k2: -1}
			}
		}
	}
}

// repairPrices picks, among the small LP's optimal prices, ones that the
// held jobs accept. A capacity row that no column of the small LP enters
// (every job that could use the type is held) and that the held jobs fill
// exactly has a degenerate dual: any price >= 0 is optimal for the small
// LP, and the simplex reports 0, at which every held job elsewhere would
// rather move to the type, so the proof fails and nearly everyone is
// released (min-cost at 512 jobs fell from 2 pooled columns to 512 jobs
// this way). For such a row, the held jobs' optimality is an interval of
// prices (each vertex comparison is linear in p_k); the estimate is
// clipped into it. Prices of other rows are left alone, so the small LP's
// duals stay optimal and the proof that follows stays a proof.
func (l *Linear) repairPrices(price, estimate []float64, X [][]float64, fixed []lfix) {
	K := len(l.Cap)
	var degenerate []int
	for k := 0; k < K; k++ {
		used := 0.0
		for j := range l.Jobs {
			b := &l.Jobs[j]
			if f := fixed[j]; b.A[k] > 0 && f.k1 == lfree && (f.mask == 0 || f.mask&(1<<k) != 0) {
				used = math.Inf(1) // a column of the small LP: its dual is the LP's own
				break
			}
			used += b.S * X[j][k]
		}
		if !math.IsInf(used, 1) && l.Cap[k]-used <= 1e-9*(1+l.Cap[k]) {
			degenerate = append(degenerate, k)
			// Several such rows interact (a job held on one compares
			// itself with the others), so all start at the estimate and
			// each is then clipped into its interval in turn.
			price[k] = estimate[k]
		}
	}
	for pass := 0; pass < 2; pass++ {
		for _, k := range degenerate {
			l.clipPrice(price, k, X, fixed)
		}
	}
}

// clipPrice moves price[k] into the interval where every held or
// restricted job's allocation stays a best vertex of its block.
func (l *Linear) clipPrice(price []float64, k int, X [][]float64, fixed []lfix) {
	lo, hi := 0.0, math.Inf(1)
	for j := range l.Jobs {
		b := &l.Jobs[j]
		if b.A[k] <= 0 || fixed[j].k1 == lfree && fixed[j].mask == 0 {
			continue
		}
		// cur(p) = c0 - S x_k p_k and vertex g: g0 - S g_k p_k;
		// cur >= g is (c0 - g0) >= S (x_k - g_k) p_k.
		c0 := 0.0
		for kk, x := range X[j] {
			if kk != k {
				c0 += (b.V[kk] - b.S*price[kk]) * x
			} else {
				c0 += b.V[kk] * x
			}
		}
		blockVertices(b, func(g lfix) {
			g0, gk := 0.0, 0.0
			for _, kx := range [2]struct {
				k int
				x float64
			}{{g.k1, g.x1}, {g.k2, g.x2}} {
				switch {
				case kx.k < 0:
				case kx.k == k:
					g0 += b.V[k] * kx.x
					gk = kx.x
				default:
					g0 += (b.V[kx.k] - b.S*price[kx.k]) * kx.x
				}
			}
			d := b.S * (X[j][k] - gk)
			switch {
			case d > 1e-12:
				hi = math.Min(hi, (c0-g0)/d)
			case d < -1e-12:
				lo = math.Max(lo, (c0-g0)/d)
			}
		})
	}
	if lo <= hi {
		price[k] = math.Min(math.Max(price[k], lo), hi)
	}
}

func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

// classify holds a job at its best block vertex at prices p, or frees it
// when another vertex is within margin of it.
func (l *Linear) classify(j int, p []float64, margin float64) lfix {
	b := &l.Jobs[j]
	f, v1, v2, ok := blockBest(b, p)
	tol := margin * (1 + maxAbs(b.V))
	if !ok {
		return lfix{k1: lfree, k2: -1}
	}
	if v1-v2 >= tol {
		return f
	}
	// A tie. Most are between a job's best type and not running (a price
	// equal to the job's value per GPU, which many jobs share when
	// values are normalised), so the small LP only gets the types of the
	// tied vertices; restricted that way, jobs on one type can be pooled
	// (see solveReduced).
	var mask uint64
	if len(b.A) > 64 {
		return lfix{k1: lfree, k2: -1}
	}
	blockVertices(b, func(g lfix) {
		if g.value(b, p) >= v1-tol {
			if g.k1 >= 0 {
				mask |= 1 << g.k1
			}
			if g.k2 >= 0 {
				mask |= 1 << g.k2
			}
		}
	})
	return lfix{k1: lfree, k2: -1, mask: mask}
}

func (l *Linear) solveReduced(ctx context.Context, fixed []lfix) (float64, [][]float64, []float64, int, error) {
	K := len(l.Cap)
	p := &Problem{}
	capRows := make([]Row, K)
	for k := range capRows {
		capRows[k] = Row{Sense: LE, RHS: l.Cap[k]}
	}
	constant := 0.0
	type amb struct {
		j           int
		vars, types []int
	}
	var ambs []amb
	var rows []Row
	// A job restricted to one type k is a single column x_k in
	// [lo, 1] (lo = C/A_k for an SLO, else 0) with capacity S and value
	// V_k per unit, i.e. a value of r = V_k/S per GPU. All such columns of
	// one type and one r are interchangeable in the LP: pooled into one
	// column xi in [0, 1] of capacity sum S (1 - lo) and value r per GPU,
	// they have the same optimum, and giving every member
	// x = lo + (1 - lo) xi spends exactly the pooled amount. This turns
	// hundreds of jobs tied at one price into one column.
	type pool struct {
		k, v       int // type and variable
		S          float64
		rate       float64
		members    []int
		lo, spread []float64
	}
	pools := map[[2]uint64]*pool{}
	var poolList []*pool
	for j := range l.Jobs {
		b := &l.Jobs[j]
		if f := fixed[j]; f.k1 == lfree && f.mask != 0 && f.mask&(f.mask-1) == 0 {
			k := bits.TrailingZeros64(f.mask)
			if b.A[k] > 0 && b.A[k] >= b.C && b.S > 0 {
				lo := math.Max(0, b.C/b.A[k])
				r := b.V[k] / b.S
				key := [2]uint64{uint64(k), math.Float64bits(r)}
				pl := pools[key]
				if pl == nil {
					pl = &pool{k: k, rate: r}
					pools[key] = pl
					poolList = append(poolList, pl)
				}
				pl.members = append(pl.members, j)
				pl.lo = append(pl.lo, lo)
				pl.spread = append(pl.spread, 1-lo)
				pl.S += b.S * (1 - lo)
				capRows[k].RHS -= b.S * lo
				constant += b.V[k] * lo
				continue
			}
		}
		switch f := fixed[j]; {
		case f.k1 >= 0:
			capRows[f.k1].RHS -= b.S * f.x1
			constant += b.V[f.k1] * f.x1
			if f.k2 >= 0 {
				capRows[f.k2].RHS -= b.S * f.x2
				constant += b.V[f.k2] * f.x2
			}
			continue
		case f.k1 == lzero:
			continue
		}
		a := amb{j: j}
		req := Row{Sense: GE, RHS: b.C}
		tim := Row{Sense: LE, RHS: 1}
		for k, av := range b.A {
			if av <= 0 || (fixed[j].mask != 0 && fixed[j].mask&(1<<k) == 0) {
				continue
			}
			v := p.AddVar("", b.V[k])
			a.vars, a.types = append(a.vars, v), append(a.types, k)
			req.Idx, req.Val = append(req.Idx, v), append(req.Val, av)
			tim.Idx, tim.Val = append(tim.Idx, v), append(tim.Val, 1)
			capRows[k].Idx, capRows[k].Val = append(capRows[k].Idx, v), append(capRows[k].Val, b.S)
		}
		if b.C > 0 {
			rows = append(rows, req)
		}
		rows = append(rows, tim)
		ambs = append(ambs, a)
	}
	for _, pl := range poolList {
		pl.v = p.AddVar("", pl.rate*pl.S)
		capRows[pl.k].Idx = append(capRows[pl.k].Idx, pl.v)
		capRows[pl.k].Val = append(capRows[pl.k].Val, pl.S)
		rows = append(rows, Row{Sense: LE, RHS: 1, Idx: []int{pl.v}, Val: []float64{1}})
	}
	p.Rows = append(capRows, rows...)
	r, err := SolveDenseContext(ctx, p)
	if err != nil {
		return 0, nil, nil, len(ambs), err
	}
	if r.Status == Infeasible && len(ambs) < len(l.Jobs) {
		// The held vertices do not fit together. Release the SLO jobs
		// first (their vertices are what must fit); failing that, all.
		next := make([]lfix, len(fixed))
		copy(next, fixed)
		changed := false
		for j := range next {
			if (next[j].k1 != lfree || next[j].mask != 0) && l.Jobs[j].C > 0 {
				next[j], changed = lfix{k1: lfree, k2: -1}, true
			}
		}
		if !changed {
			for j := range next {
				next[j] = lfix{k1: lfree, k2: -1}
			}
		}
		copy(fixed, next)
		return l.solveReduced(ctx, fixed)
	}
	if r.Status != Optimal {
		return 0, nil, nil, len(ambs), ErrNotOptimal{r.Status}
	}
	X := make([][]float64, len(l.Jobs))
	for j := range X {
		X[j] = make([]float64, K)
		if f := fixed[j]; f.k1 >= 0 {
			X[j][f.k1] = f.x1
			if f.k2 >= 0 {
				X[j][f.k2] = f.x2
			}
		}
	}
	for _, a := range ambs {
		for i, v := range a.vars {
			X[a.j][a.types[i]] = math.Max(0, r.X[v])
		}
	}
	for _, pl := range poolList {
		xi := math.Min(1, math.Max(0, r.X[pl.v]))
		for i, j := range pl.members {
			X[j][pl.k] = pl.lo[i] + pl.spread[i]*xi
		}
	}
	price := make([]float64, K)
	for k := range price {
		price[k] = math.Max(0, r.Dual[k])
	}
	return r.Objective + constant, X, price, len(ambs) + len(poolList), nil
}
