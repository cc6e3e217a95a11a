package main

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/controller/policy/workload"
)

// gavelTable is Gavel's measured table in the shared data folder beside
// the repository (../shared/data), which the tests read at run time; a
// test that needs it fails without it rather than pass untried.
func gavelTable(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../../../shared/data/gavel/simulation_throughputs.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("Gavel's table, ../shared/data beside the repository: %v", err)
	}
	return p
}

func TestStepRate(t *testing.T) {
	table := gavelTable(t)
	cases := []struct {
		name, gpu, model string
		scale            float64
		derive           []string // --derive-type
		want             float64  // Gavel's "null" entry for (model, 1) on gpu, times scale
		basis            string   // how the rate was derived ("" measured)
		err              string
	}{
		{"resnet18 on p100", "p100", "ResNet-18 (batch size 64)", 1, nil, 22.30494387033663, "", ""},
		{"time scale multiplies", "k80", "ResNet-18 (batch size 64)", 100, nil, 705.2080666695425, "", ""},
		{"a3c on v100", "v100", "A3C", 2.5, nil, 7.175767179667988 * 2.5, "", ""},
		{"unknown model", "v100", "ResNet-18 (batch size 63)", 1, nil, 0, "", `no job type "ResNet-18 (batch size 63)"`},
		{"unknown GPU type", "a100", "A3C", 1, nil, 0, "", `no GPU type "a100"`},
		{"derived whole GPU", "a100", "A3C", 1, []string{"a100=v100*2"}, 7.175767179667988 * 2, "v100 x 2 (given)", ""},
		// ResNet-18 on a V100: 24.09 steps/s; an A100 twice that; its
		// 3g.20gb slice 3 of its 7 compute slices.
		{"MIG slice of a derived GPU", "a100_3g.20gb", "ResNet-18 (batch size 64)", 1, []string{"a100=v100*2"},
			24.093231895382736 * 2 * 3 / 7, "v100 x 2 (given) x 3/7 (its share of the a100)", ""},
		{"MIG slice of a GPU nobody derived", "a100_1g.5gb", "A3C", 1, nil, 0, "", `no GPU type "a100_1g.5gb"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			derive, err := workload.ParseDerivations(c.derive)
			if err != nil {
				t.Fatal(err)
			}
			got, basis, err := stepRate(table, c.gpu, c.model, c.scale, derive)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-c.want) > 1e-9*c.want || basis != c.basis {
				t.Fatalf("rate = %v (%q), want %v (%q)", got, basis, c.want, c.basis)
			}
		})
	}
}

// TestSoloTable: a job reads the very same rate, for every job type on
// every type of the cluster, from the solo table as from Gavel's whole one.
func TestSoloTable(t *testing.T) {
	table := gavelTable(t)
	solo := filepath.Join(t.TempDir(), "solo.json")
	types := []string{"v100", "p100", "k80"}
	if err := writeSoloTable(table, solo, types); err != nil {
		t.Fatal(err)
	}
	full, err := workload.Load(table, types)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.JobTypes) == 0 {
		t.Fatal("Gavel's table read with no job types")
	}
	for _, m := range full.JobTypes {
		for _, g := range types {
			want, _, werr := stepRate(table, g, m, 300, nil)
			got, _, gerr := stepRate(solo, g, m, 300, nil)
			if got != want || (werr == nil) != (gerr == nil) {
				t.Fatalf("%s on %s: solo table %v (%v), whole table %v (%v)", m, g, got, gerr, want, werr)
			}
		}
	}
	a, _ := os.Stat(table)
	b, _ := os.Stat(solo)
	if b.Size()*10 > a.Size() {
		t.Errorf("solo table %d bytes against the whole table's %d: it should hold a small part", b.Size(), a.Size())
	}
	if err := writeSoloTable(table, solo, []string{"a100"}); err == nil || !strings.Contains(err.Error(), `no GPU type "a100"`) {
		t.Errorf("a type the table lacks: %v", err)
	}
}

func TestCheckpointRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	good := ckptFile{Job: "42", Model: "A3C", Total: 1000, Step: 417, GPU: "k80", T: 1.5}
	cases := []struct {
		name   string
		mangle func(path string) // nil: the file as written
		job    string
		model  string
		total  uint64
		step   uint64
		err    string
	}{
		{"round trip", nil, "42", "A3C", 1000, 417, ""},
		{"missing file", func(p string) { os.Remove(p) }, "42", "A3C", 1000, 0, "no checkpoint"},
		{"truncated", func(p string) { truncate(t, p, 20) }, "42", "A3C", 1000, 0, "is corrupt"},
		{"empty", func(p string) { truncate(t, p, 0) }, "42", "A3C", 1000, 0, "is corrupt"},
		{"step changed, checksum not", func(p string) { replace(t, p, `"step":417`, `"step":917`) }, "42", "A3C", 1000, 0, "checksum"},
		{"other job", nil, "43", "A3C", 1000, 0, `belongs to job "42"`},
		{"other model", nil, "42", "CycleGAN", 1000, 0, "stale checkpoint"},
		{"other total", nil, "42", "A3C", 2000, 0, "stale checkpoint"},
		{"future version", func(p string) { replace(t, p, `"v":1`, `"v":2`) }, "42", "A3C", 1000, 0, "version 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "42.ckpt")
			if err := writeCheckpoint(path, good); err != nil {
				t.Fatal(err)
			}
			if c.mangle != nil {
				c.mangle(path)
			}
			got, err := readCheckpoint(path, c.job, c.model, c.total)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one containing %q (got step %d)", err, c.err, got.Step)
				}
				if got.Step != 0 {
					t.Fatalf("a refused checkpoint returned step %d", got.Step)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Step != c.step || got.GPU != "k80" {
				t.Fatalf("read %+v, want step %d on k80", got, c.step)
			}
			// No temporary file may be left beside the checkpoint.
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Fatalf("%d files in the checkpoint dir, want 1", len(ents))
			}
		})
	}
	if !errors.Is(func() error { _, err := readCheckpoint(filepath.Join(dir, "none"), "1", "A3C", 1); return err }(), errNoCheckpoint) {
		t.Fatal("a missing checkpoint must be errNoCheckpoint")
	}
}

func truncate(t *testing.T, p string, n int64) {
	t.Helper()
	if err := os.Truncate(p, n); err != nil {
		t.Fatal(err)
	}
}

func replace(t *testing.T, p, old, new string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q: %s", p, old, b)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Recorded from Slurm 22.05.8 on the dev cluster (scontrol show job -d and
// scontrol show node), trimmed.
const (
	jobP100 = `JobId=1 JobName=st-probe.sh
   JobState=RUNNING Reason=None Dependency=(null)
   NodeList=node-p100
   BatchHost=node-p100
   NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   TRES=cpu=1,node=1,billing=1
   JOB_GRES=gpu:p100:1
     Nodes=node-p100 CPU_IDs=0 Mem=0 GRES=gpu:p100:1(IDX:0)
   TresPerNode=gres:gpu:1
`
	jobTwoNodes = `JobId=7
   NumNodes=2
   JOB_GRES=gpu:k80:2,gpu:v100:2
     Nodes=node-k80 CPU_IDs=0 Mem=0 GRES=gpu:k80:2(IDX:0,2),nvme:1
     Nodes=node-v100 CPU_IDs=0 Mem=0 GRES=gpu:v100:2(IDX:1-2)
`
	jobUntyped = `JobId=8
   JOB_GRES=gpu:1
     Nodes=node-p100 CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:0)
`
	nodeP100 = `NodeName=node-p100 Arch=x86_64 CoresPerSocket=1
   AvailableFeatures=p100
   Gres=gpu:p100:4,nvme:1
   NodeAddr=127.0.0.1 NodeHostName=vm Port=18819 Version=22.05.8
`
	nodeMixed = `NodeName=node-x
   Gres=gpu:v100:2(S:0),gpu:k80:2(S:1)
`
	// An untyped gpu:1 on a node of MIG slices, as 22.05.8 shows it.
	jobOnSlice = `JobId=10
   JOB_GRES=gpu:a100_1g.5gb:0,gpu:a100_2g.10gb:0,gpu:a100_3g.20gb:1
     Nodes=node-mig CPU_IDs=0 Mem=0 GRES=gpu:a100_1g.5gb:0(IDX:),gpu:a100_2g.10gb:0(IDX:),gpu:a100_3g.20gb:1(IDX:0)
   TresPerNode=gres:gpu:1
`
	// The same asked as gpu:a100_3g.20gb:1 on 22.05.8 with gres/shard.
	jobNoSlice = `JobId=11
   JOB_GRES=gpu:a100_3g.20gb:0
     Nodes=node-mig CPU_IDs=0 Mem=0 GRES=gpu:a100_3g.20gb:0(IDX:)
   TresPerNode=gres:gpu:a100_3g.20gb:1
`
	nodeMIG = `NodeName=node-mig
   Gres=gpu:a100_1g.5gb:4,gpu:a100_2g.10gb:2,gpu:a100_3g.20gb:2,nvme:1
`
)

func TestDetectGPUType(t *testing.T) {
	cases := []struct {
		name      string
		job, node string
		jobOut    string
		nodeOut   string
		scErr     error
		want, err string
	}{
		{"per-node line", "1", "node-p100", jobP100, "", nil, "p100", ""},
		{"multi-node job, this node's line", "7", "node-v100", jobTwoNodes, "", nil, "v100", ""},
		{"multi-node job, other node", "7", "node-k80", jobTwoNodes, "", nil, "k80", ""},
		{"multi-node job, node not named", "7", "", jobTwoNodes, "", nil, "", "several GPU types (k80, v100)"},
		{"untyped job, node has one type", "8", "node-p100", jobUntyped, nodeP100, nil, "p100", ""},
		{"untyped job, node has two types", "8", "node-x", jobUntyped, nodeMixed, nil, "", "has several (k80, v100)"},
		{"untyped job, no node name", "8", "", jobUntyped, "", nil, "", "SLURMD_NODENAME is not set"},
		{"not in Slurm", "", "", "", "", nil, "", "SLURM_JOB_ID is not set"},
		{"scontrol fails", "9", "node-p100", "", "", errors.New("Invalid job id specified"), "", "Invalid job id specified"},
		{"MIG node, the slice held", "10", "node-mig", jobOnSlice, nodeMIG, nil, "a100_3g.20gb", ""},
		// 22.05 with gres/shard in the cluster: no GPU given at all.
		{"MIG node, no GPU given", "11", "node-mig", jobNoSlice, nodeMIG, nil, "", "holds no GPU of a type (its GRES: gpu:a100_3g.20gb:0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := func(_ context.Context, args ...string) ([]byte, error) {
				if c.scErr != nil {
					return nil, c.scErr
				}
				switch strings.Join(args[:2], " ") {
				case "show job":
					if args[2] != "-d" || args[3] != c.job {
						t.Fatalf("scontrol %q", args)
					}
					return []byte(c.jobOut), nil
				case "show node":
					if args[2] != c.node {
						t.Fatalf("scontrol %q", args)
					}
					return []byte(c.nodeOut), nil
				}
				t.Fatalf("unexpected scontrol %q", args)
				return nil, nil
			}
			got, err := detectGPUType(context.Background(), sc, c.job, c.node)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestGPUTypes(t *testing.T) {
	cases := []struct{ in, want string }{
		{"gpu:p100:1(IDX:0)", "p100"},
		{"gpu:V100:2(IDX:0,2),nvme:1", "v100"},
		{"nvme:1,gpu:k80:4(S:0-1)", "k80"},
		{"gpu:2", ""},
		{"gpu:(null):1", ""},
		{"(null)", ""},
		{"", ""},
		{"gpu:a:1(IDX:0,1),gpu:b:1(IDX:2)", "a,b"},
		// An untyped gpu:1 on a MIG node, as 22.05 shows it (scontrol -d).
		{"gpu:a100_1g.5gb:1(IDX:0),gpu:a100_2g.10gb:0(IDX:),gpu:a100_3g.20gb:0(IDX:)", "a100_1g.5gb"},
		{"gpu:a100_1g.5gb:1,gpu:a100_2g.10gb:0,gpu:a100_3g.20gb:0", "a100_1g.5gb"},
	}
	for _, c := range cases {
		if got := strings.Join(gpuTypes(c.in), ","); got != c.want {
			t.Errorf("gpuTypes(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
