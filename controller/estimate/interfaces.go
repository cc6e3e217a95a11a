// The estimators behind small interfaces: a job's throughput per GPU
// type, its walltime, and its wait in the queue. Each question and answer
// is a plain struct, so an estimator can run in process (the built-ins
// here wrap this package's learners and package queuewait's model) or in
// another process (package external runs an admin's go-plugin executable
// and falls back to the built-in when it misbehaves).

package estimate

import (
	"context"
	"time"

	"github.com/rota-hpc/rota/controller/estimate/queuewait"
)

// Throughput estimates a job's steps/s on GPU types.
type Throughput interface {
	Throughput(ctx context.Context, q ThroughputQuery) (ThroughputAnswer, error)
}

// ThroughputQuery is a job and what is known of it.
type ThroughputQuery struct {
	Key string // the job's Identity key
	Job Identity
	// Types are the GPU types to estimate, in the order of the answer.
	Types []string
	// Measured holds the agents' smoothed measurements of the job, per
	// GPU type; Hints the user's --rota-throughput (steps/s per type).
	Measured map[string]Measured
	Hints    map[string]float64
}

// Rate is a job's throughput on one GPU type.
type Rate struct {
	GPUType     string
	StepsPerSec float64 // 0 when Source is SourceUnknown
	Source      string  // "measured", "table", ... SourceUnknown
	Basis       string  // words for `rota explain`
}

// ThroughputAnswer holds one Rate per queried type, in the query's order.
type ThroughputAnswer struct {
	Rates []Rate
}

// Walltime estimates the time limit a job needs.
type Walltime interface {
	Walltime(ctx context.Context, q WalltimeQuery) (WalltimeEstimate, error)
}

// WalltimeQuery is the job's remaining work and limits, and its past runs.
type WalltimeQuery struct {
	WalltimeInput
	Job Identity
	// PastRunSec are the job's latest run times, oldest first.
	PastRunSec []float64
}

// QueueWait predicts how long a job will wait in the queue.
type QueueWait interface {
	QueueWait(ctx context.Context, q QueueWaitQuery) (QueueWaitAnswer, error)
}

// QueueWaitQuery is the job and the queue as it stands.
type QueueWaitQuery struct {
	Request queuewait.Request
	State   queuewait.QueueState
}

// QueueWaitAnswer is a predicted wait.
type QueueWaitAnswer struct {
	Wait   time.Duration
	Source string // SourceUnknown: no prediction (Wait 0)
	Basis  string
}

// ThroughputQueryFor builds the query for key from what t holds of it.
func ThroughputQueryFor(t *Throughputs, key string, types []string) ThroughputQuery {
	id, _ := ParseKey(key)
	q := ThroughputQuery{Key: key, Job: id, Types: types}
	q.Measured, q.Hints = t.Known(key)
	return q
}

// WalltimeQueryFor builds the query for in from w's history of the job.
func WalltimeQueryFor(w *Walltimes, in WalltimeInput) WalltimeQuery {
	id, _ := ParseKey(in.Key)
	return WalltimeQuery{WalltimeInput: in, Job: id, PastRunSec: w.History(in.Key)}
}

// BuiltinThroughput is Throughputs behind Throughput. It answers
// from its own state, which is what ThroughputQueryFor reads the query's
// Measured and Hints from, so it looks only at Key and Types.
type BuiltinThroughput struct{ T *Throughputs }

// Throughput implements Throughput.
func (b BuiltinThroughput) Throughput(_ context.Context, q ThroughputQuery) (ThroughputAnswer, error) {
	est := b.T.Estimate(q.Key, q.Types)
	a := ThroughputAnswer{Rates: make([]Rate, len(est))}
	for i, e := range est {
		a.Rates[i] = Rate{GPUType: e.GPUType, StepsPerSec: e.StepsPerSec, Source: e.Source, Basis: e.Basis}
	}
	return a, nil
}

// BuiltinWalltime is Walltimes behind Walltime; like
// BuiltinThroughput it reads the history from its own state.
type BuiltinWalltime struct{ W *Walltimes }

// Walltime implements Walltime.
func (b BuiltinWalltime) Walltime(_ context.Context, q WalltimeQuery) (WalltimeEstimate, error) {
	return b.W.Estimate(q.WalltimeInput), nil
}

// SourceModel marks a wait the queue-wait model predicted.
const SourceModel = "model"

// BuiltinQueueWait is a queuewait.Model behind QueueWait. A nil model (none
// loaded) answers SourceUnknown.
type BuiltinQueueWait struct{ M *queuewait.Model }

// QueueWait implements QueueWait.
func (b BuiltinQueueWait) QueueWait(_ context.Context, q QueueWaitQuery) (QueueWaitAnswer, error) {
	if b.M == nil {
		return QueueWaitAnswer{Source: SourceUnknown, Basis: "no queue-wait model loaded"}, nil
	}
	w, ok := b.M.Predict(q.State, q.Request)
	if !ok {
		return QueueWaitAnswer{Source: SourceUnknown, Basis: "the queue-wait model cannot read this queue or request"}, nil
	}
	return QueueWaitAnswer{Wait: w, Source: SourceModel,
		Basis: "gradient-boosted trees over the queue now and recent waits (docs/queuewait.md)"}, nil
}
