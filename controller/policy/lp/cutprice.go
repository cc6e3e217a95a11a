package lp

import "math"

// Price search by cutting planes (K = 2 or 3 capacity types).
//
// For a value tau, h_tau(p) = sum_j cost_j(p, C_j + D_j tau) - Cap.p is the
// Lagrangian slack: the cheapest way for every job to reach tau, priced at
// p, minus the priced capacity. It is concave in p (each cost is a minimum
// of functions linear in p), and an optimal price p* of the LP has
// h_tau(p*) >= 0 for every tau >= t* (the LP optimum). If x is each job's
// cheapest block solution at (p, tau) and U its use of the capacities, then
// h_tau(p') <= (U - Cap).p' for every p' (x stays feasible at p'), so
//
//	(U - Cap).p* >= 0
//
// is a valid cut through the price simplex, and it passes through p (or
// beyond it when h_tau(p) < 0). If t* is the largest t the jobs' time
// limits allow (tmax; the capacities then need no price), h_tau < 0 on the
// whole simplex and these cuts would leave nothing; so while no evaluation
// has shown h_tau >= 0, the cut is g.p' >= hbest (the best h_tau seen),
// which keeps the maximiser of the concave h_tau instead: the prices at
// which every job's cheapest way to reach tmax fits the capacities with
// the most room (unless equal prices already fit; see cutPrices).
//
// With K = 3 the normalised prices form a triangle: cutting it at its
// centroid removes at least 4/9 of its area each time (Grünbaum), so
// 25-35 evaluations, each one pass over the jobs, locate p* to ~1e-6
// where the golden-section searches along the simplex's edges took ~370
// evaluations of several Newton passes each. With K = 2 it is bisection.
// tau itself only decreases: whenever h_tau(p) > 0 the bound t*(p) < tau is
// computed by Newton's method (valueAt) and becomes the new tau.

// usageAt returns h_tau(p) and writes U (the capacity use of every job's
// cheapest block solution at p and requirement C + D tau).
func (mm *MaxMin) usageAt(p []float64, tau float64, U []float64) float64 {
	for k := range U {
		U[k] = 0
	}
	h := 0.0
	for k, c := range mm.Cap {
		h -= c * p[k]
	}
	for j := range mm.Jobs {
		b := &mm.Jobs[j]
		h += cheapestUse(b, p, b.C+b.D*tau, U)
	}
	return h
}

// cheapestUse adds to U the capacity use of job b's cheapest way (at
// prices p) to reach requirement R within its time limit and returns that
// cost: 0 when R <= 0, +Inf (U untouched) when R is out of reach.
func cheapestUse(b *BlockJob, p []float64, R float64, U []float64) float64 {
	if R <= 0 {
		return 0
	}
	cost, k1, k2, x2 := math.Inf(1), -1, -1, 0.0
	for i, a1 := range b.A {
		if a1 <= 0 {
			continue
		}
		c1 := b.S * p[i]
		if R <= a1 {
			if c := c1 * R / a1; c < cost {
				cost, k1, k2, x2 = c, i, -1, R/a1
			}
			continue
		}
		for i2, a2 := range b.A {
			if a2 >= R {
				f := (R - a1) / (a2 - a1)
				if c := c1*(1-f) + b.S*p[i2]*f; c < cost {
					cost, k1, k2, x2 = c, i, i2, f
				}
			}
		}
	}
	if k1 < 0 {
		return math.Inf(1)
	}
	if k2 < 0 {
		U[k1] += b.S * x2
	} else {
		U[k1] += b.S * (1 - x2)
		U[k2] += b.S * x2
	}
	return cost
}

// lagrangian is what the price searches need of a max-min problem: its
// capacities, h_tau(p) with the capacity use behind it (usageAt), and the
// bound t*(p) (valueAt). MaxMin (requirements C + D t) and PathMaxMin
// (piecewise-linear requirements) both provide them.
type lagrangian interface {
	capacities() []float64
	usageAt(p []float64, tau float64, U []float64) float64
	valueAt(p []float64, hi float64) float64
}

func (mm *MaxMin) capacities() []float64 { return mm.Cap }

