package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rota-hpc/rota/wire"
)

// printRoute says where a job went, or came from, between clusters.
func printRoute(w io.Writer, r *wire.MCRoute) {
	if r.Incoming {
		fmt.Fprintf(w, "cluster\tcame from cluster %s (its job %d) as job %d, route %s (%s): %s\n", r.From, r.FromJob, r.ToJob, r.ID, r.State, r.Why)
		return
	}
	if r.State == "refused_slow" {
		fmt.Fprintf(w, "cluster\tnot moved (refused: slow link): %s\n", r.Why)
		return
	}
	to := fmt.Sprintf("cluster %s", r.To)
	if r.ToJob != 0 {
		to += fmt.Sprintf(" as job %d", r.ToJob)
	}
	what := "sent to"
	switch {
	case r.Move && (r.State == "resuming" || r.State == "resumed"):
		what = "move not taken by" // it resumes here (the why says as which job)
	case r.Move:
		what = "running job moved to"
	}
	fmt.Fprintf(w, "cluster\t%s %s, route %s (%s): %s\n", what, to, r.ID, r.State, r.Why)
}

// printMC is the other clusters as this one sees them, and the routes.
func printMC(w io.Writer, s *wire.MCStatus) error {
	fmt.Fprintf(w, "\nclusters (this one: %s):\n", s.Cluster)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tVIEW AGE\tGPUS (USED/TOTAL)\tRUNNING\tPENDING\tDEMAND GPUS\tPRICE\tLINK\tROUTED/RECEIVED")
	for _, p := range s.Peers {
		v := p.View
		var types []string
		for _, t := range sortedTypes(v.Types) {
			types = append(types, fmt.Sprintf("%s %d/%d", t, v.Types[t].Used, v.Types[t].GPUs))
		}
		link := "none"
		if p.Bandwidth > 0 {
			link = fmt.Sprintf("%.3g MB/s, %s", p.Bandwidth/1e6, time.Duration(p.LatencySeconds*float64(time.Second)))
		}
		fmt.Fprintf(tw, "%s\t%.0fs\t%s\t%d\t%d\t%g\t%g\t%s\t%d/%d\n", v.Cluster, p.AgeSeconds, strings.Join(types, ", "),
			v.Running, v.Pending, v.DemandGPUs, v.Price, link, v.Routed, v.Received)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Routes) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\njobs between clusters (newest first):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tFROM JOB\tTO JOB\tSTATE\tAT\tWHY")
	for _, r := range s.Routes {
		fmt.Fprintf(tw, "%s\t%s:%d\t%s:%d\t%s\t%s\t%s\n", r.ID, r.From, r.FromJob, r.To, r.ToJob, r.State, r.At, r.Why)
	}
	return tw.Flush()
}

// printMCEstimate is the job on every cluster.
func printMCEstimate(w io.Writer, rows []wire.MCEstimate) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nevery cluster (the shared-cluster estimate of docs/multicluster.md; transfer = the job's data over the link):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPARTITION\tTYPE\tFITS\tRUN\tWAIT (LOAD)\tCOST\tTRANSFER\tFINISH\tVIEW AGE")
	for _, r := range rows {
		name := r.Cluster
		if !r.Remote {
			name += " (here)"
		}
		if !r.Fits {
			fmt.Fprintf(tw, "%s\t%s\t%s\tno: %s\t-\t-\t-\t-\t-\t%.0fs\n", name, r.Partition, r.Type, r.Why, r.AgeSeconds)
			continue
		}
		xfer := "-"
		fin := r.RunSeconds + r.WaitSeconds
		switch {
		case r.TransferSeconds < 0:
			xfer, fin = "no link", math.Inf(1)
		case r.Remote:
			xfer = fmt.Sprintf("%s (%.3g GB)", mcSecs(r.TransferSeconds), r.DataGB)
			fin += r.TransferSeconds
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tyes\t%s\t%s\t%.3g\t%s\t%s\t%.0fs\n", name, r.Partition, r.Type, mcSecs(r.RunSeconds),
			mcSecs(r.WaitSeconds), r.Cost, xfer, mcSecs(fin), r.AgeSeconds)
	}
	return tw.Flush()
}

func mcSecs(s float64) string {
	if math.IsInf(s, 1) {
		return "never"
	}
	return (time.Duration(s) * time.Second).Round(time.Second).String()
}

func sortedTypes(m map[string]wire.MCType) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
