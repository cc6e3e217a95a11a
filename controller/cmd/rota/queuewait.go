package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rota-hpc/rota/controller/estimate/queuewait"
)

func newQueuewaitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queuewait",
		Short: "train and evaluate the queue-wait model on an sacct trace",
		Long: `rota queuewait trains the controller's queue-wait model (boosted trees on
the queue's state when each job was submitted) from an sacct trace or this
cluster's slurmdbd, and scores it on held-out days against simple
baselines (docs/queuewait.md). The controller loads the model named by
queuewait_model in controller.conf.`,
		Example: `  rota queuewait train --from-sacct --since 30d --out /var/lib/rota/queuewait.json
  rota queuewait eval --trace sacct.tsv --compare`,
		Args: cobra.ArbitraryArgs,
		RunE: groupRunE,
	}
	cmd.AddCommand(newQueuewaitTrainCmd(), newQueuewaitEvalCmd())
	return cmd
}

// qwFlags are the flags train and eval share.
type qwFlags struct {
	trace       *string
	partition   *string
	gpusPerNode *int
	holdout     *float64
	warmup      *float64
	loss        *string
	trees       *int
	depth       *int
	seed        *int64
	asJSON      *bool
	fromSacct   *bool
	since       *string
	start, end  *string
	fs          *pflag.FlagSet
}

func newQWFlags(fs *pflag.FlagSet, holdout float64) qwFlags {
	d := queuewait.DefaultTrainOptions()
	return qwFlags{
		trace: fs.String("trace", "", "sacct trace (TSV: JobID JobName UID Start Submit End Priority TimelimitRaw ExitCode NNodes)"),
		// sacct's export has no partition or GPU column: Lonestar6's A100
		// partition by default.
		partition:   fs.String("partition", "gpu-a100", "partition the trace's jobs belong to"),
		gpusPerNode: fs.Int("gpus-per-node", 3, "GPUs per node of the trace's partition"),
		holdout:     fs.Float64("holdout-days", holdout, "leave out the jobs submitted in the trace's last N days"),
		warmup:      fs.Float64("warmup-days", 7, "do not train on the trace's first N days (the queue from before the trace is missing)"),
		loss:        fs.String("loss", d.Loss, "lad (absolute error on log wait) or l2"),
		trees:       fs.Int("trees", d.Trees, "boosting rounds"),
		depth:       fs.Int("depth", d.Depth, "tree depth"),
		seed:        fs.Int64("seed", d.Seed, "subsampling seed"),
		asJSON:      fs.Bool("json", false, "print JSON"),
		fromSacct:   fs.Bool("from-sacct", false, "read the jobs from this cluster's slurmdbd (sacct, with $SLURM_CONF) instead of a trace"),
		since:       fs.String("since", "7d", "with --from-sacct: the jobs of the last N days (7d) or hours (36h)"),
		start:       fs.String("start", "", "with --from-sacct: from this time (2026-11-01 or 2026-11-01T08:00:00, local), instead of --since"),
		end:         fs.String("end", "", "with --from-sacct: up to this time (default now)"),
		fs:          fs,
	}
}

// set says whether the flag name was given.
func (f qwFlags) set(name string) bool {
	return f.fs.Changed(name)
}

func (f qwFlags) read(ctx context.Context) ([]queuewait.TraceJob, queuewait.TraceStats, error) {
	if (*f.trace == "") == !*f.fromSacct {
		return nil, queuewait.TraceStats{}, usageError{"--trace is required, or --from-sacct (one of them)"}
	}
	if *f.gpusPerNode < 0 || *f.holdout < 0 || *f.warmup < 0 {
		return nil, queuewait.TraceStats{}, usageError{"--gpus-per-node, --holdout-days and --warmup-days must be >= 0"}
	}
	if *f.fromSacct {
		return f.readSacct(ctx)
	}
	if f.set("since") || f.set("start") || f.set("end") {
		return nil, queuewait.TraceStats{}, usageError{"--since, --start and --end go with --from-sacct"}
	}
	return queuewait.ReadTraceFile(*f.trace, queuewait.TraceOptions{Partition: *f.partition, GPUsPerNode: *f.gpusPerNode})
}

