package lp

import (
	"fmt"
	"math"
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
// and, where k2 >= 0, x[k2] = x2. k1 = lfree: solved in full; k1 = lzero:
// held at x = 0.
type lfix struct {
	k1, k2 int
	x1, x2 float64
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
// one (see groupJobs); Reduced then counts groups.
func SolveLinear(l *Linear) (LinearResult, error) {
	merged, of, _ := groupJobs(l.Jobs)
	if merged == nil {
		return solveLinear(l)
	}
	res, err := solveLinear(&Linear{Cap: l.Cap, Jobs: merged})
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
func solveLinear(l *Linear) (LinearResult, error) {
	n := len(l.Jobs)
	for j := range l.Jobs {
		if _, _, _, ok := blockBest(&l.Jobs[j], make([]float64, len(l.Cap))); !ok {
			return LinearResult{}, fmt.Errorf("lp: job %d needs %g, at most %g is reachable: %w", j, l.Jobs[j].C, maxAbs(l.Jobs[j].A), ErrNotOptimal{Infeasible})
		}
	}
	p := l.approxPrices()
	fixed := make([]lfix, n)
	for j := range l.Jobs {
		fixed[j] = l.classify(j, p, 1e-4)
	}
	res := LinearResult{}
	for round := 1; ; round++ {
		res.Rounds = round
		obj, X, price, red, err := l.solveReduced(fixed)
		if err != nil {
			return res, err
		}
		bad := 0
		for j := range l.Jobs {
			f := fixed[j]
			if f.k1 == lfree {
				continue
			}
			b := &l.Jobs[j]
			_, best, _, _ := blockBest(b, price)
			scale := 1e-10 * (1 + maxAbs(b.V))
			if best > f.value(b, price)+scale {
				fixed[j] = lfix{k1: lfree, k2: -1}
				bad++
			}
		}
		if bad == 0 {
			res.Objective, res.X, res.Price, res.Reduced = obj, X, price, red
			return res, nil
		}
		if round <= 3 && bad > n/20 {
			// Far from the optimum: reclassify everyone at the exact
			// prices of the small LP, which are much closer.
			for j := range l.Jobs {
				fixed[j] = l.classify(j, price, 1e-4)
			}
		}
		if round > 50 {
			for j := range fixed {
				fixed[j] = lfix{k1: lfree, k2: -1}
			}
		}
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
	if !ok || v1-v2 < margin*(1+maxAbs(b.V)) {
		return lfix{k1: lfree, k2: -1}
	}
	return f
}

// approxPrices minimises the Lagrangian dual
// Cap·p + sum_j max over j's block vertices of (V_j - S_j p)·x by cyclic
// golden-section line searches; it is convex in p, and only a good start
// is needed. Without SLOs no price exceeds max V_k/S (above it nobody
// wants the type); an SLO can push a price past that, so a bound the
// search ends at is widened and the search repeated.
func (l *Linear) approxPrices() []float64 {
	K := len(l.Cap)
	p := make([]float64, K)
	hi := make([]float64, K)
	for j := range l.Jobs {
		b := &l.Jobs[j]
		for k, a := range b.A {
			if a > 0 && b.S > 0 {
				hi[k] = math.Max(hi[k], b.V[k]/b.S)
			}
		}
	}
	dual := func(p []float64) float64 {
		v := 0.0
		for k, c := range l.Cap {
			v += c * p[k]
		}
		for j := range l.Jobs {
			_, best, _, _ := blockBest(&l.Jobs[j], p)
			v += best
		}
		return v
	}
	const gr = 0.6180339887498949
	best := dual(p)
	for sweep := 0; sweep < 8; sweep++ {
		start := best
		widened := false
		for k := 0; k < K; k++ {
			old := p[k]
			f := func(v float64) float64 { p[k] = v; return dual(p) }
			lo, up := 0.0, hi[k]
			x1, x2 := up-gr*(up-lo), lo+gr*(up-lo)
			f1, f2 := f(x1), f(x2)
			for it := 0; it < 45; it++ {
				if f1 <= f2 {
					up, x2, f2 = x2, x1, f1
					x1 = up - gr*(up-lo)
					f1 = f(x1)
				} else {
					lo, x1, f1 = x1, x2, f2
					x2 = lo + gr*(up-lo)
					f2 = f(x2)
				}
			}
			if v := f((lo + up) / 2); v < best {
				best = v
				if lo > hi[k]*0.99 {
					hi[k] *= 4
					widened = true
				}
			} else {
				p[k] = old
			}
		}
		if !widened && !(best < start-1e-12*math.Abs(start)) {
			break
		}
	}
	return p
}

func (l *Linear) solveReduced(fixed []lfix) (float64, [][]float64, []float64, int, error) {
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
	for j := range l.Jobs {
		b := &l.Jobs[j]
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
			if av <= 0 {
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
	p.Rows = append(capRows, rows...)
	r := SolveDense(p)
	if r.Status == Infeasible && len(ambs) < len(l.Jobs) {
		// The held vertices do not fit together. Release the SLO jobs
		// first (their vertices are what must fit); failing that, all.
		next := make([]lfix, len(fixed))
		copy(next, fixed)
		changed := false
		for j := range next {
			if next[j].k1 != lfree && l.Jobs[j].C > 0 {
				next[j], changed = lfix{k1: lfree, k2: -1}, true
			}
		}
		if !changed {
			for j := range next {
				next[j] = lfix{k1: lfree, k2: -1}
			}
		}
		copy(fixed, next)
		return l.solveReduced(fixed)
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
	price := make([]float64, K)
	for k := range price {
		price[k] = math.Max(0, r.Dual[k])
	}
	return r.Objective + constant, X, price, len(ambs), nil
}
