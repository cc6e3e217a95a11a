package policy

import (
	"context"
	"errors"
	"math"
	"sort"

	"github.com/rota-hpc/rota/controller/policy/lp"
)

func init() {
	register("hierarchical", func(o Options) Policy { return &hierarchicalPolicy{o: o} })
}

// hierarchicalPolicy is Gavel's hierarchical policy: weighted max-min
// fairness across entities (users or accounts) and fairness, or FIFO with
// Options.InnerFIFO, among each entity's jobs, computed by water-filling.
//
// A job's share is las's normalised throughput without the job weight,
// v_j = sum_k x_jk T_jk scale_j / E_j, and an entity's level is
// sum_{j in e} v_j / w_e. Every level of the water-filling is one MaxMin
// LP in which each job that can still grow ("active") must reach
// val_j + D_j dt, and every frozen job keeps its val_j (D = 0):
//
//   - fairness inside e: every active job of e is active, with
//     D_j = w_e * weight_j / sum of the weights of e's active jobs;
//   - FIFO inside e: only the earliest active job of e, with D_j = w_e; the
//     others are held at their value (0 until their turn).
//
// So every entity that still has an active job rises by exactly dt; after
// each level the jobs whose requirement dual is positive are frozen: by
// complementary slackness they sit at their requirement in every optimum,
// so they cannot grow without lowering someone at the same level. At least
// one job has a positive dual (the duals of the requirement rows sum to 1
// over D), so every level freezes a job and the loop ends.
type hierarchicalPolicy struct {
	o Options
}

func (h *hierarchicalPolicy) Name() string {
	n := "hierarchical"
	if h.o.InnerFIFO {
		n += "-fifo"
	}
	return n + suffix(h.o)
}

// LPObjective: Formulate exports the first level, whose optimum is the
// first water level dt_1, reported in Allocation.FormulatedOptimum.
func (h *hierarchicalPolicy) LPObjective(v float64) float64 { return v }

// waterFill is the result of the water-filling.
type waterFill struct {
	idx    []int        // schedulable jobs, in MaxMin order
	levels []*lp.MaxMin // the LP of every level, in order
	dts    []float64    // each level's optimum
	val    []float64    // final share of every job in idx
	X      [][]float64  // the last level's allocation, rows as idx
	ent    []int        // entity number of every job in idx
	entW   []float64    // entity weights
	reduce int          // jobs the last level carried in full
	names  []string     // entity names
	byEnt  map[string]int
}

// shareCoeffs is job j's normalised throughput per type.
func (h *hierarchicalPolicy) shareCoeffs(p *Problem, j int) []float64 {
	u := p.usable(j, h.o.Agnostic)
	f := p.Jobs[j].scale() / p.equalShare(u)
	for k := range u {
		u[k] *= f
	}
	return u
}

