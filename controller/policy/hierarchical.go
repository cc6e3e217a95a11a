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
//
// That is the definition; solve computes the same levels without an LP
// for each (see solve and stage): most levels end only because a job got
// its whole time on its best type, and those are known in advance.
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
	levels []*lp.MaxMin // every LP solved, in order
	dts    []float64    // each one's optimum
	first  float64      // the first level's optimum (all jobs at 0)
	val    []float64    // final share of every job in idx
	X      [][]float64  // the last LP's allocation, rows as idx
	ent    []int        // entity number of every job in idx
	entW   []float64    // entity weights
	reduce int          // jobs the last LP carried in full
	names  []string     // entity names
	byEnt  map[string]int

	A     [][]float64 // share coefficients of every job in idx
	best  []float64   // its largest share (whole time on its best type)
	wt    []float64   // its priority weight
	order []int       // positions in idx in FIFO order: arrival, then index
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

// setup reads the jobs' coefficients, entities and FIFO order.
func (h *hierarchicalPolicy) setup(p *Problem, idx []int) *waterFill {
	n := len(idx)
	w := &waterFill{idx: idx, val: make([]float64, n), ent: make([]int, n), byEnt: map[string]int{},
		A: make([][]float64, n), best: make([]float64, n), wt: make([]float64, n)}
	for i, j := range idx {
		w.A[i] = h.shareCoeffs(p, j)
		for _, a := range w.A[i] {
			w.best[i] = math.Max(w.best[i], a)
		}
		w.wt[i] = p.Jobs[j].weight()
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
	w.order = make([]int, n)
	for i := range w.order {
		w.order[i] = i
	}
	sort.SliceStable(w.order, func(a, b int) bool {
		return p.Jobs[idx[w.order[a]]].Arrival < p.Jobs[idx[w.order[b]]].Arrival
	})
	return w
}

// firstLevel is the first level's LP: every job at 0, the rates of the
// start of the water-filling.
func (h *hierarchicalPolicy) firstLevel(p *Problem, w *waterFill) *lp.MaxMin {
	st := newStage(w, make([]bool, len(w.idx)), 0, h.o.InnerFIFO)
	return st.levelLP(p, w, 0)
}

// solve runs the water-filling. Its levels fall in two kinds. Most end
// where a job reaches its whole time on its best type, with the
// capacities to spare; that only changes how its entity's level is shared
// out from then on, and needs no LP: from a level tau0 on, as long as no
// capacity binds, every job's requirement is a known piecewise-linear
// function of the water level (a stage: see stage). The others end where
// the capacities bind and some jobs freeze for good (positive duals).
// For each stage, one price search over the whole path (lp.PathMaxMin)
// locates the first capacity-bound level t*, and the single piece that
// holds it is solved exactly, from that search's prices (SolveMaxMinFrom): SolveMaxMin on that piece is exactly the
// LP the level-by-level water-filling solves for that level, with the
// same requirements (every earlier piece fits, since t* is past it) and
// so the same optimum and the same freezing. When the estimate names the
// wrong piece, its prices show it (a piece whose start they price out of
// reach: go back), or SolveMaxMin does (the piece fits to its end: go on
// to the next; its start does not fit: bisect with exact probes, see
// lastFit). With 4 or more GPU types, where the price search is a
// coordinate-wise golden section and its estimate can be far off, the
// piece is found by bisection from the start. The time-limit levels in
// between cost a sort per stage.
func (h *hierarchicalPolicy) solve(ctx context.Context, p *Problem, idx []int) (*waterFill, error) {
	w := h.setup(p, idx)
	n := len(idx)
	jobs := make([]lp.BlockJob, n)
	for i, j := range idx {
		jobs[i] = lp.BlockJob{A: w.A[i], S: p.Jobs[j].scale()}
	}
	caps := p.caps()
	frozen := make([]bool, n)
	tau0 := 0.0
	for stageNo := 0; ; stageNo++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st := newStage(w, frozen, tau0, h.o.InnerFIFO)
		if len(st.bps) == 0 {
			// Every job is frozen, or has reached its cap within rounding.
			R := make([]float64, n)
			st.reqAt(tau0, R, nil)
			for i := range frozen {
				if !frozen[i] {
					frozen[i], w.val[i] = true, math.Min(R[i], w.best[i])*(1-1e-10)
				}
			}
			return w, nil
		}
		// Which piece holds t*: from the price estimate where the cutting
		// planes give one (2 or 3 types; within ~1e-6) or it is exact (1
		// type), else by bisection with exact probes (st.fits).
		var pm *lp.PathMaxMin
		var price []float64
		budget, i, located := 0.0, 0, false
		hint, tauHat := -1, 0.0 // the piece the estimate names, and its t*
		if len(caps) <= 3 {
			pm = &lp.PathMaxMin{Cap: caps, Jobs: jobs, TMax: st.end() - tau0,
				Req: func(t float64, R, dR []float64) { st.reqAt(tau0+t, R, dR) }}
			var that float64
			var err error
			if price, that, err = pm.Estimate(ctx); err != nil {
				return nil, err
			}
			if misplace != nil {
				that = misplace(that, st.end()-tau0)
			}
			for k, c := range caps {
				budget += c * price[k]
			}
			i = st.segmentOf(tau0 + that)
			hint, tauHat = i, tau0+that
			// A piece whose start the estimate's prices prove infeasible
			// lies past t*: take the last one they do not (h_t(p) is
			// nondecreasing in t, and 0 fits).
			lo, hi := 0, i
			for lo < hi {
				mid := (lo + hi + 1) / 2
				if pm.Slack(price, st.start(mid)-tau0) > 1e-9*budget {
					hi = mid - 1
				} else {
					lo = mid
				}
			}
			i = lo
		} else {
			var err error
			if i, err = st.lastFit(ctx, p, w, 0, len(st.bps)-1); err != nil {
				return nil, err
			}
			located = true
		}
		// prev is the last piece solved that fits to its end (then t* is
		// later; there is no going back).
		type solved struct {
			i   int
			mm  *lp.MaxMin
			res lp.MaxMinResult
		}
		var prev *solved
		for {
			mm := st.levelLP(p, w, i)
			var res lp.MaxMinResult
			var err error
			if i == hint && prev == nil && !located {
				// The estimate's prices and t* serve the piece as they
				// are: no second price search.
				res, err = lp.SolveMaxMinFrom(ctx, mm, price, tauHat-st.start(i))
			} else {
				res, err = lp.SolveMaxMin(ctx, mm)
			}
			if err != nil {
				switch {
				case ctx.Err() != nil:
					return nil, err
				case prev != nil:
					// The next piece's start does not fit after all (t* is
					// at the breakpoint, within rounding): t* ends prev.
					i, mm, res = prev.i, prev.mm, prev.res
				case i > 0 && !located:
					// The estimate went past t*: the last piece whose start
					// fits holds it.
					if i, err = st.lastFit(ctx, p, w, 0, i-1); err != nil {
						return nil, err
					}
					located = true
					continue
				case i > 0:
					i-- // its start fits within rounding only
					continue
				default:
					return nil, err
				}
			} else {
				w.levels = append(w.levels, mm)
				w.dts = append(w.dts, res.T)
				w.X, w.reduce = res.X, res.Reduced
				if res.T >= levelTMax(mm)*(1-1e-9) && i < len(st.bps)-1 {
					// The piece fits to its end: t* is later.
					prev = &solved{i, mm, res}
					i++
					continue
				}
			}
			if stageNo == 0 {
				if i == 0 {
					w.first = res.T
				} else {
					w.first = st.bps[0]
				}
			}
			h.freeze(w, frozen, mm, res)
			tau0 = (st.start(i) + res.T) * (1 - 1e-10)
			break
		}
	}
}

