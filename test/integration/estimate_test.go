//go:build integration

package integration

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/wire"
)

// TestEstimate runs `rota estimate` on real job scripts against the dev
// cluster's controller, with Gavel's throughput table (--model), the dev
// config's charging rates, a queue-wait model trained on the Lonestar6
// trace, and a debug partition created for the test.
func TestEstimate(t *testing.T) {
	dir := t.TempDir()
	rota := filepath.Join(repo, "bin/rota")
	trace := filepath.Join(repo, "..", "shared", "data", "traces", "lonestar6-a100-sacct.tsv")
	model := filepath.Join(devDir, "queuewait-test.json")
	if out, err := run(rota, "queuewait", "train", "--trace", trace, "--out", model, "--trees", "100"); err != nil {
		t.Fatalf("queuewait train: %v\n%s", err, out)
	}
	// The controller reads the model at start.
	restartController(t, "ROTA_DEV_QUEUEWAIT_MODEL="+model)
	// The plugin reconnects by itself; later tests submit through it.
	t.Cleanup(func() {
		if err := waitPlaced(); err != nil {
			t.Error(err)
		}
	})
	if out, err := run("scontrol", "create", "PartitionName=debug", "Nodes="+node("v100")+","+node("k80"), "MaxTime=30", "MaxNodes=1", "State=UP"); err != nil {
		t.Fatalf("scontrol create partition: %v\n%s", err, out)
	}
	t.Cleanup(func() { run("scontrol", "delete", "PartitionName=debug") })

	// The controller re-reads Slurm every 10 s on the dev cluster.
	var st wire.Site
	var statusOut string
	var statusErr error
	shown := false
	defer func() {
		if !shown {
			t.Logf("the last rota status --site: %v\n%s", statusErr, statusOut)
		}
	}()
	eventually.True(t, 40*time.Second, "rota status --site to show the debug partition", func() bool {
		statusOut, statusErr = run(rota, "status", "--nats", natsURL, "--site", "--json")
		st = wire.Site{}
		return statusErr == nil && json.Unmarshal([]byte(statusOut), &st) == nil && len(st.Partitions) == 2
	})
	shown = true
	if !strings.Contains(st.QueueWait, "queuewait-test.json") {
		t.Errorf("queue wait: %q, want the model", st.QueueWait)
	}
	for _, p := range st.Partitions {
		switch p.Name {
		case "debug":
			if !p.Debug || p.MaxTimeMin != 30 || p.MaxNodes != 1 || len(p.Types) != 2 {
				t.Errorf("debug partition %+v", p)
			}
		case "gpu":
			if p.Debug || !p.Default || p.MaxTimeMin != 2880 || len(p.Types) != 3 {
				t.Errorf("gpu partition %+v", p)
			}
		}
	}
	for _, n := range st.Nodes {
		if n.CPUs != 16 || n.RealMemoryMB != 16000 {
			t.Errorf("node %s: %d CPUs, %d MB (dev cluster: 16, 16000)", n.Name, n.CPUs, n.RealMemoryMB)
		}
	}

	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	estimate := func(args ...string) wire.EstimateReply {
		t.Helper()
		out, err := run(rota, append([]string{"estimate", "--nats", natsURL, "--json"}, args...)...)
		if err != nil {
			t.Fatalf("rota estimate %v: %v\n%s", args, err, out)
		}
		var rep wire.EstimateReply
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("rota estimate %v: %v\n%s", args, err, out)
		}
		return rep
	}
	row := func(rep wire.EstimateReply, part, typ string) wire.EstimateRow {
		t.Helper()
		for _, r := range rep.Rows {
			if r.Partition == part && r.GPUType == typ {
				return r
			}
		}
		t.Fatalf("no row %s/%s: %+v", part, typ, rep.Rows)
		return wire.EstimateRow{}
	}
	const resnet = "ResNet-50 (batch size 64)"

	// A short job: fits everywhere, v100 fastest; the debug partition
	// may be recommended (no chain); cost = hours x (1 GPU x type rate +
	// 1 core x 0.02), the dev config's rates.
	short := write("short.sh", "#!/bin/bash\n#SBATCH --job-name=short\n#SBATCH --gres=gpu:1\n#SBATCH --rota-steps=1000\nsrun true\n")
	rep := estimate(short, "--model", resnet)
	if len(rep.Rows) != 5 {
		t.Fatalf("%d rows, want 5 (gpu x 3 types, debug x 2)", len(rep.Rows))
	}
	rates := map[string]float64{"v100": 3, "p100": 2, "k80": 1}
	for _, r := range rep.Rows {
		if r.Fits != "yes" || r.RunMin == nil || r.Segments != 1 || r.WaitMin == nil || r.Cost == nil || r.FinishMin == nil {
			t.Fatalf("row %+v: want all known and fitting", r)
		}
		want := *r.RunMin / 60 * (rates[r.GPUType] + 0.02)
		if math.Abs(*r.Cost-want) > 1e-9*math.Max(1, want) {
			t.Errorf("%s/%s cost %v, want %v", r.Partition, r.GPUType, *r.Cost, want)
		}
		if math.Abs(*r.FinishMin-(*r.WaitMin+*r.RunMin)) > 1e-9 {
			t.Errorf("%s/%s finish %v != wait %v + run %v", r.Partition, r.GPUType, *r.FinishMin, *r.WaitMin, *r.RunMin)
		}
	}
	v, k := row(rep, "gpu", "v100"), row(rep, "gpu", "k80")
	if !(*v.RunMin < *k.RunMin) || !(*v.StepsPerSec > *k.StepsPerSec) {
		t.Errorf("v100 %v min at %v steps/s, k80 %v min at %v: want v100 faster", *v.RunMin, *v.StepsPerSec, *k.RunMin, *k.StepsPerSec)
	}
	if !row(rep, "debug", "v100").Debug || rep.Fastest == nil || rep.Cheapest == nil {
		t.Errorf("debug flag / plans missing: fastest %+v cheapest %+v", rep.Fastest, rep.Cheapest)
	}

	// A job longer than MaxTime (2 days): a chain on gpu, and debug rows
	// that need a chain are not recommended.
	long := write("long.sh", "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --rota-steps=2000000\nsrun true\n")
	rep = estimate(long, "--model", resnet)
	for _, r := range rep.Rows {
		if r.RunMin == nil {
			t.Fatalf("row %+v: run time unknown", r)
		}
		maxT := 2880.0
		if r.Partition == "debug" {
			maxT = 30
		}
		if want := int(math.Ceil(*r.RunMin / maxT)); r.Segments != want || want < 2 {
			t.Errorf("%s/%s run %.0f min: %d segments, want %d (> 1)", r.Partition, r.GPUType, *r.RunMin, r.Segments, want)
		}
	}
	if rep.Fastest == nil || rep.Fastest.Partition != "gpu" || rep.Fastest.GPUType != "v100" || rep.Fastest.Segments < 2 {
		t.Errorf("fastest %+v: want a chain on gpu/v100", rep.Fastest)
	}
	if !strings.Contains(strings.Join(rep.Notes, " "), "debug partition, would need a chain") {
		t.Errorf("notes %q", rep.Notes)
	}

	// Too big for a node, an unknown model, and no rate: clear answers.
	big := write("big.sh", "#!/bin/bash\n#SBATCH --gpus-per-node=8\n#SBATCH --rota-steps=1000\n#SBATCH --rota-throughput=v100:10\nsrun true\n")
	rep = estimate(big)
	for _, r := range rep.Rows {
		if r.Fits != "no" || !strings.Contains(strings.Join(r.Why, " "), "8 GPUs per node") {
			t.Errorf("8 GPUs per node on %s/%s: %+v", r.Partition, r.GPUType, r)
		}
	}
	if rep.Fastest != nil || rep.Cheapest != nil {
		t.Errorf("plans for a job that fits nowhere: %+v %+v", rep.Fastest, rep.Cheapest)
	}
	if out, err := run(rota, "estimate", "--nats", natsURL, short, "--model", "no such model"); err == nil || !strings.Contains(out, "not in the throughput table") {
		t.Errorf("unknown model: %v\n%s", err, out)
	}
	rep = estimate(short)
	for _, r := range rep.Rows {
		if r.RunMin != nil || r.Cost != nil || r.RunWhy == "" {
			t.Errorf("no rate known, yet %s/%s: %+v", r.Partition, r.GPUType, r)
		}
	}
	out, err := run(rota, "estimate", "--nats", natsURL, long, "--model", resnet)
	if err != nil || !strings.Contains(out, "fastest:") || !strings.Contains(out, "as a chain of") {
		t.Errorf("text output: %v\n%s", err, out)
	}
	t.Logf("rota estimate long.sh --model %q:\n%s", resnet, out)
}