func (h *hierarchicalPolicy) solve(ctx context.Context, p *Problem, idx []int, onlyFirst bool) (*waterFill, error) {
	n := len(idx)
	w := &waterFill{idx: idx, val: make([]float64, n), ent: make([]int, n), byEnt: map[string]int{}}
	A := make([][]float64, n)
	best := make([]float64, n)
	for i, j := range idx {
		A[i] = h.shareCoeffs(p, j)
		for _, a := range A[i] {
			best[i] = math.Max(best[i], a)
		}
		e := p.Jobs[j].Entity
		id, ok := w.byEnt[e]
		if !ok {
			id = len(w.names)
			w.byEnt[e] = id
			w.names = append(w.names, e)
			ew, has := p.EntityWeights[e]
			if !has || ew <= 0 {
				ew = 1
			}
			w.entW = append(w.entW, ew)
		}
		w.ent[i] = id
	}
	// FIFO order inside each entity: arrival, then index.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return p.Jobs[idx[order[a]]].Arrival < p.Jobs[idx[order[b]]].Arrival
	})
	frozen := make([]bool, n)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Active jobs and their rates.
		D := make([]float64, n)
		wsum := make([]float64, len(w.names))
		head := make([]int, len(w.names))
		for e := range head {
			head[e] = -1
		}
		for _, i := range order {
			if frozen[i] {
				continue
			}
			e := w.ent[i]
			if h.o.InnerFIFO {
				if head[e] < 0 {
					head[e] = i
				}
				continue
			}
			wsum[e] += p.Jobs[idx[i]].weight()
		}
		any := false
		for i := range D {
			if frozen[i] {
				continue
			}
			e := w.ent[i]
			switch {
			case h.o.InnerFIFO && head[e] == i:
				D[i] = w.entW[e]
			case !h.o.InnerFIFO:
				D[i] = w.entW[e] * p.Jobs[idx[i]].weight() / wsum[e]
			}
			any = any || D[i] > 0
		}
		if !any {
			return w, nil
		}
		mm := &lp.MaxMin{Cap: p.caps()}
		for i := range idx {
			mm.Jobs = append(mm.Jobs, lp.BlockJob{A: A[i], S: p.Jobs[idx[i]].scale(), C: w.val[i], D: D[i]})
		}
		res, err := lp.SolveMaxMin(ctx, mm)
		if errors.Is(err, lp.ErrUnbounded) {
			return w, nil
		}
		if err != nil {
			return nil, err
		}
		w.levels = append(w.levels, mm)
		w.dts = append(w.dts, res.T)
		w.X, w.reduce = res.X, res.Reduced
		if onlyFirst {
			return w, nil
		}
		// Freeze the bottlenecks: positive requirement duals, or jobs that
		// already get all they can (their whole time on their best type).
		ymax := 0.0
		for i := range D {
			if D[i] > 0 {
				ymax = math.Max(ymax, res.Y[i])
			}
		}
		for i := range D {
			if D[i] == 0 {
				continue
			}
			// Shave the committed value by 1e-10 so the next level stays
			// feasible despite rounding.
			w.val[i] = math.Min(w.val[i]+D[i]*res.T, best[i]) * (1 - 1e-10)
			if res.Y[i] > 1e-9*ymax || w.val[i] >= best[i]*(1-1e-9) {
				frozen[i] = true
			}
		}
	}
}

func (h *hierarchicalPolicy) Formulate(p *Problem) (*lp.Problem, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	idx, _ := p.schedulable()
	if len(idx) == 0 {
		return (&lp.MaxMin{Cap: p.caps()}).FullLP(), nil
	}
	w, err := h.solve(context.Background(), p, idx, true)
	if err != nil {
		return nil, err
	}
	if len(w.levels) == 0 {
		return (&lp.MaxMin{Cap: p.caps()}).FullLP(), nil
	}
	return w.levels[0].FullLP(), nil
}

func (h *hierarchicalPolicy) Allocate(ctx context.Context, p *Problem) (Allocation, error) {
	if err := p.Validate(); err != nil {
		return Allocation{}, err
	}
	a := zeroAlloc(p, h.Name())
	a.ObjectiveName = "min weighted entity share"
	idx, not := p.schedulable()
	a.Unschedulable = not
	if len(idx) == 0 {
		return a, nil
	}
	w, err := h.solve(ctx, p, idx, false)
	if err != nil {
		return a, err
	}
	if w.X != nil {
		for i, j := range idx {
			copy(a.X[j], w.X[i])
		}
	}
	level := make([]float64, len(w.names))
	for i := range idx {
		level[w.ent[i]] += w.val[i]
	}
	a.Objective = math.Inf(1)
	for e := range level {
		a.Objective = math.Min(a.Objective, level[e]/w.entW[e])
	}
	if len(w.dts) > 0 {
		a.FormulatedOptimum = w.dts[0]
	}
	a.Levels = len(w.levels)
	a.ReducedJobs = w.reduce
	if !h.o.NoFill {
		fill(p, a.X, idx, h.o.Agnostic)
	}
	return a, ctx.Err()
}
