package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/rota-hpc/rota/controller/forecast/report"
	"github.com/rota-hpc/rota/wire"
)

func init() {
	register("estimate", command{summary: "what a job would need per partition and GPU type: fit, run time, queue wait, cost, chain", run: runEstimate})
}

const estimateUsage = `usage: rota estimate [job.sh] [--gpus N] [--steps N] [--model NAME | --throughput TYPE:STEPS_PER_S[,...]]
                     [--gpu-mem SIZE] [--mem SIZE] [--partition P] [--type T] [--time T] [--json]
Flags override what the script's #SBATCH lines say.`

func runEstimate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("estimate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nc := natsFlags(fs)
	gpus := fs.Uint("gpus", 0, "GPUs per node (as --gres=gpu:N)")
	nodes := fs.Uint("nodes", 0, "nodes")
	steps := fs.Uint64("steps", 0, "total training steps (as --rota-steps)")
	model := fs.String("model", "", "a job type of the controller's throughput table, e.g. 'ResNet-50 (batch size 64)'")
	tput := fs.String("throughput", "", "your steps/s per GPU type, TYPE:STEPS_PER_S[,...] (as --rota-throughput)")
	gpuMem := fs.String("gpu-mem", "", "GPU memory each GPU needs, e.g. 20GiB")
	mem := fs.String("mem", "", "host memory per node, as sbatch --mem (MB unless suffixed)")
	part := fs.String("partition", "", "only this partition")
	typ := fs.String("type", "", "only this GPU type")
	tl := fs.String("time", "", "time limit the job asks for, as sbatch --time")
	cpus := fs.Uint("cpus-per-task", 0, "CPUs per task")
	name := fs.String("name", "", "job name (default: the script's -J, else its file name); with the user, finds earlier runs")
	asJSON := fs.Bool("json", false, "print JSON")
	// The script may sit anywhere among the flags (rota estimate job.sh
	// --gpus 2): the flag package stops at the first non-flag, so parse
	// again after it.
	var scripts []string
	for {
		if err := fs.Parse(args); err != nil {
			var b strings.Builder
			fs.SetOutput(&b)
			fs.PrintDefaults()
			return usageError{fmt.Sprintf("estimate: %v\n%s\nflags:\n%s", err, estimateUsage, b.String())}
		}
		if fs.NArg() == 0 {
			break
		}
		scripts = append(scripts, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(scripts) > 1 {
		return usageError{"estimate: one job script at most\n" + estimateUsage}
	}
	var script string
	if len(scripts) == 1 {
		script = scripts[0]
	}
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
			return usageError{"estimate: " + fe.Msg + "\n" + estimateUsage}
		}
		return usageError{fe.Msg}
	} else if err != nil {
		return err
	}
	if optOut {
		fmt.Fprintf(os.Stderr, "note: %s opts out of Rota (--rota=off); estimating it anyway\n", script)
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
	return report.Build(&req, &rep).WriteText(stdout)
}
