package decisions

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

// Every change of a job's limit is kept with its decision, in order,
// in JetStream too (a restarted controller explains it), binding the job;
// explains binding the job meanwhile lose none of them, and the decision
// handed out before is left as it was.
func TestAddLimitKeepsEveryChange(t *testing.T) {
	t.Parallel()
	srv := natstest.StartJetStream(t)
	s := openStore(t, srv.URL())
	ctx := context.Background()
	first := decision("l1", 0)
	if err := s.Commit(ctx, first); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // explains binding the job meanwhile
		defer wg.Done()
		for range n {
			if _, err := s.Bind(ctx, "l1", 77); err != nil {
				t.Error(err)
			}
		}
	}()
	var got *wire.Decision
	for i := range n {
		d, err := s.AddLimit(ctx, "l1", 77, wire.LimitChange{At: time.Now().UTC(), FromMin: uint32(i + 1), ToMin: uint32(i + 2), Why: "test"})
		if err != nil {
			t.Fatal(err)
		}
		got = d
	}
	wg.Wait()
	check := func(where string, d *wire.Decision) {
		t.Helper()
		if d == nil || d.JobID != 77 || len(d.Limits) != n {
			t.Fatalf("%s: %+v", where, d)
		}
		for i, c := range d.Limits {
			if c.FromMin != uint32(i+1) || c.ToMin != uint32(i+2) {
				t.Fatalf("%s: change %d is %+v", where, i, c)
			}
		}
	}
	check("returned", got)
	byJob, err := s.ByJob(ctx, 77)
	if err != nil {
		t.Fatal(err)
	}
	check("by job", byJob)
	check("in JetStream", inKV(t, s, "l1"))
	check("after a restart", func() *wire.Decision {
		d, err := openStore(t, srv.URL()).ByJob(ctx, 77)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}())
	if first.JobID != 0 || first.Limits != nil {
		t.Errorf("the decision handed out before changed: %+v", first)
	}
	if _, err := s.AddLimit(ctx, "nope", 1, wire.LimitChange{}); err == nil {
		t.Error("a change for an unknown decision: no error")
	}
}
