package placement

import (
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// groups is a quick way to write a type's node groups in one partition.
func groups(gs ...wire.NodeGroup) map[string][]wire.NodeGroup {
	return map[string][]wire.NodeGroup{"gpu": gs}
}

// Holds judges a need against node groups: node count, GPUs per node,
// the total on at most MaxNodes of the largest nodes, the features a
// constraint asks for, and the partitions.
func TestHolds(t *testing.T) {
	t.Parallel()
	g := func(gpus, nodes int, feats ...string) wire.NodeGroup {
		return wire.NodeGroup{GPUs: gpus, Nodes: nodes, Features: feats}
	}
	mixed := wire.TypeView{Shapes: map[string][]wire.NodeGroup{
		"gpu":   {g(8, 1, "ib"), g(4, 2), g(2, 3, "ib")},
		"debug": {g(4, 1)},
	}}
	for _, tc := range []struct {
		name       string
		tv         wire.TypeView
		need       gpureq.Need
		parts, con string
		want       bool
	}{
		{"one node holds it", mixed, gpureq.Need{Nodes: 1, PerNode: 8, Total: 8}, "gpu", "", true},
		{"no node big enough", mixed, gpureq.Need{Nodes: 1, PerNode: 9, Total: 9}, "gpu", "", false},
		{"three nodes of 4", mixed, gpureq.Need{Nodes: 3, PerNode: 4, Total: 12}, "gpu", "", true},
		{"four nodes of 4", mixed, gpureq.Need{Nodes: 4, PerNode: 4, Total: 16}, "gpu", "", false},
		{"total over every node", mixed, gpureq.Need{Nodes: 1, PerNode: 1, Total: 22}, "gpu", "", true},
		{"total too large", mixed, gpureq.Need{Nodes: 1, PerNode: 1, Total: 23}, "gpu", "", false},
		// Three tasks of 2 GPUs: a node of 3 takes one, never 1.5.
		{"tasks do not split over nodes", wire.TypeView{Shapes: groups(g(3, 2))}, gpureq.Need{Nodes: 1, PerNode: 2, Total: 6, Unit: 2}, "gpu", "", false},
		{"tasks in whole units", wire.TypeView{Shapes: groups(g(3, 3))}, gpureq.Need{Nodes: 1, PerNode: 2, Total: 6, Unit: 2}, "gpu", "", true},
		{"total on at most 2 nodes: the largest", mixed, gpureq.Need{Nodes: 2, MaxNodes: 2, PerNode: 1, Total: 12}, "gpu", "", true},
		{"total on at most 2 nodes: too much", mixed, gpureq.Need{Nodes: 2, MaxNodes: 2, PerNode: 1, Total: 13}, "gpu", "", false},
		{"features: all of them", mixed, gpureq.Need{Nodes: 4, PerNode: 2, Total: 8}, "gpu", "ib", true},
		{"features: too few nodes with them", mixed, gpureq.Need{Nodes: 2, PerNode: 4, Total: 8}, "gpu", "ib", false},
		{"features: one missing", mixed, gpureq.Need{Nodes: 1, PerNode: 1, Total: 1}, "gpu", "ib&nvme", false},
		{"features: any of them", mixed, gpureq.Need{Nodes: 4, PerNode: 2, Total: 14}, "gpu", "nvme|ib", true},
		{"features: any of them, too few", mixed, gpureq.Need{Nodes: 5, PerNode: 2, Total: 14}, "gpu", "nvme|ib", false},
		{"features: none of them", mixed, gpureq.Need{Nodes: 1, PerNode: 1, Total: 1}, "gpu", "nvme|opa", false},
		{"constraint beyond the check", mixed, gpureq.Need{Nodes: 1, PerNode: 1, Total: 1}, "gpu", "[ib|opa]", false},
		{"constraint mixing operators", mixed, gpureq.Need{Nodes: 1, PerNode: 1, Total: 1}, "gpu", "ib&a|b", false},
		{"other partition is smaller", mixed, gpureq.Need{Nodes: 2, PerNode: 4, Total: 8}, "debug", "", false},
		{"one of several partitions", mixed, gpureq.Need{Nodes: 2, PerNode: 4, Total: 8}, "debug,gpu", "", true},
		{"unknown partition", mixed, gpureq.Need{Nodes: 1, PerNode: 1, Total: 1}, "cpu", "", false},
		{"any partition", mixed, gpureq.Need{Nodes: 1, PerNode: 8, Total: 8}, "", "", true},
		{"older controller: totals", wire.TypeView{Nodes: 2, Total: 8, MaxPerNode: 4, Partitions: []string{"gpu"}},
			gpureq.Need{Nodes: 2, PerNode: 4, Total: 8}, "gpu", "", true},
		{"older controller: node count", wire.TypeView{Nodes: 1, Total: 8, MaxPerNode: 8, Partitions: []string{"gpu"}},
			gpureq.Need{Nodes: 2, PerNode: 1, Total: 8}, "gpu", "", false},
		{"older controller: partition", wire.TypeView{Nodes: 2, Total: 8, MaxPerNode: 4, Partitions: []string{"gpu"}},
			gpureq.Need{Nodes: 1, PerNode: 1, Total: 1}, "debug", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cv := &wire.ClusterView{Types: map[string]wire.TypeView{"x": tc.tv}}
			if got := Holds(cv, "x", tc.need, tc.parts, tc.con); got != tc.want {
				t.Errorf("Holds(%+v, %q, %q) = %v, want %v", tc.need, tc.parts, tc.con, got, tc.want)
			}
		})
	}
}

