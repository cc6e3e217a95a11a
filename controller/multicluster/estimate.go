// Package multicluster is the controller's side of several clusters under
// one Rota (docs/multicluster.md): it publishes what this cluster knows to
// the others over the link between sites, keeps their latest views, and
// sends a pending job to the cluster where the estimate says it finishes
// sooner (or the only one it fits), as a copy submitted there as its user
// and withdrawn here, recorded durably so that a restart neither
// duplicates nor loses it. The estimate and the rule are the simulator's
// (controller/xcluster).
package multicluster

import (
	"math"
	"sort"

	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gputype"
)

// Job is what the estimate reads of a job.
type Job struct {
	Hints wire.Hints
	// GPUs asked in all; LimitS its time limit in seconds (0 none).
	GPUs   int
	LimitS float64
	// DataBytes is what must be copied for it to run elsewhere.
	DataBytes float64
}

// fallbackSpeed is a type's relative speed when no table names it.
const fallbackSpeed = 1.0

// rates are the job's steps/s per type of a view: its declared
// throughput; a type it did not declare, scaled from one it did by the
// relative speeds; no throughput at all, the relative speed itself. 0 for
// a type the job does not allow.
func rates(j Job, v *wire.MCView, speed map[string]float64) map[string]float64 {
	sp := func(t string) float64 {
		if s, src := gputype.Speed(v.Speed, t); src != gputype.FromDefault {
			return s
		}
		if s, src := gputype.Speed(speed, t); src != gputype.FromDefault {
			return s
		}
		return fallbackSpeed
	}
	out := map[string]float64{}
	for t := range v.Types {
		if len(j.Hints.Types) > 0 && !contains(j.Hints.Types, t) {
			out[t] = 0
			continue
		}
		if r := j.Hints.StepsPerSecond(t, sp); r > 0 {
			out[t] = r
		} else {
			out[t] = sp(t)
		}
	}
	return out
}

// work is the job's steps (or, without --rota-steps, its time limit in
// seconds at the best rate it has on home: what the limit buys there; an
// hour without a limit), in the units of rates.
func work(j Job, home *wire.MCView, speed map[string]float64) float64 {
	if j.Hints.Steps > 0 && len(j.Hints.Throughput) > 0 {
		return float64(j.Hints.Steps)
	}
	limit := j.LimitS
	if limit <= 0 {
		limit = 3600
	}
	best := 0.0
	for t, r := range rates(j, home, speed) {
		if home.Types[t].GPUs > 0 {
			best = math.Max(best, r)
		}
	}
	if best == 0 {
		best = fallbackSpeed
	}
	return limit * best
}

// finish is the xcluster estimate of the job's time to run on v when jobs
// asking for others GPUs share it: +Inf where it cannot run.
func finish(j Job, v *wire.MCView, w float64, others float64, speed map[string]float64) float64 {
	rs := rates(j, v, speed)
	var ts []xcluster.TypeRate
	for _, t := range sortedKeys(v.Types) {
		ts = append(ts, xcluster.TypeRate{Rate: rs[t], GPUs: v.Types[t].GPUs})
	}
	return xcluster.Finish(w, xcluster.Rate(ts, max(j.GPUs, 1), math.Max(others, 0)))
}

// Rows are the job's estimate per cluster x partition x type: every view
// given (home first), its default partition, each type; links are the
// links from home to the others, by name (none: no transfer possible).
func Rows(j Job, home *wire.MCView, views []*wire.MCView, ages map[string]float64, links map[string]xcluster.Link,
	extra map[string]float64, speed map[string]float64) []wire.MCEstimate {
	w := work(j, home, speed)
	var out []wire.MCEstimate
	for _, v := range append([]*wire.MCView{home}, views...) {
		remote := v.Cluster != home.Cluster
		others := v.DemandGPUs + extra[v.Cluster]
		shared := finish(j, v, w, others, speed)
		xfer := 0.0
		if remote {
			xfer = links[v.Cluster].Transfer(j.DataBytes)
			if math.IsInf(xfer, 1) {
				xfer = -1
			}
		}
		rs := rates(j, v, speed)
		for _, t := range sortedKeys(v.Types) {
			tv := v.Types[t]
			e := wire.MCEstimate{Cluster: v.Cluster, Partition: v.DefaultPartition, Type: t, Remote: remote,
				TransferSeconds: xfer, DataGB: j.DataBytes / 1e9, AgeSeconds: ages[v.Cluster]}
			switch {
			case rs[t] == 0:
				e.Why = "type not allowed"
			case tv.GPUs < max(j.GPUs, 1):
				e.Why = "too few GPUs of the type"
			default:
				e.Fits = true
				e.RunSeconds = w / rs[t]
				if !math.IsInf(shared, 1) {
					e.WaitSeconds = math.Max(0, shared-w/bestRate(rs, v, j.GPUs))
				}
				price := v.Price
				if price == 0 {
					price = 1
				}
				e.Cost = float64(max(j.GPUs, 1)) * e.RunSeconds / 3600 * price
			}
			out = append(out, e)
		}
	}
	return out
}

func bestRate(rs map[string]float64, v *wire.MCView, gpus int) float64 {
	b := 0.0
	for t, r := range rs {
		if v.Types[t].GPUs >= max(gpus, 1) {
			b = math.Max(b, r)
		}
	}
	if b == 0 {
		return math.Inf(1)
	}
	return b
}

// linkOf is the link between a and b (Bandwidth 0: none).
func linkOf(links []xcluster.Link, a, b string) xcluster.Link {
	for _, l := range links {
		if l.Joins(a, b) {
			return l
		}
	}
	return xcluster.Link{}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
