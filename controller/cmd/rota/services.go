package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/rota-hpc/rota/wire"
)

// printServices lists inference services: one line per replica, then
// one per job of it, with where it runs, what Rota kept it off, when it
// was ready, and the overlap with (or gap after) its predecessor.
func printServices(w io.Writer, ss []wire.ServiceStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tREPLICA\tSTATE\tJOB\tJOB STATE\tNODES\tEXCLUDED\tREADY\tOVERLAP\tGAP\tWHY")
	for _, s := range ss {
		for _, r := range s.Replicas {
			fmt.Fprintf(tw, "%s\t%d\t%s\t\t\t\t\t\t\t\t%s\n", s.Name, r.ID, r.State, r.Why)
			for _, j := range r.Jobs {
				fmt.Fprintf(tw, "\t\t\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.JobID, dash(j.State), dash(j.Nodes), dash(j.Excluded),
					dash(j.Ready), secs(j.OverlapSeconds), secs(j.GapSeconds), j.Why)
			}
		}
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func secs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0fs", *v)
}

// explainService says what service a job is a replica of, how its
// replicas are spread, and where each runs.
func explainService(w io.Writer, s *wire.ServiceStatus) error {
	running := 0
	for _, r := range s.Replicas {
		if r.State == "running" {
			running++
		}
	}
	fmt.Fprintf(w, "service %s: %d replicas running, kept apart by %s; a replica rolls over before its time limit (docs/serve.md)\n",
		s.Name, running, s.Spread)
	return printServices(w, []wire.ServiceStatus{*s})
}
