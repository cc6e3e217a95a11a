package slurm

import (
	"context"
	"errors"
	"testing"
	"time"
)

// cacheReader is a queue reader that keeps its last read and serves a
// QueueSince that takes it, as the CLI and slurmrestd backends do.
type cacheReader struct {
	at    time.Time
	reads int
	fail  bool
}

func (r *cacheReader) Jobs(ctx context.Context) ([]Job, error) {
	if q, ok := queueSinceOf(ctx); ok && q.takes(r.at) {
		return []Job{{ID: 1}}, nil
	}
	if r.fail {
		return nil, errors.New("slurmctld did not answer")
	}
	r.reads++
	r.at = time.Now()
	return []Job{{ID: 1}}, nil
}

// A manager that follows no job reads the queue at its first tick and
// then only after a Wake, taking the waking round's read; one that
// follows jobs reads at every tick, taking a read made since its last;
// a failed read is tried again at the next tick.
func TestTickQueue(t *testing.T) {
	t.Parallel()
	type step struct {
		what     string
		round    bool // the round loop reads the queue first
		wake     int  // 1: Wake with the round's read; 2: with a time after it
		busy     bool
		fail     bool
		wantRead bool
		reads    int // reads the reader made in all, after the step
	}
	steps := []step{
		{what: "first tick", wantRead: true, reads: 1},
		{what: "idle, nothing new", reads: 1},
		{what: "a round without its wake (not yet bound)", round: true, reads: 2},
		{what: "the round's wake", wake: 1, wantRead: true, reads: 2},
		{what: "idle again", reads: 2},
		{what: "woken for a read the reader no longer has", wake: 2, wantRead: true, reads: 3},
		{what: "busy: the last read is its own, from before its last tick", busy: true, wantRead: true, reads: 4},
		{what: "busy after a round", round: true, busy: true, wantRead: true, reads: 5},
		{what: "woken, Slurm down", round: true, wake: 2, fail: true, reads: 6},
		{what: "idle, after the failure", wantRead: true, reads: 7},
		{what: "idle, all done", reads: 7},
	}
	r := &cacheReader{}
	var q TickQueue
	for _, s := range steps {
		time.Sleep(time.Millisecond) // reads and ticks at distinct times
		r.fail = false
		if s.round {
			if _, err := r.Jobs(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		switch s.wake {
		case 1:
			q.Wake(r.at)
		case 2:
			time.Sleep(time.Millisecond) // a time after the round's read
			q.Wake(time.Now())
		}
		r.fail = s.fail
		jobs, read, err := q.Read(context.Background(), r, time.Hour, s.busy)
		q.Ticked()
		if s.fail != (err != nil) {
			t.Errorf("%s: error %v", s.what, err)
		}
		if read != s.wantRead || (read && len(jobs) != 1) {
			t.Errorf("%s: read %v (%d jobs), want %v", s.what, read, len(jobs), s.wantRead)
		}
		if r.reads != s.reads {
			t.Errorf("%s: %d reads in all, want %d", s.what, r.reads, s.reads)
		}
	}
}
