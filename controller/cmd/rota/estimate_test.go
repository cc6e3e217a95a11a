package main

import (
	"reflect"
	"strings"
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
	t.Parallel()
	for _, args := range [][]string{{"a.sh", "b.sh"}, {"--steps", "1", "a.sh", "--gpus", "1", "b.sh"}} {
		_, stderr, code := rota(t, append([]string{"estimate"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "accepts at most 1 arg") {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, stderr)
		}
	}
	// A script among the flags is read (and must exist).
	_, stderr, code := rota(t, "estimate", "--steps", "1", "/nonexistent/job.sh", "--gpus", "1")
	if code != 1 || stderr != "rota estimate: open /nonexistent/job.sh: no such file or directory\n" {
		t.Errorf("script after flags: exit %d, %q", code, stderr)
	}
}
