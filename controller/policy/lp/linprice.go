package lp

import (
	"context"
	"math"
)

// Price search of the Linear solver by exact line minimisations.
//
// The Lagrangian dual L(p) = Cap.p + sum_j max_v (V_j - S_j p).x_v (v over
// the vertices of job j's block) is convex and piecewise linear. Along a
// line p + s d each job's term is the upper envelope of a few lines in s
// (one per vertex, slope -S_j x_v.d), so L's derivative along d is
// Cap.d plus the slope of every job's envelope, a step function whose
// steps are the envelopes' breakpoints. Sorting those breakpoints gives the
// exact minimiser along the line in O(n log n), where a golden-section
// search took ~47 evaluations of L per line (min-cost-slo at 512 jobs
// spent all its time there). The lines are the coordinate axes, then the
// pairwise exchanges e_i - e_k, swept until L stops falling. Like any
// descent along fixed directions this can stop at a kink short of the
// minimum; the exact phase corrects the jobs it misclassifies.

// blockPolytope lists a job's block vertices once: xs holds K shares per
// vertex and val its objective V.x.
type blockPolytope struct {
	xs  []float64
	val []float64
}

func (l *Linear) polytopes() []blockPolytope {
	K := len(l.Cap)
	out := make([]blockPolytope, len(l.Jobs))
	for j := range l.Jobs {
		b := &l.Jobs[j]
		bp := &out[j]
		blockVertices(b, func(f lfix) {
			x := make([]float64, K)
			v := 0.0
			if f.k1 >= 0 {
				x[f.k1] = f.x1
				v += b.V[f.k1] * f.x1
			}
			if f.k2 >= 0 {
				x[f.k2] = f.x2
				v += b.V[f.k2] * f.x2
			}
			bp.xs = append(bp.xs, x...)
			bp.val = append(bp.val, v)
		})
	}
	return out
}

type event struct{ s, rise float64 }

// lineScratch is lineMin's reusable memory.
type lineScratch struct {
	a, m   []float64
	events []event
}

// lineMin returns the s in [lo, hi] minimising L(p + s d).
func (l *Linear) lineMin(ls *lineScratch, polys []blockPolytope, p, d []float64, lo, hi float64) float64 {
	K := len(l.Cap)
	events := ls.events[:0]
	defer func() { ls.events = events[:0] }()
	slope := 0.0 // L's right derivative at lo
	for k, c := range l.Cap {
		slope += c * d[k]
	}
	for j := range polys {
		b := &l.Jobs[j]
		bp := &polys[j]
		nv := len(bp.val)
		// value at s: a_v + m_v s, with a_v at p + lo d.
		if cap(ls.a) < nv {
			ls.a, ls.m = make([]float64, nv), make([]float64, nv)
		}
		a, m := ls.a[:nv], ls.m[:nv]
		for v := 0; v < nv; v++ {
			x := bp.xs[v*K : (v+1)*K]
			av, mv := bp.val[v], 0.0
			for k, xk := range x {
				if xk != 0 {
					av -= b.S * (p[k] + lo*d[k]) * xk
					mv -= b.S * d[k] * xk
				}
			}
			a[v], m[v] = av, mv
		}
		// The envelope's line at lo (ties: the larger slope, as slope is
		// the right derivative), then each line that overtakes it.
		cur := 0
		for v := 1; v < nv; v++ {
			if a[v] > a[cur] || (a[v] == a[cur] && m[v] > m[cur]) {
				cur = v
			}
		}
		slope += m[cur]
		s := 0.0 // offset from lo
		for {
			next, at := -1, math.Inf(1)
			for v := 0; v < nv; v++ {
				if m[v] > m[cur] {
					x := (a[cur] - a[v]) / (m[v] - m[cur])
					if x < s {
						x = s
					}
					if next < 0 || x < at || (x == at && m[v] > m[next]) {
						next, at = v, x
					}
				}
			}
			if next < 0 || lo+at >= hi {
				break
			}
			events = append(events, event{lo + at, m[next] - m[cur]})
			cur, s = next, at
		}
	}
	if slope >= 0 {
		return lo
	}
	if s, ok := weightedSelect(events, -slope); ok {
		return s
	}
	return hi
}

