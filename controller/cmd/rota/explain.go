package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

func init() {
	register("explain", command{summary: "why a job got its GPU type and walltime", run: runExplain})
}

func runExplain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	nc := natsFlags(fs)
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() != 1 {
		return usageError{"usage: rota explain [--json] <jobid>"}
	}
	id, err := strconv.ParseUint(fs.Arg(0), 10, 32)
	if err != nil || id == 0 {
		return usageError{fmt.Sprintf("%q is not a job id", fs.Arg(0))}
	}
	var rep wire.ExplainReply
	if err := ask(ctx, nc, wire.SubjectExplain, wire.ExplainRequest{V: wire.Version, JobID: uint32(id)}, &rep); err != nil {
		return err
	}
	if rep.Error != "" {
		return errors.New(rep.Error)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep.Decision)
	}
	printDecision(stdout, rep.Decision)
	return nil
}

func printDecision(w io.Writer, d *wire.Decision) {
	a, g := d.Asked, d.Given
	asked := a.GPU.Type
	if asked == "" {
		asked = "any type"
	}
	given := g.GPUType
	if given == "" {
		given = "kept as asked"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%d\n", d.JobID)
	fmt.Fprintf(tw, "decision\t%s at %s by policy %s\n", d.ID, d.At.Format("2006-01-02 15:04:05 MST"), g.Policy)
	fmt.Fprintf(tw, "asked\tgpu %s (per job %d, per node %d, per task %d), time %s\n", asked, a.GPU.PerJob, a.GPU.PerNode, a.GPU.PerTask, minutes(a.TimeLimitMin))
	if a.Hints.Steps > 0 || len(a.Hints.Throughput) > 0 {
		fmt.Fprintf(tw, "hints\tsteps %d, throughput %v\n", a.Hints.Steps, a.Hints.Throughput)
	}
	fmt.Fprintf(tw, "given\tgpu %s, time %s\n", given, minutesOrKeep(g.TimeLimitMin))
	fmt.Fprintf(tw, "why\t%s\n", g.Reason)
	keys := make([]string, 0, len(d.Numbers))
	for k := range d.Numbers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "  %s\t%g\n", k, d.Numbers[k])
	}
	tw.Flush()
}

func minutes(m uint32) string {
	if m == 0 {
		return "not given"
	}
	return slurmtime.Format(m)
}

func minutesOrKeep(m uint32) string {
	if m == 0 {
		return "kept as asked"
	}
	return slurmtime.Format(m)
}
