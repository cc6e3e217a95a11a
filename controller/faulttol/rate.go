// Package faulttol protects checkpointable jobs from node failures
// (docs/faulttolerance.md): it learns how often the cluster's nodes fail
// from their state changes, asks each job that can survive a checkpoint
// for one at the interval Young and Daly derived from its checkpoint cost
// and that failure rate, and follows a job through a node failure (Slurm's
// requeue, the restart elsewhere, the checkpoint it resumed from) for
// `rota explain`.
package faulttol

import (
	"math"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
)

// Down reports whether a node in sinfo's long state s has failed: DOWN,
// FAIL or FAILING, or not responding (sinfo marks that with a trailing
// '*', e.g. "idle*"). A DRAIN alone is an admin's maintenance, not a
// failure, so it does not count.
func Down(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "down") || strings.Contains(s, "fail") || strings.HasSuffix(s, "*") ||
		strings.Contains(s, "not_responding")
}

// Rate learns the nodes' failure rate from their state changes: each
// node seen up and then down is one failure, and the time nodes were seen
// up is the exposure. MTBF is their ratio, with a prior of one failure
// per PriorMTBF, so a cluster that has not failed yet has a finite,
// sensible MTBF that grows as failure-free time accumulates.
type Rate struct {
	// UpSeconds is the node-seconds of nodes seen up; Failures the up ->
	// down changes seen.
	UpSeconds float64 `json:"up_s"`
	Failures  int     `json:"failures"`
	// Up is each node's last state (true: up); At the last look.
	Up map[string]bool `json:"up"`
	At time.Time       `json:"at"`
}

// maxGap bounds the time one look may count: a controller that was down
// (or not leading) an hour did not see the nodes that hour.
const maxGap = 5 * time.Minute

// Observe takes one look at the nodes and returns those that have failed
// since the last one.
func (r *Rate) Observe(nodes []slurm.Node, now time.Time) (failed []string) {
	if r.Up == nil {
		r.Up = map[string]bool{}
	}
	dt := 0.0
	if !r.At.IsZero() && now.After(r.At) {
		dt = min(now.Sub(r.At), maxGap).Seconds()
	}
	for _, n := range nodes {
		up := !Down(n.State)
		was, seen := r.Up[n.Name]
		if seen && was {
			r.UpSeconds += dt
			if !up {
				r.Failures++
				failed = append(failed, n.Name)
			}
		}
		r.Up[n.Name] = up
	}
	r.At = now
	return failed
}

// MTBF is the learned mean time between failures of one node.
func (r *Rate) MTBF(prior time.Duration) time.Duration {
	return time.Duration((r.UpSeconds + prior.Seconds()) / float64(r.Failures+1) * float64(time.Second))
}

// Interval is Young's optimal time between checkpoints, sqrt(2 C M), for a
// checkpoint cost C and a mean time between failures M of the job (its
// nodes' together), with Daly's correction (minus C) when C is small
// against M, clamped to [lo, hi]. Checkpointing more often wastes C each
// time; less often loses, on average, half an interval's work per failure.
func Interval(cost, mtbf, lo, hi time.Duration) time.Duration {
	c, m := cost.Seconds(), mtbf.Seconds()
	if c <= 0 || m <= 0 {
		return hi
	}
	t := math.Sqrt(2 * c * m)
	if c < 2*m {
		t -= c
	}
	d := time.Duration(t * float64(time.Second))
	return min(max(d, lo), hi)
}
