package external

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/queuewait"
)

// capture records the query a plugin's server hands its implementation.
type capture struct {
	tp   estimate.ThroughputQuery
	wall estimate.WalltimeQuery
	qw   estimate.QueueWaitQuery
}

func (c *capture) Throughput(_ context.Context, q estimate.ThroughputQuery) (estimate.ThroughputAnswer, error) {
	c.tp = q
	return estimate.ThroughputAnswer{}, nil
}

func (c *capture) Walltime(_ context.Context, q estimate.WalltimeQuery) (estimate.WalltimeEstimate, error) {
	c.wall = q
	return estimate.WalltimeEstimate{}, nil
}

func (c *capture) QueueWait(_ context.Context, q estimate.QueueWaitQuery) (estimate.QueueWaitAnswer, error) {
	c.qw = q
	return estimate.QueueWaitAnswer{}, nil
}

// What the controller asks is what the plugin's implementation gets:
// the conversions to and from the wire lose nothing (times to the
// millisecond, limits to the second).
func TestWireRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := &capture{}
	at := time.UnixMilli(1_700_000_000_123)
	tp := estimate.ThroughputQuery{Key: "a/b/c", Job: estimate.Identity{User: "a", Name: "b", ScriptHash: "c"},
		Types: []string{"k80", "v100"}, Hints: map[string]float64{"v100": 9.5},
		Measured: map[string]estimate.Measured{"k80": {StepsPerSec: 2.5, Samples: 7}, "p100": {StepsPerSec: 4, Samples: 1}}}
	if _, err := (throughputServer{impl: c}).Estimate(ctx, throughputRequest(tp)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.tp, tp) {
		t.Errorf("throughput:\n got %+v\nwant %+v", c.tp, tp)
	}

	wall := estimate.WalltimeQuery{WalltimeInput: estimate.WalltimeInput{Key: "a/b", RemainingSteps: 1e6, StepsPerSec: 12,
		UserLimitMin: 600, MaxTimeMin: 2880}, Job: estimate.Identity{User: "a", Name: "b"}, PastRunSec: []float64{60, 90}}
	if _, err := (walltimeServer{impl: c}).Estimate(ctx, walltimeRequest(wall)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.wall, wall) {
		t.Errorf("walltime:\n got %+v\nwant %+v", c.wall, wall)
	}

	job := func(id string, start time.Time) queuewait.QueueJob {
		return queuewait.QueueJob{ID: id, User: "u" + id, Partition: "gpu", Nodes: 2, GPUs: 6, TimeLimit: 90 * time.Minute,
			Submit: at.Add(-time.Hour), Start: start}
	}
	qw := estimate.QueueWaitQuery{
		Request: queuewait.Request{User: "a", Partition: "gpu", Nodes: 1, GPUs: 3, TimeLimit: 2 * time.Hour},
		State: queuewait.QueueState{Now: at, TotalNodes: 80, Pending: []queuewait.QueueJob{job("1", time.Time{})},
			Running: []queuewait.QueueJob{job("2", at.Add(-time.Minute))}, Recent: []queuewait.QueueJob{job("3", at.Add(-time.Second))}},
	}
	if _, err := (queueWaitServer{impl: c}).Estimate(ctx, queueWaitRequest(qw)); err != nil {
		t.Fatal(err)
	}
	eq := func(a, b time.Time) bool { return a.Equal(b) }
	got := c.qw
	if got.Request != qw.Request || !eq(got.State.Now, at) || got.State.TotalNodes != 80 ||
		len(got.State.Pending) != 1 || len(got.State.Running) != 1 || len(got.State.Recent) != 1 {
		t.Fatalf("queue wait: got %+v", got)
	}
	for i, pair := range [][2]queuewait.QueueJob{{got.State.Pending[0], qw.State.Pending[0]},
		{got.State.Running[0], qw.State.Running[0]}, {got.State.Recent[0], qw.State.Recent[0]}} {
		g, w := pair[0], pair[1]
		if g.ID != w.ID || g.User != w.User || g.Partition != w.Partition || g.Nodes != w.Nodes || g.GPUs != w.GPUs ||
			g.TimeLimit != w.TimeLimit || !eq(g.Submit, w.Submit) || !eq(g.Start, w.Start) || g.Start.IsZero() != w.Start.IsZero() {
			t.Errorf("job %d: got %+v, want %+v", i, g, w)
		}
	}
}