// cutPrices locates the optimal capacity prices for K = 2 or 3 by the cuts
// described above and returns prices (normalised to sum 1) and the best
// upper bound on t found. It stops once the region left is below 1e-6 wide
// or after maxEvals evaluations; the exact phase corrects what is left.
func cutPrices(mm lagrangian, tmax float64, check func() error) ([]float64, float64, error) {
	capv := mm.capacities()
	K := len(capv)
	const maxEvals = 120
	const width = 1e-6
	p := make([]float64, K)
	U := make([]float64, K)
	g := make([]float64, K)
	tau := tmax
	var best []float64
	hbest := math.Inf(-1)
	lvl := 0.0
	// fits: every job's cheapest solution at p reaches tmax within the
	// capacities, so t* = tmax and p is as good as any price. The first
	// evaluation is at equal prices, where that solution puts each job on
	// its fastest type; when that fits it is kept (the prices that fit
	// "with the most room" would spread jobs onto slow GPUs for nothing,
	// and the simulator's JCTs got worse that way).
	fits := false
	// eval evaluates at p and sets the cut g.p' >= lvl (g = U - Cap),
	// lowering tau first when p proves a smaller bound.
	eval := func() error {
		h := mm.usageAt(p, tau, U)
		if h > 0 {
			if v := mm.valueAt(p, tau); v < tau {
				tau = v
				best = append(best[:0], p...)
				h = mm.usageAt(p, tau, U)
			}
		}
		hbest = math.Max(hbest, h)
		lvl = math.Min(0, hbest)
		fits = tau == tmax
		for k := range g {
			g[k] = U[k] - capv[k]
			fits = fits && g[k] <= 1e-12*capv[k]
		}
		if check != nil {
			return check()
		}
		return nil
	}
	if K == 2 {
		// p = (u, 1-u): the cut is (g0 - g1) u + g1 >= 0.
		lo, hi := 0.0, 1.0
		for it := 0; it < maxEvals && hi-lo > width; it++ {
			u := (lo + hi) / 2
			olo, ohi := lo, hi
			p[0], p[1] = u, 1-u
			if err := eval(); err != nil {
				return nil, 0, err
			}
			if fits {
				return p, tau, nil
			}
			a, r := g[0]-g[1], lvl-g[1]
			switch {
			case a > 0:
				lo = math.Max(lo, r/a)
			case a < 0:
				hi = math.Min(hi, r/a)
			default:
				if r > 0 {
					lo = hi
				}
			}
			if lo > hi || (lo == olo && hi == ohi) {
				break // emptied by rounding, or the cut removed nothing (g ~ 0)
			}
		}
		u := math.Min(1, math.Max(0, (lo+hi)/2))
		if lo > hi && best != nil {
			u = best[0]
		}
		p[0], p[1] = u, 1-u
		return p, tau, nil
	}
	// K = 3: p = (u, v, 1-u-v) over the triangle u, v >= 0, u + v <= 1.
	// The cut g.p' >= 0 is (g0-g2) u + (g1-g2) v + g2 >= 0.
	poly := [][2]float64{{0, 0}, {1, 0}, {0, 1}}
	c := [2]float64{1.0 / 3, 1.0 / 3}
	lastArea := 0.5
	for it := 0; it < maxEvals; it++ {
		p[0], p[1], p[2] = c[0], c[1], math.Max(0, 1-c[0]-c[1])
		if err := eval(); err != nil {
			return nil, 0, err
		}
		if fits {
			return p, tau, nil
		}
		next := clipPoly(poly, g[0]-g[2], g[1]-g[2], lvl-g[2])
		if len(next) == 0 {
			break // rounding emptied the region: p is as good as it gets
		}
		poly = next
		nc, area := centroid(poly)
		if nc == c || area >= lastArea*(1-1e-9) {
			// The cut removed nothing, so g = U - Cap is ~0: the jobs'
			// cheapest solutions at p fill the capacities exactly, which
			// makes p optimal; evaluating p again would change nothing.
			break
		}
		c, lastArea = nc, area
		lo0, hi0, lo1, hi1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
		for _, z := range poly {
			lo0, hi0 = math.Min(lo0, z[0]), math.Max(hi0, z[0])
			lo1, hi1 = math.Min(lo1, z[1]), math.Max(hi1, z[1])
		}
		if hi0-lo0 < width && hi1-lo1 < width {
			break
		}
	}
	p[0], p[1], p[2] = c[0], c[1], math.Max(0, 1-c[0]-c[1])
	return p, tau, nil
}

// clipPoly keeps the part of a convex polygon where a0 u + a1 v >= b.
func clipPoly(poly [][2]float64, a0, a1, b float64) [][2]float64 {
	out := make([][2]float64, 0, len(poly)+1)
	side := func(z [2]float64) float64 { return a0*z[0] + a1*z[1] - b }
	for i, z := range poly {
		w := poly[(i+1)%len(poly)]
		sz, sw := side(z), side(w)
		if sz >= 0 {
			out = append(out, z)
		}
		if (sz >= 0) != (sw >= 0) {
			f := sz / (sz - sw)
			out = append(out, [2]float64{z[0] + f*(w[0]-z[0]), z[1] + f*(w[1]-z[1])})
		}
	}
	return out
}

// centroid is the centre of gravity of a convex polygon (the mean of its
// vertices if it has collapsed to a segment or point) and its area. The
// sums are taken relative to the first vertex: in absolute coordinates a
// sliver of area 1e-13 left by the last cuts lost its centroid to
// cancellation (3e-4 off, outside the sliver, on the 10,000-job tight
// benchmark, whose exact phase then carried 204 jobs instead of 48).
func centroid(poly [][2]float64) ([2]float64, float64) {
	var area, cx, cy float64
	o := poly[0]
	for i, z := range poly {
		w := poly[(i+1)%len(poly)]
		z0, z1, w0, w1 := z[0]-o[0], z[1]-o[1], w[0]-o[0], w[1]-o[1]
		cr := z0*w1 - w0*z1
		area += cr
		cx += (z0 + w0) * cr
		cy += (z1 + w1) * cr
	}
	if math.Abs(area) < 1e-30 {
		var m [2]float64
		for _, z := range poly {
			m[0] += z[0] / float64(len(poly))
			m[1] += z[1] / float64(len(poly))
		}
		return m, 0
	}
	return [2]float64{o[0] + cx/(3*area), o[1] + cy/(3*area)}, math.Abs(area) / 2
}
