package queuewait

import "time"

// QueueJob is a job as squeue (pending, running) or sacct (recently
// started) shows it. The controller fills it live; Replay fills it from a
// trace.
type QueueJob struct {
	ID        string
	User      string
	Partition string
	// Nodes and GPUs requested. A job with Nodes 0 is sized from GPUs
	// and the model's GPUs per node (at least one node).
	Nodes     int
	GPUs      int
	TimeLimit time.Duration // 0: unknown (the model's typical limit is used)
	Submit    time.Time
	// Start is zero for a pending job.
	Start time.Time
}

// QueueState is the queue as it stands at Now.
type QueueState struct {
	Now time.Time
	// TotalNodes is the partition's node count (from sinfo); 0 uses the
	// capacity the model learned from its training trace.
	TotalNodes int
	// Pending holds the jobs waiting now, in priority order if known
	// (squeue --sort=-p), else in submit order.
	Pending []QueueJob
	// Running holds the jobs running now; Start must be set.
	Running []QueueJob
	// Recent holds jobs that started lately (running or finished), each
	// with Submit and Start, in any order: their waits are the
	// history the model and the baseline look at. The controller can
	// fill it from `sacct -S now-2days -s R,CD,F,TO,CA` or from the
	// pending->running transitions it sees in squeue. It needs no more
	// than the last RecentWindow starts per partition.
	Recent []QueueJob
}

// Request is the job whose wait is to be predicted.
type Request struct {
	User      string
	Partition string
	Nodes     int
	GPUs      int
	TimeLimit time.Duration
}

// RecentWindow is how many of the latest starts the features and the
// baseline look at.
const RecentWindow = 50
