package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strconv"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/controller/xcluster"
)

// MoveMode says when a job may run on a cluster other than the one it was
// submitted to (docs/multicluster.md).
type MoveMode string

const (
	// MovesNone: every job runs where it was submitted.
	MovesNone MoveMode = "none"
	// MovesGreedy: at submission and at every round, a job goes or moves
	// wherever its estimated finish, plus the transfer time, is soonest;
	// checkpoint and restart, margin and minimum stay are ignored.
	MovesGreedy MoveMode = "greedy"
	// MovesPlanned: placement as greedy; a running job moves only when its
	// estimated gain exceeds the move's whole cost by MultiConfig.Margin
	// plus MarginFraction of its time left, and not before it has stayed MultiConfig.MinStay, or the cost of its
	// last move if longer, where it is.
	MovesPlanned MoveMode = "planned"
)

// MoveModes lists the modes in the order the CLI compares them.
var MoveModes = []MoveMode{MovesNone, MovesGreedy, MovesPlanned}

// Cluster is one Slurm cluster of a multi-cluster simulation.
type Cluster struct {
	Name     string
	Capacity []int   // GPUs per type of MultiConfig.Base.Types; 0: none here
	Price    float64 // per GPU-hour, only reported (0: 1)
}

// Link joins two clusters; a pair without one never exchanges jobs.
type Link = xcluster.Link

// MultiJob is a job with where it is submitted and what a move must copy.
type MultiJob struct {
	workload.Job
	Home            int     // index into MultiConfig.Clusters
	CheckpointBytes float64 // copied on every move of a started job
	DataBytes       float64 // copied the first time it runs on a cluster
}

// MultiConfig is one multi-cluster simulation.
type MultiConfig struct {
	// Base holds what every cluster shares: Types (every GPU type, which
	// Job.Rates index), Round, MigrationCost (also a move's checkpoint +
	// restart), GPUsPerNode, MeasureLo/Hi, ReallocInterval, Seed, Jitter,
	// GroupIdentical and NoStick. Its Capacity and Jobs are unused.
	Base     Config
	Clusters []Cluster
	Links    []Link
	Jobs     []MultiJob // in arrival order, ID = index
	Moves    MoveMode
	Margin   float64 // seconds: planned moves need gain > cost + Margin
	// MarginFraction: and gain > cost + MarginFraction x the time left
	// where the job is, since estimates err in proportion to it.
	MarginFraction float64
	MinStay        float64 // seconds: planned moves wait this long after landing
}

// Move is one job leaving a cluster, at submission or while running.
type Move struct {
	Job       int
	From, To  int
	At, Lands float64 // leaves; may run there from (seconds)
	Bytes     float64
	Placement bool // at submission: data only, no checkpoint
}

// ClusterReport is one cluster's share of a multi-cluster run.
type ClusterReport struct {
	Name         string    `json:"name"`
	Types        []string  `json:"types"`
	Utilisation  []float64 `json:"utilisation"`
	JobsFinished int       `json:"jobs_finished"` // measured or not
	GPUHours     float64   `json:"gpu_hours"`
	Cost         float64   `json:"cost"` // GPU-hours x price
	Migrations   int       `json:"migrations"`
	Solves       int       `json:"solves"`
}

// MultiReport summarises the measured jobs of a multi-cluster run.
type MultiReport struct {
	Policy         string  `json:"policy"`
	Mode           string  `json:"moves_mode"`
	JobsMeasured   int     `json:"jobs_measured"`
	Rejected       int     `json:"rejected"` // measured jobs no allowed cluster can run
	AvgJCTHours    float64 `json:"avg_jct_hours"`
	MedianJCTHours float64 `json:"median_jct_hours"`
	P99JCTHours    float64 `json:"p99_jct_hours"`
	MakespanHours  float64 `json:"makespan_hours"`
	Moves          int     `json:"moves"`       // running jobs moved
	PlacedAway     int     `json:"placed_away"` // jobs started away from home
	GBMoved        float64 `json:"gb_moved"`
	// LostHours: job-hours between leaving a cluster (or being submitted,
	// for a placement away) and landing on the other, for all jobs.
	LostHours float64         `json:"lost_hours"`
	Rounds    int             `json:"rounds"`
	Clusters  []ClusterReport `json:"clusters"`
	JCTHours  []float64       `json:"-"`
	Log       []Move          `json:"-"`
	Done      []int           `json:"-"` // every finished job's ID, in order
}

