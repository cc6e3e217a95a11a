package report

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/controller/jobscript"
	"github.com/rota-hpc/rota/wire"
)

func TestFromScript(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
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

func TestRequest(t *testing.T) {
	t.Parallel()
	script := []byte("#!/bin/bash\n#SBATCH --gres=gpu:2 --rota-steps=100\nsrun x\n")
	tests := []struct {
		name     string
		script   []byte
		file     string
		f        Fields
		check    func(wire.EstimateRequest) bool
		fieldErr string // a FieldError containing this; "" none
		err      string // another error containing this
	}{
		{"job named after its file", script, "/tmp/x/train.sh", Fields{},
			func(r wire.EstimateRequest) bool {
				return r.Name == "train.sh" && r.GPUsPerNode == 2 && r.Steps == 100 && r.ScriptHash != ""
			}, "", ""},
		{"pasted script: no name", script, "", Fields{},
			func(r wire.EstimateRequest) bool { return r.Name == "" }, "", ""},
		{"fields over the script", script, "a.sh", Fields{GPUs: 4, Steps: 7, Name: "n", Time: "1:00:00", Mem: "2G", GPUMem: "20GiB", Throughput: "v100:3"},
			func(r wire.EstimateRequest) bool {
				return r.GPUsPerNode == 4 && r.Steps == 7 && r.Name == "n" && r.TimeLimitMin == 60 && r.MemPerNodeMB == 2048 &&
					r.GPUMemBytes == 20<<30 && r.Throughput["v100"] == 3
			}, "", ""},
		{"no script, fields alone", nil, "", Fields{GPUs: 1},
			func(r wire.EstimateRequest) bool { return r.GPUsPerNode == 1 && r.ScriptHash == "" }, "", ""},
		{"no GPUs", nil, "", Fields{Steps: 5}, nil, NoGPUs, ""},
		{"bad time", nil, "", Fields{GPUs: 1, Time: "soon"}, nil, "--time=", ""},
		{"bad gpu memory", nil, "", Fields{GPUs: 1, GPUMem: "lots"}, nil, "--gpu-mem=", ""},
		{"bad throughput", nil, "", Fields{GPUs: 1, Throughput: "v100"}, nil, "v100", ""},
		{"bad script names the file", []byte("#SBATCH --time=soon\n"), "j.sh", Fields{}, nil, "", "j.sh: "},
		{"bad pasted script", []byte("#SBATCH --time=soon\n"), "", Fields{}, nil, "", "script: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, _, err := Request(tc.script, tc.file, tc.f)
			var fe FieldError
			switch {
			case tc.fieldErr != "":
				if !errors.As(err, &fe) || !strings.Contains(fe.Msg, tc.fieldErr) {
					t.Fatalf("err %v, want a field error with %q", err, tc.fieldErr)
				}
			case tc.err != "":
				if err == nil || errors.As(err, &fe) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case !tc.check(req):
				t.Fatalf("request %+v", req)
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }

// The table and its text are what `rota estimate` printed before the
// table moved here (want is the old code's output).
func TestBuildAndWriteText(t *testing.T) {
	t.Parallel()
	req := &wire.EstimateRequest{Steps: 36000}
	rep := &wire.EstimateReply{GPUs: 1, Cores: 1, Unit: "SU",
		Rows: []wire.EstimateRow{
			{Partition: "gpu", GPUType: "v100", Fits: "yes", Nodes: 1, StepsPerSec: ptr(10), RunMin: ptr(60), Segments: 1,
				WaitMin: ptr(0.5), FinishMin: ptr(60.5), Cost: ptr(3.02)},
			{Partition: "gpu", GPUType: "k80", Fits: "yes", Nodes: 1, RunMin: ptr(3000), Segments: 3, SegmentMin: 1440,
				WaitWhy: "queue wait unknown: no model", CostBasis: "no rate for k80"},
			{Partition: "debug", Debug: true, GPUType: "v100", Fits: "no", Why: []string{"needs 60m, MaxTime 30m"}},
		},
		Fastest:  &wire.Plan{Partition: "gpu", GPUType: "v100", Why: "finishes first"},
		Cheapest: &wire.Plan{Partition: "gpu", GPUType: "k80", Why: "costs least", Segments: 3},
		Notes:    []string{"a note"},
	}
	var b bytes.Buffer
	if err := Build(req, rep).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `job: 1 GPU(s), 1 core(s), 36000 steps

PARTITION      TYPE  FITS  NODES  STEPS/S  RUN      CHAIN           WAIT NOW  FINISH   COST
gpu            v100  yes   1      10       60m      -               30s       60m      3.02 SU
gpu            k80   yes   1      unknown  2.1d     3 x 1-00:00:00  unknown   unknown  unknown
debug (debug)  v100  no    0      unknown  unknown  unknown         unknown   unknown  unknown

  gpu/k80: queue wait unknown: no model
  gpu/k80: no rate for k80
  debug/v100: needs 60m, MaxTime 30m

fastest:  v100 on gpu: finishes first
cheapest: k80 on gpu: costs least
          as a chain of 3 jobs, each within its time limit
note: a note
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// FuzzRequest: no script or field makes Request panic, and a request it
// accepts always asks for GPUs.
func FuzzRequest(f *testing.F) {
	f.Add([]byte("#SBATCH --gres=gpu:1\n"), "v100:1", "1:00", "1G", uint(0))
	f.Add([]byte("#SBATCH -G 2 -p a,b\n#SBATCH --rota-throughput=k80:0.5\n"), "", "", "", uint(1))
	f.Add([]byte{}, "x:y", "-1", "-5T", uint(3))
	f.Fuzz(func(t *testing.T, script []byte, tput, tl, mem string, gpus uint) {
		req, _, err := Request(script, "", Fields{GPUs: gpus, Throughput: tput, Time: tl, Mem: mem})
		if err == nil && req.GPUsPerNode == 0 && req.GPUsPerJob == 0 && req.GPUsPerTask == 0 {
			t.Fatalf("accepted a request without GPUs: %+v", req)
		}
	})
}
