package slurm

import (
	"context"
	"math"
	"sync"
	"time"
)

// JobsNow is JobsAt for a reader whose reads are never shared: its
// queue, timed from the call.
func JobsNow(ctx context.Context, s QueueReader) ([]Job, time.Time, error) {
	at := time.Now()
	jobs, err := s.Jobs(ctx)
	return jobs, at, err
}

// QueueReader reads the queue (a Scheduler does).
type QueueReader interface {
	Jobs(ctx context.Context) ([]Job, error)
}

// TickQueue is how a manager that ticks (chains, fault tolerance,
// services) reads the queue. While it follows jobs, every tick reads it,
// taking any read that began after the previous tick ended (QueueSince).
// While it follows none, only jobs the round loop binds can become its
// own, so a tick reads only after a Wake (the round loop's, once a round
// has bound its jobs), and then takes that round's own read: an idle
// manager costs slurmctld no queue read of its own, whatever the round's
// length (at the default 5 min round and 10 s tick it was about thirty
// whole-queue reads a round). The first tick always reads.
type TickQueue struct {
	mu     sync.Mutex
	looked time.Time // when the last tick ended
	wake   time.Time // a pending Wake: a read that began at or after it will do
}

// Wake asks the next tick to look at the queue even if it follows no job:
// a read that began at or after readAt (the round's, which bound new
// jobs) holds what it needs. Safe to call from any goroutine.
func (q *TickQueue) Wake(readAt time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if readAt.IsZero() {
		readAt = time.Now()
	}
	if readAt.After(q.wake) {
		q.wake = readAt
	}
}

// Read is a tick's look at the queue: every tick while busy (the manager
// follows jobs), and otherwise after a Wake only; read is false when the
// tick has no queue to act on. Call Ticked when the tick ends.
func (q *TickQueue) Read(ctx context.Context, s QueueReader, tick time.Duration, busy bool) (jobs []Job, read bool, err error) {
	q.mu.Lock()
	looked, wake := q.looked, q.wake
	q.wake = time.Time{}
	q.mu.Unlock()
	switch {
	case busy || looked.IsZero():
		ctx = QueueSince(ctx, looked, tick)
	case !wake.IsZero():
		// The waking round's read, or any later one, however old.
		ctx = QueueSince(ctx, wake.Add(-time.Nanosecond), math.MaxInt64)
	default:
		return nil, false, nil
	}
	jobs, err = s.Jobs(ctx)
	if err != nil {
		q.Wake(time.Now()) // not read: the next tick tries again
		return nil, false, err
	}
	return jobs, true, nil
}

// Ticked marks the end of a tick: a busy tick's read must begin after it,
// so that the manager sees what it changed itself.
func (q *TickQueue) Ticked() {
	q.mu.Lock()
	q.looked = time.Now()
	q.mu.Unlock()
}
