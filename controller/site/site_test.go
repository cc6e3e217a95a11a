package site

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/conf"
	"github.com/rota-hpc/rota/wire"
)

func readConfig(t *testing.T, text string) (Config, error) {
	t.Helper()
	v, err := conf.Parse(strings.NewReader(text), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ReadConfig(v)
	if err == nil {
		err = v.Err()
	}
	return c, err
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// devSite builds the knowledge base from output captured on the dev
// cluster (three nodes, partition gpu and a debug partition created with
// `scontrol create PartitionName=debug Nodes=node-v100,node-k80 MaxTime=30
// MaxNodes=1 MaxCPUsPerNode=8 DefaultTime=10`).
func devSite(t *testing.T, cfg Config) *wire.Site {
	t.Helper()
	parts, err := slurm.ParsePartitions(mustRead(t, "scontrol-show-partition.txt"))
	if err != nil {
		t.Fatal(err)
	}
	details, err := slurm.ParseNodeDetails(mustRead(t, "scontrol-show-node.txt"))
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := slurm.ParseSinfoNodes(mustRead(t, "sinfo-nodes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return Build(Inputs{At: time.Unix(0, 0), Partitions: parts, Nodes: nodes, Details: details, Config: cfg,
		Speed: map[string]float64{"v100": 3.36}, AgentMemory: map[string]uint64{"k80": 12 << 30}})
}

func TestBuildFromDevCluster(t *testing.T) {
	cfg, err := readConfig(t, "debug_partitions = debug\ngpu_mem.v100 = 32GiB\ncharge.gpu_hour = 1\n")
	if err != nil {
		t.Fatal(err)
	}
	s := devSite(t, cfg)
	if len(s.Partitions) != 2 || len(s.Nodes) != 3 || len(s.GPUTypes) != 3 {
		t.Fatalf("partitions %d nodes %d types %d, want 2 3 3", len(s.Partitions), len(s.Nodes), len(s.GPUTypes))
	}
	debug, ok := Partition(s, "debug")
	if !ok || !debug.Debug || debug.MaxTimeMin != 30 || debug.DefaultTimeMin != 10 || debug.MaxNodes != 1 ||
		debug.MinNodes != 1 || debug.MaxCPUsPerNode != 8 || debug.TotalNodes != 2 || debug.TotalCPUs != 32 || debug.State != "UP" {
		t.Errorf("debug partition: %+v", debug)
	}
	if len(debug.Types) != 2 || debug.Types[0].Type != "k80" || debug.Types[1].Type != "v100" {
		t.Errorf("debug types: %+v", debug.Types)
	}
	gpu, _ := Partition(s, "gpu")
	if gpu.Debug || !gpu.Default || gpu.MaxTimeMin != 2*24*60 || gpu.MaxNodes != 0 || len(gpu.Types) != 3 {
		t.Errorf("gpu partition: %+v", gpu)
	}
	for _, pt := range gpu.Types {
		if pt.Nodes != 1 || pt.GPUs != 4 || pt.MaxPerNode != 4 || pt.MinCPUsPerNode != 16 || pt.MinMemPerNodeMB != 16000 {
			t.Errorf("gpu/%s: %+v", pt.Type, pt)
		}
	}
	want := map[string]struct {
		mem uint64
		src string
	}{"k80": {12 << 30, "agents"}, "p100": {0, "unknown"}, "v100": {32 << 30, "config"}}
	for _, g := range s.GPUTypes {
		if w := want[g.Type]; g.MemoryBytes != w.mem || g.MemorySource != w.src {
			t.Errorf("%s memory %d from %s, want %d from %s", g.Type, g.MemoryBytes, g.MemorySource, w.mem, w.src)
		}
	}
	for _, n := range s.Nodes {
		if n.CPUs != 16 || n.RealMemoryMB != 16000 || !n.Usable {
			t.Errorf("node %+v", n)
		}
	}
}

func TestBuildWithoutDetails(t *testing.T) {
	nodes, err := slurm.ParseSinfoNodes(mustRead(t, "sinfo-nodes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	parts, _ := slurm.ParsePartitions(mustRead(t, "scontrol-show-partition.txt"))
	// One node drained: its GPUs leave the partition's types.
	nodes[0].State = "idle+drain"
	s := Build(Inputs{Partitions: parts, Nodes: nodes})
	gpu, _ := Partition(s, "gpu")
	for _, pt := range gpu.Types {
		if pt.MinCPUsPerNode != 0 || pt.MinMemPerNodeMB != 0 {
			t.Errorf("sizes without node details must be unknown (0): %+v", pt)
		}
		if pt.Type == nodes[0].Name[len("node-"):] {
			t.Errorf("drained node's type %s still listed", pt.Type)
		}
	}
	if len(gpu.Types) != 2 {
		t.Errorf("types %+v, want 2 after draining one node", gpu.Types)
	}
}

func TestReadConfig(t *testing.T) {
	tests := []struct {
		name, text string
		rates      []wire.Rate
		err        string
	}{
		{"all scopes", `charge.unit = SU
charge.gpu_hour = 1
charge.gpu_hour.type.v100 = 3
charge.gpu_hour.partition.gpu = 2
charge.gpu_hour.partition.gpu.type.v100 = 4
charge.core_hour.partition.cpu = 0.05
`, []wire.Rate{{Resource: "gpu", PerHour: 1}, {Resource: "gpu", GPUType: "v100", PerHour: 3},
			{Resource: "gpu", Partition: "gpu", PerHour: 2}, {Resource: "gpu", Partition: "gpu", GPUType: "v100", PerHour: 4},
			{Resource: "core", Partition: "cpu", PerHour: 0.05}}, ""},
		{"partition name with dots", "charge.gpu_hour.partition.a.b.type.k80 = 1\n",
			[]wire.Rate{{Resource: "gpu", Partition: "a.b", GPUType: "k80", PerHour: 1}}, ""},
		{"bad scope", "charge.gpu_hour.queue.gpu = 1\n", nil, "want charge.gpu_hour"},
		{"typo in resource", "charge.gpu_hours = 1\n", nil, "want charge.gpu_hour"},
		{"negative rate", "charge.core_hour = -1\n", nil, "want a number in [0"},
		{"not a number", "charge.gpu_hour.type.v100 = cheap\n", nil, "want a number"},
		{"bad type name", "charge.gpu_hour.type.v1:00 = 1\n", nil, "v1:00"},
		{"bad gpu memory", "gpu_mem.v100 = lots\n", nil, "want a size"},
		{"empty partition", "charge.gpu_hour.partition..type.v100 = 1\n", nil, "want charge.gpu_hour"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := readConfig(t, tc.text)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[wire.Rate]bool{}
			for _, r := range c.Rates {
				got[r] = true
			}
			if len(got) != len(tc.rates) {
				t.Fatalf("rates %+v, want %+v", c.Rates, tc.rates)
			}
			for _, r := range tc.rates {
				if !got[r] {
					t.Errorf("missing rate %+v in %+v", r, c.Rates)
				}
			}
		})
	}
}

func TestCostPrecedence(t *testing.T) {
	all := []wire.Rate{
		{Resource: GPU, PerHour: 1},
		{Resource: GPU, Partition: "gpu", PerHour: 2},
		{Resource: GPU, GPUType: "v100", PerHour: 3},
		{Resource: GPU, Partition: "gpu", GPUType: "v100", PerHour: 4},
		{Resource: Core, PerHour: 0.1},
		{Resource: Core, Partition: "big", PerHour: 0.2},
	}
	tests := []struct {
		name       string
		rates      []wire.Rate
		part, typ  string
		gpus, cpus int
		hours      float64
		want       float64
		ok         bool
		basis      string
	}{
		{"partition+type beats all", all, "gpu", "v100", 2, 4, 10, 10 * (2*4 + 4*0.1), true, "gpu/v100"},
		{"type beats partition", all, "other", "v100", 1, 0, 2, 2 * 3, true, "type v100"},
		{"partition beats site-wide", all, "gpu", "k80", 1, 0, 1, 2, true, "partition gpu"},
		{"site-wide last", all, "other", "k80", 1, 0, 1, 1, true, "site-wide"},
		{"core rate by partition", all, "big", "k80", 1, 10, 1, 1 + 10*0.2, true, "partition big"},
		{"names compare without case", all, "GPU", "V100", 1, 0, 1, 4, true, "GPU/V100"},
		{"no rates at all: unknown, not 0", nil, "gpu", "v100", 1, 1, 1, 0, false, "no charging rates"},
		{"charged elsewhere only: unknown", []wire.Rate{{Resource: GPU, GPUType: "a100", PerHour: 5}}, "gpu", "v100", 1, 1, 1, 0, false, "no GPU-hour rate"},
		{"cores never charged: free", []wire.Rate{{Resource: GPU, PerHour: 2}}, "gpu", "v100", 1, 64, 3, 6, true, "1 GPU"},
		{"explicit zero rate is free", []wire.Rate{{Resource: GPU, GPUType: "k80", PerHour: 0}}, "gpu", "k80", 4, 0, 5, 0, true, "k80"},
		{"negative hours refused", all, "gpu", "v100", 1, 1, -1, 0, false, "no run time"},
		{"NaN hours refused", all, "gpu", "v100", 1, 1, math.NaN(), 0, false, "no run time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, basis, ok := Cost(wire.Charging{Rates: tc.rates}, tc.part, tc.typ, tc.gpus, tc.cpus, tc.hours)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 || !strings.Contains(basis, tc.basis) {
				t.Errorf("Cost = %v, %q, %v; want %v, ~%q, %v", got, basis, ok, tc.want, tc.basis, tc.ok)
			}
		})
	}
}
