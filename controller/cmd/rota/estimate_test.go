package main

import (
	"reflect"
	"testing"

	"github.com/rota-hpc/rota/controller/jobscript"
	"github.com/rota-hpc/rota/wire"
)

func TestFromScript(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   wire.EstimateRequest
	}{
		{"tasks per node times nodes; one partition kept",
			"#SBATCH -N 2 --ntasks-per-node=4 -c 2 --gres=gpu:v100:4 -p gpu --time=10:00 --mem=8G --rota-steps=5\n",
			wire.EstimateRequest{Nodes: 2, Tasks: 8, CPUsPerTask: 2, GPUsPerNode: 4, GPUType: "v100", Partition: "gpu",
				TimeLimitMin: 10, MemPerNodeMB: 8192, Steps: 5}},
		{"a partition list answers for every partition", "#SBATCH -p a,b -G 2 -J x\n",
			wire.EstimateRequest{GPUsPerJob: 2, Name: "x"}},
		{"ntasks wins over ntasks-per-node", "#SBATCH -n 3 --ntasks-per-node=2 --gpus-per-task=1\n",
			wire.EstimateRequest{Tasks: 3, GPUsPerTask: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := jobscript.Parse([]byte(tc.script))
			if err != nil {
				t.Fatal(err)
			}
			var got wire.EstimateRequest
			fromScript(&got, j)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// Flags may come before or after the script; two scripts are refused.
func TestEstimateArgs(t *testing.T) {
	for _, args := range [][]string{{"a.sh", "b.sh"}, {"--steps", "1", "a.sh", "--gpus", "1", "b.sh"}} {
		err := runEstimate(t.Context(), args, nil)
		if _, ok := err.(usageError); !ok {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	// A script among the flags is read (and must exist).
	err := runEstimate(t.Context(), []string{"--steps", "1", "/nonexistent/job.sh", "--gpus", "1"}, nil)
	if err == nil || err.Error() != "open /nonexistent/job.sh: no such file or directory" {
		t.Errorf("script after flags: %v", err)
	}
}
