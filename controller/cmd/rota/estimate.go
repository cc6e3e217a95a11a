package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rota-hpc/rota/controller/jobscript"
	"github.com/rota-hpc/rota/controller/site"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/plugin/submit"
	"github.com/rota-hpc/rota/wire"
)

const estimateUsage = `usage: rota estimate [job.sh] [--gpus N] [--steps N] [--model NAME | --throughput TYPE:STEPS_PER_S[,...]]
                     [--gpu-mem SIZE] [--mem SIZE] [--partition P] [--type T] [--time T] [--json]
Flags override what the script's #SBATCH lines say.`

// estimateFlags are rota estimate's flags.
type estimateFlags struct {
	nc                                      *natsConn
	gpus, nodes, cpus                       *uint
	steps                                   *uint64
	model, tput, gpuMem, mem, part, typ, tl *string
	name                                    *string
	asJSON                                  *bool
}

func newEstimateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "estimate [job.sh] [flags]",
		Short: "what a job would need per partition and GPU type: fit, run time, queue wait, cost, chain",
		Long: `rota estimate tells, before you submit, per partition and GPU type: whether
the job fits, its run time, the queue wait now, its cost, whether it needs
a chain of jobs past MaxTime, and the fastest and cheapest plans. It reads
the job from a batch script's #SBATCH lines, from flags, or both (flags
override the script); the controller answers (docs/estimate.md).`,
		Example: `  rota estimate job.sh
  rota estimate --gpus 1 --steps 36000 --model 'ResNet-50 (batch size 64)'
  rota estimate job.sh --throughput v100:10,p100:8 --partition gpu --json`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
	}
	fs := cmd.Flags()
	f := &estimateFlags{nc: natsFlags(fs)}
	f.gpus = fs.Uint("gpus", 0, "GPUs per node (as --gres=gpu:N)")
	f.nodes = fs.Uint("nodes", 0, "nodes")
	f.steps = fs.Uint64("steps", 0, "total training steps (as --rota-steps)")
	f.model = fs.String("model", "", "a job type of the controller's throughput table, e.g. 'ResNet-50 (batch size 64)'")
	f.tput = fs.String("throughput", "", "your steps/s per GPU type, as sbatch --rota-throughput: TYPE:STEPS_PER_S[,...]")
	f.gpuMem = fs.String("gpu-mem", "", "GPU memory each GPU needs, e.g. 20GiB")
	f.mem = fs.String("mem", "", "host memory per node, as sbatch --mem (MB unless suffixed)")
	f.part = fs.String("partition", "", "only this partition")
	f.typ = fs.String("type", "", "only this GPU type")
	f.tl = fs.String("time", "", "time limit the job asks for, as sbatch --time")
	f.cpus = fs.Uint("cpus-per-task", 0, "CPUs per task")
	f.name = fs.String("name", "", "job name (default: the script's -J, else its file name); with the user, finds earlier runs")
	f.asJSON = fs.Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var script string
		if len(args) == 1 {
			script = args[0]
		}
		return runEstimate(cmd.Context(), f, script, cmd.OutOrStdout())
	}
	return cmd
}

func runEstimate(ctx context.Context, f *estimateFlags, script string, stdout io.Writer) error {
	nc, gpus, nodes, steps, cpus, name, asJSON := f.nc, f.gpus, f.nodes, f.steps, f.cpus, f.name, f.asJSON
	model, tput, gpuMem, mem, part, typ, tl := f.model, f.tput, f.gpuMem, f.mem, f.part, f.typ, f.tl
	req := wire.EstimateRequest{V: wire.Version}
	if u, err := user.Current(); err == nil {
		req.User = u.Username
	}
	if script != "" {
		b, err := os.ReadFile(script)
		if err != nil {
			return err
		}
		j, err := jobscript.Parse(b)
		if err != nil {
			return fmt.Errorf("%s: %w", script, err)
		}
		if j.Off {
			fmt.Fprintf(os.Stderr, "note: %s opts out of Rota (--rota=off); estimating it anyway\n", script)
		}
		fromScript(&req, j)
		if req.Name == "" {
			// Slurm names a job after its script.
			req.Name = filepath.Base(script)
		}
		req.ScriptHash = submit.ScriptHash(b)
	}
	if *gpus > 0 {
		req.GPUsPerNode, req.GPUsPerJob, req.GPUsPerTask = uint32(*gpus), 0, 0
	}
	if *nodes > 0 {
		req.Nodes = uint32(*nodes)
	}
	if *steps > 0 {
		req.Steps = *steps
	}
	if *cpus > 0 {
		req.CPUsPerTask = uint32(*cpus)
	}
	req.Model = *model
	if *tput != "" {
		h, err := submit.ParseThroughputHint(*tput)
		if err != nil {
			return usageError{err.Error()}
		}
		req.Throughput = h
	}
	if *gpuMem != "" {
		b, err := site.ParseBytes(*gpuMem)
		if err != nil || b == 0 {
			return usageError{fmt.Sprintf("--gpu-mem=%q: want a size such as 20GiB", *gpuMem)}
		}
		req.GPUMemBytes = b
	}
	if *mem != "" {
		j, err := jobscript.Parse([]byte("#SBATCH --mem=" + *mem))
		if err != nil {
			return usageError{err.Error()}
		}
		req.MemPerNodeMB = j.MemMB
	}
	if *part != "" {
		req.Partition = *part
	}
	if *typ != "" {
		req.GPUType = *typ
	}
	if *tl != "" {
		m, err := slurmtime.Parse(*tl)
		if err != nil {
			return usageError{fmt.Sprintf("--time=%q: %v", *tl, err)}
		}
		req.TimeLimitMin = m
	}
	if *name != "" {
		req.Name = *name
	}
	if req.GPUsPerNode == 0 && req.GPUsPerJob == 0 && req.GPUsPerTask == 0 {
		return usageError{"the job asks for no GPUs: give --gpus N or a script with #SBATCH --gres=gpu:N (or --gpus)\n" + estimateUsage}
	}
	var rep wire.EstimateReply
	if err := ask(ctx, nc, wire.SubjectEstimate, req, &rep); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		if rep.Error != "" {
			return fmt.Errorf("%s", rep.Error)
		}
		return nil
	}
	if rep.Error != "" {
		return fmt.Errorf("%s", rep.Error)
	}
	return printEstimate(stdout, &req, &rep)
}

