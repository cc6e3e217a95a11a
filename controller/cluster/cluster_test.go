package cluster

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

func TestUsable(t *testing.T) {
	for s, want := range map[string]bool{
		"idle": true, "mixed": true, "allocated": true, "completing": true, "planned": true,
		"down": false, "drained": false, "idle+drain": false, "mixed*": true, "down*": false,
		"draining": false, "invalid": false, "idle~": true, "unknown": false,
		"reserved": false, "idle+reserved": false, "mixed+reserved": false,
	} {
		if got := Usable(s); got != want {
			t.Errorf("Usable(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestBuild(t *testing.T) {
	nodes := []slurm.Node{
		{Name: "a1", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"v100": 4}, GPUsUsed: map[string]int{"v100": 1}},
		{Name: "a2", State: "mixed", Partitions: []string{"gpu", "debug"}, GPUs: map[string]int{"v100": 8}, GPUsUsed: map[string]int{"v100": 8}},
		{Name: "b1", State: "down", Partitions: []string{"gpu"}, GPUs: map[string]int{"k80": 4}},
		{Name: "c1", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"p100": 2, "": 1}},
	}
	parts := []slurm.Partition{{Name: "debug", MaxTimeMin: 60}, {Name: "gpu", Default: true, MaxTimeMin: 2880}}
	s := Build(time.Unix(0, 0), nodes, parts)
	if s.DefaultPartition != "gpu" {
		t.Fatalf("default partition %q", s.DefaultPartition)
	}
	v := s.Types["v100"]
	if v == nil || v.Nodes != 2 || v.Total != 12 || v.Used != 9 || v.Free() != 3 || v.MaxPerNode != 8 || !v.Partitions["debug"] {
		t.Fatalf("v100 %+v", v)
	}
	if _, ok := s.Types["k80"]; ok {
		t.Fatal("a down node's GPUs must not count")
	}
	if got := s.TypeNames(); len(got) != 2 || got[0] != "p100" || got[1] != "v100" {
		t.Fatalf("types %v", got)
	}
}

func TestByFeature(t *testing.T) {
	node := func(name, typ string, feats ...string) slurm.Node {
		return slurm.Node{Name: name, State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{typ: 4}, Features: feats}
	}
	for _, c := range []struct {
		name  string
		nodes []slurm.Node
		want  bool
	}{
		{"every node has its type", []slurm.Node{node("a", "v100", "v100", "ib"), node("b", "k80", "k80")}, true},
		{"one node lacks it", []slurm.Node{node("a", "v100", "v100"), node("b", "k80", "ib")}, false},
		{"down node lacks it too", []slurm.Node{node("a", "v100", "v100"), {Name: "b", State: "down", GPUs: map[string]int{"k80": 2}}}, false},
		{"no GPU types", []slurm.Node{{Name: "c", State: "idle", GPUs: map[string]int{}}}, false},
		{"untyped GPUs are not asked for", []slurm.Node{node("a", "v100", "v100"), {Name: "u", State: "idle", GPUs: map[string]int{"": 2}}}, true},
	} {
		if got := Build(time.Now(), c.nodes, nil).ByFeature; got != c.want {
			t.Errorf("%s: ByFeature=%v, want %v", c.name, got, c.want)
		}
	}
}

// TestTypeByFeature: each type is chosen by constraint only where the
// constraint reaches GPUs of that type and no others: every node of it
// carries it as a feature, and every node with the feature has it alone.
// A MIG node carries its model (a100), never its slice types.
func TestTypeByFeature(t *testing.T) {
	t.Parallel()
	node := func(name string, gpus map[string]int, feats ...string) slurm.Node {
		return slurm.Node{Name: name, State: "idle", Partitions: []string{"gpu"}, GPUs: gpus, Features: feats}
	}
	one := func(typ string) map[string]int { return map[string]int{typ: 4} }
	mig := map[string]int{"a100_3g.20gb": 2, "a100_2g.10gb": 2, "a100_1g.5gb": 4}
	for _, c := range []struct {
		name  string
		nodes []slurm.Node
		by    string // the types chosen by feature, sorted
		all   bool   // Snapshot.ByFeature
	}{
		{"every node has its type", []slurm.Node{node("a", one("v100"), "v100", "ib"), node("b", one("k80"), "k80")}, "k80,v100", true},
		{"a MIG node beside whole GPUs", []slurm.Node{node("a", one("v100"), "v100"), node("b", one("k80"), "k80"), node("m", mig, "a100")},
			"k80,v100", false},
		{"one node of a type lacks it", []slurm.Node{node("a", one("v100"), "v100"), node("b", one("v100")), node("c", one("k80"), "k80")}, "k80", false},
		{"a node with the feature holds other GPUs too", []slurm.Node{node("a", one("v100"), "v100"), node("b", map[string]int{"v100": 2, "k80": 2}, "v100", "k80")},
			"", false},
		{"a node with the feature holds untyped GPUs too", []slurm.Node{node("a", one("v100"), "v100"), node("b", map[string]int{"v100": 2, "": 2}, "v100")},
			"", false},
		{"a CPU node with the feature", []slurm.Node{node("a", one("v100"), "v100"), node("c", nil, "v100")}, "v100", true},
	} {
		s := Build(time.Now(), c.nodes, nil)
		var by []string
		for _, typ := range s.TypeNames() {
			if s.TypeByFeature(typ) {
				by = append(by, typ)
			}
			if v := s.View(); v.TypeByFeature(typ) != s.TypeByFeature(typ) {
				t.Errorf("%s: %s: the plugin's view says %v", c.name, typ, v.TypeByFeature(typ))
			}
		}
		if got := strings.Join(by, ","); got != c.by || s.ByFeature != c.all {
			t.Errorf("%s: by feature %q (all %v), want %q (all %v)", c.name, got, s.ByFeature, c.by, c.all)
		}
		s.GresOnly()
		for _, typ := range s.TypeNames() {
			if s.TypeByFeature(typ) || s.View().TypeByFeature(typ) {
				t.Errorf("%s: %s by feature after GresOnly", c.name, typ)
			}
		}
	}
}

// Build groups each type's usable nodes per partition by GPU count and
// features, most GPUs first: what the placement rule checks a job's
// shape against. Too many kinds of nodes merge by GPU count alone.
func TestShapes(t *testing.T) {
	t.Parallel()
	node := func(name string, gpus int, parts []string, feats ...string) slurm.Node {
		return slurm.Node{Name: name, State: "idle", Partitions: parts, GPUs: map[string]int{"v100": gpus}, Features: feats}
	}
	gpu, both := []string{"gpu"}, []string{"gpu", "debug"}
	s := Build(time.Unix(0, 0), []slurm.Node{
		node("a1", 4, gpu, "v100", "ib"), node("a2", 4, both, "ib", "v100"), node("a3", 8, gpu, "v100"),
		node("a4", 2, both, "v100"), {Name: "a5", State: "down", Partitions: gpu, GPUs: map[string]int{"v100": 16}},
	}, nil)
	want := map[string][]wire.NodeGroup{
		"gpu": {{GPUs: 8, Nodes: 1, Features: []string{"v100"}}, {GPUs: 4, Nodes: 2, Features: []string{"ib", "v100"}},
			{GPUs: 2, Nodes: 1, Features: []string{"v100"}}},
		"debug": {{GPUs: 4, Nodes: 1, Features: []string{"ib", "v100"}}, {GPUs: 2, Nodes: 1, Features: []string{"v100"}}},
	}
	if got := s.Types["v100"].Shapes; !reflect.DeepEqual(got, want) {
		t.Fatalf("shapes %+v\nwant %+v", got, want)
	}

	var many []slurm.Node
	for i := range maxGroups + 1 {
		many = append(many, node(fmt.Sprint("r", i), 4-i%2, gpu, fmt.Sprint("rack", i)))
	}
	got := Build(time.Unix(0, 0), many, nil).Types["v100"].Shapes["gpu"]
	if want := []wire.NodeGroup{{GPUs: 4, Nodes: maxGroups/2 + 1}, {GPUs: 3, Nodes: maxGroups / 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%d kinds of node: %+v, want %+v (features left out)", maxGroups+1, got, want)
	}
}

// ShardsPerGPU: the shards each GPU of a type is offered as, only where
// every usable node of the type offers the same per GPU and holds no
// other type.
func TestShardsPerGPU(t *testing.T) {
	t.Parallel()
	node := func(name string, gpus map[string]int, shards int) slurm.Node {
		return slurm.Node{Name: name, State: "idle", Partitions: []string{"gpu"}, GPUs: gpus, Shards: shards}
	}
	for _, c := range []struct {
		name  string
		nodes []slurm.Node
		want  int // v100's
	}{
		{"none", []slurm.Node{node("a", map[string]int{"v100": 4}, 0)}, 0},
		{"two a GPU", []slurm.Node{node("a", map[string]int{"v100": 4}, 8), node("b", map[string]int{"v100": 2}, 4)}, 2},
		{"nodes differ", []slurm.Node{node("a", map[string]int{"v100": 4}, 8), node("b", map[string]int{"v100": 4}, 16)}, 0},
		{"one node without", []slurm.Node{node("a", map[string]int{"v100": 4}, 8), node("b", map[string]int{"v100": 4}, 0)}, 0},
		{"not a whole number a GPU", []slurm.Node{node("a", map[string]int{"v100": 4}, 6)}, 0},
		{"a node of two types", []slurm.Node{node("a", map[string]int{"v100": 2, "k80": 2}, 8)}, 0},
		{"a down node does not count", []slurm.Node{node("a", map[string]int{"v100": 4}, 8),
			{Name: "b", State: "down", Partitions: []string{"gpu"}, GPUs: map[string]int{"v100": 4}}}, 2},
	} {
		if got := Build(time.Now(), c.nodes, nil).Types["v100"].ShardsPerGPU; got != c.want {
			t.Errorf("%s: %d shards a v100, want %d", c.name, got, c.want)
		}
	}
}
