package lp

import (
	"context"
	"math"
)

// PathMaxMin is a max-min problem whose requirements move along a path:
//
//	maximise t in [0, TMax]
//	s.t.  sum_k A[j][k] x[j][k] >= R_j(t)   for each job j
//	      time and capacity rows as in MaxMin
//
// where every R_j is continuous, nondecreasing and piecewise linear, and
// never above the job's best rate max_k A[j][k]. Water-filling produces
// such paths: between two capacity-bound levels, a job's requirement rises
// linearly until the job reaches its whole time on its best type, and
// then its entity's other jobs rise faster (hierarchical). Every piece is
// a MaxMin level of its own; PathMaxMin finds which piece holds the
// optimum without solving them one by one.
//
// Feasibility is monotone in t (the requirements only grow), and for a
// fixed t it is decided by prices exactly as for MaxMin: R(t) fits iff
// h_t(p) = sum_j cost_j(p, R_j(t)) - Cap.p <= 0 for every price p >= 0.
// So t* = min_p t*(p), with t*(p) the largest t where h_t(p) <= 0, and
// the cutting-plane search of cutPrices applies unchanged (h_t is concave
// in p for fixed t). Only t*(p) differs: h_t(p) is nondecreasing in t but
// no longer convex (it flattens where a job saturates), so valueAt
// brackets the root and takes Newton steps only inside the bracket.
type PathMaxMin struct {
	Cap  []float64
	Jobs []BlockJob // A and S as in MaxMin; C and D are not read
	// Req writes every job's requirement at t into R and, when dR is not
	// nil, its derivative from the right into dR.
	Req  func(t float64, R, dR []float64)
	TMax float64

	r, dr []float64 // scratch for Req
}

func (pm *PathMaxMin) capacities() []float64 { return pm.Cap }

func (pm *PathMaxMin) req(t float64, slopes bool) {
	if len(pm.r) != len(pm.Jobs) {
		pm.r = make([]float64, len(pm.Jobs))
		pm.dr = make([]float64, len(pm.Jobs))
	}
	if slopes {
		pm.Req(t, pm.r, pm.dr)
	} else {
		pm.Req(t, pm.r, nil)
	}
}

// usageAt is MaxMin.usageAt with the path's requirements at tau.
func (pm *PathMaxMin) usageAt(p []float64, tau float64, U []float64) float64 {
	for k := range U {
		U[k] = 0
	}
	h := 0.0
	for k, c := range pm.Cap {
		h -= c * p[k]
	}
	pm.req(tau, false)
	for j := range pm.Jobs {
		h += cheapestUse(&pm.Jobs[j], p, pm.r[j], U)
	}
	return h
}

// Slack is h_t(p): positive proves that R(t) does not fit (t > t*).
func (pm *PathMaxMin) Slack(p []float64, t float64) float64 {
	U := make([]float64, len(pm.Cap))
	return pm.usageAt(p, t, U)
}

// slackAt is h_t(p) and its derivative in t from the right.
func (pm *PathMaxMin) slackAt(p []float64, t, budget float64) (g, dg float64) {
	pm.req(t, true)
	g = -budget
	for j := range pm.Jobs {
		c, s := blockCost(&pm.Jobs[j], p, pm.r[j])
		g += c
		dg += s * pm.dr[j]
	}
	return g, dg
}

// valueAt is t*(p) capped at hi: the largest t <= hi with h_t(p) <= 0.
// h_t(p) is nondecreasing in t and h_0(p) <= 0 (t = 0 fits), so the root
// is bracketed in [0, hi]; Newton steps from the upper end (exact where h
// is convex and piecewise linear, as for MaxMin) are taken while they
// stay inside the bracket, and a step that lands below the root is
// followed by a bisection.
func (pm *PathMaxMin) valueAt(p []float64, hi float64) float64 {
	budget := 0.0
	for k, c := range pm.Cap {
		budget += c * p[k]
	}
	tol := budget * 1e-12
	gh, dh := pm.slackAt(p, hi, budget)
	if gh <= tol {
		return hi
	}
	lo, bisect := 0.0, false
	for it := 0; it < 100 && hi-lo > 1e-13*hi; it++ {
		t := (lo + hi) / 2
		if !bisect && dh > 0 {
			if nt := hi - gh/dh; nt > lo && nt < hi {
				t = nt
			}
		}
		g, dg := pm.slackAt(p, t, budget)
		if math.Abs(g) <= tol {
			return t
		}
		if g > 0 {
			hi, gh, dh, bisect = t, g, dg, false
		} else {
			lo, bisect = t, true
		}
	}
	return lo
}

// Estimate locates t* and its capacity prices as SolveMaxMin's price
// search does (cutting planes for 2 or 3 types, golden section otherwise)
// and returns the prices and the best upper bound on t* found, within
// about 1e-6 of t*. It is an estimate: the caller solves the piece that
// holds it exactly (SolveMaxMin) and can use Slack with these prices to
// prove a later piece infeasible.
func (pm *PathMaxMin) Estimate(ctx context.Context) ([]float64, float64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if K := len(pm.Cap); K == 2 || K == 3 {
		return cutPrices(pm, pm.TMax, ctx.Err)
	}
	return approxPrices(ctx, pm, pm.TMax)
}