// weightedSelect returns the smallest breakpoint s at which the rises of
// the events up to and including s reach need (> 0), by a weighted
// quickselect: expected O(len(ev)), where sorting every line's breakpoints
// was most of the search. It reorders ev.
func weightedSelect(ev []event, need float64) (float64, bool) {
	for len(ev) > 0 {
		// Three-way partition around the middle element's s (median of
		// three against sorted inputs).
		a, b, c := ev[0].s, ev[len(ev)/2].s, ev[len(ev)-1].s
		piv := max(min(a, b), min(max(a, b), c))
		lt, i, gt := 0, 0, len(ev)
		wl, we := 0.0, 0.0
		for i < gt {
			switch x := ev[i].s; {
			case x < piv:
				wl += ev[i].rise
				ev[lt], ev[i] = ev[i], ev[lt]
				lt++
				i++
			case x > piv:
				gt--
				ev[gt], ev[i] = ev[i], ev[gt]
			default:
				we += ev[i].rise
				i++
			}
		}
		switch {
		case wl >= need:
			ev = ev[:lt]
		case wl+we >= need:
			return piv, true
		default:
			need -= wl + we
			ev = ev[gt:]
		}
	}
	return 0, false
}

// linePrices minimises L by exact line searches along the axes and the
// pairwise exchanges, from p = 0.
func (l *Linear) linePrices(ctx context.Context) ([]float64, error) {
	K := len(l.Cap)
	polys := l.polytopes()
	var ls lineScratch
	p := make([]float64, K)
	d := make([]float64, K)
	// An upper limit for price increases: past the largest value per GPU
	// of any vertex nobody wants the type, except SLO jobs that must use
	// it; L then rises with Cap, so the search never runs off, but a
	// finite bound keeps the arithmetic finite.
	top := 1.0
	for j := range l.Jobs {
		b := &l.Jobs[j]
		for k, a := range b.A {
			if a > 0 && b.S > 0 {
				top = math.Max(top, math.Abs(b.V[k])/b.S)
			}
		}
	}
	top *= 1e6
	dual := func() float64 {
		v := 0.0
		for k, c := range l.Cap {
			v += c * p[k]
		}
		for j := range polys {
			b := &l.Jobs[j]
			bp := &polys[j]
			best := math.Inf(-1)
			for i, val := range bp.val {
				x := bp.xs[i*K : (i+1)*K]
				for k, xk := range x {
					val -= b.S * p[k] * xk
				}
				best = math.Max(best, val)
			}
			v += best
		}
		return v
	}
	best := dual()
	step := func() {
		// The range keeps p >= 0.
		lo, hi := -top, top
		for k, dk := range d {
			switch {
			case dk > 0:
				lo = math.Max(lo, -p[k]/dk)
			case dk < 0:
				hi = math.Min(hi, -p[k]/dk)
			}
		}
		if lo >= hi {
			return
		}
		s := l.lineMin(&ls, polys, p, d, lo, hi)
		for k := range p {
			p[k] = math.Max(0, p[k]+s*d[k])
		}
	}
	for sweep := 0; sweep < 20; sweep++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := best
		for i := 0; i < K; i++ {
			for k := range d {
				d[k] = 0
			}
			d[i] = 1
			step()
		}
		for i := 0; i < K; i++ {
			for k := i + 1; k < K; k++ {
				for kk := range d {
					d[kk] = 0
				}
				d[i], d[k] = 1, -1
				step()
			}
		}
		best = dual()
		if !(best < start-1e-12*math.Abs(start)) {
			break
		}
	}
	return p, nil
}
