package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
)

func newExplainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain [flags] <jobid>",
		Short: "why a job got its GPU type and walltime",
		Long: `rota explain asks the controller for the decision it recorded for a job:
what the job asked, what it was given and why, the numbers behind it, the
last round's view of it, every change of its time limit while it ran, and
its chain when it runs as one.`,
		Example: `  rota explain 27
  rota explain --json 27`,
		Args: usageArgs(cobra.ExactArgs(1)),
	}
	fs := cmd.Flags()
	nc := natsFlags(fs)
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return runExplain(cmd.Context(), nc, *asJSON, args[0], cmd.OutOrStdout())
	}
	return cmd
}

func runExplain(ctx context.Context, nc *natsConn, asJSON bool, job string, stdout io.Writer) error {
	id, err := strconv.ParseUint(job, 10, 32)
	if err != nil || id == 0 {
		return usageError{fmt.Sprintf("%q is not a job id", job)}
	}
	var rep wire.ExplainReply
	if err := ask(ctx, nc, wire.SubjectExplain, wire.ExplainRequest{V: wire.Version, JobID: uint32(id)}, &rep); err != nil {
		return err
	}
	if rep.Error != "" && rep.MultiCluster == nil {
		return errors.New(rep.Error)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if rep.MultiCluster != nil {
		printRoute(stdout, rep.MultiCluster)
	}
	if rep.Decision == nil {
		return nil
	}
	printDecision(stdout, rep.Decision)
	printLimits(stdout, rep.Decision.Limits)
	if rep.Round != nil {
		printRound(stdout, rep.Round)
	}
	if rep.Fault != nil {
		printFault(stdout, rep.Fault)
	}
	if rep.Service != nil {
		if err := explainService(stdout, rep.Service); err != nil {
			return err
		}
	}
	if rep.Chain != nil {
		fmt.Fprintf(stdout, "chain %d (%s, successors submitted %s): %s\n", rep.Chain.ID, rep.Chain.State, rep.Chain.Mode, rep.Chain.Why)
		return printChains(stdout, []wire.ChainStatus{*rep.Chain})
	}
	if rep.ChainNote != "" {
		fmt.Fprintf(stdout, "chain\t%s\n", rep.ChainNote)
	}
	return nil
}

// printFault shows the job's periodic checkpoints and the node failures
// it went through.
func printFault(w io.Writer, f *wire.FaultStatus) {
	fmt.Fprintf(w, "checkpoints\t%s\n", f.Why)
	if f.Checkpoints > 0 {
		fmt.Fprintf(w, "\t%d taken, the latest at step %d (%s)\n", f.Checkpoints, f.LastStep, f.LastCheckpoint)
	}
	if f.MTBFSource != "" {
		fmt.Fprintf(w, "\tnode MTBF %s: %s\n", (time.Duration(f.NodeMTBFSeconds) * time.Second).String(), f.MTBFSource)
	}
	for _, e := range f.Events {
		fmt.Fprintf(w, "%s\t%s\t%s\n", e.Time, strings.ReplaceAll(e.Kind, "_", " "), e.Text)
	}
}

// printRound shows what the round loop last decided and the numbers
// behind it.
func printRound(w io.Writer, r *wire.RoundJob) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	state := "waiting"
	if r.Placed {
		state = "given GPUs"
	}
	fmt.Fprintf(tw, "last round\ttype %s (%s), moved %d times\n", r.Type, state, r.Moves)
	fmt.Fprintf(tw, "  why\t%s\n", r.Why)
	types := make([]string, 0, len(r.Rates))
	for t := range r.Rates {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		share := ""
		if s, ok := r.Share[t]; ok {
			share = fmt.Sprintf(", share %.2f", s)
		}
		fmt.Fprintf(tw, "  %s\t%.4g steps/s (%s)%s\n", t, r.Rates[t], r.RateSource[t], share)
	}
	if r.StepsLeft > 0 {
		fmt.Fprintf(tw, "  steps left\t%.0f\n", r.StepsLeft)
	}
	if r.WalltimeMin > 0 {
		fmt.Fprintf(tw, "  walltime\t%s: %s\n", slurmtime.Format(r.WalltimeMin), r.WalltimeBasis)
	} else if r.WalltimeBasis != "" {
		fmt.Fprintf(tw, "  walltime\tno estimate: %s\n", r.WalltimeBasis)
	}
	tw.Flush()
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
	fmt.Fprintf(tw, "asked\tgpu %s (per job %d, per node %d, per task %d)%s, time %s\n", asked, a.GPU.PerJob, a.GPU.PerNode, a.GPU.PerTask,
		nodesAsked(a.GPU), minutes(a.TimeLimitMin))
	if a.Hints.Steps > 0 || len(a.Hints.Throughput) > 0 {
		fmt.Fprintf(tw, "hints\tsteps %d, throughput %v\n", a.Hints.Steps, a.Hints.Throughput)
	}
	if len(a.Hints.Types) > 0 || strings.Contains(a.Features, "|") {
		fmt.Fprintf(tw, "types allowed\t%s\n", placement.HowAllowed(a.Hints, a.Features))
	}
	if g.Kind != "" {
		// Why it is of that kind leads the reason below.
		fmt.Fprintf(tw, "kind\t%s\n", g.Kind)
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

// printLimits shows every change of the job's time limit while it ran,
// and why.
func printLimits(w io.Writer, limits []wire.LimitChange) {
	for i, c := range limits {
		what := "given back"
		if c.Measured {
			what = "raised"
		}
		if i == 0 {
			fmt.Fprintln(w, "time limit changes while it ran:")
		}
		fmt.Fprintf(w, "  %s -> %s %s at %s, %s into its run: %s\n", slurmtime.Format(c.FromMin), slurmtime.Format(c.ToMin), what,
			c.At.Local().Format("2006-01-02 15:04:05 MST"), time.Duration(c.RanSeconds*float64(time.Second)).Round(time.Second), c.Why)
	}
}

// nodesAsked is the node count a job asked for (-N), which decides
// which GPU types can hold it: "" when not given.
func nodesAsked(g wire.GPUAsk) string {
	switch {
	case g.MaxNodes > g.Nodes && g.Nodes > 0:
		return fmt.Sprintf(" on %d-%d nodes", g.Nodes, g.MaxNodes)
	case g.Nodes > 1:
		return fmt.Sprintf(" on %d nodes", g.Nodes)
	}
	return ""
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
