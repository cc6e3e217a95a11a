package policy

import (
	"context"
	"math"

	"github.com/rota-hpc/rota/controller/policy/lp"
)

func init() {
	register("ftf", func(o Options) Policy { return &ftfPolicy{o: o} })
}

// ftfPolicy is finish-time fairness (Themis' rho as Gavel formulates it):
// minimise max_j rho_j with
//
//	rho_j = (Elapsed_j + Steps_j / thr_j(x)) / (IsolatedElapsed_j + Steps_j / iso_j)
//
// where iso_j is the job's throughput under a 1/n share of the cluster
// (its equal-share throughput times min(1, G/(n scale_j)), G GPUs, n
// jobs). Write D_j for the denominator. rho_j <= r is
// thr_j(x) >= Steps_j / (r D_j - E_j), so with t = 1/r the requirement
// is sum_k x_jk T_jk (D_j - E_j/r)/Steps_j >= t: with no elapsed time this
// is one MaxMin LP (A_jk = T_jk D_j/Steps_j, optimum 1/max rho). With
// elapsed time the coefficients depend on r; the optimum r* is the root
// of the increasing function r t(r) - 1, found by safeguarded secant
// steps, each an exact MaxMin solve; the LP at r* is exported.
// Priority weights are ignored, as in Gavel. Jobs with no steps left are
// left out of the LP (they need nothing).
type ftfPolicy struct {
	o Options
}

func (f *ftfPolicy) Name() string { return "ftf" + suffix(f.o) }

// LPObjective: the LP's optimum is 1/max rho.
func (f *ftfPolicy) LPObjective(v float64) float64 { return 1 / v }

type ftfJob struct {
	i          int // index in idx
	T          []float64
	S, E, D, s float64
}

func (f *ftfPolicy) jobs(p *Problem, idx []int) []ftfJob {
	n := 0.0
	for _, j := range idx {
		n += p.Jobs[j].count()
	}
	G := p.totalGPUs()
	var out []ftfJob
	for i, j := range idx {
		job := &p.Jobs[j]
		if job.Steps <= 0 {
			continue
		}
		u := p.usable(j, f.o.Agnostic)
		iso := p.equalShare(u) * math.Min(1, G/(n*job.scale()))
		out = append(out, ftfJob{i: i, T: u, S: job.Steps, E: job.Elapsed, D: job.IsolatedElapsed + job.Steps/iso, s: job.scale()})
	}
	return out
}

// build is the MaxMin at r (r = +Inf: elapsed time ignored).
func (f *ftfPolicy) build(p *Problem, idx []int, js []ftfJob, r float64) *lp.MaxMin {
	mm := &lp.MaxMin{Cap: p.caps()}
	for _, j := range js {
		c := (j.D - j.E/r) / j.S
		b := lp.BlockJob{A: make([]float64, len(j.T)), S: j.s, D: 1}
		for k, t := range j.T {
			b.A[k] = t * c
		}
		mm.Jobs = append(mm.Jobs, b)
	}
	return mm
}

// solve returns r*, the MaxMin at r* and its solution, and the number of
// LPs solved.
func (f *ftfPolicy) solve(ctx context.Context, p *Problem, idx []int, js []ftfJob) (float64, *lp.MaxMin, lp.MaxMinResult, int, error) {
	type sol struct {
		mm  *lp.MaxMin
		res lp.MaxMinResult
	}
	r, s, n, err := ftfRoot(ctx, js, func(r float64) (float64, sol, error) {
		mm := f.build(p, idx, js, r)
		res, err := lp.SolveMaxMin(ctx, mm)
		return res.T, sol{mm, res}, err
	})
	return r, s.mm, s.res, n, err
}

func (f *ftfPolicy) sharing(p *Problem) bool { return f.o.SpaceSharing && len(p.Pairs) > 0 }

// ftfCoef is each schedulable job's share-row weight at r (0 for a job with
// no steps left: it needs nothing).
func ftfCoef(n int, js []ftfJob, r float64) []float64 {
	c := make([]float64, n)
	for _, j := range js {
		c[j.i] = (j.D - j.E/r) / j.S
	}
	return c
}

// solvePacked is solve over single jobs and pairs (see packed): r*, each
// schedulable job's X row and each pair's GPUs at r*, and the solves.
func (f *ftfPolicy) solvePacked(ctx context.Context, pk *packed, js []ftfJob) (float64, [][]float64, [][]float64, int, error) {
	type sol struct{ X, Y [][]float64 }
	r, s, n, err := ftfRoot(ctx, js, func(r float64) (float64, sol, error) {
		t, X, Y, err := pk.solve(ctx, ftfCoef(len(pk.idx), js, r))
		return t, sol{X, Y}, err
	})
	return r, s.X, s.Y, n, err
}

