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

// fixedZero marks a job fixed to x = 0 in linear problems.
const fixedZero = -2

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

func solveLinear(l *Linear) (LinearResult, error) {
	n := len(l.Jobs)
	p := l.approxPrices()
	fixed := make([]int, n)
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
			if f == -1 {
				continue
			}
			b := &l.Jobs[j]
			scale := 1e-10 * (1 + maxAbs(b.V))
			best := 0.0
			for k, a := range b.A {
				if a > 0 {
					best = math.Max(best, b.V[k]-b.S*price[k])
				}
			}
			cur := 0.0
			if f >= 0 {
				cur = b.V[f] - b.S*price[f]
			}
			if best > cur+scale || (f >= 0 && cur < -scale) {
				fixed[j] = -1
				bad++
			}
		}
		if bad == 0 {
			res.Objective, res.X, res.Price, res.Reduced = obj, X, price, red
			return res, nil
		}
		if round > 50 {
			for j := range fixed {
				fixed[j] = -1
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

// classify fixes a job to its best type (x = 1), to zero, or -1 when it is
// within margin of a tie or carries an SLO requirement.
func (l *Linear) classify(j int, p []float64, margin float64) int {
	b := &l.Jobs[j]
	if b.C > 0 {
		return -1
	}
	scale := margin * (1 + maxAbs(b.V))
	// Candidates: each allowed type, and "not at all" with value 0.
	k1, u1, u2 := fixedZero, 0.0, math.Inf(-1)
	for k, a := range b.A {
		if a <= 0 {
			continue
		}
		if u := b.V[k] - b.S*p[k]; u > u1 {
			k1, u1, u2 = k, u, u1
		} else if u > u2 {
			u2 = u
		}
	}
	if u1-u2 < scale {
		return -1
	}
	return k1
}

// approxPrices minimises the Lagrangian dual
// N·p + sum_j max(0, max_k V_jk - S_j p_k) by cyclic golden-section line
// searches; it is convex in p, and only a good start is needed.
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
			b := &l.Jobs[j]
			best := 0.0
			for k, a := range b.A {
				if a > 0 {
					best = math.Max(best, b.V[k]-b.S*p[k])
				}
			}
			v += best
		}
		return v
	}
	const gr = 0.6180339887498949
	best := dual(p)
	for sweep := 0; sweep < 8; sweep++ {
		start := best
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
			} else {
				p[k] = old
			}
		}
		if !(best < start-1e-12*math.Abs(start)) {
			break
		}
	}
	return p
}

func (l *Linear) solveReduced(fixed []int) (float64, [][]float64, []float64, int, error) {
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
		switch k := fixed[j]; {
		case k >= 0:
			capRows[k].RHS -= b.S
			constant += b.V[k]
			continue
		case k == fixedZero:
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
		all := make([]int, len(fixed))
		for j := range all {
			all[j] = -1
		}
		return l.solveReduced(all)
	}
	if r.Status != Optimal {
		return 0, nil, nil, len(ambs), ErrNotOptimal{r.Status}
	}
	X := make([][]float64, len(l.Jobs))
	for j := range X {
		X[j] = make([]float64, K)
		if k := fixed[j]; k >= 0 {
			X[j][k] = 1
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
