// Package rule is the interim placement rule as a pure function of a
// wire.PlaceState and a request. The controller (controller/placement) and
// the job_submit plugin (plugin/submit, placement = local) run this same
// code, so a plugin deciding on slurmctld's thread from the state the
// controller pushed decides what the controller would have. It imports
// nothing but wire and small helpers: it is linked into the plugin's .so.
package rule

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

// Result is a placement with the numbers behind it, for `rota explain`.
type Result struct {
	GPUType      string // "" keeps the request's type
	TimeLimitMin uint32 // 0 keeps the request's time limit
	Reason       string
	Numbers      map[string]float64
	// ByFeature: express GPUType as a node constraint (see
	// cluster.Snapshot.ByFeature).
	ByFeature bool
	// Reserve is what the caller must add to its reservations (nil: this
	// placement chose no type).
	Reserve *wire.Reservation
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

// Speed is type t's relative speed in r; a missing or non-positive entry
// counts as 1.
func Speed(r *wire.PlaceRule, t string) float64 {
	if s, ok := r.Speed[t]; ok && s > 0 {
		return s
	}
	return 1
}

// Place decides one request from state s, counting extra (the caller's
// own reservations not yet in s.Reserved; may be nil) as taken too. It
// reads s and extra and changes neither: the caller applies
// Result.Reserve. Rule: of the GPU types that can hold the job, the one
// with the most free GPUs weighted by relative speed; when none has room
// now, the one with the most total capacity weighted by speed.
func Place(s *wire.PlaceState, extra map[string]int, req *wire.PlaceRequest) Result {
	num := map[string]float64{}
	if s == nil || s.Cluster == nil {
		return Result{Reason: "no view of the cluster yet (first Slurm refresh pending); request kept", Numbers: num}
	}
	cv, r := s.Cluster, &s.Rule
	total, perNode := Demand(req.GPU)
	num["need.total"], num["need.per_node"] = float64(total), float64(perNode)
	part := req.Partition
	if part == "" {
		part = cv.DefaultPartition
	}
	if i := strings.IndexByte(part, ','); i >= 0 {
		part = part[:i] // several partitions: judge by the first
	}

	var res Result
	switch {
	case len(req.GPU.Types) > 1:
		res.Reason = "several GPU types named (" + strings.Join(req.GPU.Types, ",") + "); request kept"
		res.TimeLimitMin = walltime(s, req, "", part, num)
		return withNumbers(res, num)
	case req.GPU.Type == "" && constraintType(req.Features, cv) != "":
		t := constraintType(req.Features, cv)
		res.Reason = "user's constraint names type " + t + "; type kept"
		res.TimeLimitMin = walltime(s, req, t, part, num)
		return withNumbers(res, num)
	case req.GPU.Type != "" && !r.RetypeTyped:
		res.Reason = "user named type " + req.GPU.Type + " (retyping typed requests is off); type kept"
		if _, known := cv.Types[req.GPU.Type]; !known {
			res.Reason = "user named type " + req.GPU.Type + ", which no usable node has; request kept"
		}
		res.TimeLimitMin = walltime(s, req, req.GPU.Type, part, num)
		return withNumbers(res, num)
	}

	type cand struct {
		t     string
		free  int
		score float64
	}
	var fits []cand
	for _, t := range typeNames(cv) {
		tc := cv.Types[t]
		if part != "" && !slices.Contains(tc.Partitions, part) {
			continue
		}
		if tc.MaxPerNode < perNode || tc.Total < total {
			continue
		}
		free := max(tc.Free()-s.Reserved[t]-extra[t], 0)
		sp := Speed(r, t)
		num["free."+t], num["speed."+t] = float64(free), sp
		fits = append(fits, cand{t: t, free: free, score: float64(free) * sp})
	}
	if len(fits) == 0 {
		res.Reason = fmt.Sprintf("no GPU type in partition %q can hold %d GPUs (%d per node); request kept for Slurm to judge", part, total, perNode)
		return withNumbers(res, num)
	}
	best, room := fits[0], false
	for _, c := range fits {
		if c.free >= total && (!room || c.score > best.score) {
			best, room = c, true
		}
	}
	if room {
		res.Reason = fmt.Sprintf("%s has the most free GPUs weighted by speed: %d free x %.2g = %.3g (of %d types that fit)",
			best.t, best.free, Speed(r, best.t), best.score, len(fits))
	} else {
		for _, c := range fits {
			capScore := float64(cv.Types[c.t].Total) * Speed(r, c.t)
			if capScore > float64(cv.Types[best.t].Total)*Speed(r, best.t) {
				best = c
			}
		}
		res.Reason = fmt.Sprintf("no type has %d GPUs free now; %s has the most capacity weighted by speed (%d x %.2g)",
			total, best.t, cv.Types[best.t].Total, Speed(r, best.t))
	}
	res.Reserve = &wire.Reservation{Type: best.t, GPUs: total}
	num["chosen.score"] = best.score
	if best.t != req.GPU.Type {
		res.GPUType = best.t
		res.ByFeature = cv.ByFeature
	}
	res.TimeLimitMin = walltime(s, req, best.t, part, num)
	return withNumbers(res, num)
}

func typeNames(cv *wire.ClusterView) []string {
	names := make([]string, 0, len(cv.Types))
	for t := range cv.Types {
		names = append(names, t)
	}
	sort.Strings(names)
	return names
}

// constraintType is the GPU type a job's constraint names, if any.
func constraintType(features string, cv *wire.ClusterView) string {
	for _, f := range strings.FieldsFunc(features, func(r rune) bool { return strings.ContainsRune("&|,[]()*", r) }) {
		if _, ok := cv.Types[f]; ok {
			return f
		}
	}
	return ""
}

func withNumbers(r Result, num map[string]float64) Result {
	r.Numbers = num
	return r
}

// walltime estimates the run time on type t from the user's hints: total
// steps over steps/s on t (given for t, or scaled from another type by the
// speed table), times the margin, plus overhead; capped by the user's limit
// and the partition's MaxTime. 0 means "no estimate: keep".
func walltime(s *wire.PlaceState, req *wire.PlaceRequest, t, part string, num map[string]float64) uint32 {
	r := &s.Rule
	steps := req.Hints.Steps
	if steps == 0 || len(req.Hints.Throughput) == 0 {
		return 0
	}
	rate := req.Hints.Throughput[t]
	if rate <= 0 {
		if t == "" {
			return 0
		}
		hinted := make([]string, 0, len(req.Hints.Throughput))
		for h := range req.Hints.Throughput {
			hinted = append(hinted, h)
		}
		sort.Strings(hinted)
		h := hinted[0]
		rate = req.Hints.Throughput[h] * Speed(r, t) / Speed(r, h)
	}
	if !(rate > 0) {
		return 0
	}
	est := float64(steps)/rate*r.WalltimeMargin/60 + float64(r.WalltimeOverheadMin)
	num["est.steps_per_s"], num["est.minutes_uncapped"] = rate, est
	m := uint32(math.Min(math.Ceil(est), float64(slurmtime.Unlimited-1)))
	if pt, ok := s.Cluster.Partitions[part]; ok && pt.MaxTimeMin > 0 && m > pt.MaxTimeMin {
		m = pt.MaxTimeMin
	}
	if req.TimeLimitMin > 0 && m > req.TimeLimitMin {
		m = req.TimeLimitMin
	}
	return m
}