// DrawMulti gives each job a home, with a chance proportional to each
// cluster's GPU count, and checkpoint and data sizes log-uniform in the
// given [lo, hi] GB; drawn per job from seed and ID, so every mode and
// policy sees the same jobs.
func DrawMulti(jobs []workload.Job, clusters []Cluster, ckptGB, dataGB [2]float64, seed int64) []MultiJob {
	var w []float64
	total := 0.0
	for _, c := range clusters {
		g := 0.0
		for _, n := range c.Capacity {
			g += float64(n)
		}
		w = append(w, g)
		total += g
	}
	logU := func(r *rand.Rand, lh [2]float64) float64 {
		lo, hi := math.Max(lh[0], 1e-9), math.Max(lh[1], 1e-9)
		return 1e9 * math.Exp(math.Log(lo)+r.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	out := make([]MultiJob, len(jobs))
	for i, j := range jobs {
		r := rand.New(rand.NewSource(seed*1000003 + int64(j.ID)))
		u, home := r.Float64()*total, 0
		for home < len(w)-1 && u >= w[home] {
			u -= w[home]
			home++
		}
		out[i] = MultiJob{Job: j, Home: home, CheckpointBytes: logU(r, ckptGB), DataBytes: logU(r, dataGB)}
	}
	return out
}

// mcluster is one cluster of a run: its engine over the types it has.
type mcluster struct {
	e      *engine
	global []int   // local type -> index in Base.Types
	demand float64 // GPUs asked by jobs here or on their way here
	done   int
	price  float64
}

// mjob is a job's state across clusters.
type mjob struct {
	j      *MultiJob
	l      *live
	seen   []float64 // jittered throughputs over every type
	at     int       // cluster it runs on or is heading to
	dataAt []bool    // clusters holding its data
	landed float64
	stay   float64 // least time where it is before moving again
}

type flight struct {
	m     *mjob
	from  int
	left  float64
	lands float64
}

// RunMulti simulates one policy (a fresh instance per cluster from
// newPolicy) on several clusters under one move mode.
func RunMulti(ctx context.Context, cfg MultiConfig, newPolicy func() (policy.Policy, error)) (MultiReport, error) {
	b := cfg.Base
	rep := MultiReport{Mode: string(cfg.Moves)}
	switch cfg.Moves {
	case MovesNone, MovesGreedy, MovesPlanned:
	default:
		return rep, fmt.Errorf("unknown move mode %q", cfg.Moves)
	}
	nc := len(cfg.Clusters)
	idx := map[string]int{}
	cls := make([]*mcluster, nc)
	for c, cl := range cfg.Clusters {
		idx[cl.Name] = c
		pol, err := newPolicy()
		if err != nil {
			return rep, err
		}
		rep.Policy = pol.Name()
		mc := &mcluster{price: cl.Price}
		if mc.price == 0 {
			mc.price = 1
		}
		var types []string
		var caps []int
		for k, n := range cl.Capacity {
			if n > 0 {
				types = append(types, b.Types[k])
				caps = append(caps, n)
				mc.global = append(mc.global, k)
			}
		}
		mc.e = newEngine(types, caps, &b, b.Seed+int64(c)*7919, pol)
		cls[c] = mc
	}
	// link[a][b]: the link between two clusters (bandwidth 0: none).
	link := make([][]xcluster.Link, nc)
	for c := range link {
		link[c] = make([]xcluster.Link, nc)
	}
	for _, lk := range cfg.Links {
		a, okA := idx[lk.A]
		z, okB := idx[lk.B]
		if !okA || !okB || a == z || lk.Bandwidth <= 0 {
			return rep, fmt.Errorf("bad link %s-%s", lk.A, lk.B)
		}
		link[a][z], link[z][a] = lk, lk
	}
	xfer := func(from, to int, bytes float64) float64 {
		if from == to {
			return 0
		}
		return link[from][to].Transfer(bytes)
	}
	// finish is the estimate the controller's multi-cluster manager reads
	// too (xcluster.Rate): job m's remaining time on cluster c when jobs
	// asking for others GPUs share it.
	finish := func(c int, m *mjob, others float64) float64 {
		mc := cls[c]
		types := make([]xcluster.TypeRate, len(mc.global))
		for i, k := range mc.global {
			types[i] = xcluster.TypeRate{Rate: m.j.Rates[k], GPUs: mc.e.capacity[i]}
		}
		return xcluster.Finish(m.l.remaining, xcluster.Rate(types, m.j.Scale, others))
	}
	rule := xcluster.Rule{Planned: cfg.Moves == MovesPlanned, MoveCost: b.MigrationCost,
		Margin: cfg.Margin, MarginFraction: cfg.MarginFraction}
	// land puts a job on its cluster with the rates of that cluster's types.
	land := func(m *mjob, now float64) {
		mc := cls[m.at]
		m.l.rates = make([]float64, len(mc.global))
		m.l.seen = make([]float64, len(mc.global))
		for i, k := range mc.global {
			m.l.rates[i], m.l.seen[i] = m.j.Rates[k], m.seen[k]
		}
		m.landed = now
		m.dataAt[m.at] = true
		mc.e.add(m.l)
	}
	var inFlight []flight
	send := func(m *mjob, to int, now float64, placement bool) {
		bytes := m.j.CheckpointBytes
		if placement || !m.l.ran {
			bytes = 0
		}
		if !m.dataAt[to] {
			bytes += m.j.DataBytes
		}
		lands := now + xfer(m.at, to, bytes)
		if !placement {
			lands += b.MigrationCost // checkpoint here, restart there
			rep.Moves++
		} else {
			rep.PlacedAway++
		}
		cost := lands - now
		rep.Log = append(rep.Log, Move{Job: m.j.ID, From: m.at, To: to, At: now, Lands: lands, Bytes: bytes, Placement: placement})
		rep.GBMoved += bytes / 1e9
		cls[m.at].demand -= float64(m.j.Scale)
		cls[to].demand += float64(m.j.Scale)
		inFlight = append(inFlight, flight{m: m, from: m.at, left: now, lands: lands})
		m.at = to
		m.stay = xcluster.MinStay(cfg.MinStay, cost)
	}

	next, done, need := 0, 0, b.MeasureHi-b.MeasureLo
	measured := func(id int) bool { return id >= b.MeasureLo && id < b.MeasureHi }
	jct := map[int]float64{}
	byID := map[string]*mjob{}
	first, last := math.Inf(1), 0.0
	fins := make([]func(l *live, end float64), nc)
	for c := range fins {
		fins[c] = func(l *live, end float64) {
			delete(byID, l.id)
			cls[c].demand -= float64(l.job.Scale)
			cls[c].done++
			rep.Done = append(rep.Done, l.job.ID)
			if measured(l.job.ID) {
				jct[l.job.ID] = end - l.job.Arrival
				done++
				first = math.Min(first, l.job.Arrival)
				last = math.Max(last, end)
			}
		}
	}
	type cand struct {
		c, i  int // cluster, index in its active list
		m     *mjob
		score float64
	}
	var cands []cand
	// best is the cluster other than m's where it would gain most, and by
	// how much (score > 0: move), under the mode's rule.
	best := func(m *mjob) (int, float64) {
		h := m.at
		here := finish(h, m, cls[h].demand-float64(m.j.Scale))
		to, score := -1, 0.0
		for o := range cls {
			if o == h || link[h][o].Bandwidth == 0 {
				continue
			}
			bytes := m.j.DataBytes * boolf(!m.dataAt[o])
			if m.l.ran {
				bytes += m.j.CheckpointBytes
			}
			if s := rule.MoveScore(here, finish(o, m, cls[o].demand), xfer(h, o, bytes)); s > score {
				to, score = o, s
			}
		}
		return to, score
	}
	now := 0.0
	for done < need {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		// Land what has arrived by this round.
		keep := inFlight[:0]
		for _, f := range inFlight {
			if f.lands <= now {
				rep.LostHours += (now - f.left) / 3600
				land(f.m, now)
				continue
			}
			keep = append(keep, f)
		}
		inFlight = keep
		// Admit submissions: home, or under greedy and planned the
		// cluster with the soonest estimated finish, data copy included.
		for next < len(cfg.Jobs) && cfg.Jobs[next].Arrival <= now {
			j := &cfg.Jobs[next]
			next++
			m := &mjob{j: j, at: j.Home, dataAt: make([]bool, nc), seen: jitter(j.Job, b.Jitter),
				l: &live{id: strconv.Itoa(j.ID), job: j.Job, remaining: j.Steps}}
			m.dataAt[j.Home] = true
			to, soonest := -1, math.Inf(1)
			for c := range cls {
				if cfg.Moves == MovesNone && c != j.Home {
					continue
				}
				if t := xfer(j.Home, c, j.DataBytes) + finish(c, m, cls[c].demand); t < soonest {
					to, soonest = c, t
				}
			}
			if to < 0 {
				if measured(j.ID) {
					rep.Rejected++
					need--
				}
				continue
			}
			byID[m.l.id] = m
			cls[j.Home].demand += float64(j.Scale)
			if to != j.Home {
				send(m, to, now, true)
				continue
			}
			land(m, now)
		}
		// Moves of running jobs, the largest gains first, each checked
		// again against the loads the moves before it left.
		if cfg.Moves != MovesNone {
			cands = cands[:0]
			for c, mc := range cls {
				for i, l := range mc.e.active {
					m := byID[l.id]
					if cfg.Moves == MovesPlanned && now-m.landed < m.stay {
						continue
					}
					if _, s := best(m); s > 0 {
						cands = append(cands, cand{c, i, m, s})
					}
				}
			}
			sort.SliceStable(cands, func(x, y int) bool { return cands[x].score > cands[y].score })
			var gone [][]int
			if len(cands) > 0 {
				gone = make([][]int, nc)
			}
			for _, cd := range cands {
				if to, s := best(cd.m); s > 0 {
					gone[cd.c] = append(gone[cd.c], cd.i)
					send(cd.m, to, now, false)
				}
			}
			for c, is := range gone {
				sort.Sort(sort.Reverse(sort.IntSlice(is)))
				for _, i := range is {
					cls[c].e.remove(i)
				}
			}
		}
		busy := false
		for c, mc := range cls {
			if len(mc.e.active) == 0 {
				continue
			}
			busy = true
			if err := mc.e.step(ctx, now, fins[c]); err != nil {
				return rep, err
			}
		}
		if busy {
			rep.Rounds++
		}
		if !busy && len(inFlight) == 0 {
			if next >= len(cfg.Jobs) {
				break
			}
			now = math.Max(now+b.Round, math.Ceil(cfg.Jobs[next].Arrival/b.Round)*b.Round)
			continue
		}
		now += b.Round
	}
	// The loads the estimates read must be what is there or on its way.
	want := make([]float64, nc)
	for c, mc := range cls {
		for _, l := range mc.e.active {
			want[c] += float64(l.job.Scale)
		}
	}
	for _, f := range inFlight {
		want[f.m.at] += float64(f.m.j.Scale)
	}
	for c, mc := range cls {
		if mc.demand != want[c] {
			return rep, fmt.Errorf("sim: cluster %s counts %g GPUs asked, holds %g", cfg.Clusters[c].Name, mc.demand, want[c])
		}
	}
	for c, mc := range cls {
		cr := ClusterReport{Name: cfg.Clusters[c].Name, Types: mc.e.types, JobsFinished: mc.done,
			Migrations: mc.e.migrations, Solves: mc.e.solves, Utilisation: make([]float64, len(mc.e.types))}
		for k, s := range mc.e.busy {
			cr.Utilisation[k] = s / (float64(mc.e.capacity[k]) * math.Max(now, 1))
			cr.GPUHours += s / 3600
		}
		cr.Cost = cr.GPUHours * mc.price
		rep.Clusters = append(rep.Clusters, cr)
	}
	summarise(jct, &rep.JCTHours, &rep.JobsMeasured, &rep.AvgJCTHours, &rep.MedianJCTHours, &rep.P99JCTHours)
	if rep.JobsMeasured > 0 {
		rep.MakespanHours = (last - first) / 3600
	}
	return rep, nil
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
