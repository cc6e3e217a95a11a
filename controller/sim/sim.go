// Package sim is Rota's discrete-time simulator: it runs a policy and the
// round-based mechanism, the very code the controller uses, on generated
// (Gavel's generator) or traced jobs, and reports job completion times.
package sim

import (
	"context"
	"math"
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
	RhoMean          float64   `json:"ftf_rho_mean"`
	RhoMedian        float64   `json:"ftf_rho_median"`
	RhoP99           float64   `json:"ftf_rho_p99"`
	SolveSecondsMean float64   `json:"solve_seconds_mean"`
	SolveSecondsMax  float64   `json:"solve_seconds_max"`
	Solves           int       `json:"solves"`
	JCTHours         []float64 `json:"-"`
}

type live struct {
	job       workload.Job
	remaining float64
	activeSum float64 // sum over rounds of active job count (for rho)
	rounds    float64
}

// Run simulates one policy.
func Run(ctx context.Context, cfg Config, pol policy.Policy) (Report, error) {
	K := len(cfg.Types)
	mech := mechanism.New(cfg.Capacity, cfg.GPUsPerNode)
	rep := Report{Policy: pol.Name(), Utilisation: make([]float64, K)}
	busy := make([]float64, K)
	var active []*live
	next := 0
	done := 0
	need := cfg.MeasureHi - cfg.MeasureLo
	jct := map[int]float64{}
	rhos := []float64{}
	var X [][]float64
	changed := true
	now := 0.0
	first, last := math.Inf(1), 0.0
	totalGPUs := 0.0
	for _, c := range cfg.Capacity {
		totalGPUs += float64(c)
	}
	for done < need {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		for next < len(cfg.Jobs) && cfg.Jobs[next].Arrival <= now {
			j := cfg.Jobs[next]
			active = append(active, &live{job: j, remaining: j.Steps})
			next++
			changed = true
		}
		if len(active) == 0 {
			if next >= len(cfg.Jobs) {
				break
			}
			now = math.Ceil(cfg.Jobs[next].Arrival/cfg.Round) * cfg.Round
			continue
		}
		if changed {
			p := &policy.Problem{Types: cfg.Types, Capacity: cfg.Capacity, CostPerHour: ones(K)}
			for _, l := range active {
				p.Jobs = append(p.Jobs, policy.Job{ID: strconv.Itoa(l.job.ID), Throughput: l.job.Rates,
					Scale: l.job.Scale, Steps: l.remaining, Arrival: l.job.Arrival, Elapsed: now - l.job.Arrival})
			}
			start := time.Now()
			a, err := pol.Allocate(ctx, p)
			secs := time.Since(start).Seconds()
			if err != nil {
				return rep, err
			}
			rep.Solves++
			rep.SolveSecondsMean += secs
			rep.SolveSecondsMax = math.Max(rep.SolveSecondsMax, secs)
			X = a.X
			changed = false
		}
		reqs := make([]mechanism.Request, len(active))
		for i, l := range active {
			reqs[i] = mechanism.Request{ID: strconv.Itoa(l.job.ID), Scale: l.job.Scale, X: X[i]}
		}
		res := mech.Round(reqs)
		migrated := map[string]bool{}
		for _, id := range res.Migrations {
			migrated[id] = true
		}
		rep.Migrations += len(res.Migrations)
		keep := active[:0]
		n := float64(len(active))
		for _, l := range active {
			l.activeSum += n
			l.rounds++
			id := strconv.Itoa(l.job.ID)
			pl, ok := res.Placed[id]
			if !ok {
				keep = append(keep, l)
				continue
			}
			run := cfg.Round
			lost := 0.0
			if migrated[id] {
				lost = math.Min(cfg.MigrationCost, run)
			}
			rate := l.job.Rates[pl.Type]
			needT := l.remaining / rate
			if needT <= run-lost {
				busy[pl.Type] += (lost + needT) * float64(l.job.Scale)
				end := now + lost + needT
				if l.job.ID >= cfg.MeasureLo && l.job.ID < cfg.MeasureHi {
					c := end - l.job.Arrival
					jct[l.job.ID] = c
					done++
					first = math.Min(first, l.job.Arrival)
					last = math.Max(last, end)
					share := math.Min(1, totalGPUs/(l.activeSum/l.rounds)/float64(l.job.Scale))
					eq := 0.0
					for k, cap := range cfg.Capacity {
						eq += l.job.Rates[k] * float64(cap) / totalGPUs
					}
					rhos = append(rhos, c/(l.job.Steps/(eq*share)))
				}
				mech.Forget(id)
				changed = true
				continue
			}
			busy[pl.Type] += run * float64(l.job.Scale)
			l.remaining -= rate * (run - lost)
			keep = append(keep, l)
		}
		active = keep
		now += cfg.Round
	}
	for k := range busy {
		rep.Utilisation[k] = busy[k] / (float64(cfg.Capacity[k]) * math.Max(now, 1))
	}
	if rep.Solves > 0 {
		rep.SolveSecondsMean /= float64(rep.Solves)
	}
	var v []float64
	for _, c := range jct {
		v = append(v, c/3600)
	}
	sort.Float64s(v)
	rep.JobsMeasured = len(v)
	rep.JCTHours = v
	if len(v) > 0 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		rep.AvgJCTHours = s / float64(len(v))
		rep.MedianJCTHours = quantile(v, 0.5)
		rep.P99JCTHours = quantile(v, 0.99)
		rep.MakespanHours = (last - first) / 3600
		sort.Float64s(rhos)
		s = 0
		for _, x := range rhos {
			s += x
		}
		rep.RhoMean = s / float64(len(rhos))
		rep.RhoMedian = quantile(rhos, 0.5)
		rep.RhoP99 = quantile(rhos, 0.99)
	}
	return rep, nil
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
