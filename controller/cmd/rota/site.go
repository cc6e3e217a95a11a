package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

func orDash[T comparable](v T, f func(T) string) string {
	var zero T
	if v == zero {
		return "-"
	}
	return f(v)
}

func printSite(w io.Writer, s *wire.Site) error {
	fmt.Fprintf(w, "site as read %s\n\n", s.At.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTATE\tMAXTIME\tDEFTIME\tNODES\tMAXNODES\tMAXCPUS/NODE\tMAXMEM/NODE\tGPU TYPES (nodes x GPUs, used)")
	for _, p := range s.Partitions {
		name := p.Name
		if p.Default {
			name += "*"
		}
		if p.Debug {
			name += " (debug)"
		}
		maxTime := "UNLIMITED"
		if p.MaxTimeMin > 0 {
			maxTime = slurmtime.Format(p.MaxTimeMin)
		}
		var types []string
		for _, t := range p.Types {
			types = append(types, fmt.Sprintf("%s %dx%d (%d used)", t.Type, t.Nodes, t.MaxPerNode, t.Used))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, orDash(p.State, func(s string) string { return s }), maxTime,
			orDash(p.DefaultTimeMin, slurmtime.Format), orDash(p.TotalNodes, func(n uint32) string { return fmt.Sprint(n) }),
			orDash(p.MaxNodes, func(n uint32) string { return fmt.Sprint(n) }), orDash(p.MaxCPUsPerNode, func(n uint32) string { return fmt.Sprint(n) }),
			orDash(p.MaxMemPerNodeMB, func(n uint64) string { return fmt.Sprintf("%d MB", n) }), strings.Join(types, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tGPUS\tCPUS\tMEMORY\tPARTITIONS")
	for _, n := range s.Nodes {
		var g []string
		types := make([]string, 0, len(n.GPUs))
		for t := range n.GPUs {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, t := range types {
			name := t
			if name == "" {
				name = "(untyped)"
			}
			g = append(g, fmt.Sprintf("%s:%d", name, n.GPUs[t]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.State, orDash(strings.Join(g, ","), func(s string) string { return s }),
			orDash(n.CPUs, func(c int) string { return fmt.Sprint(c) }), orDash(n.RealMemoryMB, func(m uint64) string { return fmt.Sprintf("%d MB", m) }),
			strings.Join(n.Partitions, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU TYPE\tMEMORY/GPU\tFROM\tSPEED")
	for _, g := range s.GPUTypes {
		mem := "unknown"
		if g.MemoryBytes > 0 {
			mem = fmt.Sprintf("%.1f GiB", float64(g.MemoryBytes)/(1<<30))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Type, mem, g.MemorySource, orDash(g.Speed, func(f float64) string { return fmt.Sprintf("%.3g", f) }))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(s.Charging.Rates) == 0 {
		fmt.Fprintln(w, "charging: no rates configured (charge.gpu_hour..., charge.core_hour...): costs are unknown")
	} else {
		unit := s.Charging.Unit
		if unit == "" {
			unit = "(no unit)"
		}
		fmt.Fprintf(w, "charging, in %s per hour (most specific applies: partition+type, type, partition, site-wide):\n", unit)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  RESOURCE\tPARTITION\tGPU TYPE\tPER HOUR")
		for _, r := range s.Charging.Rates {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%.4g\n", r.Resource, orDash(r.Partition, func(s string) string { return s }),
				orDash(r.GPUType, func(s string) string { return s }), r.PerHour)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "queue wait:", s.QueueWait)
	for _, p := range s.Problems {
		fmt.Fprintln(w, "problem:", p)
	}
	return nil
}
