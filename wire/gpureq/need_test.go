package gpureq

import (
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// NeedOf counts every request form as Slurm does: per node, per socket
// times sockets, per task times tasks per node on a node and times tasks
// in all (one task per node unless told), and a one-node job's whole total
// on its node.
func TestNeedOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ask  wire.GPUAsk
		want Need
	}{
		{"--gres=gpu:2", wire.GPUAsk{PerNode: 2}, Need{Nodes: 1, PerNode: 2, Total: 2, Unit: 1}},
		{"--gres=gpu:2 -N3", wire.GPUAsk{PerNode: 2, Nodes: 3, MaxNodes: 3}, Need{Nodes: 3, MaxNodes: 3, PerNode: 2, Total: 6, Unit: 1}},
		{"--gpus=4", wire.GPUAsk{PerJob: 4}, Need{Nodes: 1, PerNode: 1, Total: 4, Unit: 1}},
		{"--gpus=4 -N1", wire.GPUAsk{PerJob: 4, Nodes: 1, MaxNodes: 1}, Need{Nodes: 1, MaxNodes: 1, PerNode: 4, Total: 4, Unit: 1}},
		{"--gpus=4 -N1, recorded without MaxNodes", wire.GPUAsk{PerJob: 4, Nodes: 1}, Need{Nodes: 1, PerNode: 4, Total: 4, Unit: 1}},
		{"--gpus=4 -N1-2", wire.GPUAsk{PerJob: 4, Nodes: 1, MaxNodes: 2}, Need{Nodes: 1, MaxNodes: 2, PerNode: 1, Total: 4, Unit: 1}},
		{"--gpus=8 -N2", wire.GPUAsk{PerJob: 8, Nodes: 2, MaxNodes: 2}, Need{Nodes: 2, MaxNodes: 2, PerNode: 1, Total: 8, Unit: 1}},
		{"--gpus-per-task=1 -n4", wire.GPUAsk{PerTask: 1, Tasks: 4}, Need{Nodes: 1, PerNode: 1, Total: 4, Unit: 1}},
		{"--gpus-per-task=1 -n4 -N1", wire.GPUAsk{PerTask: 1, Tasks: 4, Nodes: 1}, Need{Nodes: 1, PerNode: 4, Total: 4, Unit: 1}},
		{"--gpus-per-task=1 -n4 --ntasks-per-node=2", wire.GPUAsk{PerTask: 1, Tasks: 4, TasksPerNode: 2}, Need{Nodes: 1, PerNode: 2, Total: 4, Unit: 1}},
		{"--gpus-per-task=2 --ntasks-per-node=2 -N3", wire.GPUAsk{PerTask: 2, TasksPerNode: 2, Nodes: 3}, Need{Nodes: 3, PerNode: 4, Total: 12, Unit: 2}},
		{"--gpus-per-socket=1", wire.GPUAsk{PerSocket: 1}, Need{Nodes: 1, PerNode: 1, Total: 1, Unit: 1}},
		{"--gpus-per-socket=2 --sockets-per-node=2 -N2", wire.GPUAsk{PerSocket: 2, SocketsPerNode: 2, Nodes: 2}, Need{Nodes: 2, PerNode: 4, Total: 8, Unit: 1}},
		{"no GPUs", wire.GPUAsk{}, Need{Nodes: 1, Unit: 1}},
		{"--gpus-per-task=1 -N2: one task per node", wire.GPUAsk{PerTask: 1, Nodes: 2}, Need{Nodes: 2, PerNode: 1, Total: 2, Unit: 1}},
		{"--gpus-per-task=2 -n3", wire.GPUAsk{PerTask: 2, Tasks: 3}, Need{Nodes: 1, PerNode: 2, Total: 6, Unit: 2}},
		{"absurd counts stay bounded", wire.GPUAsk{PerSocket: 1 << 31, SocketsPerNode: 1 << 31, Nodes: 1 << 31},
			Need{Nodes: maxAsk, PerNode: maxAsk * maxAsk, Total: maxAsk * maxAsk * maxAsk, Unit: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := NeedOf(tc.ask); got != tc.want {
				t.Errorf("NeedOf(%+v) = %+v, want %+v", tc.ask, got, tc.want)
			}
		})
	}
}