// misplace, set only by tests, moves the estimate of t* (given it and the
// end of the path) to check that a misplaced estimate is caught.
var misplace func(t, end float64) float64

// levelTMax is the largest t the jobs' time limits allow in a level LP.
func levelTMax(mm *lp.MaxMin) float64 {
	t := math.Inf(1)
	for j := range mm.Jobs {
		b := &mm.Jobs[j]
		if b.D > 0 {
			best := 0.0
			for _, a := range b.A {
				best = math.Max(best, a)
			}
			t = math.Min(t, (best-b.C)/b.D)
		}
	}
	return t
}

// freeze applies a solved level as the level-by-level water-filling
// does: every rising job whose requirement dual is positive is frozen (by
// complementary slackness it is at its requirement in every optimum, so
// it cannot grow without lowering someone at the same level), and so is
// every job that has reached its best rate, in this level or earlier in
// the stage. At least one rising job has a positive dual (the duals of
// the requirement rows sum to 1 over D), so every capacity-bound level
// freezes a job. Committed values are shaved by 1e-10 so that the next
// LP stays feasible despite rounding.
func (h *hierarchicalPolicy) freeze(w *waterFill, frozen []bool, mm *lp.MaxMin, res lp.MaxMinResult) {
	ymax := 0.0
	for i := range mm.Jobs {
		if mm.Jobs[i].D > 0 {
			ymax = math.Max(ymax, res.Y[i])
		}
	}
	for i := range mm.Jobs {
		b := &mm.Jobs[i]
		switch {
		case frozen[i]:
		case b.D > 0:
			v := math.Min(b.C+b.D*res.T, w.best[i]) * (1 - 1e-10)
			if res.Y[i] > 1e-9*ymax || v >= w.best[i]*(1-1e-9) {
				frozen[i], w.val[i] = true, v
			}
		case b.C > 0: // capped earlier in the stage (levelLP)
			frozen[i], w.val[i] = true, b.C
		}
	}
}

