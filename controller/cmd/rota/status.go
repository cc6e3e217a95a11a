package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

func init() {
	register("status", command{summary: "the controller's view: GPU capacity and use per type", run: runStatus})
}

func runStatus(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	nc := natsFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	var rep wire.StatusReply
	if err := ask(ctx, nc, wire.SubjectStatus, wire.StatusRequest{V: wire.Version}, &rep); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "policy %s, cluster read %s, %d decisions since start\n", rep.Policy, rep.RefreshedAt, rep.Decisions)
	if rep.Leader != "" {
		fmt.Fprintf(stdout, "answered by the leading controller %s\n", rep.Leader)
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tNODES\tGPUS\tUSED\tFREE\tSPEED")
	for _, t := range rep.Types {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.2f\n", t.Type, t.Nodes, t.Total, t.Used, t.Total-t.Used, t.Speed)
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tDEFAULT\tMAXTIME\tNODES")
	for _, p := range rep.Partitions {
		mt := "UNLIMITED"
		if p.MaxTimeMin > 0 {
			mt = slurmtime.Format(p.MaxTimeMin)
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", p.Name, p.Default, mt, p.Nodes)
	}
	return tw.Flush()
}
