package policy

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/rota-hpc/rota/controller/policy/lp"
)

func init() {
	register("las", func(o Options) Policy { return &maxMinPolicy{o: o, kind: "las"} })
	register("makespan", func(o Options) Policy { return &maxMinPolicy{o: o, kind: "makespan"} })
}

// maxMinPolicy is las (Gavel's max-min fairness over normalised, weighted
// throughput) and makespan (max-min of 1/finish-time, i.e. min max
// steps/throughput). Both are one MaxMin LP.
type maxMinPolicy struct {
	o    Options
	kind string
}

func (m *maxMinPolicy) Name() string { return m.kind + suffix(m.o) }

// build maps the problem to a MaxMin over the schedulable jobs.
//
// las: A[j][k] = T[j][k] * scale_j / (weight_j * equalShare_j), as in
// Gavel's max_min_fairness_perf: the scale factor makes a multi-GPU job
// count its GPUs, the weight divides the share it must reach, and the
// equal-share throughput normalises away how fast a model is in absolute
// terms. makespan: A[j][k] = T[j][k]/steps_j, so t = 1/makespan.
func (m *maxMinPolicy) build(p *Problem, idx []int) *lp.MaxMin {
	mm := &lp.MaxMin{Cap: p.caps()}
	for _, j := range idx {
		job := &p.Jobs[j]
		u := p.usable(j, m.o.Agnostic)
		b := lp.BlockJob{A: make([]float64, len(u)), S: job.scale(), D: 1}
		var f float64
		switch m.kind {
		case "las":
			f = job.scale() / (job.weight() * p.equalShare(u))
		case "makespan":
			f = 1 / math.Max(job.Steps, 1e-9)
		}
		for k, t := range u {
			b.A[k] = t * f
		}
		mm.Jobs = append(mm.Jobs, b)
	}
	return mm
}

func (m *maxMinPolicy) Formulate(p *Problem) (*lp.Problem, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	idx, _ := p.schedulable()
	if m.sharing(p) {
		prob, _ := newPacked(p, idx, m.o.shareMargin(), m.o.Agnostic).formulated(m.lasCoef(p, idx))
		return prob, nil
	}
	return m.build(p, idx).FullLP(), nil
}

// sharing says whether this solve is the space-sharing formulation.
func (m *maxMinPolicy) sharing(p *Problem) bool {
	return m.o.SpaceSharing && m.kind == "las" && len(p.Pairs) > 0
}

// lasCoef is las's weight for each schedulable job's throughput: its
// scale over its weight times its equal-share throughput (see build).
func (m *maxMinPolicy) lasCoef(p *Problem, idx []int) []float64 {
	c := make([]float64, len(idx))
	for i, j := range idx {
		job := &p.Jobs[j]
		c[i] = job.scale() / (job.weight() * p.equalShare(p.usable(j, m.o.Agnostic)))
	}
	return c
}

// allocatePacked is las over single jobs and pairs (see packed).
func (m *maxMinPolicy) allocatePacked(ctx context.Context, p *Problem, idx []int, a Allocation) (Allocation, error) {
	pk := newPacked(p, idx, m.o.shareMargin(), m.o.Agnostic)
	t, X, Y, err := pk.solve(ctx, m.lasCoef(p, idx))
	if err != nil {
		return a, err
	}
	for i, j := range idx {
		copy(a.X[j], X[i])
	}
	a.PairX = Y
	a.Objective = t
	if !m.o.NoFill {
		packedFill(p, a.X, a.PairX, idx, m.o.Agnostic)
	}
	return a, ctx.Err()
}

func (m *maxMinPolicy) LPObjective(v float64) float64 {
	if m.kind == "makespan" {
		return 1 / v
	}
	return v
}

func (m *maxMinPolicy) Allocate(ctx context.Context, p *Problem) (Allocation, error) {
	if err := p.Validate(); err != nil {
		return Allocation{}, err
	}
	a := zeroAlloc(p, m.Name())
	a.ObjectiveName = map[string]string{"las": "min normalised share", "makespan": "makespan seconds"}[m.kind]
	idx, not := p.schedulable()
	a.Unschedulable = not
	if len(idx) == 0 {
		return a, nil
	}
	if m.sharing(p) {
		return m.allocatePacked(ctx, p, idx, a)
	}
	res, err := lp.SolveMaxMin(ctx, m.build(p, idx))
	if err != nil {
		return a, err
	}
	for i, j := range idx {
		copy(a.X[j], res.X[i])
	}
	a.Objective = m.LPObjective(res.T)
	a.ReducedJobs = res.Reduced
	if !m.o.NoFill {
		fill(p, a.X, idx, m.o.Agnostic)
	}
	return a, ctx.Err()
}

// fillCand is job j on type k, gain its speed there over its best.
type fillCand struct {
	j, k int
	gain float64
}

// fillOrder is the order the fills hand idle GPUs out in: every (job,
// type) the job can use, fastest relative to the job's best type first.
func fillOrder(p *Problem, idx []int, agnostic bool) []fillCand {
	var cs []fillCand
	for _, j := range idx {
		u := p.usable(j, agnostic)
		best := 0.0
		for _, t := range u {
			best = math.Max(best, t)
		}
		for k, t := range u {
			if t > 0 {
				cs = append(cs, fillCand{j, k, t / best})
			}
		}
	}
	// slices' generic stable sort, not sort.SliceStable: the reflection
	// swapper made this sort a quarter of a 2,048-job las solve.
	slices.SortStableFunc(cs, func(a, b fillCand) int { return cmp.Compare(b.gain, a.gain) })
	return cs
}

// fill hands capacity the optimum leaves idle to jobs with time to spare,
// fastest gain first. It only ever raises allocations, so every max-min
// objective keeps its value; it exists because an LP vertex often leaves
// GPUs unused that Gavel's interior-point solutions would spread out.
func fill(p *Problem, X [][]float64, idx []int, agnostic bool) {
	free := p.caps()
	for j := range X {
		for k, x := range X[j] {
			free[k] -= p.Jobs[j].scale() * x
		}
	}
	for _, c := range fillOrder(p, idx, agnostic) {
		if free[c.k] <= 1e-9 {
			continue
		}
		s := p.Jobs[c.j].scale()
		room := 1.0
		for _, x := range X[c.j] {
			room -= x
		}
		add := math.Min(room, free[c.k]/s)
		if add > 1e-9 {
			X[c.j][c.k] += add
			free[c.k] -= add * s
		}
	}
}
