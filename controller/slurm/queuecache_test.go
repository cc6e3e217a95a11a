package slurm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// countingQueue is a Scheduler whose squeue cannot print AdminComment.
type countingQueue struct {
	Scheduler // only Jobs and DecisionIDs are called
	mu        sync.Mutex
	reads     int
}

func (q *countingQueue) Jobs(context.Context) ([]Job, error) {
	q.mu.Lock()
	q.reads++
	q.mu.Unlock()
	time.Sleep(10 * time.Millisecond) // concurrent readers wait for this one
	return []Job{{ID: 1}, {ID: 2}}, nil
}

func (q *countingQueue) JobsAt(ctx context.Context) ([]Job, time.Time, error) {
	return JobsNow(ctx, q)
}

func (q *countingQueue) DecisionIDs(context.Context) (map[uint32]string, error) {
	return map[uint32]string{2: "d2"}, nil
}

func TestQueueCacheSharesOneRead(t *testing.T) {
	t.Parallel()
	q := &countingQueue{}
	c := &QueueCache{Client: q, MaxAge: time.Hour}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jobs, at, err := c.Jobs(context.Background())
			if err != nil || len(jobs) != 2 || at.IsZero() || jobs[1].Decision != "d2" {
				t.Errorf("jobs %+v at %v err %v", jobs, at, err)
			}
		}()
	}
	wg.Wait()
	if q.reads != 1 {
		t.Fatalf("%d reads for 8 readers within MaxAge, want 1", q.reads)
	}
	c.MaxAge = 0
	if _, _, err := c.Jobs(context.Background()); err != nil || q.reads != 2 {
		t.Fatalf("after MaxAge: %d reads, err %v", q.reads, err)
	}
	// A read that fails says so, and is not kept.
	if _, _, err := (&QueueCache{Client: Unserved{}}).Jobs(context.Background()); !errors.Is(err, ErrUnserved) {
		t.Fatalf("a failed queue read: %v, want ErrUnserved", err)
	}
}

// A QueueCache over a CLI passes ctx on, and dates what it returns by
// when the CLI's read began: a QueueSince reader can get the round's
// earlier read, dated by it.
func TestQueueCacheDatesASharedRead(t *testing.T) {
	calls := fakeReaders(t)
	cli := &CLI{ShareReads: time.Hour}
	ctx := context.Background()
	_, roundAt, err := cli.JobsAt(ctx) // the round's read
	if err != nil {
		t.Fatal(err)
	}
	nice := int32(1)
	if err := cli.Update(ctx, 7, JobUpdate{Nice: &nice}); err != nil { // and its update
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // a sample later than the round's read
	c := &QueueCache{Client: cli, MaxAge: time.Hour}
	_, at, err := c.Jobs(QueueSince(ctx, time.Time{}, time.Hour))
	if err != nil || !at.Equal(roundAt) || calls.Count("squeue") != 1 {
		t.Errorf("a sample after the round's read: at %v (the round read at %v), %d squeue, %v", at, roundAt, calls.Count("squeue"), err)
	}
	c.MaxAge = 0
	_, at, err = c.Jobs(ctx)
	if err != nil || !at.After(roundAt) || calls.Count("squeue") != 2 {
		t.Errorf("a plain read after the update: at %v, %d squeue, %v", at, calls.Count("squeue"), err)
	}
}

// Its own entry serves a QueueSince reader only when it fits: a sampler
// that asks for a read newer than its last sample gets one.
func TestQueueCacheHonoursQueueSince(t *testing.T) {
	t.Parallel()
	q := &countingQueue{}
	c := &QueueCache{Client: q, MaxAge: time.Hour}
	ctx := context.Background()
	_, at, err := c.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs(QueueSince(ctx, time.Time{}, time.Hour)); err != nil || q.reads != 1 {
		t.Fatalf("a fitting entry: %d reads, %v", q.reads, err)
	}
	_, again, err := c.Jobs(QueueSince(ctx, at, time.Hour))
	if err != nil || q.reads != 2 || !again.After(at) {
		t.Fatalf("an entry no newer than since: %d reads (want 2), read at %v after %v, %v", q.reads, again, at, err)
	}
}
