package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

func newStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [flags]",
		Short: "the controller's view: GPU capacity and use per type",
		Long: `rota status asks the controller what it knows: GPU capacity and use per
type, partitions, queue waits, the agents reporting and the round loop;
--jobs adds every job's measured steps/s, and --site the site knowledge
that rota estimate uses (partitions and limits, nodes, GPU memory,
charging rates, queue-wait model).`,
		Example: `  rota status
  rota status --jobs --json
  rota status --site --nats nats://ctl:4222 --nkey-seed /etc/rota/creds/cli.nk`,
		Args: usageArgs(cobra.NoArgs),
	}
	fs := cmd.Flags()
	nc := natsFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	jobs := fs.Bool("jobs", false, "also list jobs' measured steps/s per GPU type and peak GPU memory")
	siteOnly := fs.Bool("site", false, "show the controller's knowledge of the site: partitions and limits, nodes, GPU memory, charging rates, queue-wait model")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runStatus(cmd.Context(), nc, *asJSON, *jobs, *siteOnly, cmd.OutOrStdout())
	}
	return cmd
}

func runStatus(ctx context.Context, nc *natsConn, asJSON, jobs, siteOnly bool, stdout io.Writer) error {
	var rep wire.StatusReply
	if err := ask(ctx, nc, wire.SubjectStatus, wire.StatusRequest{V: wire.Version, Jobs: jobs, Site: siteOnly}, &rep); err != nil {
		return err
	}
	if siteOnly && rep.Site == nil {
		return fmt.Errorf("the controller has no site knowledge yet (it has not read Slurm, or it predates rota status --site)")
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if siteOnly {
			return enc.Encode(rep.Site)
		}
		return enc.Encode(rep)
	}
	if siteOnly {
		return printSite(stdout, rep.Site)
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
	if err := tw.Flush(); err != nil {
		return err
	}
	if q := rep.QueueWaits; q != nil {
		if err := printQueueWaits(stdout, q); err != nil {
			return err
		}
	}
	if in := rep.Ingest; in != nil {
		fmt.Fprintf(stdout, "\nagents: %d nodes, %d jobs reporting; %d reports received, %d taken in, dropped %d malformed, %d invalid, %d slow consumer; %d pending; %d lost by agents; %d forgotten\n",
			in.Nodes, in.Jobs, in.Received, in.Decoded, in.Malformed, in.Invalid, in.SlowConsumer, in.Pending, in.LostReports, in.Forgotten)
	}
	if r := rep.Rounds; r != nil {
		fmt.Fprintf(stdout, "\nround loop (%s): %d rounds (%d failed), last %.2fs (solve %.3fs); %d retyped, %d migrations (%d failed), %d limits raised, %d Slurm update errors\n",
			r.Policy, r.Rounds, r.RoundErrors, r.LastRoundSeconds, r.SolveSeconds, r.Retyped, r.Migrations, r.MigrationFailures, r.LimitsRaised, r.SlurmErrors)
		if jobs && len(r.Jobs) > 0 {
			tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tTYPE\tGPUS NOW\tSHARE\tSTEPS/S (SOURCE)\tSTEPS LEFT\tWALLTIME\tMOVES")
			for _, j := range r.Jobs {
				types := make([]string, 0, len(j.Rates))
				for t := range j.Rates {
					types = append(types, t)
				}
				sort.Strings(types)
				var share, rates []string
				for _, t := range types {
					if v, ok := j.Share[t]; ok {
						share = append(share, fmt.Sprintf("%s=%.2f", t, v))
					}
					rates = append(rates, fmt.Sprintf("%s=%.3g(%s)", t, j.Rates[t], j.RateSource[t]))
				}
				wt := "-"
				if j.WalltimeMin > 0 {
					wt = slurmtime.Format(j.WalltimeMin)
				}
				fmt.Fprintf(tw, "%d\t%s\t%v\t%s\t%s\t%.0f\t%s\t%d\n", j.JobID, j.Type, j.Placed, strings.Join(share, " "),
					strings.Join(rates, " "), j.StepsLeft, wt, j.Moves)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
	}
	if rep.MultiCluster != nil {
		if err := printMC(stdout, rep.MultiCluster); err != nil {
			return err
		}
	}
	if jobs && len(rep.Chains) > 0 {
		fmt.Fprintf(stdout, "\nchains (jobs run past MaxTime as segments; id = first segment's job id):\n")
		if err := printChains(stdout, rep.Chains); err != nil {
			return err
		}
	}
	if jobs && len(rep.Services) > 0 {
		fmt.Fprintf(stdout, "\nservices (replicas kept apart, rolled over before their limits; replica = its first job's id):\n")
		if err := printServices(stdout, rep.Services); err != nil {
			return err
		}
	}
	if jobs {
		fmt.Fprintln(stdout)
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tTYPE\tSTEPS/S\tSTEP\tTOTAL\tPEAK GPU MEM\tPER GPU\tNODES\tLAST SEEN")
		for _, j := range rep.Jobs {
			fmt.Fprintf(tw, "%d\t%s\t%.3g\t%d\t%d\t%.1f GiB\t%.1f GiB\t%d\t%s\n", j.JobID, j.GPUType, j.StepsPerSec, j.Step, j.Total,
				float64(j.PeakGPUMemoryBytes)/(1<<30), float64(j.PeakGPUMemoryPerGPU)/(1<<30), j.Nodes, j.LastSeen)
		}
		if rep.JobsTruncated {
			fmt.Fprintf(tw, "(first %d only)\n", len(rep.Jobs))
		}
		return tw.Flush()
	}
	return nil
}

// printChains lists chains, one line per chain and per segment.
func printChains(w io.Writer, cs []wire.ChainStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHAIN\tSTATE\tSEGMENT\tJOB\tPARTITION\tTYPE\tJOB STATE\tSTEPS\tGAP\tWHY")
	for _, c := range cs {
		steps := "-"
		if c.Total > 0 {
			steps = fmt.Sprintf("%d/%d", c.Step, c.Total)
		}
		planned := ""
		if c.Planned > 0 {
			planned = fmt.Sprintf(" of ~%d", c.Planned)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d%s\t\t\t\t\t%s\t\t%s\n", c.ID, c.State, len(c.Segments), planned, steps, c.Why)
		for _, s := range c.Segments {
			gap := "-"
			if s.GapSeconds != nil {
				gap = fmt.Sprintf("%.0fs", *s.GapSeconds)
			}
			st := "-"
			if s.LastStep > 0 {
				st = fmt.Sprintf("%d-%d", s.FirstStep, s.LastStep)
			}
			fmt.Fprintf(tw, "\t\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.N, s.JobID, s.Partition, s.Type, s.State, st, gap, s.Why)
		}
	}
	return tw.Flush()
}

// printQueueWaits prints where the queue-wait history came from and
// the waits per partition and GPU type.
func printQueueWaits(w io.Writer, q *wire.QueueWaitHistory) error {
	fmt.Fprintf(w, "\nqueue waits: %s\n", q.Source)
	if len(q.Groups) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tTYPE\tJOBS\tMEAN WAIT\tMEDIAN\tMAX\tLAST START")
	secs := func(s float64) string {
		return (time.Duration(s*float64(time.Second)) / time.Second * time.Second).String()
	}
	for _, g := range q.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", g.Partition, orDash(g.GPUType, func(s string) string { return s }), g.Jobs,
			secs(g.MeanWaitSec), secs(g.MedianWaitSec), secs(g.MaxWaitSec), g.LastStart.Format("2006-01-02 15:04:05"))
	}
	return tw.Flush()
}
