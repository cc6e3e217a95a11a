package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/rota-hpc/rota/controller/estimate/forecast/report"
	"github.com/rota-hpc/rota/controller/xcluster"
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
	dataGB                                  *float64
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
	f.dataGB = fs.Float64("job-data-gb", 0, "GB of data the job reads (what running it on another cluster copies; a script may say #ROTA --data-gb=N)")
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
	var body []byte
	if script != "" {
		b, err := os.ReadFile(script)
		if err != nil {
			return err
		}
		body = b
	}
	req, optOut, err := report.Request(body, script, report.Fields{GPUs: *gpus, Nodes: *nodes, Steps: *steps, CPUsPerTask: *cpus,
		Model: *model, Throughput: *tput, GPUMem: *gpuMem, Mem: *mem, Partition: *part, Type: *typ, Time: *tl, Name: *name})
	if fe, ok := err.(report.FieldError); ok {
		if fe.Msg == report.NoGPUs {
			return usageError{fe.Msg + "\n" + estimateUsage}
		}
		return usageError{fe.Msg}
	} else if err != nil {
		return err
	}
	if optOut {
		fmt.Fprintf(os.Stderr, "note: %s opts out of Rota (--rota=off); estimating it anyway\n", script)
	}
	req.DataGB = *f.dataGB
	if gb, ok := xcluster.DeclaredGB(body, "data-gb"); ok && req.DataGB == 0 {
		req.DataGB = gb
	}
	if u, err := user.Current(); err == nil {
		req.User = u.Username
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
	if err := report.Build(&req, &rep).WriteText(stdout); err != nil {
		return err
	}
	return printMCEstimate(stdout, rep.Clusters)
}
