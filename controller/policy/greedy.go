package policy

import (
	"context"
	"math"
	"sort"
)

func init() {
	register("fifo", func(o Options) Policy { return &greedy{o: o, kind: "fifo"} })
	register("sjf", func(o Options) Policy { return &greedy{o: o, kind: "sjf"} })
}

// greedy is fifo and sjf: jobs in order (arrival, or remaining time on the
// fastest type) each take a whole type-slot while one fits. The
// heterogeneity-aware forms place each job on its fastest type with room;
// the agnostic forms place it on the type with the most free GPUs, and sjf
// orders by remaining time at the job's mean throughput, since an agnostic
// scheduler does not know which type is fastest.
type greedy struct {
	o    Options
	kind string
}

func (g *greedy) Name() string { return g.kind + suffix(g.o) }

func (g *greedy) Allocate(ctx context.Context, p *Problem) (Allocation, error) {
	if err := p.Validate(); err != nil {
		return Allocation{}, err
	}
	a := zeroAlloc(p, g.Name())
	a.ObjectiveName = "jobs placed"
	idx, not := p.schedulable()
	a.Unschedulable = not
	key := make([]float64, len(p.Jobs))
	for _, j := range idx {
		job := &p.Jobs[j]
		switch {
		case g.kind == "fifo":
			key[j] = job.Arrival
		case g.o.Agnostic:
			sum, n := 0.0, 0.0
			for _, t := range p.usable(j, false) {
				if t > 0 {
					sum, n = sum+t, n+1
				}
			}
			key[j] = job.Steps / (sum / n)
		default:
			best := 0.0
			for _, t := range p.usable(j, false) {
				best = math.Max(best, t)
			}
			key[j] = job.Steps / best
		}
	}
	sort.SliceStable(idx, func(x, y int) bool { return key[idx[x]] < key[idx[y]] })
	free := p.caps()
	for _, j := range idx {
		s := p.Jobs[j].scale()
		u := p.usable(j, false)
		pick, best := -1, -1.0
		for k, t := range u {
			if t <= 0 || free[k] < s {
				continue
			}
			score := t
			if g.o.Agnostic {
				score = free[k]
			}
			if score > best {
				pick, best = k, score
			}
		}
		if pick >= 0 {
			a.X[j][pick] = 1
			free[pick] -= s
			a.Objective++
		}
	}
	return a, ctx.Err()
}
