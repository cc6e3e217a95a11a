package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/controller/sim"
	"github.com/rota-hpc/rota/controller/xcluster"
)

// simCfg is what runSim has read for a multi-cluster run.
type simCfg struct {
	types    []string
	clusters []sim.Cluster
	jobs     []workload.Job
	lo, hi   int
}

var clusterName = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)

// parseClusters reads "a:v100=32,p100=32;b:k80=64,v100=16": the GPU types
// of all clusters (first seen first) and each cluster's counts over them.
func parseClusters(s string) ([]string, []sim.Cluster, error) {
	var types []string
	col := map[string]int{}
	type raw struct {
		name  string
		types []string
		caps  []int
	}
	var rs []raw
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ";") {
		name, spec, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || !clusterName.MatchString(name) || seen[name] {
			return nil, nil, fmt.Errorf("bad --clusters entry %q (want name:type=count,...; names of letters, digits, '_' and '.', each once)", part)
		}
		seen[name] = true
		ts, cs, err := parseCluster(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("--clusters %s: %v", name, err)
		}
		for _, t := range ts {
			if _, ok := col[t]; !ok {
				col[t] = len(types)
				types = append(types, t)
			}
		}
		rs = append(rs, raw{name, ts, cs})
	}
	if len(rs) < 2 {
		return nil, nil, fmt.Errorf("--clusters wants at least two clusters")
	}
	var out []sim.Cluster
	for _, r := range rs {
		c := sim.Cluster{Name: r.name, Capacity: make([]int, len(types))}
		for i, t := range r.types {
			c.Capacity[col[t]] += r.caps[i]
		}
		out = append(out, c)
	}
	return types, out, nil
}

// parseLink reads "a-b:1GB/s" or "a-b:10Gb/s:20ms" (xcluster.ParseLink,
// which controller.conf's mc_link shares).
func parseLink(s string) (sim.Link, error) {
	l, err := xcluster.ParseLink(s)
	if err != nil {
		return sim.Link{}, fmt.Errorf("bad --link %q (want a-b:bandwidth[:latency], e.g. a-b:1GB/s:20ms)", s)
	}
	return l, nil
}

// parseRange reads "lo:hi" with 0 < lo <= hi.
func parseRange(flag, s string) ([2]float64, error) {
	a, b, ok := strings.Cut(s, ":")
	lo, e1 := strconv.ParseFloat(a, 64)
	hi, e2 := strconv.ParseFloat(b, 64)
	if !ok || e1 != nil || e2 != nil || lo <= 0 || hi < lo {
		return [2]float64{}, fmt.Errorf("bad --%s %q (want lo:hi GB, 0 < lo <= hi)", flag, s)
	}
	return [2]float64{lo, hi}, nil
}

func runMultiSim(ctx context.Context, o simOptions, c simCfg, stdout io.Writer) error {
	var links []sim.Link
	for _, s := range o.links {
		l, err := parseLink(s)
		if err != nil {
			return usageError{err.Error()}
		}
		known := 0
		for _, cl := range c.clusters {
			if cl.Name == l.A || cl.Name == l.B {
				known++
			}
		}
		if known != 2 || l.A == l.B {
			return usageError{fmt.Sprintf("--link %s: want two different clusters of --clusters", s)}
		}
		links = append(links, l)
	}
	ckpt, err := parseRange("checkpoint-gb", o.ckptGB)
	if err != nil {
		return usageError{err.Error()}
	}
	data, err := parseRange("data-gb", o.dataGB)
	if err != nil {
		return usageError{err.Error()}
	}
	if o.prices != "" {
		for _, part := range strings.Split(o.prices, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(part), "=")
			p, err := strconv.ParseFloat(val, 64)
			found := false
			for i := range c.clusters {
				if c.clusters[i].Name == name {
					c.clusters[i].Price, found = p, true
				}
			}
			if err != nil || p <= 0 || !found {
				return usageError{fmt.Sprintf("bad --cluster-price entry %q (want cluster=price)", part)}
			}
		}
	}
	var modes []sim.MoveMode
	for _, m := range o.moves {
		mm := sim.MoveMode(strings.TrimSpace(m))
		switch mm {
		case sim.MovesNone, sim.MovesGreedy, sim.MovesPlanned:
			modes = append(modes, mm)
		default:
			return usageError{fmt.Sprintf("bad --moves %q (want none, greedy or planned)", m)}
		}
	}
	if len(modes) == 0 {
		modes = sim.MoveModes
	}
	if o.margin < 0 || o.minStay < 0 || o.marginFraction < 0 {
		return usageError{"--move-margin, --move-margin-fraction and --min-stay must be >= 0"}
	}
	base := sim.Config{Types: c.types, Round: o.round.Seconds(), MigrationCost: o.migCost.Seconds(),
		GPUsPerNode: o.perNode, MeasureLo: c.lo, MeasureHi: c.hi,
		ReallocInterval: o.realloc.Seconds(), Seed: o.seed, Jitter: o.jitter, NoStick: o.noStick}
	jobs := sim.DrawMulti(c.jobs, c.clusters, ckpt, data, o.seed)
	pols := o.policies
	if len(pols) == 0 {
		pols = []string{"las"}
	}
	var reps []sim.MultiReport
	for _, name := range pols {
		for _, mode := range modes {
			b := base
			b.GroupIdentical = name == "las" && !o.noGroup
			cfg := sim.MultiConfig{Base: b, Clusters: c.clusters, Links: links, Jobs: jobs, Moves: mode,
				Margin: o.margin.Seconds(), MarginFraction: o.marginFraction, MinStay: o.minStay.Seconds()}
			rep, err := sim.RunMulti(ctx, cfg, func() (policy.Policy, error) {
				p, err := policy.New(name, policy.Options{Agnostic: o.agnostic})
				if err != nil {
					return nil, usageError{err.Error()}
				}
				return p, nil
			})
			if err != nil {
				return err
			}
			reps = append(reps, rep)
		}
	}
	if o.plot != "" {
		var cdf []sim.Report
		for _, r := range reps {
			cdf = append(cdf, sim.Report{Policy: r.Policy + " moves=" + r.Mode, AvgJCTHours: r.AvgJCTHours, JCTHours: r.JCTHours})
		}
		if err := writePlot(o.plot, cdf); err != nil {
			return err
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reps)
	}
	for _, r := range reps {
		var per []string
		for _, cr := range r.Clusters {
			per = append(per, fmt.Sprintf("%s: %d jobs, util %s", cr.Name, cr.JobsFinished, fmtUtil(cr.Types, cr.Utilisation)))
		}
		fmt.Fprintf(stdout, "%-10s moves=%-8s jobs %d  JCT h avg %.2f med %.2f p99 %.2f  makespan %.1f h  moves %d  placed away %d  GB moved %.0f  lost %.1f job-h  rejected %d  [%s]\n",
			r.Policy, r.Mode, r.JobsMeasured, r.AvgJCTHours, r.MedianJCTHours, r.P99JCTHours, r.MakespanHours,
			r.Moves, r.PlacedAway, r.GBMoved, r.LostHours, r.Rejected, strings.Join(per, "; "))
	}
	return nil
}
