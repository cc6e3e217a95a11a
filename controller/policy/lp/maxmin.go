package lp

import (
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

// SolveMaxMin returns an exact optimum of mm (see MaxMin).
func SolveMaxMin(mm *MaxMin) (MaxMinResult, error) {
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
	p, that := mm.approxPrices()
	that = math.Min(that, tmax)

	// Classify at the approximate prices: fixed[j] = cheapest type, or -1
	// when the job is near a tie or near its time limit and must be solved
	// in full.
	const margin = 1e-4
	fixed := make([]int, n)
	for j := range mm.Jobs {
		fixed[j] = mm.classify(j, p, that, margin)
	}
	res := MaxMinResult{}
	for round := 1; ; round++ {
		res.Rounds = round
		sol, red, atLimit, err := mm.solveReduced(fixed)
		if err != nil {
			return res, err
		}
		// Prove optimality: every fixed job must still be on a cheapest type
		// at the exact prices, and within its time limit at the exact t; a
		// fixed job whose time limit is what stops t must be split instead.
		bad := len(atLimit)
		for _, j := range atLimit {
			fixed[j] = -1
		}
		for j := range mm.Jobs {
			k := fixed[j]
			if k < 0 {
				continue
			}
			b := &mm.Jobs[j]
			ok := b.C+b.D*sol.T <= b.A[k]*(1+1e-12)
			rk := ratio(b, sol.Price, k)
			for kk, a := range b.A {
				if ok && a > 0 && kk != k && ratio(b, sol.Price, kk) < rk*(1-1e-10)-1e-300 {
					ok = false
				}
			}
			if !ok {
				fixed[j] = -1
				bad++
			}
		}
		if bad == 0 {
			res.T, res.X, res.Price, res.Y, res.Reduced = sol.T, sol.X, sol.Price, sol.Y, red
			return res, nil
		}
		if round > 50 {
			// Cannot happen in exact arithmetic (the set only grows); guard
			// against numerical ping-pong by solving everything in full.
			for j := range fixed {
				fixed[j] = -1
			}
		}
	}
}

// classify returns the type a job can be fixed to at prices p and value t,
// or -1 if it is ambiguous within the relative margin.
func (mm *MaxMin) classify(j int, p []float64, t, margin float64) int {
	b := &mm.Jobs[j]
	k1, r1, r2 := -1, math.Inf(1), math.Inf(1)
	for k, a := range b.A {
		if a <= 0 {
			continue
		}
		r := ratio(b, p, k)
		if r < r1 {
			k1, r1, r2 = k, r, r1
		} else if r < r2 {
			r2 = r
		}
	}
	if k1 < 0 || !(r2 > r1*(1+margin)) || r1 <= 0 {
		return -1
	}
	if b.C+b.D*t > b.A[k1]*(1-margin) {
		return -1
	}
	return k1
}

// approxPrices minimises the Lagrangian bound
//
//	h(p) = (N·p - sum_j C_j m_j(p)) / sum_j D_j m_j(p),  m_j(p) = min_k S_j p_k / A_jk
//
// over the price simplex. h is quasi-convex (convex numerator, concave
// denominator), so golden-section searches along the simplex's edge
// directions converge; only a good starting point is needed, since the
// exact phase corrects any job the estimate misclassifies.
func (mm *MaxMin) approxPrices() ([]float64, float64) {
	K := len(mm.Cap)
	p := make([]float64, K)
	for k := range p {
		p[k] = 1 / float64(K)
	}
	h := func(p []float64) float64 {
		num, den := 0.0, 0.0
		for k, c := range mm.Cap {
			num += c * p[k]
		}
		for j := range mm.Jobs {
			b := &mm.Jobs[j]
			m := math.Inf(1)
			for k, a := range b.A {
				if a > 0 {
					if r := b.S * p[k] / a; r < m {
						m = r
					}
				}
			}
			if math.IsInf(m, 1) {
				continue
			}
			num -= b.C * m
			den += b.D * m
		}
		if den <= 0 {
			return math.Inf(1)
		}
		return num / den
	}
	best := h(p)
	if K == 1 {
		return p, best
	}
	q := make([]float64, K)
	const gr = 0.6180339887498949
	for sweep := 0; sweep < 8; sweep++ {
		start := best
		for i := 0; i < K; i++ {
			for k := i + 1; k < K; k++ {
				// move d from k to i, d in [-p[i], p[k]]
				f := func(d float64) float64 {
					copy(q, p)
					q[i] += d
					q[k] -= d
					return h(q)
				}
				lo, hi := -p[i], p[k]
				x1, x2 := hi-gr*(hi-lo), lo+gr*(hi-lo)
				f1, f2 := f(x1), f(x2)
				for it := 0; it < 45; it++ {
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
				d := (lo + hi) / 2
				if v := f(d); v < best {
					best = v
					p[i] += d
					p[k] -= d
				}
			}
		}
		if !(best < start*(1-1e-9)) {
			break
		}
	}
	return p, best
}

type reducedSol struct {
	T     float64
	X     [][]float64
	Price []float64
	Y     []float64
}

// solveReduced solves the problem with every job j where fixed[j] >= 0
// restricted to x[j][fixed[j]] = (C_j + D_j t)/A, i.e. exactly its
// requirement on that type, which makes its use of capacity linear in t.
func (mm *MaxMin) solveReduced(fixed []int) (reducedSol, int, []int, error) {
	K := len(mm.Cap)
	p := &Problem{}
	p.AddVar("t", 1)
	capRows := make([]Row, K)
	tcoef := make([]float64, K)
	for k := range capRows {
		capRows[k] = Row{Sense: LE, RHS: mm.Cap[k]}
	}
	tBound := math.Inf(1)
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
		if k := fixed[j]; k >= 0 {
			capRows[k].RHS -= b.S * b.C / b.A[k]
			tcoef[k] += b.S * b.D / b.A[k]
			if b.D > 0 {
				tBound = math.Min(tBound, (b.A[k]-b.C)/b.D)
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
	boundRow := -1
	if !math.IsInf(tBound, 1) {
		boundRow = p.AddRow(Row{Sense: LE, RHS: tBound, Idx: []int{0}, Val: []float64{1}})
	}
	r := SolveDense(p)
	if r.Status == Infeasible && len(ambs) < len(mm.Jobs) {
		// The fixed structure is too restrictive (only possible with frozen
		// requirements C > 0); solve everything in full.
		all := make([]int, len(fixed))
		for j := range all {
			all[j] = -1
		}
		return mm.solveReduced(all)
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
		if k := fixed[j]; k >= 0 {
			b := &mm.Jobs[j]
			sol.X[j][k] = (b.C + b.D*sol.T) / b.A[k]
			sol.Y[j] = ratio(b, sol.Price, k)
		}
	}
	for _, a := range ambs {
		for i, v := range a.vars {
			sol.X[a.j][a.types[i]] = math.Max(0, r.X[v])
		}
		sol.Y[a.j] = math.Max(0, -r.Dual[a.reqRow])
	}
	// A binding bound row means a fixed job's time limit caps t: those jobs
	// go back to the caller to be solved in full.
	var atLimit []int
	if boundRow >= 0 && r.Dual[boundRow] > 1e-12 {
		for j := range mm.Jobs {
			b := &mm.Jobs[j]
			if k := fixed[j]; k >= 0 && b.D > 0 && (b.A[k]-b.C)/b.D <= tBound*(1+1e-12) {
				atLimit = append(atLimit, j)
			}
		}
	}
	return sol, len(ambs), atLimit, nil
}
