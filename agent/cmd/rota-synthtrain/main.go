// Command rota-synthtrain is a synthetic training job for Rota's end-to-end
// demonstration (issue #5). It "trains" at the speed Gavel measured for its
// job type on the GPU type Slurm gave it, reports progress the way a real
// job does (docs/agent.md), checkpoints on its checkpoint signal and
// resumes from that checkpoint after a requeue.
//
//	rota-synthtrain --model 'ResNet-18 (batch size 64)' --steps 20000 \
//	    --throughputs ../shared/data/gavel/simulation_throughputs.json \
//	    --time-scale 100 --ckpt-dir /shared/ckpt --log /shared/logs/$SLURM_JOB_ID.log
//	rota-synthtrain workload --n 24 --seed 1 --time-scale 100
//	rota-synthtrain summarize --log-dir /shared/logs --submit-times submits.txt
//
// In a batch script run it with exec, so that the program is the batch
// step's only process: Slurm's and the agent's signals then reach it rather
// than a shell that would die of SIGUSR1:
//
//	#!/bin/bash
//	#SBATCH --gres=gpu:1 --requeue --rota-checkpoint-signal=USR1
//	exec rota-synthtrain --model "$MODEL" --steps "$STEPS" ...
//
// Use a fresh --ckpt-dir for every run of a workload: a dev cluster started
// again hands out the same job ids, and a checkpoint keyed by job id would
// otherwise be taken for the new job's (a checkpoint names its model and
// total steps, and one that does not match is refused).
package main

import (
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run dispatches to a subcommand; without one it trains. It returns the
// process exit status.
func run(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "train":
			return train(args[1:])
		case "workload":
			return workloadCmd(args[1:], os.Stdout)
		case "summarize":
			return summarizeCmd(args[1:], os.Stdout)
		case "help", "-h", "--help":
			fmt.Fprintln(os.Stderr, "usage: rota-synthtrain [train] --model M --steps N --throughputs PATH [flags]\n"+
				"       rota-synthtrain workload --n N --seed S [flags]\n"+
				"       rota-synthtrain summarize --log-dir DIR [--submit-times FILE]\n"+
				"each takes -h for its flags")
			return 0
		}
	}
	return train(args)
}
