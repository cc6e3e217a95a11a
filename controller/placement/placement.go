// Package placement answers the job_submit plugin's question "which GPU
// type and what walltime?" from state the controller already holds. It runs
// on slurmctld's submit path (inside the plugin's deadline), so a Placer
// never solves or does I/O there: the policy engine precomputes, Place
// looks up.
package placement

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Placer decides one placement. Implementations must be safe for
// concurrent use and fast: microseconds, not milliseconds.
type Placer interface {
	// Name is the policy name written into annotations ("interim", "las"...).
	Name() string
	// Update gives the Placer a fresh picture of the cluster.
	Update(s *cluster.Snapshot)
	Place(req *wire.PlaceRequest) Result
}

// Result is a placement with the numbers behind it, for `rota explain`.
type Result struct {
	GPUType      string // "" keeps the request's type
	TimeLimitMin uint32 // 0 keeps the request's time limit
	Reason       string
	Numbers      map[string]float64
	// ByFeature: express GPUType as a node constraint (see
	// cluster.Snapshot.ByFeature).
	ByFeature bool
}

// Config holds the knobs shared by placement rules.
type Config struct {
	// Speed is each GPU type's relative speed for a typical job (the
	// admin's table); a type missing from it counts as 1.
	Speed map[string]float64
	// RetypeTyped lets Rota change a type the user named.
	RetypeTyped bool
	// WalltimeMargin multiplies an estimated run time (>= 1).
	WalltimeMargin float64
	// WalltimeOverheadMin is added to every estimate: start-up, data
	// loading, checkpoint writing.
	WalltimeOverheadMin uint32
	// Name is the policy named in annotations; "" means "interim". The
	// controller sets it to the round loop's policy, whose rounds then
	// correct what the submit-time rule chose.
	Name string
}

// DefaultConfig is what an unconfigured controller uses.
func DefaultConfig() Config {
	return Config{Speed: map[string]float64{}, WalltimeMargin: 1.5, WalltimeOverheadMin: 5}
}

func (c *Config) speed(t string) float64 {
	if s, ok := c.Speed[t]; ok && s > 0 {
		return s
	}
	return 1
}

// Demand is how many GPUs a request needs in all and on its busiest node.
func Demand(a wire.GPUAsk) (total, perNode int) {
	nodes := int(max(a.Nodes, 1))
	tasks := int(max(a.Tasks, 1))
	perNode = int(max(a.PerNode, a.PerSocket, a.PerTask))
	total = max(int(a.PerJob), int(a.PerNode)*nodes, int(a.PerSocket)*nodes, int(a.PerTask)*tasks)
	if a.Nodes == 1 {
		// Everything lands on the one node.
		perNode = max(perNode, total)
	}
	if total > 0 {
		perNode = max(perNode, 1)
	}
	return total, perNode
}

// Interim is the rule Rota uses until the policy engine drives placement:
// of the GPU types that can hold the job, take the one with the most free
// GPUs weighted by relative speed; when none has room now, the one with the
// most total capacity weighted by speed (the job queues where it will run
// fastest on average). Each placement reserves its GPUs in the view until
// the next refresh, so a burst of submissions spreads over the types
// instead of piling onto one.
type Interim struct {
	cfg Config

	mu       sync.Mutex
	snap     *cluster.Snapshot
	reserved map[string]int
	// slots[t] holds, for every GPU of type t, the seconds from the last
	// Update until it is free: 0 for a free GPU, the remaining run time
	// of the job on it when the round loop knows it (SetBusy), +Inf when
	// not. Placements book them, so a burst is list-scheduled.
	slots map[string][]float64
	busy  map[string][]float64
}

// NewInterim returns an Interim placer with no cluster view yet: until the
// first Update it keeps every request as it is.
func NewInterim(cfg Config) *Interim {
	return &Interim{cfg: cfg, reserved: map[string]int{}}
}

// Name implements Placer.
func (p *Interim) Name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.Name != "" {
		return p.cfg.Name
	}
	return "interim"
}

// SetBusy tells the placer, per GPU type, how many seconds each running
// job has left (one entry per GPU it holds; unknown ones left out). It
// takes effect at the next Update.
func (p *Interim) SetBusy(busy map[string][]float64) {
	p.mu.Lock()
	p.busy = busy
	p.mu.Unlock()
}

// SetName names the policy whose rounds follow up on these placements.
func (p *Interim) SetName(name string) {
	p.mu.Lock()
	p.cfg.Name = name
	p.mu.Unlock()
}

