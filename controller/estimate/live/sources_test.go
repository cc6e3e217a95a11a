package live

import (
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// A request's GPUs are counted as placement counts them, whichever form
// it takes.
func TestGPUsAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  wire.EstimateRequest
		want int
	}{
		{"nothing asked", wire.EstimateRequest{}, 1},
		{"per job", wire.EstimateRequest{GPUsPerJob: 3, Nodes: 2}, 3},
		{"per node, one node", wire.EstimateRequest{GPUsPerNode: 4}, 4},
		{"per node on two nodes", wire.EstimateRequest{GPUsPerNode: 4, Nodes: 2}, 8},
		{"per task, tasks given", wire.EstimateRequest{GPUsPerTask: 1, Tasks: 3}, 3},
		{"per task, a task per node", wire.EstimateRequest{GPUsPerTask: 2, Nodes: 2}, 4},
		{"per task and per job: the larger", wire.EstimateRequest{GPUsPerTask: 1, Tasks: 2, GPUsPerJob: 4}, 4},
	} {
		if got := gpusAsked(&tc.req); got != tc.want {
			t.Errorf("%s: %d GPUs, want %d", tc.name, got, tc.want)
		}
	}
}