// Place chooses only among the types that hold the whole job, and leaves
// a job none holds as asked, saying why; Decide decides the same.
func TestPlaceOnlyWhereItHolds(t *testing.T) {
	t.Parallel()
	one := func(gpus int, feats ...string) map[string][]wire.NodeGroup {
		return groups(wire.NodeGroup{GPUs: gpus, Nodes: 1, Features: feats})
	}
	perType := func() *wire.PlaceState { // the dev cluster: one node of 4 GPUs per type
		s := state()
		s.Cluster.Types = map[string]wire.TypeView{
			"v100": {Nodes: 1, Total: 4, MaxPerNode: 4, Partitions: []string{"gpu"}, Shapes: one(4, "v100")},
			"k80":  {Nodes: 1, Total: 4, MaxPerNode: 4, Partitions: []string{"gpu"}, Shapes: one(4, "k80")},
		}
		return s
	}
	several := func() *wire.PlaceState { // one v100 node of 4, three k80 nodes of 4 with ib
		s := perType()
		s.Cluster.Types["k80"] = wire.TypeView{Nodes: 3, Total: 12, MaxPerNode: 4, Partitions: []string{"gpu"},
			Shapes: groups(wire.NodeGroup{GPUs: 4, Nodes: 3, Features: []string{"ib", "k80"}})}
		return s
	}
	for _, tc := range []struct {
		name     string
		s        func() *wire.PlaceState
		ask      wire.GPUAsk
		features string
		retype   bool
		want     string // "" left as asked
		why      string
	}{
		{"fits everywhere: fastest", perType, wire.GPUAsk{PerNode: 2}, "", false, "v100", "most free GPUs"},
		{"-N2 on one node per type", perType, wire.GPUAsk{PerNode: 2, Nodes: 2, MaxNodes: 2}, "", false, "",
			"no single GPU type has 2 nodes with 2 GPUs each in partition gpu; left as asked"},
		{"--gpus=8 -N2 on one node per type", perType, wire.GPUAsk{PerJob: 8, Nodes: 2, MaxNodes: 2}, "", false, "",
			"no single GPU type has 2 nodes with 8 GPUs in all in partition gpu; left as asked"},
		{"--gpus=8 on one node per type", perType, wire.GPUAsk{PerJob: 8}, "", false, "",
			"no single GPU type has 8 GPUs in all in partition gpu; left as asked"},
		{"-N2 where only k80 has the nodes", several, wire.GPUAsk{PerNode: 2, Nodes: 2, MaxNodes: 2}, "", false, "k80", "of 1 types that fit"},
		{"--gpus=8 -N2 where only k80 has the nodes", several, wire.GPUAsk{PerJob: 8, Nodes: 2, MaxNodes: 2}, "", false, "k80", ""},
		{"--gpus=12 on at most 2 nodes", several, wire.GPUAsk{PerJob: 12, Nodes: 1, MaxNodes: 2}, "", false, "",
			"no single GPU type has 12 GPUs in all on at most 2 nodes in partition gpu; left as asked"},
		{"user's constraint: only k80 has ib", several, wire.GPUAsk{PerNode: 1}, "ib", false, "k80", ""},
		{"user's constraint nobody has", several, wire.GPUAsk{PerNode: 1}, "nvme", false, "",
			"no single GPU type has a node with 1 GPU with features nvme in partition gpu; left as asked"},
		{"constraint Rota cannot judge", several, wire.GPUAsk{PerNode: 1}, "[ib|opa]", false, "",
			`constraint "[ib|opa]" is more than Rota checks nodes against; left as asked`},
		{"per task times tasks per node", several, wire.GPUAsk{PerTask: 2, Tasks: 4, TasksPerNode: 2}, "", false, "k80", ""},
		{"per socket times sockets", perType, wire.GPUAsk{PerSocket: 2, SocketsPerNode: 4}, "", false, "",
			"no single GPU type has a node with 8 GPUs in partition gpu; left as asked"},
		{"typed is kept, even where it does not hold", perType, wire.GPUAsk{PerNode: 2, Nodes: 2, Type: "v100"}, "", false, "", "user named type v100"},
		{"typed, retyping on: only where it holds", several, wire.GPUAsk{PerNode: 2, Nodes: 2, Type: "v100"}, "", true, "k80", ""},
		{"typed, retyping on, nowhere", perType, wire.GPUAsk{PerNode: 2, Nodes: 2, Type: "v100"}, "", true, "",
			"no single GPU type has 2 nodes with 2 GPUs each in partition gpu; left as asked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.s()
			s.Rule.RetypeTyped = tc.retype
			req := &wire.PlaceRequest{GPU: tc.ask, Features: tc.features}
			res := Place(s, nil, req)
			kept := tc.want == ""
			if kept && tc.ask.Type != "" && !tc.retype {
				kept = res.GPUType == "" // typed: the user's type stands
			}
			if res.GPUType != tc.want || (res.Reserve == nil) != kept || !strings.Contains(res.Reason, tc.why) {
				t.Fatalf("placed on %q (reserve %+v) because %q; want %q because %q", res.GPUType, res.Reserve, res.Reason, tc.want, tc.why)
			}
			if d := Decide(s, nil, req); d.GPUType != res.GPUType || (d.Reserve == nil) != (res.Reserve == nil) {
				t.Fatalf("Decide placed on %q, Place on %q", d.GPUType, res.GPUType)
			}
		})
	}
}