// ftfRoot finds r* = max rho: at(r) solves the max-min at r (+Inf first:
// elapsed time ignored) and returns its optimum t(r) with the solution,
// which ftfRoot returns for r*. It returns r*, that solution and the number
// of solves.
func ftfRoot[S any](ctx context.Context, js []ftfJob, at func(r float64) (float64, S, error)) (float64, S, int, error) {
	t0, s0, err := at(math.Inf(1))
	if err != nil {
		return 0, s0, 1, err
	}
	lo := 0.0 // max E_j/D_j: below it some job cannot be fast enough
	for _, j := range js {
		lo = math.Max(lo, j.E/j.D)
	}
	if lo == 0 {
		return 1 / t0, s0, 1, nil
	}
	// g(r) = r t(r) - 1 is increasing; g(lo) = -1 and g(r) <= r t_inf - 1.
	solves := 1
	g := func(r float64) (float64, S, error) {
		solves++
		t, s, err := at(r)
		return r*t - 1, s, err
	}
	a, ga := lo, -1.0
	b := math.Max(lo, 1/t0) * 2
	gb, sb, err := g(b)
	for err == nil && gb < 0 {
		a, ga = b, gb
		b *= 2
		gb, sb, err = g(b)
	}
	if err != nil {
		return 0, s0, solves, err
	}
	// Illinois regula falsi on [a, b], to 1e-12 relative.
	side := 0
	for it := 0; it < 100 && b-a > 1e-12*b; it++ {
		if err := ctx.Err(); err != nil {
			return 0, s0, solves, err
		}
		c := b - gb*(b-a)/(gb-ga)
		if !(c > a && c < b) {
			c = (a + b) / 2
		}
		gc, sc, err := g(c)
		if err != nil {
			return 0, s0, solves, err
		}
		if gc >= 0 {
			b, gb, sb = c, gc, sc
			if side == 1 {
				ga /= 2
			}
			side = 1
		} else {
			a, ga = c, gc
			if side == -1 {
				gb /= 2
			}
			side = -1
		}
		if gc == 0 {
			break
		}
	}
	// the solution at b is feasible (t(b) >= 1/b): every rho <= b.
	return b, sb, solves, nil
}

func (f *ftfPolicy) Formulate(p *Problem) (*lp.Problem, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	idx, _ := p.schedulable()
	js := f.jobs(p, idx)
	if len(js) == 0 {
		return (&lp.MaxMin{Cap: p.caps()}).FullLP(), nil
	}
	if f.sharing(p) {
		pk := newPacked(p, idx, f.o.shareMargin(), f.o.Agnostic)
		r, _, _, _, err := f.solvePacked(context.Background(), pk, js)
		if err != nil {
			return nil, err
		}
		prob, _ := pk.formulated(ftfCoef(len(idx), js, r))
		return prob, nil
	}
	_, mm, _, _, err := f.solve(context.Background(), p, idx, js)
	if err != nil {
		return nil, err
	}
	return mm.FullLP(), nil
}

func (f *ftfPolicy) Allocate(ctx context.Context, p *Problem) (Allocation, error) {
	if err := p.Validate(); err != nil {
		return Allocation{}, err
	}
	a := zeroAlloc(p, f.Name())
	a.ObjectiveName = "max finish-time fairness rho"
	idx, not := p.schedulable()
	a.Unschedulable = not
	js := f.jobs(p, idx)
	if len(js) == 0 {
		return a, nil
	}
	if f.sharing(p) {
		pk := newPacked(p, idx, f.o.shareMargin(), f.o.Agnostic)
		r, X, Y, n, err := f.solvePacked(ctx, pk, js)
		if err != nil {
			return a, err
		}
		for i, j := range idx {
			copy(a.X[j], X[i])
		}
		a.PairX = Y
		a.Objective, a.FormulatedOptimum, a.Levels = r, 1/r, n
		if !f.o.NoFill {
			packedFill(p, a.X, a.PairX, idx, f.o.Agnostic)
		}
		return a, ctx.Err()
	}
	r, _, res, n, err := f.solve(ctx, p, idx, js)
	if err != nil {
		return a, err
	}
	for i, j := range js {
		copy(a.X[idx[j.i]], res.X[i])
	}
	a.Objective, a.FormulatedOptimum, a.Levels, a.ReducedJobs = r, res.T, n, res.Reduced
	if !f.o.NoFill {
		fill(p, a.X, idx, f.o.Agnostic)
	}
	return a, ctx.Err()
}
