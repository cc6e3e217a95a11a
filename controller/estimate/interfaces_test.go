package estimate

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/estimate/queuewait"
)

func TestBuiltins(t *testing.T) {
	ctx := context.Background()
	tp := NewThroughputs(ThroughputConfig{})
	key := Identity{User: "alice", Name: "resnet", ScriptHash: "h1"}.Key()
	if err := tp.Observe(key, "k80", 3, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := tp.Hint(key, map[string]float64{"v100": 10}); err != nil {
		t.Fatal(err)
	}
	q := ThroughputQueryFor(tp, key, []string{"k80", "v100", "a100"})
	if q.Job.User != "alice" || q.Job.ScriptHash != "h1" || q.Measured["k80"] != (Measured{StepsPerSec: 3, Samples: 1}) ||
		!reflect.DeepEqual(q.Hints, map[string]float64{"v100": 10}) {
		t.Fatalf("query %+v", q)
	}
	a, err := BuiltinThroughput{T: tp}.Throughput(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range tp.Estimate(key, q.Types) {
		if r := a.Rates[i]; r.GPUType != e.GPUType || r.StepsPerSec != e.StepsPerSec || r.Source != e.Source || r.Basis != e.Basis {
			t.Errorf("rate %d: %+v, estimate %+v", i, r, e)
		}
	}
	if q := ThroughputQueryFor(tp, "bob/x", []string{"k80"}); q.Measured != nil || q.Hints != nil {
		t.Errorf("unknown job: %+v", q)
	}

	wall := NewWalltimes(WalltimeConfig{})
	for _, s := range []float64{600, 1200} {
		if err := wall.Finished(key, 1, 0, s); err != nil {
			t.Fatal(err)
		}
	}
	in := WalltimeInput{Key: key, MaxTimeMin: 100}
	wq := WalltimeQueryFor(wall, in)
	if !reflect.DeepEqual(wq.PastRunSec, []float64{600, 1200}) || wq.Job.Name != "resnet" {
		t.Fatalf("walltime query %+v", wq)
	}
	if w, _ := (BuiltinWalltime{W: wall}).Walltime(ctx, wq); w != wall.Estimate(in) || w.Source != WalltimeHistory {
		t.Errorf("walltime %+v", w)
	}

	for _, tc := range []struct {
		name string
		m    *queuewait.Model
		st   queuewait.QueueState
	}{
		{"no model", nil, queuewait.QueueState{Now: time.Now()}},
		{"no time", &queuewait.Model{}, queuewait.QueueState{}},
	} {
		a, err := BuiltinQueueWait{M: tc.m}.QueueWait(ctx, QueueWaitQuery{State: tc.st})
		if err != nil || a.Source != SourceUnknown || a.Wait != 0 {
			t.Errorf("%s: %+v %v", tc.name, a, err)
		}
	}
	// A model of no trees predicts its base: log1p of 5 minutes.
	m := &queuewait.Model{Features: make([]string, 22), Capacity: 10, DefaultLimitMin: 60, Base: math.Log1p(5)}
	qa, err := BuiltinQueueWait{M: m}.QueueWait(ctx, QueueWaitQuery{State: queuewait.QueueState{Now: time.Now()},
		Request: queuewait.Request{Nodes: 1}})
	if err != nil || qa.Source != SourceModel || qa.Wait.Round(time.Second) != 5*time.Minute {
		t.Errorf("model: %+v %v", qa, err)
	}
}
