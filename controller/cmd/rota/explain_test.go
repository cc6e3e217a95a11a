package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// explain shows the node count a job asked for beside its GPUs: it is
// what decides which types can hold it.
func TestPrintDecisionShowsNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		gpu  wire.GPUAsk
		want string
	}{
		{wire.GPUAsk{PerNode: 2}, "(per job 0, per node 2, per task 0), time"},
		{wire.GPUAsk{PerNode: 2, Nodes: 1, MaxNodes: 1}, "(per job 0, per node 2, per task 0), time"},
		{wire.GPUAsk{PerNode: 2, Nodes: 2, MaxNodes: 2}, "(per job 0, per node 2, per task 0) on 2 nodes, time"},
		{wire.GPUAsk{PerJob: 8, Nodes: 2, MaxNodes: 4}, "(per job 8, per node 0, per task 0) on 2-4 nodes, time"},
	} {
		var b bytes.Buffer
		printDecision(&b, &wire.Decision{Asked: wire.PlaceRequest{GPU: tc.gpu}, Given: wire.PlaceReply{Reason: "r"}})
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%+v: %q lacks %q", tc.gpu, b.String(), tc.want)
		}
	}
}
