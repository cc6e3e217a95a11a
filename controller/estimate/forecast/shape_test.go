package forecast

import (
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// jobShape counts a request's GPUs as the rest of Rota does
// (gpureq.NeedOf), whatever form it takes, and spreads them per node.
func TestJobShapeCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		req           wire.EstimateRequest
		gpus, perNode int
		nodes         int
	}{
		{"--gres=gpu:2", wire.EstimateRequest{GPUsPerNode: 2}, 2, 2, 1},
		{"--gres=gpu:2 -N3", wire.EstimateRequest{GPUsPerNode: 2, Nodes: 3}, 6, 2, 3},
		{"--gpus=4", wire.EstimateRequest{GPUsPerJob: 4}, 4, 0, 0},
		{"--gpus=8 -N2", wire.EstimateRequest{GPUsPerJob: 8, Nodes: 2}, 8, 4, 2},
		{"--gpus-per-task=1 -n4", wire.EstimateRequest{GPUsPerTask: 1, Tasks: 4}, 4, 0, 0},
		{"--gpus-per-task=1 -N2: one task per node", wire.EstimateRequest{GPUsPerTask: 1, Nodes: 2}, 2, 1, 2},
		{"--gpus-per-task=2 -n3 -N2", wire.EstimateRequest{GPUsPerTask: 2, Tasks: 3, Nodes: 2}, 6, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := jobShape(&tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if s.gpus != tc.gpus || s.perNode != tc.perNode || s.nodes != tc.nodes {
				t.Errorf("gpus=%d per_node=%d nodes=%d, want %d %d %d", s.gpus, s.perNode, s.nodes, tc.gpus, tc.perNode, tc.nodes)
			}
		})
	}
	for _, bad := range []wire.EstimateRequest{{}, {GPUsPerJob: 1 << 31}, {GPUsPerNode: 1 << 15, Nodes: 1 << 10}} {
		if _, err := jobShape(&bad); err == nil {
			t.Errorf("jobShape(%+v): no error", bad)
		}
	}
}
