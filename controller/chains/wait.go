package chains

import (
	"sort"
	"sync"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
)

// WaitRequest is the job whose queue wait is asked for: a chain's next
// segment.
type WaitRequest struct {
	Partition    string
	GPUs         int
	GPUType      string // "" any
	TimeLimitMin uint32
}

// WaitPredictor predicts how long a job submitted now waits in the queue;
// ok false when it cannot tell. controller/estimate/queuewait's model is meant to
// plug in here (Manager.SetPredictor); until it does, ObservedWaits
// stands in.
type WaitPredictor interface {
	PredictWait(r WaitRequest) (time.Duration, bool)
}

// ObservedWaits is the fallback predictor: the waits (start - submit) of
// the last jobs seen to start in each partition, from the manager's own
// reads of the queue. It answers a high quantile, because a successor
// submitted too early only waits on its dependency, while one submitted
// too late leaves a gap.
type ObservedWaits struct {
	// Keep is how many recent waits per partition count; Quantile the
	// one answered; MinSamples below which it does not answer.
	Keep       int
	Quantile   float64
	MinSamples int

	mu   sync.Mutex
	seen map[uint32]bool // job ids already counted
	by   map[string][]time.Duration
}

// NewObservedWaits keeps the last 50 waits per partition and answers
// their 90th percentile once it has 3.
func NewObservedWaits() *ObservedWaits {
	return &ObservedWaits{Keep: 50, Quantile: 0.9, MinSamples: 3, seen: map[uint32]bool{}, by: map[string][]time.Duration{}}
}

// Observe takes the queue as read: every running job not counted yet
// adds its wait. A requeued job is skipped (Slurm resets its submit time),
// and so are jobs in skip (chain successors, whose wait is the
// dependency's, not the queue's).
func (o *ObservedWaits) Observe(jobs []slurm.Job, skip func(uint32) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		if !j.Running() || o.seen[j.ID] || j.Restarts > 0 || j.Start.IsZero() || j.Submit.IsZero() {
			continue
		}
		o.seen[j.ID] = true
		if skip != nil && skip(j.ID) {
			continue
		}
		w := max(j.Start.Sub(j.Submit), 0)
		l := append(o.by[j.Partition], w)
		if len(l) > o.Keep {
			l = l[len(l)-o.Keep:]
		}
		o.by[j.Partition] = l
	}
	// Forget ids no longer in the queue, so the set stays small.
	if len(o.seen) > 4*len(jobs)+1000 {
		in := map[uint32]bool{}
		for i := range jobs {
			in[jobs[i].ID] = true
		}
		for id := range o.seen {
			if !in[id] {
				delete(o.seen, id)
			}
		}
	}
}

// PredictWait implements WaitPredictor.
func (o *ObservedWaits) PredictWait(r WaitRequest) (time.Duration, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.by[r.Partition]
	if len(l) < o.MinSamples || len(l) == 0 {
		return 0, false
	}
	s := append([]time.Duration(nil), l...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	k := int(o.Quantile*float64(len(s)-1) + 0.5)
	return s[min(max(k, 0), len(s)-1)], true
}
