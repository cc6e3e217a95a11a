package slurm

import (
	"context"
	"sync"
	"time"
)

// QueueCache shares one read of Slurm's queue among its readers for
// MaxAge: page loads of the web view and its fairness samples cost Slurm
// one squeue per MaxAge, however many viewers there are.
type QueueCache struct {
	// Client reads the queue.
	Client JobsAter
	MaxAge time.Duration

	mu   sync.Mutex
	at   time.Time
	jobs []Job
}

// Jobs is Slurm's pending and running jobs, with their Rota decision ids,
// as read at most MaxAge ago (and as a QueueSince in ctx allows), and
// when that read began (a client's shared read can be older than this
// call); concurrent callers wait for one read.
func (q *QueueCache) Jobs(ctx context.Context) ([]Job, time.Time, error) {
	sched := q.Client
	q.mu.Lock()
	defer q.mu.Unlock()
	qs, since := queueSinceOf(ctx)
	if !q.at.IsZero() && time.Since(q.at) < q.MaxAge && (!since || qs.takes(q.at)) {
		return q.jobs, q.at, nil
	}
	jobs, at, err := sched.JobsAt(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	for i := range jobs {
		if !jobs[i].DecisionRead {
			// This squeue cannot print AdminComment: one scontrol read.
			if ids, err := sched.DecisionIDs(ctx); err == nil {
				for k := range jobs {
					if id, ok := ids[jobs[k].ID]; ok {
						jobs[k].Decision = id
					}
				}
			}
			break
		}
	}
	q.jobs, q.at = jobs, at
	return jobs, at, nil
}