func (f qwFlags) trainOptions() queuewait.TrainOptions {
	o := queuewait.DefaultTrainOptions()
	o.Loss, o.Trees, o.Depth, o.Seed, o.GPUsPerNode = *f.loss, *f.trees, *f.depth, *f.seed, *f.gpusPerNode
	return o
}

func days(d float64) time.Duration { return time.Duration(d * 24 * float64(time.Hour)) }

// trainSummary is `rota queuewait train --json`.
type trainSummary struct {
	Out          string               `json:"out"`
	Jobs         int                  `json:"jobs_train"`
	From         time.Time            `json:"from"`
	To           time.Time            `json:"to"`
	Capacity     int                  `json:"capacity_nodes"`
	Trees        int                  `json:"trees"`
	TrainSeconds float64              `json:"train_seconds"`
	Trace        queuewait.TraceStats `json:"trace"`
}

func newQueuewaitTrainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "train (--trace FILE | --from-sacct) --out model.json [flags]",
		Short: "train the queue-wait model and write it to a file",
		Long: `rota queuewait train fits the queue-wait model on an sacct trace (--trace)
or on this cluster's slurmdbd (--from-sacct, with $SLURM_CONF) and writes it
to --out. From slurmdbd it also scores the model on the window's last
quarter, trained on the rest.`,
		Example: `  rota queuewait train --trace sacct.tsv --out model.json --holdout-days 30
  rota queuewait train --from-sacct --since 30d --out /var/lib/rota/queuewait.json`,
		Args: usageArgs(cobra.NoArgs),
	}
	fs := cmd.Flags()
	f := newQWFlags(fs, 0)
	out := fs.String("out", "", "where to write the model (JSON)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runQueuewaitTrain(cmd.Context(), f, *out, cmd.OutOrStdout())
	}
	return cmd
}

func runQueuewaitTrain(ctx context.Context, f qwFlags, out string, stdout io.Writer) error {
	if out == "" {
		return usageError{"--out is required"}
	}
	jobs, st, err := f.read(ctx)
	if err != nil {
		return err
	}
	if *f.fromSacct && !f.set("warmup-days") {
		// sacct lists the jobs still pending at the window's start too:
		// the queue the first jobs saw is complete.
		*f.warmup = 0
	}
	first, last := jobs[0].Submit, jobs[0].Submit
	for _, j := range jobs {
		if j.Submit.Before(first) {
			first = j.Submit
		}
		if j.Submit.After(last) {
			last = j.Submit
		}
	}
	o := f.trainOptions()
	o.From = first.Add(days(*f.warmup))
	if *f.holdout > 0 {
		// Train as if at the cutoff: only waits known by then.
		o.To = last.Add(-days(*f.holdout))
		o.LabelsBy = o.To
	}
	start := time.Now()
	m, err := queuewait.TrainTrace(jobs, o)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if err := m.SaveFile(out); err != nil {
		return err
	}
	sum := trainSummary{Out: out, Jobs: m.Trained.Jobs, From: m.Trained.From, To: m.Trained.To,
		Capacity: m.Capacity, Trees: len(m.Trees), TrainSeconds: secs, Trace: st}
	if *f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	fmt.Fprintf(stdout, "trained on %d jobs submitted %s .. %s (%d bad trace lines skipped) in %.1fs\n",
		sum.Jobs, sum.From.Format(time.DateTime), sum.To.Format(time.DateTime), st.Bad, secs)
	fmt.Fprintf(stdout, "capacity %d nodes, %d trees; wrote %s\n", sum.Capacity, sum.Trees, out)
	if *f.fromSacct {
		// What the model is worth on this cluster: trained on all but
		// the window's last quarter, scored on that quarter.
		span := last.Sub(first).Hours() / 24
		o := queuewait.DefaultEvalOptions()
		o.HoldoutDays, o.WarmupDays, o.Train = span/4, *f.warmup, f.trainOptions()
		fmt.Fprintf(stdout, "evaluation on this cluster's own jobs (trained on the first three quarters of the window, scored on the last):\n")
		rep, err := queuewait.Evaluate(jobs, o)
		if err != nil {
			fmt.Fprintf(stdout, "evaluation skipped: %v\n", err)
			return nil
		}
		rep.Trace = &st
		printEval(stdout, "sacct", st, rep)
	}
	return nil
}

func newQueuewaitEvalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval (--trace FILE | --from-sacct) [flags]",
		Short: "score the queue-wait model on the held-out days of a trace",
		Long: `rota queuewait eval trains the model on all but the last --holdout-days of
the jobs (or loads --model) and scores its predictions on those days:
mean and median absolute error and the share within a factor of 2, beside
the recent-mean baseline (--compare adds the l2 loss, the recent median
and an FCFS replay at the time limits).`,
		Example: `  rota queuewait eval --trace sacct.tsv --compare --json
  rota queuewait eval --trace sacct.tsv --model model.json`,
		Args: usageArgs(cobra.NoArgs),
	}
	fs := cmd.Flags()
	f := newQWFlags(fs, 30)
	modelPath := fs.String("model", "", "evaluate this model instead of training one on all but the held-out days")
	compare := fs.Bool("compare", false, "also score the l2 loss, the recent median and an FCFS replay at the time limits")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runQueuewaitEval(cmd.Context(), f, *modelPath, *compare, cmd.OutOrStdout())
	}
	return cmd
}

func runQueuewaitEval(ctx context.Context, f qwFlags, modelPath string, compare bool, stdout io.Writer) error {
	if !(*f.holdout > 0) {
		return usageError{"--holdout-days must be > 0"}
	}
	jobs, st, err := f.read(ctx)
	if err != nil {
		return err
	}
	if *f.fromSacct && !f.set("warmup-days") {
		*f.warmup = 0
	}
	o := queuewait.DefaultEvalOptions()
	o.HoldoutDays, o.WarmupDays, o.Train, o.Compare = *f.holdout, *f.warmup, f.trainOptions(), compare
	if modelPath != "" {
		if o.Model, err = queuewait.LoadFile(modelPath); err != nil {
			return err
		}
	}
	rep, err := queuewait.Evaluate(jobs, o)
	if err != nil {
		return err
	}
	rep.Trace = &st
	if *f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	src := "trace"
	if *f.fromSacct {
		src = "sacct"
	}
	printEval(stdout, src, st, rep)
	return nil
}

// printEval prints an evaluation report as a table.
func printEval(stdout io.Writer, src string, st queuewait.TraceStats, rep *queuewait.Report) {
	fmt.Fprintf(stdout, "%s: %d jobs, %d bad lines; test: %d jobs submitted from %s (mean wait %.2f h, median %.3f h); train: %d jobs\n",
		src, st.Jobs, st.Bad, rep.JobsTest, rep.Cutoff.Format(time.DateTime), rep.TestMeanWaitHours, rep.TestMedianWaitHours, rep.JobsTrain)
	fmt.Fprintf(stdout, "model:    %s\n", rep.Model)
	fmt.Fprintf(stdout, "%-22s %10s %14s %10s\n", "", "MAE h", "median AE h", "within 2x")
	fmt.Fprintf(stdout, "%-22s %10.3f %14.3f %10.3f\n", "model", rep.MAEHours, rep.MedianAEHours, rep.Within2x)
	fmt.Fprintf(stdout, "%-22s %10.3f %14.3f %10.3f\n", "baseline (recent mean)", rep.BaselineMAEHours, rep.BaselineMedianAEHours, rep.BaselineWithin2x)
	for _, s := range rep.Compared {
		fmt.Fprintf(stdout, "%-22s %10.3f %14.3f %10.3f\n", s.Name, s.MAEHours, s.MedianAEHours, s.Within2x)
	}
	if rep.Note != "" {
		fmt.Fprintln(stdout, "note:", rep.Note)
	}
}
