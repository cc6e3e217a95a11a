package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

// explain shows every change of the job's limit, old -> new and why; a
// job whose limit never changed shows none.
func TestPrintLimits(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	printLimits(&b, []wire.LimitChange{
		{At: at, FromMin: 7, ToMin: 35, RanSeconds: 180, Measured: true, Why: "measured 4.4 steps/s"},
		{At: at.Add(time.Minute), FromMin: 35, ToMin: slurmtime.Unlimited, RanSeconds: 1800, Why: "no rate measured"},
	})
	for _, re := range []string{
		`(?m)^time limit changes while it ran:$`,
		`(?m)^  00:07:00 -> 00:35:00 raised at 2026-03-0[12] \d\d:\d\d:00 \S+, 3m0s into its run: measured 4.4 steps/s$`,
		`(?m)^  00:35:00 -> UNLIMITED given back at .*, 30m0s into its run: no rate measured$`,
	} {
		if !regexp.MustCompile(re).MatchString(b.String()) {
			t.Errorf("no line matching %s in\n%s", re, b.String())
		}
	}
	b.Reset()
	printLimits(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no changes printed as %q", b.String())
	}
}

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
