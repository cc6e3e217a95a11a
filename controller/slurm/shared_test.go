package slurm

import (
	"context"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/slurm/slurmtest"
)

// fakeReaders puts on PATH a squeue, sinfo and scontrol that log each
// call and print nothing (no jobs, no nodes, no partitions).
func fakeReaders(t *testing.T) *slurmtest.Calls {
	return slurmtest.Commands(t, "squeue", "sinfo", "scontrol")
}

// Readers within ShareReads of a read share it; a write through the CLI
// makes the next read fresh; ShareReads 0 reads every time.
func TestShareReads(t *testing.T) {
	ctx := context.Background()
	t.Run("shared until a write", func(t *testing.T) {
		calls := fakeReaders(t)
		c := &CLI{ShareReads: time.Hour}
		for range 3 {
			if _, err := c.Jobs(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Nodes(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Partitions(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := calls.All(); calls.Count("squeue") != 1 || calls.Count("sinfo") != 1 || calls.Count("scontrol") != 2 {
			t.Fatalf("three rounds of reads ran %v, want one of each (scontrol: reservations and partitions)", got)
		}
		nice := int32(3)
		if err := c.Update(ctx, 7, JobUpdate{Nice: &nice}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Jobs(ctx); err != nil {
			t.Fatal(err)
		}
		if got := calls.All(); calls.Count("squeue") != 2 {
			t.Errorf("a read after an update ran %v, want a second squeue", got)
		}
		_, _, _ = c.Release(ctx) // a reader (the fake prints no version): shares still
		if _, err := c.Jobs(ctx); err != nil {
			t.Fatal(err)
		}
		if got := calls.All(); calls.Count("squeue") != 2 {
			t.Errorf("scontrol --version made the next read fresh: %v", got)
		}
		if _, err := c.Jobs(Fresh(ctx)); err != nil {
			t.Fatal(err)
		}
		if got := calls.All(); calls.Count("squeue") != 3 {
			t.Errorf("a Fresh read was shared: %v", got)
		}
	})
	t.Run("off", func(t *testing.T) {
		calls := fakeReaders(t)
		c := &CLI{}
		for range 3 {
			if _, err := c.Jobs(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := calls.All(); calls.Count("squeue") != 3 {
			t.Errorf("ShareReads 0 ran %v, want three squeue", got)
		}
	})
}

// A round's paced apply is one write: readers during it share one read
// (made after it began), and the first read after it is fresh.
func TestShareReadsAcrossAPacedApply(t *testing.T) {
	ctx := context.Background()
	calls := fakeReaders(t)
	fakeStreamScontrol(t, true, "", "", "")
	c := &CLI{ShareReads: time.Hour}
	squeues := func() int { return calls.Count("squeue") }
	read := func() {
		t.Helper()
		if _, err := c.Jobs(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read() // before the apply
	c.UpdatePaced(ctx, nil, func() bool { return true })
	read()
	if n := squeues(); n != 1 {
		t.Fatalf("%d squeue runs, want 1: an apply of no changes is no write", n)
	}
	nice := int32(1)
	var during []int
	errs := c.UpdatePaced(ctx, []Change{{JobID: 1, Update: JobUpdate{Nice: &nice}}, {JobID: 2, Update: JobUpdate{Nice: &nice}},
		{JobID: 3, Update: JobUpdate{Nice: &nice}}}, func() bool {
		read()
		during = append(during, squeues())
		return true
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if len(during) != 2 || during[0] != 2 || during[1] != 2 {
		t.Errorf("squeue runs after each read during the apply: %v, want [2 2] (one fresh read, then shared)", during)
	}
	read()
	if n := squeues(); n != 3 {
		t.Errorf("%d squeue runs, want 3: the read after the apply is fresh", n)
	}
}

// A QueueSince reader takes a queue read that began after its since and
// within its maxAge, whatever was written meanwhile; nodes and
// partitions, and a Fresh reader, are not affected.
func TestQueueSince(t *testing.T) {
	ctx := context.Background()
	calls := fakeReaders(t)
	c := &CLI{ShareReads: time.Hour}
	count := calls.Count
	nice := int32(1)
	write := func() {
		t.Helper()
		if err := c.Update(ctx, 7, JobUpdate{Nice: &nice}); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	time.Sleep(time.Millisecond)           // a read strictly after before: the clock is what is tested
	if _, err := c.Jobs(ctx); err != nil { // the round's read
		t.Fatal(err)
	}
	if _, err := c.Nodes(ctx); err != nil {
		t.Fatal(err)
	}
	// In order: each read changes the cache. After a write, only
	// QueueSince can share a read.
	tests := []struct {
		name   string
		ctx    context.Context
		squeue int // squeue runs after this read
	}{
		{"a manager takes the round's read", QueueSince(ctx, before, time.Hour), 1},
		{"but not one older than its own last look", QueueSince(ctx, time.Now(), time.Hour), 2},
		{"nor one older than maxAge", QueueSince(ctx, before, time.Nanosecond), 3},
		{"nor when Fresh", Fresh(QueueSince(ctx, before, time.Hour)), 4},
		{"and the last read serves the next", QueueSince(ctx, before, time.Hour), 4},
	}
	for _, tc := range tests {
		write()
		if _, err := c.Jobs(tc.ctx); err != nil {
			t.Fatal(err)
		}
		if n := count("squeue"); n != tc.squeue {
			t.Errorf("%s: %d squeue runs, want %d", tc.name, n, tc.squeue)
		}
	}
	write()
	if _, err := c.Nodes(QueueSince(ctx, before, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := count("sinfo"); n != 2 {
		t.Errorf("%d sinfo runs, want 2: QueueSince is for the queue only", n)
	}
	if _, err := c.Jobs(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count("squeue"); n != 5 {
		t.Errorf("%d squeue runs, want 5: a plain read after a write is fresh", n)
	}
}
