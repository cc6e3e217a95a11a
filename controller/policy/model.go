// Package policy holds Rota's scheduling policies: Gavel's
// heterogeneity-aware formulations (OSDI 2020) and their agnostic
// baselines. A policy only decides: throughputs in, allocation out. Applying
// an allocation to GPUs round by round is package mechanism's job.
package policy

import (
	"context"
	"fmt"
	"math"
)

// Job is what a policy knows about one job.
type Job struct {
	ID string
	// Throughput per GPU type in steps/s, aggregate over the job's Scale
	// GPUs; 0 means the job cannot run on that type.
	Throughput []float64
	Scale      int     // GPUs per job (Gavel's scale factor); 0 means 1
	Weight     float64 // priority weight; 0 means 1
	Steps      float64 // steps remaining
	Entity     string  // user or account, for hierarchical
	// Deadline is the seconds left until the job must finish (min-cost-slo);
	// 0 means none.
	Deadline float64
	// Arrival orders fifo (smaller = earlier); Elapsed is the seconds since
	// arrival and IsolatedElapsed the seconds it would have spent under an
	// equal share so far (finish-time fairness).
	Arrival, Elapsed, IsolatedElapsed float64
	// Count is how many identical jobs this row stands for (0 means 1),
	// read by the space-sharing formulations (Options.SpaceSharing), whose
	// pairs can join two members of one row; the others take a row as one
	// job (the simulator groups for them through Scale and Weight).
	Count int
}

// Problem is one allocation decision.
type Problem struct {
	Types    []string
	Capacity []int // GPUs per type
	// CostPerHour per type in dollars per GPU-hour (min-cost policies).
	CostPerHour   []float64
	Jobs          []Job
	EntityWeights map[string]float64 // hierarchical; missing = 1
	// Pairs are the pairs of jobs that may share one GPU, read by the
	// policies with Options.SpaceSharing (las and ftf).
	Pairs []Pair
}

// Allocation is a policy's decision. X[j][k] is the fraction of time job j
// should spend on type k: sum_j Scale_j X[j][k] <= Capacity[k] and
// sum_k X[j][k] <= 1.
type Allocation struct {
	Policy string
	X      [][]float64
	// Objective is the policy's own objective value (the max-min value for
	// las, the makespan in seconds for makespan, max rho for ftf, ...);
	// ObjectiveName says which.
	Objective     float64
	ObjectiveName string
	// Unschedulable lists jobs that fit no GPU type (zero throughput
	// everywhere, or more GPUs than a type has); they get no allocation.
	Unschedulable []int
	// Note explains a fallback, e.g. SLOs that could not all be met.
	Note string
	// ReducedJobs is how many jobs the exact finish had to carry in full.
	ReducedJobs int
	// FormulatedOptimum, where set (hierarchical, ftf), is the optimum of
	// the maximisation LPPolicy.Formulate returns, for policies whose
	// Objective is not a plain function of it.
	FormulatedOptimum float64
	// Levels is how many LPs the policy solved (for hierarchical, one per
	// water-filling level where the capacities bind or the filling ends,
	// plus any the price estimate misplaced; fixed-point steps for ftf).
	Levels int
	// PairX[q][k], with space sharing, is the GPUs of type k that pair
	// Problem.Pairs[q] should hold on average (each runs one job of A and
	// one of B); X then holds each job's time alone.
	PairX [][]float64
}

// Policy decides an allocation.
type Policy interface {
	Name() string
	Allocate(ctx context.Context, p *Problem) (Allocation, error)
}

// Validate checks the problem's shape.
func (p *Problem) Validate() error {
	K := len(p.Types)
	if len(p.Capacity) != K {
		return fmt.Errorf("policy: %d types but %d capacities", K, len(p.Capacity))
	}
	if p.CostPerHour != nil && len(p.CostPerHour) != K {
		return fmt.Errorf("policy: %d types but %d costs", K, len(p.CostPerHour))
	}
	for _, c := range p.Capacity {
		if c < 0 {
			return fmt.Errorf("policy: negative capacity %d", c)
		}
	}
	for i, j := range p.Jobs {
		if len(j.Throughput) != K {
			return fmt.Errorf("policy: job %d (%s) has %d throughputs for %d types", i, j.ID, len(j.Throughput), K)
		}
		for _, t := range j.Throughput {
			if t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
				return fmt.Errorf("policy: job %d (%s) has throughput %g", i, j.ID, t)
			}
		}
		if j.Scale < 0 || j.Weight < 0 || j.Steps < 0 || j.Count < 0 {
			return fmt.Errorf("policy: job %d (%s) has a negative scale, weight, steps or count", i, j.ID)
		}
	}
	return p.validatePairs()
}

func (j *Job) scale() float64 {
	if j.Scale <= 0 {
		return 1
	}
	return float64(j.Scale)
}

func (j *Job) weight() float64 {
	if j.Weight <= 0 {
		return 1
	}
	return j.Weight
}

// usable is the throughput the policy may count on: zero where the job
// cannot run or does not fit. With agnostic set, every usable type is
// equally fast (1), which is how Gavel builds its baselines.
func (p *Problem) usable(j int, agnostic bool) []float64 {
	job := &p.Jobs[j]
	out := make([]float64, len(p.Types))
	for k, t := range job.Throughput {
		if t > 0 && job.scale() <= float64(p.Capacity[k]) {
			out[k] = t
			if agnostic {
				out[k] = 1
			}
		}
	}
	return out
}

// schedulable splits jobs into those that can run somewhere and those that
// cannot.
func (p *Problem) schedulable() (ok, not []int) {
	for j := range p.Jobs {
		any := false
		for _, t := range p.usable(j, false) {
			any = any || t > 0
		}
		if any {
			ok = append(ok, j)
		} else {
			not = append(not, j)
		}
	}
	return ok, not
}

// equalShare is the job's throughput on a uniformly random GPU of the
// cluster: the normaliser Gavel calls the proportional (equal-share)
// throughput, up to a constant factor common to all jobs.
func (p *Problem) equalShare(rates []float64) float64 {
	tot, s := 0.0, 0.0
	for k, c := range p.Capacity {
		tot += float64(c)
		s += rates[k] * float64(c)
	}
	if tot == 0 {
		return 0
	}
	return s / tot
}

// totalGPUs is the cluster size.
func (p *Problem) totalGPUs() float64 {
	s := 0.0
	for _, c := range p.Capacity {
		s += float64(c)
	}
	return s
}

func (p *Problem) caps() []float64 {
	c := make([]float64, len(p.Capacity))
	for k, v := range p.Capacity {
		c[k] = float64(v)
	}
	return c
}

func zeroAlloc(p *Problem, name string) Allocation {
	X := make([][]float64, len(p.Jobs))
	for j := range X {
		X[j] = make([]float64, len(p.Types))
	}
	return Allocation{Policy: name, X: X}
}

// Throughput is job j's effective throughput (steps/s) under X.
func (p *Problem) Throughput(X [][]float64, j int) float64 {
	s := 0.0
	for k, x := range X[j] {
		s += x * p.Jobs[j].Throughput[k]
	}
	return s
}
