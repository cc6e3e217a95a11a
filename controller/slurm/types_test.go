package slurm

import (
	"maps"
	"testing"
)

// A node's type: its one typed GPU type, never an untyped or empty entry;
// none for a node of several types (MIG slices of different sizes: the
// job's request says which it has).
func TestNodeType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gpus map[string]int
		want string
	}{
		{"one type", map[string]int{"v100": 4}, "v100"},
		{"untyped only", map[string]int{"": 4}, ""},
		{"untyped beside typed", map[string]int{"": 8, "k80": 2}, "k80"},
		{"a type configured with none", map[string]int{"v100": 0}, ""},
		{"MIG slices of two sizes: none", map[string]int{"a100_1g.5gb": 4, "a100_3g.20gb": 2}, ""},
		{"mixed whole types: none", map[string]int{"p100": 2, "k80": 2}, ""},
		{"one slice type", map[string]int{"a100_1g.5gb": 7}, "a100_1g.5gb"},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := NodeType(tc.gpus); got != tc.want {
				t.Errorf("NodeType(%v) = %q, want %q", tc.gpus, got, tc.want)
			}
		})
	}
	got := NodeTypes([]Node{{Name: "a", GPUs: map[string]int{"v100": 2}}, {Name: "b", GPUs: map[string]int{"": 2}}, {Name: "c"},
		{Name: "mig", GPUs: map[string]int{"a100_3g.20gb": 2, "a100_1g.5gb": 4}}})
	if want := map[string]string{"a": "v100"}; !maps.Equal(got, want) {
		t.Errorf("NodeTypes = %v, want %v", got, want)
	}
}

// A job's type, with one precedence for everyone: where it runs (a job
// that started), else its constraint, else its request's one type.
func TestJobGPUType(t *testing.T) {
	t.Parallel()
	nodeType := NodeTypes([]Node{{Name: "n-v100", GPUs: map[string]int{"v100": 4}}, {Name: "n-k80", GPUs: map[string]int{"k80": 4}},
		{Name: "mig", GPUs: map[string]int{"a100_3g.20gb": 2, "a100_1g.5gb": 4}}})
	types := []string{"v100", "p100", "k80", "a100_3g.20gb", "a100_1g.5gb"}
	for _, tc := range []struct {
		name string
		job  Job
		want string
	}{
		{"running: its node, whatever it asked", Job{State: "RUNNING", Nodes: []string{"n-v100"}, Features: "k80", TresPerNode: "gres/gpu:p100:1"}, "v100"},
		{"ended: its node", Job{State: "COMPLETED", Nodes: []string{"n-k80"}, TresPerNode: "gres/gpu:1"}, "k80"},
		{"running on a node of no type: its constraint", Job{State: "RUNNING", Nodes: []string{"cpu1"}, Features: "p100", TresPerNode: "gres/gpu:1"}, "p100"},
		{"running on a node of MIG slices: the slice it asked", Job{State: "RUNNING", Nodes: []string{"mig"}, Features: "a100", TresPerNode: "gres/gpu:a100_3g.20gb:1"}, "a100_3g.20gb"},
		{"pending: the constraint before the request", Job{State: "PENDING", Features: "k80", TresPerNode: "gres/gpu:v100:1"}, "k80"},
		{"pending, nodes listed: not where it runs", Job{State: "PENDING", Nodes: []string{"n-v100"}, TresPerNode: "gres/gpu:k80:1"}, "k80"},
		{"pending: the request's one type", Job{State: "PENDING", TresPerNode: "gres/gpu:p100:2"}, "p100"},
		{"a constraint that names no type", Job{State: "PENDING", Features: "ib", TresPerNode: "gres/gpu:v100:1"}, "v100"},
		{"an or of types: none", Job{State: "PENDING", Features: "v100|p100", TresPerNode: "gres/gpu:1"}, ""},
		{"untyped", Job{State: "PENDING", TresPerNode: "gres/gpu:1"}, ""},
		{"no GPUs", Job{State: "PENDING"}, ""},
		{"pending on typed shards: their type", Job{State: "PENDING", TresPerNode: "gres/shard:v100:1"}, "v100"},
		{"pending on shards under a constraint", Job{State: "PENDING", Features: "v100", TresPerNode: "gres/shard:1"}, "v100"},
		{"pending on untyped shards", Job{State: "PENDING", TresPerNode: "gres/shard:1"}, ""},
		{"running on shards: its node", Job{State: "RUNNING", Nodes: []string{"n-k80"}, TresPerNode: "gres/shard:v100:1"}, "k80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.job.GPUType(nodeType, types); got != tc.want {
				t.Errorf("GPUType = %q, want %q", got, tc.want)
			}
		})
	}
}