// fromScript copies what the script asks for into the request.
func fromScript(r *wire.EstimateRequest, j jobscript.Job) {
	r.Name = j.Name
	if len(j.Partitions) == 1 {
		r.Partition = j.Partitions[0]
	}
	r.TimeLimitMin, r.Nodes, r.CPUsPerTask, r.MemPerNodeMB = j.TimeMin, j.Nodes, j.CPUsPerTask, j.MemMB
	r.Tasks = j.Tasks
	if r.Tasks == 0 && j.TasksPerNode > 0 {
		r.Tasks = j.TasksPerNode * max(j.Nodes, 1)
	}
	r.GPUsPerJob, r.GPUsPerNode, r.GPUsPerTask, r.GPUType = j.GPUsPerJob, j.GPUsPerNode, j.GPUsPerTask, j.GPUType
	r.Steps, r.Throughput = j.Steps, j.Throughput
}

func fmtMin(p *float64) string {
	if p == nil {
		return "unknown"
	}
	m := *p
	switch {
	case m < 1:
		return fmt.Sprintf("%.0fs", m*60)
	case m < 120:
		return fmt.Sprintf("%.0fm", m)
	case m < 48*60:
		return fmt.Sprintf("%.1fh", m/60)
	}
	return fmt.Sprintf("%.1fd", m/1440)
}

func fmtCost(p *float64, unit string) string {
	if p == nil {
		return "unknown"
	}
	return strings.TrimSpace(fmt.Sprintf("%.4g %s", *p, unit))
}

func printEstimate(w io.Writer, req *wire.EstimateRequest, rep *wire.EstimateReply) error {
	fmt.Fprintf(w, "job: %d GPU(s), %d core(s)", rep.GPUs, rep.Cores)
	if req.Steps > 0 {
		fmt.Fprintf(w, ", %d steps", req.Steps)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tTYPE\tFITS\tNODES\tSTEPS/S\tRUN\tCHAIN\tWAIT NOW\tFINISH\tCOST")
	for _, r := range rep.Rows {
		p := r.Partition
		if r.Debug {
			p += " (debug)"
		}
		sps := "unknown"
		if r.StepsPerSec != nil {
			sps = fmt.Sprintf("%.4g", *r.StepsPerSec)
		}
		chain := "-"
		switch {
		case r.Segments > 1:
			chain = fmt.Sprintf("%d x %s", r.Segments, slurmtime.Format(r.SegmentMin))
		case r.Segments == 0:
			chain = "unknown"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p, r.GPUType, r.Fits, r.Nodes, sps, fmtMin(r.RunMin), chain,
			fmtMin(r.WaitMin), fmtMin(r.FinishMin), fmtCost(r.Cost, rep.Unit))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Reasons: why a row does not fit, and where each unknown comes from.
	var why []string
	for _, r := range rep.Rows {
		at := r.Partition + "/" + r.GPUType + ": "
		for _, y := range r.Why {
			why = append(why, at+y)
		}
		if r.RunWhy != "" {
			why = append(why, at+"run time unknown: "+r.RunWhy)
		}
		if r.WaitWhy != "" && r.Fits != "no" {
			why = append(why, at+r.WaitWhy)
		}
		if r.Cost == nil && r.RunMin != nil {
			why = append(why, at+r.CostBasis)
		}
	}
	if len(why) > 0 {
		fmt.Fprintln(w)
		for _, y := range dedupe(why) {
			fmt.Fprintln(w, "  "+y)
		}
	}
	fmt.Fprintln(w)
	plan := func(label string, p *wire.Plan) {
		if p == nil {
			return
		}
		fmt.Fprintf(w, "%s %s on %s: %s\n", label, p.GPUType, p.Partition, p.Why)
		if p.Segments > 1 {
			fmt.Fprintf(w, "%*s as a chain of %d jobs, each within its time limit\n", len(label), "", p.Segments)
		}
	}
	plan("fastest: ", rep.Fastest)
	plan("cheapest:", rep.Cheapest)
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
