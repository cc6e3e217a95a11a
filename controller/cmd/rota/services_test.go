package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

func TestExplainService(t *testing.T) {
	t.Parallel()
	ov, gap := 12.0, 3.0
	s := &wire.ServiceStatus{Name: "llm", Spread: "nodes", Replicas: []wire.ServiceReplica{
		{ID: 41, State: "running", Jobs: []wire.ServiceJob{
			{JobID: 41, N: 1, State: "CANCELLED", Nodes: "sv-v100", Ready: "2026-11-26T08:00:30Z", Why: "stopped by Rota: job 44 is ready in its place"},
			{JobID: 44, N: 2, State: "RUNNING", Nodes: "sv-k80", Excluded: "sv-p100,sv-v100", Ready: "2026-11-26T08:08:35Z", OverlapSeconds: &ov},
		}},
		{ID: 42, State: "stopped", Why: "job 42 was cancelled by its user or an admin", Jobs: []wire.ServiceJob{
			{JobID: 42, N: 1, State: "TIMEOUT", Nodes: "sv-p100"}, {JobID: 45, N: 2, State: "RUNNING", GapSeconds: &gap}}},
	}}
	var b bytes.Buffer
	if err := explainService(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"service llm: 1 replicas running, kept apart by nodes", "sv-p100,sv-v100", "12s", "3s",
		"stopped by Rota: job 44 is ready in its place", "job 42 was cancelled"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