// stage is the water-filling from level tau0 on, as long as no capacity
// binds. Every entity with a job still rising is at level tau0 and rises
// with the water level tau: its frozen jobs keep their values (F), and
// w_e tau - F is shared out among its other jobs, each capped at its best
// rate:
//
//   - fair inside: job j gets min(best_j, weight_j lambda), with lambda the
//     entity's inner level; jobs reach their cap in the order of
//     best_j/weight_j, and each one that does makes lambda rise faster;
//   - FIFO inside: the jobs fill up one after the other in arrival order.
//
// So every requirement is piecewise linear in tau, and the breakpoints (a
// job reaching its cap) are known in advance: bp of each entity, merged
// into bps. Between two breakpoints, the requirements are exactly those of
// one level of the level-by-level water-filling (levelLP).
type stage struct {
	tau0     float64
	fifo     bool
	w        *waterFill
	frozen   []int  // jobs frozen before the stage
	isFrozen []bool // the same, by position in idx
	ents     []entPath
	bps      []float64 // every entity's breakpoints, ascending
}

type entPath struct {
	jobs []int     // rising jobs, in the order they reach their cap
	bp   []float64 // bp[m]: the level at which jobs[0..m] have all reached it
	pref []float64 // pref[m]: the sum of the caps of jobs[0..m-1]
	suf  []float64 // fair: suf[m]: the sum of the weights of jobs[m..]
	F, w float64   // frozen jobs' values; entity weight
}

func newStage(w *waterFill, frozen []bool, tau0 float64, fifo bool) *stage {
	st := &stage{tau0: tau0, fifo: fifo, w: w, isFrozen: frozen}
	ents := make([]entPath, len(w.names))
	for i := range ents {
		ents[i].w = w.entW[i]
	}
	for _, i := range w.order {
		if frozen[i] {
			st.frozen = append(st.frozen, i)
			ents[w.ent[i]].F += w.val[i]
		} else {
			ents[w.ent[i]].jobs = append(ents[w.ent[i]].jobs, i)
		}
	}
	for e := range ents {
		ep := &ents[e]
		if len(ep.jobs) == 0 {
			continue
		}
		m := len(ep.jobs)
		if !fifo {
			sort.SliceStable(ep.jobs, func(a, b int) bool {
				ja, jb := ep.jobs[a], ep.jobs[b]
				return w.best[ja]/w.wt[ja] < w.best[jb]/w.wt[jb]
			})
		}
		ep.pref = make([]float64, m+1)
		for r, i := range ep.jobs {
			ep.pref[r+1] = ep.pref[r] + w.best[i]
		}
		ep.bp = make([]float64, m)
		if fifo {
			for r := range ep.jobs {
				ep.bp[r] = (ep.F + ep.pref[r+1]) / ep.w
			}
		} else {
			ep.suf = make([]float64, m+1)
			for r := m - 1; r >= 0; r-- {
				ep.suf[r] = ep.suf[r+1] + w.wt[ep.jobs[r]]
			}
			for r, i := range ep.jobs {
				ep.bp[r] = (ep.F + ep.pref[r] + w.best[i]/w.wt[i]*ep.suf[r]) / ep.w
			}
		}
		for r := 1; r < m; r++ { // monotone despite rounding
			ep.bp[r] = math.Max(ep.bp[r], ep.bp[r-1])
		}
		st.ents = append(st.ents, *ep)
		st.bps = append(st.bps, ep.bp...)
	}
	// The pieces lie between distinct breakpoints past tau0.
	sort.Float64s(st.bps)
	out := st.bps[:0]
	for _, b := range st.bps {
		if b > tau0 && (len(out) == 0 || b > out[len(out)-1]) {
			out = append(out, b)
		}
	}
	st.bps = out
	return st
}

// end is the level at which every rising job has reached its cap.
func (st *stage) end() float64 { return st.bps[len(st.bps)-1] }

// start is where piece i begins: tau0, or the i-th breakpoint.
func (st *stage) start(i int) float64 {
	if i == 0 {
		return st.tau0
	}
	return st.bps[i-1]
}

