// Package sim is Rota's discrete-time simulator: it runs a policy and the
// round-based mechanism, the very code the controller uses, on generated
// (Gavel's generator) or traced jobs, and reports job completion times.
package sim

import (
	"context"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"time"

	"github.com/rota-hpc/rota/controller/mechanism"
	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

// Config is one simulation.
type Config struct {
	Types         []string
	Capacity      []int
	Round         float64 // seconds
	MigrationCost float64 // seconds lost per type change
	GPUsPerNode   int
	// Jobs in arrival order; the measured window is [MeasureLo, MeasureHi)
	// by index, run until all of those finish.
	Jobs                 []workload.Job
	MeasureLo, MeasureHi int
	// ReallocInterval is the least simulated time between two solves of
	// the policy: the allocation is recomputed when jobs arrived or
	// finished since the last solve and at least this long has passed
	// (0: at the first round after any change, as Gavel's simulator
	// does). Jobs that arrive in between run on GPUs the allocation
	// leaves over until the next solve.
	ReallocInterval float64
	Seed            int64 // drives the mechanism's per-round type order
	// Jitter scales each (job, type) throughput the policy sees by a
	// factor in [1-Jitter, 1+Jitter] fixed per job (jobs still run at
	// their true rates). Measured throughputs of real jobs are never
	// identical; exactly identical rows make the LP degenerate and slow.
	Jitter float64
	// GroupIdentical solves the policy over groups of identical jobs (same
	// throughputs as seen and scale) instead of single jobs; sound only
	// for policies whose LP sees nothing else of a job (las). See group.
	GroupIdentical bool
	NoStick        bool // mechanism.Mechanism.NoStick
	// Pairs, where set, gives two jobs' steps/s per type when they share
	// one GPU (nil: never measured); the policy then runs with space
	// sharing (policy.Options.SpaceSharing) and pairs run at these rates.
	// Only single-GPU jobs share.
	Pairs func(a, b workload.Job) [][2]float64
}

// Report summarises the measured jobs.
type Report struct {
	Policy           string    `json:"policy"`
	JobsMeasured     int       `json:"jobs_measured"`
	AvgJCTHours      float64   `json:"avg_jct_hours"`
	MedianJCTHours   float64   `json:"median_jct_hours"`
	P99JCTHours      float64   `json:"p99_jct_hours"`
	MakespanHours    float64   `json:"makespan_hours"`
	Utilisation      []float64 `json:"utilisation"`
	Migrations       int       `json:"migrations"`
	LeaseExtensions  int       `json:"lease_extensions"`
	Rounds           int       `json:"rounds"`
	RhoMean          float64   `json:"ftf_rho_mean"`
	RhoMedian        float64   `json:"ftf_rho_median"`
	RhoP99           float64   `json:"ftf_rho_p99"`
	SolveSecondsMean float64   `json:"solve_seconds_mean"`
	SolveSecondsMax  float64   `json:"solve_seconds_max"`
	Solves           int       `json:"solves"`
	// SharedGPUHours is GPU time spent running two jobs on one GPU.
	SharedGPUHours float64   `json:"shared_gpu_hours"`
	JCTHours       []float64 `json:"-"`
}

type live struct {
	id        string
	job       workload.Job
	remaining float64
	rates     []float64 // true throughputs on its cluster's types
	seen      []float64 // throughputs as the policy sees them
	activeSum float64   // sum over rounds of active job count (for rho)
	rounds    float64
	ran       bool // placed at least once: a move copies its checkpoint
}

// engine is one cluster's queue, policy solves and round mechanism: Run
// drives one, RunMulti one per cluster, so both run the same code.
type engine struct {
	types    []string
	capacity []int
	round    float64
	migCost  float64
	realloc  float64
	group    bool
	pol      policy.Policy
	mech     *mechanism.Mechanism

	active    []*live
	reqs      []mechanism.Request
	changed   bool
	lastSolve float64
	busy      []float64 // GPU-seconds per type

	rounds, migrations, leaseExt, solves int
	solveSum, solveMax                   float64

	pairs  func(a, b workload.Job) [][2]float64
	combos []*combo // pairs of active jobs sharing GPUs, from the last solve
	shared float64  // GPU-seconds run by pairs
}

// combo is two active jobs that the last solve lets share a GPU.
type combo struct {
	id    string
	a, b  *live
	x     []float64
	rates [][2]float64 // true steps/s of a and b sharing each type
}

func newEngine(types []string, capacity []int, cfg *Config, seed int64, pol policy.Policy) *engine {
	mech := mechanism.New(capacity, cfg.GPUsPerNode, cfg.Round, seed)
	mech.NoStick = cfg.NoStick
	return &engine{types: types, capacity: capacity, round: cfg.Round, migCost: cfg.MigrationCost,
		realloc: cfg.ReallocInterval, group: cfg.GroupIdentical, pol: pol, mech: mech,
		lastSolve: math.Inf(-1), busy: make([]float64, len(types)), pairs: cfg.Pairs}
}

func (e *engine) add(l *live) {
	e.active = append(e.active, l)
	e.changed = true
}

// remove takes active job i off this cluster (it moves elsewhere).
func (e *engine) remove(i int) *live {
	l := e.active[i]
	e.active = append(e.active[:i], e.active[i+1:]...)
	e.mech.Forget(l.id)
	e.changed = true
	return l
}

// step runs one round starting at now: a solve if the jobs changed, the
// mechanism's placement, and each placed job's progress; fin is called
// for each job that finishes, with its end time.
func (e *engine) step(ctx context.Context, now float64, fin func(l *live, end float64)) error {
	K := len(e.types)
	e.reqs = e.reqs[:0]
	for _, l := range e.active {
		e.reqs = append(e.reqs, mechanism.Request{ID: l.id, Scale: l.job.Scale, Rates: l.rates})
	}
	solve := e.changed && now-e.lastSolve >= e.realloc
	if !solve {
		e.comboRequests()
	}
	if solve {
		p := &policy.Problem{Types: e.types, Capacity: e.capacity, CostPerHour: ones(K),
			Jobs: make([]policy.Job, 0, len(e.active))}
		var rowOf []int // active job -> problem row
		switch {
		case e.pairs != nil:
			rowOf = e.classes(p, now)
		case e.group:
			rowOf = group(p, e.active)
		default:
			for _, l := range e.active {
				p.Jobs = append(p.Jobs, policy.Job{ID: l.id, Throughput: l.seen,
					Scale: l.job.Scale, Steps: l.remaining, Arrival: l.job.Arrival, Elapsed: now - l.job.Arrival})
			}
		}
		start := time.Now()
		a, err := e.pol.Allocate(ctx, p)
		secs := time.Since(start).Seconds()
		if err != nil {
			return err
		}
		e.solves++
		e.solveSum += secs
		e.solveMax = math.Max(e.solveMax, secs)
		for i := range e.reqs {
			if rowOf != nil {
				e.reqs[i].X = a.X[rowOf[i]]
			} else {
				e.reqs[i].X = a.X[i]
			}
		}
		if e.pairs != nil {
			e.setCombos(p, a, rowOf)
			e.comboRequests()
		}
		e.mech.Reset(e.reqs)
		e.changed = false
		e.lastSolve = now
	}
	res := e.mech.Round(e.reqs)
	e.rounds++
	e.migrations += res.Migrations
	e.leaseExt += res.LeaseExtensions
	keep := e.active[:0]
	n := float64(len(e.active))
	for i, l := range e.active {
		l.activeSum += n
		l.rounds++
		pl := res.Placed[i]
		if pl.Type < 0 {
			keep = append(keep, l)
			continue
		}
		l.ran = true
		run := e.round
		lost := 0.0
		if res.Migrated[i] {
			lost = math.Min(e.migCost, run)
		}
		rate := l.rates[pl.Type]
		gpus := float64(l.job.Scale)
		if v := res.Via[i]; v >= 0 {
			c := e.combos[v-len(e.active)]
			rate = c.rates[pl.Type][0]
			if c.b == l {
				rate = c.rates[pl.Type][1]
			}
			gpus = 0.5 // one GPU for the two
		}
		needT := l.remaining / rate
		if needT <= run-lost {
			e.busy[pl.Type] += (lost + needT) * gpus
			fin(l, now+lost+needT)
			e.mech.Forget(l.id)
			e.changed = true
			continue
		}
		e.busy[pl.Type] += run * gpus
		l.remaining -= rate * (run - lost)
		keep = append(keep, l)
	}
	for i := len(e.active); i < len(e.reqs); i++ {
		if res.Placed[i].Type >= 0 {
			e.shared += e.round
		}
	}
	clear(e.active[len(keep):])
	e.active = keep
	return nil
}

// Run simulates one policy.
func Run(ctx context.Context, cfg Config, pol policy.Policy) (Report, error) {
	K := len(cfg.Types)
	e := newEngine(cfg.Types, cfg.Capacity, &cfg, cfg.Seed, pol)
	rep := Report{Policy: pol.Name(), Utilisation: make([]float64, K)}
	next := 0
	done := 0
	need := cfg.MeasureHi - cfg.MeasureLo
	jct := map[int]float64{}
	rhos := []float64{}
	now := 0.0
	first, last := math.Inf(1), 0.0
	totalGPUs := 0.0
	for _, c := range cfg.Capacity {
		totalGPUs += float64(c)
	}
	eqRate := func(j workload.Job) float64 {
		eq := 0.0
		for k, c := range cfg.Capacity {
			eq += j.Rates[k] * float64(c) / totalGPUs
		}
		return eq
	}
	fin := func(l *live, end float64) {
		if l.job.ID >= cfg.MeasureLo && l.job.ID < cfg.MeasureHi {
			c := end - l.job.Arrival
			jct[l.job.ID] = c
			done++
			first = math.Min(first, l.job.Arrival)
			last = math.Max(last, end)
			share := math.Min(1, totalGPUs/(l.activeSum/l.rounds)/float64(l.job.Scale))
			rhos = append(rhos, c/(l.job.Steps/(eqRate(l.job)*share)))
		}
	}
	for done < need {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		for next < len(cfg.Jobs) && cfg.Jobs[next].Arrival <= now {
			j := cfg.Jobs[next]
			e.add(&live{id: strconv.Itoa(j.ID), job: j, remaining: j.Steps, rates: j.Rates, seen: jitter(j, cfg.Jitter)})
			next++
		}
		if len(e.active) == 0 {
			if next >= len(cfg.Jobs) {
				break
			}
			now = math.Ceil(cfg.Jobs[next].Arrival/cfg.Round) * cfg.Round
			continue
		}
		if err := e.step(ctx, now, fin); err != nil {
			return rep, err
		}
		now += cfg.Round
	}
	rep.Rounds, rep.Migrations, rep.LeaseExtensions, rep.Solves = e.rounds, e.migrations, e.leaseExt, e.solves
	rep.SharedGPUHours = e.shared / 3600
	rep.SolveSecondsMax = e.solveMax
	for k := range e.busy {
		rep.Utilisation[k] = e.busy[k] / (float64(cfg.Capacity[k]) * math.Max(now, 1))
	}
	if rep.Solves > 0 {
		rep.SolveSecondsMean = e.solveSum / float64(rep.Solves)
	}
	summarise(jct, &rep.JCTHours, &rep.JobsMeasured, &rep.AvgJCTHours, &rep.MedianJCTHours, &rep.P99JCTHours)
	if len(rep.JCTHours) > 0 {
		rep.MakespanHours = (last - first) / 3600
		sort.Float64s(rhos)
		s := 0.0
		for _, x := range rhos {
			s += x
		}
		rep.RhoMean = s / float64(len(rhos))
		rep.RhoMedian = quantile(rhos, 0.5)
		rep.RhoP99 = quantile(rhos, 0.99)
	}
	return rep, nil
}

// classes puts the active jobs into problem rows for a space-sharing
// solve: with grouping, identical jobs (same workload type, throughputs as
// seen and scale) into one row that stands for all of them (Count), else
// one row each; and a pair for every two rows (and a row with itself,
// when it stands for two or more) whose jobs the table measured sharing a
// GPU. It returns, per active job, its row.
func (e *engine) classes(p *policy.Problem, now float64) []int {
	rowOf := make([]int, len(e.active))
	rows := map[string]int{}
	var first []*live // per row, one of its jobs
	var buf []byte
	for i, l := range e.active {
		key := ""
		if e.group {
			buf = append(buf[:0], l.job.Type...)
			buf = append(buf, '|')
			buf = strconv.AppendInt(buf, int64(l.job.Scale), 10)
			for _, t := range l.seen {
				buf = append(buf, ',')
				buf = strconv.AppendFloat(buf, t, 'g', -1, 64)
			}
			key = string(buf)
			if r, ok := rows[key]; ok {
				p.Jobs[r].Count++
				rowOf[i] = r
				continue
			}
			rows[key] = len(p.Jobs)
		}
		rowOf[i] = len(p.Jobs)
		first = append(first, l)
		p.Jobs = append(p.Jobs, policy.Job{ID: l.id, Throughput: l.seen, Scale: l.job.Scale, Count: 1,
			Steps: l.remaining, Arrival: l.job.Arrival, Elapsed: now - l.job.Arrival})
	}
	for a := range p.Jobs {
		for b := a; b < len(p.Jobs); b++ {
			ja, jb := first[a], first[b]
			if max(ja.job.Scale, 1) != 1 || max(jb.job.Scale, 1) != 1 || (a == b && p.Jobs[a].Count < 2) {
				continue
			}
			r := e.pairs(ja.job, jb.job)
			if r == nil {
				continue
			}
			// the policy sees the pair's rates as it sees each job's
			seen := make([][2]float64, len(r))
			for k := range r {
				seen[k] = [2]float64{r[k][0] * ratio(ja.seen[k], ja.rates[k]), r[k][1] * ratio(jb.seen[k], jb.rates[k])}
			}
			p.Pairs = append(p.Pairs, policy.Pair{A: a, B: b, Throughput: seen})
		}
	}
	return rowOf
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// setCombos turns the solve's pairs into pairs of active jobs. A pair of
// rows A and B holding y GPUs of a type becomes max(|A|, |B|) pairs of
// jobs, member i of A with member i mod |B| of B, each with y/max of the
// type, so that every job gets the time the LP gave each member (a row
// with itself: member i with member i+1, each pair y/|A|).
func (e *engine) setCombos(p *policy.Problem, a policy.Allocation, rowOf []int) {
	// a pair of jobs that stays paired keeps its id, so its history (and
	// the GPUs it holds) carry over; the mechanism's Reset drops the rest.
	e.combos = e.combos[:0]
	members := make([][]*live, len(p.Jobs))
	for i, l := range e.active {
		members[rowOf[i]] = append(members[rowOf[i]], l)
	}
	for q, row := range a.PairX {
		tot := 0.0
		for _, y := range row {
			tot += y
		}
		if tot <= 1e-9 {
			continue
		}
		pr := p.Pairs[q]
		A, B := members[pr.A], members[pr.B]
		var ps [][2]*live
		if pr.A == pr.B {
			for i := range A {
				if len(A) == 2 && i == 1 {
					break
				}
				ps = append(ps, [2]*live{A[i], A[(i+1)%len(A)]})
			}
		} else {
			for i := 0; i < max(len(A), len(B)); i++ {
				ps = append(ps, [2]*live{A[i%len(A)], B[i%len(B)]})
			}
		}
		for _, m := range ps {
			x := make([]float64, len(row))
			for k, y := range row {
				x[k] = y / float64(len(ps))
			}
			e.combos = append(e.combos, &combo{id: m[0].id + "+" + m[1].id, a: m[0], b: m[1], x: x,
				rates: e.pairs(m[0].job, m[1].job)})
		}
	}
}

// comboRequests appends a request for each pair whose jobs are both still
// active (after the jobs' own requests), dropping the others.
func (e *engine) comboRequests() {
	if len(e.combos) == 0 {
		return
	}
	at := make(map[*live]int, len(e.active))
	for i, l := range e.active {
		at[l] = i
	}
	keep := e.combos[:0]
	for _, c := range e.combos {
		ia, okA := at[c.a]
		ib, okB := at[c.b]
		if !okA || !okB {
			e.mech.Forget(c.id)
			continue
		}
		rates := make([]float64, len(c.rates))
		for k, r := range c.rates {
			if r[0] > 0 && r[1] > 0 {
				rates[k] = r[0] + r[1]
			}
		}
		e.reqs = append(e.reqs, mechanism.Request{ID: c.id, Scale: 1, X: c.x, Rates: rates, Members: []int{ia, ib}})
		keep = append(keep, c)
	}
	clear(e.combos[len(keep):])
	e.combos = keep
}

// summarise sorts the JCTs (seconds, per job) into hours and their mean,
// median and 99th percentile.
func summarise(jct map[int]float64, v *[]float64, n *int, avg, med, p99 *float64) {
	*v = (*v)[:0]
	for _, c := range jct {
		*v = append(*v, c/3600)
	}
	sort.Float64s(*v)
	*n = len(*v)
	if *n == 0 {
		return
	}
	s := 0.0
	for _, x := range *v {
		s += x
	}
	*avg = s / float64(*n)
	*med = quantile(*v, 0.5)
	*p99 = quantile(*v, 0.99)
}

// group puts identical active jobs (same throughputs as seen, same scale s)
// into one problem job of scale c*s and weight c, c at most the smallest
// capacity among the types it can use divided by s, so it can use the same
// types. For max-min fairness over normalised throughput (las: A = T*s /
// (w*equalShare)) this is exact: the group's row A is each member's, its
// capacity use c*s*x is the members' together, and since averaging the
// members' allocations keeps any optimum optimal, the LP over groups has
// the same optimum as the LP over jobs, with every member given the same
// allocation (what an interior-point solver such as Gavel's returns for
// identical jobs). It keeps the LP from seeing hundreds of identical rows,
// which are ties that make the structured solver fall back to its dense
// simplex. It returns, per active job, its problem row.
func group(p *policy.Problem, active []*live) []int {
	rowOf := make([]int, len(active))
	type key struct {
		rates string
		scale int
	}
	open := map[key]int{} // key -> row still taking members
	var buf []byte
	for i, l := range active {
		buf = buf[:0]
		for _, t := range l.seen {
			buf = strconv.AppendFloat(buf, t, 'g', -1, 64)
			buf = append(buf, ',')
		}
		s := max(l.job.Scale, 1)
		k := key{string(buf), s}
		limit := math.MaxInt
		for c, t := range l.seen {
			if t > 0 && s <= p.Capacity[c] {
				limit = min(limit, p.Capacity[c]/s)
			}
		}
		if r, ok := open[k]; ok && int(p.Jobs[r].Weight) < limit {
			p.Jobs[r].Weight++
			p.Jobs[r].Scale += s
			rowOf[i] = r
			continue
		}
		open[k] = len(p.Jobs)
		rowOf[i] = len(p.Jobs)
		p.Jobs = append(p.Jobs, policy.Job{ID: l.id, Throughput: l.seen, Scale: s, Weight: 1,
			Steps: l.remaining, Arrival: l.job.Arrival})
	}
	return rowOf
}

func jitter(j workload.Job, J float64) []float64 {
	if J == 0 {
		return j.Rates
	}
	r := rand.New(rand.NewSource(int64(j.ID)*7919 + 17))
	out := make([]float64, len(j.Rates))
	for k, t := range j.Rates {
		out[k] = t * (1 + J*(2*r.Float64()-1))
	}
	return out
}

func ones(k int) []float64 {
	o := make([]float64, k)
	for i := range o {
		o[i] = 1
	}
	return o
}

func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
