package slurm

import (
	"maps"
	"testing"
)

// A node's type: the typed GPUs it has most of (by name when even),
// never an untyped or empty entry.
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
		{"mixed: the most", map[string]int{"a100": 1, "a100_3g.20gb": 4}, "a100_3g.20gb"},
		{"mixed, even: by name", map[string]int{"p100": 2, "k80": 2}, "k80"},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := NodeType(tc.gpus); got != tc.want {
				t.Errorf("NodeType(%v) = %q, want %q", tc.gpus, got, tc.want)
			}
		})
	}
	got := NodeTypes([]Node{{Name: "a", GPUs: map[string]int{"v100": 2}}, {Name: "b", GPUs: map[string]int{"": 2}}, {Name: "c"}})
	if want := map[string]string{"a": "v100"}; !maps.Equal(got, want) {
		t.Errorf("NodeTypes = %v, want %v", got, want)
	}
}

// A job's type, with one precedence for everyone: where it runs (a job
// that started), else its constraint, else its request's one type.
func TestJobGPUType(t *testing.T) {
	t.Parallel()
	nodeType := map[string]string{"n-v100": "v100", "n-k80": "k80"}
	types := []string{"v100", "p100", "k80"}
	for _, tc := range []struct {
		name string
		job  Job
		want string
	}{
		{"running: its node, whatever it asked", Job{State: "RUNNING", Nodes: []string{"n-v100"}, Features: "k80", TresPerNode: "gres/gpu:p100:1"}, "v100"},
		{"ended: its node", Job{State: "COMPLETED", Nodes: []string{"n-k80"}, TresPerNode: "gres/gpu:1"}, "k80"},
		{"running on a node of no type: its constraint", Job{State: "RUNNING", Nodes: []string{"cpu1"}, Features: "p100", TresPerNode: "gres/gpu:1"}, "p100"},
		{"pending: the constraint before the request", Job{State: "PENDING", Features: "k80", TresPerNode: "gres/gpu:v100:1"}, "k80"},
		{"pending, nodes listed: not where it runs", Job{State: "PENDING", Nodes: []string{"n-v100"}, TresPerNode: "gres/gpu:k80:1"}, "k80"},
		{"pending: the request's one type", Job{State: "PENDING", TresPerNode: "gres/gpu:p100:2"}, "p100"},
		{"a constraint that names no type", Job{State: "PENDING", Features: "ib", TresPerNode: "gres/gpu:v100:1"}, "v100"},
		{"an or of types: none", Job{State: "PENDING", Features: "v100|p100", TresPerNode: "gres/gpu:1"}, ""},
		{"untyped", Job{State: "PENDING", TresPerNode: "gres/gpu:1"}, ""},
		{"no GPUs", Job{State: "PENDING"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.job.GPUType(nodeType, types); got != tc.want {
				t.Errorf("GPUType = %q, want %q", got, tc.want)
			}
		})
	}
}