// Update implements Placer. Reservations end: the new snapshot's use
// includes the jobs that have started.
func (p *Interim) Update(s *cluster.Snapshot) {
	p.mu.Lock()
	p.snap = s
	p.reserved = map[string]int{}
	p.slots = map[string][]float64{}
	for t, tc := range s.Types {
		sl := make([]float64, 0, tc.Total)
		for i := 0; i < tc.Free(); i++ {
			sl = append(sl, 0)
		}
		b := p.busy[t]
		for i := 0; len(sl) < tc.Total; i++ {
			if i < len(b) {
				sl = append(sl, b[i])
			} else {
				sl = append(sl, math.Inf(1))
			}
		}
		sort.Float64s(sl)
		p.slots[t] = sl
	}
	p.mu.Unlock()
}

// Place implements Placer.
func (p *Interim) Place(req *wire.PlaceRequest) Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	num := map[string]float64{}
	if p.snap == nil {
		return Result{Reason: "no view of the cluster yet (first Slurm refresh pending); request kept", Numbers: num}
	}
	total, perNode := Demand(req.GPU)
	num["need.total"], num["need.per_node"] = float64(total), float64(perNode)
	part := req.Partition
	if part == "" {
		part = p.snap.DefaultPartition
	}
	if i := strings.IndexByte(part, ','); i >= 0 {
		part = part[:i] // several partitions: judge by the first
	}

	var res Result
	switch {
	case len(req.GPU.Types) > 1:
		res.Reason = "several GPU types named (" + strings.Join(req.GPU.Types, ",") + "); request kept"
		res.TimeLimitMin = p.walltime(req, "", part, num)
		return withNumbers(res, num)
	case req.GPU.Type == "" && constraintType(req.Features, p.snap) != "":
		t := constraintType(req.Features, p.snap)
		res.Reason = "user's constraint names type " + t + "; type kept"
		res.TimeLimitMin = p.walltime(req, t, part, num)
		return withNumbers(res, num)
	case req.GPU.Type != "" && !p.cfg.RetypeTyped:
		res.Reason = "user named type " + req.GPU.Type + " (retyping typed requests is off); type kept"
		if _, known := p.snap.Types[req.GPU.Type]; !known {
			res.Reason = "user named type " + req.GPU.Type + ", which no usable node has; request kept"
		}
		res.TimeLimitMin = p.walltime(req, req.GPU.Type, part, num)
		return withNumbers(res, num)
	}

	var fits []cand
	for _, t := range p.snap.TypeNames() {
		tc := p.snap.Types[t]
		if part != "" && !tc.Partitions[part] {
			continue
		}
		if tc.MaxPerNode < perNode || tc.Total < total {
			continue
		}
		free := max(tc.Free()-p.reserved[t], 0)
		sp := p.jobSpeed(req, t)
		num["free."+t], num["speed."+t] = float64(free), p.cfg.speed(t)
		if len(req.Hints.Throughput) > 0 {
			num["job_speed."+t] = sp
		}
		fits = append(fits, cand{t: t, free: free, score: float64(free) * sp})
	}
	if len(fits) == 0 {
		res.Reason = fmt.Sprintf("no GPU type in partition %q can hold %d GPUs (%d per node); request kept for Slurm to judge", part, total, perNode)
		return withNumbers(res, num)
	}
	if r, ok := p.earliestFinish(req, fits, total, part, num); ok {
		return r
	}
	best, room := fits[0], false
	for _, c := range fits {
		if c.free >= total && (!room || c.score > best.score) {
			best, room = c, true
		}
	}
	if room {
		res.Reason = fmt.Sprintf("%s has the most free GPUs weighted by speed: %d free x %.3g = %.3g (of %d types that fit)",
			best.t, best.free, p.jobSpeed(req, best.t), best.score, len(fits))
	} else {
		for _, c := range fits {
			capScore := float64(p.snap.Types[c.t].Total) * p.jobSpeed(req, c.t)
			if capScore > float64(p.snap.Types[best.t].Total)*p.jobSpeed(req, best.t) {
				best = c
			}
		}
		res.Reason = fmt.Sprintf("no type has %d GPUs free now; %s has the most capacity weighted by speed (%d x %.3g)",
			total, best.t, p.snap.Types[best.t].Total, p.jobSpeed(req, best.t))
	}
	p.reserved[best.t] += total
	num["chosen.score"] = best.score
	if best.t != req.GPU.Type {
		res.GPUType = best.t
		res.ByFeature = p.snap.ByFeature
	}
	res.TimeLimitMin = p.walltime(req, best.t, part, num)
	return withNumbers(res, num)
}

