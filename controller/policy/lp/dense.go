package lp

import (
	"context"
	"math"
)

// SolveDense solves p with a two-phase dense tableau simplex. It is meant for
// problems of at most a few thousand rows and columns: the structured
// solvers in package policy reduce large cluster LPs to such a size before
// calling it. Dantzig's rule is used for speed and Bland's rule takes over
// after a run of degenerate pivots, which rules out cycling.
func SolveDense(p *Problem) Result {
	r, _ := SolveDenseContext(context.Background(), p)
	return r
}

// SolveDenseContext is SolveDense that stops with status Cancelled and
// ctx's error when ctx is done; it looks every 16 pivots (a pivot of the
// small LPs costs microseconds, a few milliseconds at the largest).
func SolveDenseContext(ctx context.Context, p *Problem) (Result, error) {
	const tol = 1e-9
	m, n := len(p.Rows), p.NumVars()

	// Column layout: structural | one slack per inequality | one artificial
	// per row whose initial basic column is not a +slack. ident[i] is the
	// column that starts as e_i, from which the duals are read at the end.
	flip := make([]bool, m)
	sense := make([]Sense, m)
	for i, r := range p.Rows {
		sense[i] = r.Sense
		if r.RHS < 0 {
			flip[i] = true
			switch r.Sense {
			case LE:
				sense[i] = GE
			case GE:
				sense[i] = LE
			}
		}
	}
	ncol := n
	slack := make([]int, m)
	art := make([]int, m)
	for i := range p.Rows {
		slack[i], art[i] = -1, -1
		if sense[i] != EQ {
			slack[i] = ncol
			ncol++
		}
	}
	firstArt := ncol
	for i := range p.Rows {
		if sense[i] != LE {
			art[i] = ncol
			ncol++
		}
	}
	w := ncol + 1 // row width; last entry is the right-hand side
	T := make([]float64, (m+1)*w)
	row := func(i int) []float64 { return T[i*w : (i+1)*w] }
	basis := make([]int, m)
	ident := make([]int, m)
	for i, r := range p.Rows {
		R := row(i)
		s := 1.0
		if flip[i] {
			s = -1
		}
		for k, j := range r.Idx {
			R[j] += s * r.Val[k]
		}
		R[ncol] = s * r.RHS
		switch sense[i] {
		case LE:
			R[slack[i]] = 1
			basis[i], ident[i] = slack[i], slack[i]
		case GE:
			R[slack[i]] = -1
			R[art[i]] = 1
			basis[i], ident[i] = art[i], art[i]
		case EQ:
			R[art[i]] = 1
			basis[i], ident[i] = art[i], art[i]
		}
	}
	z := row(m) // z_j - c_j for the current phase's costs (maximisation)

	iters := 0
	limit := 50*(m+ncol) + 1000
	pivot := func(r, e int) {
		R := row(r)
		inv := 1 / R[e]
		for j := range R {
			R[j] *= inv
		}
		R[e] = 1
		for i := 0; i <= m; i++ {
			if i == r {
				continue
			}
			Q := row(i)
			f := Q[e]
			if f == 0 {
				continue
			}
			for j, v := range R {
				if v != 0 {
					Q[j] -= f * v
				}
			}
			Q[e] = 0
		}
		basis[r] = e
	}
	// run pivots until optimal for the costs currently in z; maxCol bounds
	// the columns allowed to enter.
	run := func(maxCol int) Status {
		degenerate := 0
		for {
			if iters >= limit {
				return IterationLimit
			}
			if iters%16 == 0 && ctx.Err() != nil {
				return Cancelled
			}
			e := -1
			if degenerate > 50 {
				for j := 0; j < maxCol; j++ { // Bland: first improving column
					if z[j] < -tol {
						e = j
						break
					}
				}
			} else {
				best := -tol
				for j := 0; j < maxCol; j++ {
					if z[j] < best {
						best, e = z[j], j
					}
				}
			}
			if e < 0 {
				return Optimal
			}
			r := -1
			ratio := math.Inf(1)
			for i := 0; i < m; i++ {
				a := T[i*w+e]
				if a > tol {
					q := T[i*w+ncol] / a
					if q < ratio-1e-12 || (q <= ratio+1e-12 && r >= 0 && basis[i] < basis[r]) {
						ratio, r = q, i
					}
				}
			}
			if r < 0 {
				return Unbounded
			}
			if ratio < 1e-12 {
				degenerate++
			} else {
				degenerate = 0
			}
			pivot(r, e)
			iters++
		}
	}

	// Phase 1: maximise -(sum of artificials).
	if firstArt < ncol {
		for j := range z {
			z[j] = 0
		}
		for i := 0; i < m; i++ {
			if art[i] >= 0 {
				z[art[i]] = 1
			}
		}
		for i := 0; i < m; i++ { // price out the basic artificials
			if art[i] >= 0 {
				R := row(i)
				for j := range z {
					z[j] -= R[j]
				}
			}
		}
		if st := run(firstArt); st == IterationLimit || st == Cancelled {
			return Result{Status: st, Iterations: iters}, ctx.Err()
		}
		if z[ncol] < -1e-7*(1+maxAbsRHS(p)) {
			return Result{Status: Infeasible, Iterations: iters}, nil
		}
		// Drive artificials still basic (at zero) out where possible.
		for i := 0; i < m; i++ {
			if basis[i] >= firstArt {
				R := row(i)
				for j := 0; j < firstArt; j++ {
					if math.Abs(R[j]) > 1e-7 {
						pivot(i, j)
						break
					}
				}
			}
		}
	}
	// Phase 2: original costs, artificial columns barred from entering.
	for j := range z {
		z[j] = 0
	}
	for j, c := range p.Obj {
		z[j] = -c
	}
	for i := 0; i < m; i++ {
		if b := basis[i]; b < n && p.Obj[b] != 0 {
			c := p.Obj[b]
			R := row(i)
			for j := range z {
				z[j] += c * R[j]
			}
		}
	}
	st := run(firstArt)
	res := Result{Status: st, Iterations: iters}
	if st != Optimal {
		if st == Cancelled {
			return res, ctx.Err()
		}
		return res, nil
	}
	res.X = make([]float64, n)
	for i := 0; i < m; i++ {
		if b := basis[i]; b < n {
			res.X[b] = T[i*w+ncol]
		}
	}
	res.Objective = p.Value(res.X)
	res.Dual = make([]float64, m)
	for i := 0; i < m; i++ {
		y := z[ident[i]]
		if flip[i] {
			y = -y
		}
		res.Dual[i] = y
	}
	return res, nil
}

func maxAbsRHS(p *Problem) float64 {
	v := 0.0
	for _, r := range p.Rows {
		v = math.Max(v, math.Abs(r.RHS))
	}
	return v
}