// segmentOf is the piece holding level tau (the last one past the end).
func (st *stage) segmentOf(tau float64) int {
	i := sort.Search(len(st.bps), func(i int) bool { return st.bps[i] > tau })
	return min(i, len(st.bps)-1)
}

// reqAt writes every job's requirement at level tau (positions as idx)
// and, with dR, its derivative from the right. A job counts as capped at
// a breakpoint equal to tau, so that at the start of a piece the rates
// are the piece's own.
func (st *stage) reqAt(tau float64, R, dR []float64) {
	w := st.w
	for _, i := range st.frozen {
		R[i] = w.val[i]
		if dR != nil {
			dR[i] = 0
		}
	}
	for e := range st.ents {
		ep := &st.ents[e]
		m := sort.Search(len(ep.bp), func(r int) bool { return ep.bp[r] > tau })
		room := ep.w*tau - ep.F - ep.pref[m] // shared out among jobs[m..]
		lam, slope := 0.0, 0.0
		if !st.fifo && m < len(ep.jobs) {
			lam, slope = math.Max(0, room/ep.suf[m]), ep.w/ep.suf[m]
		}
		for r, i := range ep.jobs {
			var v, d float64
			switch {
			case r < m:
				v = w.best[i]
			case st.fifo && r == m:
				v, d = math.Min(w.best[i], math.Max(0, room)), ep.w
			case !st.fifo:
				v, d = math.Min(w.best[i], w.wt[i]*lam), w.wt[i]*slope
			}
			R[i] = v
			if dR != nil {
				dR[i] = d
			}
		}
	}
}

// fits reports whether every requirement at level tau fits the cluster:
// an exact probe, the MaxMin "every job reaches t times its requirement
// at tau" (always feasible at t = 0, so SolveMaxMin never meets an
// infeasible problem), whose optimum is at least 1 exactly when it fits.
func (st *stage) fits(ctx context.Context, p *Problem, w *waterFill, tau float64) (bool, error) {
	n := len(w.idx)
	R := make([]float64, n)
	st.reqAt(tau, R, nil)
	mm := &lp.MaxMin{Cap: p.caps(), Jobs: make([]lp.BlockJob, n)}
	for k, j := range w.idx {
		mm.Jobs[k] = lp.BlockJob{A: w.A[k], S: p.Jobs[j].scale(), D: R[k]}
	}
	res, err := lp.SolveMaxMin(ctx, mm)
	if errors.Is(err, lp.ErrUnbounded) {
		return true, nil // nothing required
	}
	return err == nil && res.T >= 1-1e-9, err
}

// lastFit is the last piece in [lo, hi] whose start fits (piece lo's
// does), by bisection.
func (st *stage) lastFit(ctx context.Context, p *Problem, w *waterFill, lo, hi int) (int, error) {
	for lo < hi {
		mid := (lo + hi + 1) / 2
		ok, err := st.fits(ctx, p, w, st.start(mid))
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

// levelLP is piece i's level as the level-by-level water-filling states
// it: every job must reach its requirement at the piece's start plus its
// rate times dt.
func (st *stage) levelLP(p *Problem, w *waterFill, i int) *lp.MaxMin {
	n := len(w.idx)
	R, dR := make([]float64, n), make([]float64, n)
	st.reqAt(st.start(i), R, dR)
	mm := &lp.MaxMin{Cap: p.caps(), Jobs: make([]lp.BlockJob, n)}
	for k, j := range w.idx {
		c := R[k]
		if dR[k] == 0 && !st.isFrozen[k] && c >= w.best[k] {
			// Capped earlier in the stage: held just below the cap, as
			// the level-by-level water-filling commits it (at exactly
			// its cap, every price check frees the job, see
			// lp.MaxMin.classify).
			c = w.best[k] * (1 - 1e-10)
		}
		mm.Jobs[k] = lp.BlockJob{A: w.A[k], S: p.Jobs[j].scale(), C: c, D: dR[k]}
	}
	return mm
}

func (h *hierarchicalPolicy) Formulate(p *Problem) (*lp.Problem, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	idx, _ := p.schedulable()
	if len(idx) == 0 {
		return (&lp.MaxMin{Cap: p.caps()}).FullLP(), nil
	}
	return h.firstLevel(p, h.setup(p, idx)).FullLP(), nil
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
	w, err := h.solve(ctx, p, idx)
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
	a.FormulatedOptimum = w.first
	a.Levels = len(w.levels)
	a.ReducedJobs = w.reduce
	if !h.o.NoFill {
		fill(p, a.X, idx, h.o.Agnostic)
	}
	return a, ctx.Err()
}
