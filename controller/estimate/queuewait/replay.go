package queuewait

import (
	"container/heap"
	"sort"
	"time"
)

// Snapshot is the queue as a job found it when it was submitted, and what
// then happened to it.
type Snapshot struct {
	Job   TraceJob // the submitted job; Job.Wait() is the truth
	Index int      // position in submit order
	State QueueState
	Req   Request
}

// Replay rebuilds, for every job of the trace, the queue state at its
// submit time, and calls fn with it in submit order. Jobs are ordered by
// (Submit, order in the trace). For job j submitted at t, a job i != j
// "came before" j when it is earlier in that order, and:
//
//   - Pending: i came before j and i.Start > t;
//   - Running: i came before j and i.Start <= t < i.End;
//   - Recent: the RecentWindow jobs that came before j with the latest
//     Start <= t (ties by submit order), oldest first.
//
// Only what was known at t is used: pending jobs contribute their
// request, running jobs their start and limit, never their actual end.
// The slices in the snapshot are reused: fn must not keep them.
// fn returning false stops the replay.
func Replay(jobs []TraceJob, fn func(Snapshot) bool) {
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return jobs[order[a]].Submit.Before(jobs[order[b]].Submit) })

	var (
		starts  startHeap                      // submitted, not yet started, by (Start, pos)
		pending []int                          // submitted, not started, in submit order (by pos)
		running []int                          // started, not yet ended
		recent  = make([]int, 0, RecentWindow) // ring of the latest starts, oldest first
		pos     = make([]int, len(jobs))       // job -> position in submit order
		snap    Snapshot
	)
	for p, ji := range order {
		pos[ji] = p
	}
	for p, ji := range order {
		j := jobs[ji]
		t := j.Submit
		// Everything submitted earlier that has started by t moves to
		// running and into the recent window, in start order.
		started := false
		for starts.Len() > 0 && !jobs[starts.items[0].job].Start.After(t) {
			it := heap.Pop(&starts).(startItem)
			running = append(running, it.job)
			if len(recent) == RecentWindow {
				copy(recent, recent[1:])
				recent = recent[:RecentWindow-1]
			}
			recent = append(recent, it.job)
			started = true
		}
		if started {
			k := 0
			for _, q := range pending {
				if jobs[q].Start.After(t) {
					pending[k] = q
					k++
				}
			}
			pending = pending[:k]
		}
		k := 0
		for _, q := range running {
			if jobs[q].End.After(t) {
				running[k] = q
				k++
			}
		}
		running = running[:k]

		snap.Job, snap.Index = j, p
		snap.State.Now = t
		snap.State.Pending = fill(snap.State.Pending[:0], jobs, pending, false)
		snap.State.Running = fill(snap.State.Running[:0], jobs, running, true)
		snap.State.Recent = fill(snap.State.Recent[:0], jobs, recent, true)
		snap.Req = Request{User: j.User, Partition: j.Partition, Nodes: j.Nodes, GPUs: j.GPUs, TimeLimit: j.TimeLimit}
		if !fn(snap) {
			return
		}
		heap.Push(&starts, startItem{job: ji, start: j.Start, pos: p})
		pending = append(pending, ji)
	}
}

func fill(dst []QueueJob, jobs []TraceJob, idx []int, started bool) []QueueJob {
	for _, i := range idx {
		j := jobs[i]
		q := QueueJob{ID: j.ID, User: j.User, Partition: j.Partition, Nodes: j.Nodes, GPUs: j.GPUs, TimeLimit: j.TimeLimit, Submit: j.Submit}
		if started {
			q.Start = j.Start
		}
		dst = append(dst, q)
	}
	return dst
}

type startItem struct {
	job   int
	start time.Time
	pos   int
}

type startHeap struct{ items []startItem }

func (h startHeap) Len() int { return len(h.items) }
func (h startHeap) Less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	if !x.start.Equal(y.start) {
		return x.start.Before(y.start)
	}
	return x.pos < y.pos
}
func (h startHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *startHeap) Push(x any)   { h.items = append(h.items, x.(startItem)) }
func (h *startHeap) Pop() any {
	n := len(h.items)
	it := h.items[n-1]
	h.items = h.items[:n-1]
	return it
}
