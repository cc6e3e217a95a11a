package policy

import (
	"context"
	"fmt"
	"math"

	"github.com/rota-hpc/rota/controller/policy/lp"
)

func init() {
	register("max-throughput", func(o Options) Policy { return &linearPolicy{o: o, kind: "max-throughput"} })
	register("min-cost", func(o Options) Policy { return &linearPolicy{o: o, kind: "min-cost"} })
	register("min-cost-slo", func(o Options) Policy { return &linearPolicy{o: o, kind: "min-cost-slo"} })
}

// linearPolicy is max-throughput (sum of weighted throughput, each job's
// normalised by its fastest type so models are comparable), min-cost
// (Gavel's throughput per dollar: the same sum with each type's term
// divided by its dollars per hour for the job's GPUs) and min-cost-slo
// (min-cost with each deadline as a throughput floor). All are one Linear
// LP.
type linearPolicy struct {
	o    Options
	kind string
}

func (l *linearPolicy) Name() string { return l.kind + suffix(l.o) }

func (l *linearPolicy) LPObjective(v float64) float64 { return v }

// build maps the problem; floor scales SLO floors (1 = as asked).
func (l *linearPolicy) build(p *Problem, idx []int, floor float64) (*lp.Linear, error) {
	if l.kind != "max-throughput" && p.CostPerHour == nil {
		return nil, fmt.Errorf("policy: %s needs CostPerHour", l.kind)
	}
	li := &lp.Linear{Cap: p.caps()}
	for _, j := range idx {
		job := &p.Jobs[j]
		u := p.usable(j, l.o.Agnostic)
		best := 0.0
		for _, t := range u {
			best = math.Max(best, t)
		}
		b := lp.BlockJob{A: u, S: job.scale(), V: make([]float64, len(u))}
		for k, t := range u {
			v := job.weight() * t / best
			if l.kind != "max-throughput" {
				v /= p.CostPerHour[k] * job.scale()
			}
			b.V[k] = v
		}
		if l.kind == "min-cost-slo" && job.Deadline > 0 && floor > 0 {
			// The floor is on true throughput (steps/s): the deadline is
			// real even when the policy is agnostic about speed.
			b.A = p.usable(j, false)
			b.C = floor * job.Steps / job.Deadline
		}
		li.Jobs = append(li.Jobs, b)
	}
	return li, nil
}

func (l *linearPolicy) Formulate(p *Problem) (*lp.Problem, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	idx, _ := p.schedulable()
	li, err := l.build(p, idx, 1)
	if err != nil {
		return nil, err
	}
	return li.FullLP(), nil
}

func (l *linearPolicy) Allocate(ctx context.Context, p *Problem) (Allocation, error) {
	if err := p.Validate(); err != nil {
		return Allocation{}, err
	}
	a := zeroAlloc(p, l.Name())
	a.ObjectiveName = map[string]string{"max-throughput": "sum normalised throughput", "min-cost": "normalised throughput per dollar-hour", "min-cost-slo": "normalised throughput per dollar-hour"}[l.kind]
	idx, not := p.schedulable()
	a.Unschedulable = not
	if len(idx) == 0 {
		return a, nil
	}
	li, err := l.build(p, idx, 1)
	if err != nil {
		return a, err
	}
	res, err := lp.SolveLinear(ctx, li)
	if err != nil && l.kind == "min-cost-slo" {
		// Deadlines cannot all be met. Fall back cleanly: find the largest
		// fraction f of every SLO's required rate that can be met at once
		// (a max-min LP), then optimise cost under floors at f.
		f, ferr := l.sloFraction(ctx, p, idx)
		if ferr != nil {
			return a, ferr
		}
		if li, err = l.build(p, idx, f*(1-1e-9)); err != nil {
			return a, err
		}
		res, err = lp.SolveLinear(ctx, li)
		a.Note = fmt.Sprintf("deadlines infeasible: every SLO job gets %.1f%% of the rate its deadline needs", 100*f)
	}
	if err != nil {
		return a, err
	}
	for i, j := range idx {
		copy(a.X[j], res.X[i])
	}
	a.Objective, a.ReducedJobs = res.Objective, res.Reduced
	return a, ctx.Err()
}

// sloFraction is max f such that every SLO job can get f times its
// required rate at once.
func (l *linearPolicy) sloFraction(ctx context.Context, p *Problem, idx []int) (float64, error) {
	mm := &lp.MaxMin{Cap: p.caps()}
	for _, j := range idx {
		job := &p.Jobs[j]
		u := p.usable(j, false)
		b := lp.BlockJob{A: u, S: job.scale()}
		if job.Deadline > 0 {
			need := job.Steps / job.Deadline
			b.A = make([]float64, len(u))
			for k, t := range u {
				b.A[k] = t / need
			}
			b.D = 1
		}
		mm.Jobs = append(mm.Jobs, b)
	}
	r, err := lp.SolveMaxMin(ctx, mm)
	if err != nil {
		return 0, err
	}
	return math.Min(1, r.T), nil
}