// constraintType is the GPU type a job's constraint names, if any.
func constraintType(features string, s *cluster.Snapshot) string {
	return gpureq.FeatureType(features, func(f string) bool { _, ok := s.Types[f]; return ok })
}

// cand is a GPU type that can hold the job.
type cand struct {
	t     string
	free  int
	score float64
}

// earliestFinish places a job whose work is known (steps and a rate
// hint) on the type where it would finish first, counting the wait for a
// GPU there: GPUs free now, those the round loop knows will free up, and
// those earlier placements booked (list scheduling: a burst of jobs fills
// the fast types only as long as waiting for them beats running slower
// now). ok is false when the job's work is unknown or no type has a GPU
// whose wait is known.
func (p *Interim) earliestFinish(req *wire.PlaceRequest, fits []cand, total int, part string, num map[string]float64) (Result, bool) {
	if req.Hints.Steps == 0 || len(req.Hints.Throughput) == 0 || total <= 0 {
		return Result{}, false
	}
	best, bestFinish, bestStart := "", math.Inf(1), 0.0
	for _, c := range fits {
		sl := p.slots[c.t]
		rate := p.jobSpeed(req, c.t)
		if len(sl) < total || rate <= 0 {
			continue
		}
		start := sl[total-1] // slots are sorted: the total-th earliest
		run := float64(req.Hints.Steps) / rate
		num["start_s."+c.t], num["run_s."+c.t] = start, run
		if f := start + run; f < bestFinish {
			best, bestFinish, bestStart = c.t, f, start
		}
	}
	if best == "" {
		return Result{}, false
	}
	sl := p.slots[best]
	for i := 0; i < total; i++ {
		sl[i] = bestFinish
	}
	sort.Float64s(sl)
	p.reserved[best] += total
	var res Result
	res.Reason = fmt.Sprintf("%s finishes it soonest: a GPU there in %.0f s, then %.0f s of work (of %d types that fit)",
		best, bestStart, bestFinish-bestStart, len(fits))
	if best != req.GPU.Type {
		res.GPUType = best
		res.ByFeature = p.snap.ByFeature
	}
	res.TimeLimitMin = p.walltime(req, best, part, num)
	return withNumbers(res, num), true
}

// jobSpeed is how fast this job runs on type t relative to the others:
// the user's hinted steps/s for t, or a hinted type's scaled by the speed
// table; without hints the speed table itself. Only the ratios between
// types matter to the rule.
func (p *Interim) jobSpeed(req *wire.PlaceRequest, t string) float64 {
	if r := req.Hints.Throughput[t]; r > 0 {
		return r
	}
	hinted := make([]string, 0, len(req.Hints.Throughput))
	for h, r := range req.Hints.Throughput {
		if r > 0 {
			hinted = append(hinted, h)
		}
	}
	if len(hinted) == 0 {
		return p.cfg.speed(t)
	}
	sort.Strings(hinted)
	h := hinted[0]
	return req.Hints.Throughput[h] * p.cfg.speed(t) / p.cfg.speed(h)
}

func withNumbers(r Result, num map[string]float64) Result {
	r.Numbers = num
	return r
}

// walltime estimates the run time on type t from the user's hints: total
// steps over steps/s on t (given for t, or scaled from another type by the
// speed table), times the margin, plus overhead; capped by the user's limit
// and the partition's MaxTime. 0 means "no estimate: keep".
func (p *Interim) walltime(req *wire.PlaceRequest, t, part string, num map[string]float64) uint32 {
	steps := req.Hints.Steps
	if steps == 0 || len(req.Hints.Throughput) == 0 {
		return 0
	}
	if t == "" {
		return 0
	}
	rate := p.jobSpeed(req, t)
	if !(rate > 0) {
		return 0
	}
	est := float64(steps)/rate*p.cfg.WalltimeMargin/60 + float64(p.cfg.WalltimeOverheadMin)
	num["est.steps_per_s"], num["est.minutes_uncapped"] = rate, est
	m := uint32(math.Min(math.Ceil(est), float64(slurmtime.Unlimited-1)))
	if pt, ok := p.snap.Partitions[part]; ok && pt.MaxTimeMin > 0 && m > pt.MaxTimeMin {
		m = pt.MaxTimeMin
	}
	if req.TimeLimitMin > 0 && m > req.TimeLimitMin {
		m = req.TimeLimitMin
	}
	return m
}
