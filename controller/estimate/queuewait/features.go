package queuewait

import (
	"container/heap"
	"math"
	"slices"
	"sort"
	"time"
)

// featureNames lists the model's inputs in order. A saved model records
// them, and Load refuses a model whose list differs: a model trained on
// other features would read these in the wrong places.
var featureNames = []string{
	"req_nodes",         // the job's own size
	"req_limit_h",       // and time limit
	"req_frac_capacity", // its size against the partition's
	"pend_jobs",         // pending jobs now
	"pend_nodes",        // nodes they ask for
	"pend_node_h",       // node-hours they ask for (nodes x limit)
	"pend_user_jobs",    // the same user's pending jobs (fair share)
	"pend_oldest_h",     // how long the oldest pending job has waited
	"run_jobs",          // running jobs now
	"run_nodes",         // nodes they hold
	"free_nodes",        // capacity - run_nodes
	"run_remain_node_h", // node-hours left before their limits
	"run_user_nodes",    // nodes the same user holds
	"shadow_h",          // when enough nodes free up if running jobs ran to their limits, ignoring pending jobs
	"fcfs_h",            // start in a first-come-first-served replay of the pending jobs at their limits
	"recent_mean_h",     // mean wait of the last RecentWindow starts (the baseline)
	"recent_median_h",   // their median
	"recent_mean10_h",   // mean wait of the last 10 starts
	"recent_under1m",    // fraction of them that waited under a minute
	"last_start_age_h",  // time since anything last started (-1: none known)
	"hour",              // hour of the day (cluster wall clock)
	"weekday",           // 0 = Sunday
}

// featureEnv is what the features need besides the state and request:
// the model's view of the partition.
type featureEnv struct {
	capacity     int
	gpusPerNode  int
	defaultLimit time.Duration
}

func (e featureEnv) nodes(n, gpus int) int {
	if n > 0 {
		return n
	}
	if gpus > 0 && e.gpusPerNode > 0 {
		return (gpus + e.gpusPerNode - 1) / e.gpusPerNode
	}
	return 1
}

func (e featureEnv) limit(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return e.defaultLimit
}

func samePartition(a, b string) bool { return a == "" || b == "" || a == b }

func hours(d time.Duration) float64 { return d.Hours() }

// features computes the feature vector into dst (len(featureNames)).
// Only jobs in the request's partition count.
func (e featureEnv) features(st QueueState, req Request, scratch *featureScratch, dst []float64) {
	now := st.Now
	capacity := e.capacity
	if st.TotalNodes > 0 {
		capacity = st.TotalNodes
	}
	reqNodes := e.nodes(req.Nodes, req.GPUs)
	reqLimit := e.limit(req.TimeLimit)

	var pendJobs, pendNodes, pendUser int
	var pendNodeH, pendOldest float64
	for _, q := range st.Pending {
		if !samePartition(req.Partition, q.Partition) {
			continue
		}
		n := e.nodes(q.Nodes, q.GPUs)
		pendJobs++
		pendNodes += n
		pendNodeH += float64(n) * hours(e.limit(q.TimeLimit))
		if req.User != "" && q.User == req.User {
			pendUser++
		}
		if !q.Submit.IsZero() {
			pendOldest = math.Max(pendOldest, hours(now.Sub(q.Submit)))
		}
	}

	// Running jobs end, at the latest, at their limit; one already past it
	// (Slurm's grace time) is taken to end now.
	ends := scratch.ends[:0]
	var runJobs, runNodes, runUser int
	var runRemain float64
	for _, q := range st.Running {
		if !samePartition(req.Partition, q.Partition) {
			continue
		}
		n := e.nodes(q.Nodes, q.GPUs)
		end := q.Start.Add(e.limit(q.TimeLimit))
		if end.Before(now) {
			end = now
		}
		runJobs++
		runNodes += n
		runRemain += float64(n) * hours(end.Sub(now))
		if req.User != "" && q.User == req.User {
			runUser += n
		}
		ends = append(ends, nodeEnd{end: end, nodes: n})
	}
	// A stale or learned capacity may be below what runs now.
	capacity = max(capacity, runNodes, 1)
	free := capacity - runNodes
	need := min(reqNodes, capacity)

	// shadow: the earliest time need nodes are free, pending jobs aside.
	slices.SortFunc(ends, func(a, b nodeEnd) int { return a.end.Compare(b.end) })
	shadow := 0.0
	if free < need {
		f := free
		for _, x := range ends {
			f += x.nodes
			if f >= need {
				shadow = hours(x.end.Sub(now))
				break
			}
		}
	}

	// fcfs: pending jobs in order, then this one, each starting when the
	// one before it has started and enough nodes are free, running to
	// its limit. No backfill: an upper-bound-like estimate that the trees
	// rescale.
	h := endHeap(append(scratch.heap[:0], ends...))
	heap.Init(&h)
	t, f := now, free
	place := func(n int, lim time.Duration) time.Time {
		n = min(n, capacity)
		for f < n && h.Len() > 0 {
			x := heap.Pop(&h).(nodeEnd)
			if x.end.After(t) {
				t = x.end
			}
			f += x.nodes
		}
		heap.Push(&h, nodeEnd{end: t.Add(lim), nodes: n})
		f -= n
		return t
	}
	for _, q := range st.Pending {
		if samePartition(req.Partition, q.Partition) {
			place(e.nodes(q.Nodes, q.GPUs), e.limit(q.TimeLimit))
		}
	}
	fcfs := hours(place(need, reqLimit).Sub(now))
	scratch.ends, scratch.heap = ends, h

	// History: the latest RecentWindow starts at or before now.
	rec := latestStarts(scratch.rec[:0], st, req)
	scratch.rec = rec
	waits := scratch.waits[:0]
	var sum, sum10 float64
	under := 0
	for i, r := range rec {
		w := hours(r.wait)
		waits = append(waits, w)
		sum += w
		if i < 10 {
			sum10 += w
		}
		if r.wait < time.Minute {
			under++
		}
	}
	var mean, median, mean10, underFrac float64
	lastAge := -1.0
	if len(rec) > 0 {
		mean = sum / float64(len(rec))
		mean10 = sum10 / float64(min(10, len(rec)))
		underFrac = float64(under) / float64(len(rec))
		lastAge = hours(now.Sub(rec[0].start))
		sort.Float64s(waits)
		median = waits[len(waits)/2]
		if len(waits)%2 == 0 {
			median = (waits[len(waits)/2-1] + waits[len(waits)/2]) / 2
		}
	}
	scratch.waits = waits

	v := dst[:0]
	v = append(v,
		float64(reqNodes), hours(reqLimit), float64(reqNodes)/float64(capacity),
		float64(pendJobs), float64(pendNodes), pendNodeH, float64(pendUser), pendOldest,
		float64(runJobs), float64(runNodes), float64(free), runRemain, float64(runUser),
		shadow, fcfs,
		mean, median, mean10, underFrac, lastAge,
		float64(now.Hour()), float64(now.Weekday()),
	)
	if len(v) != len(featureNames) {
		panic("queuewait: feature vector and featureNames disagree")
	}
}

// featureScratch holds buffers reused across calls (replay computes
// features for every job of a trace).
type featureScratch struct {
	ends  []nodeEnd
	heap  []nodeEnd
	rec   []startWait
	waits []float64
}

type nodeEnd struct {
	end   time.Time
	nodes int
}

type endHeap []nodeEnd

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(a, b int) bool { return h[a].end.Before(h[b].end) }
func (h endHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(nodeEnd)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type startWait struct {
	start time.Time
	wait  time.Duration
}

// latestStarts returns the RecentWindow latest starts at or before
// st.Now in req's partition, latest first (ties keep st.Recent's order).
func latestStarts(dst []startWait, st QueueState, req Request) []startWait {
	for _, q := range st.Recent {
		if !samePartition(req.Partition, q.Partition) || q.Start.IsZero() || q.Start.After(st.Now) {
			continue
		}
		dst = append(dst, startWait{q.Start, q.Start.Sub(q.Submit)})
	}
	slices.SortStableFunc(dst, func(a, b startWait) int { return b.start.Compare(a.start) })
	if len(dst) > RecentWindow {
		dst = dst[:RecentWindow]
	}
	return dst
}

// baselineWait is the baseline: the mean wait of the last RecentWindow
// jobs of the request's partition that started at or before now (their
// waits are known then). With no such job it predicts no wait.
func baselineWait(st QueueState, req Request) time.Duration {
	rec := latestStarts(nil, st, req)
	if len(rec) == 0 {
		return 0
	}
	var sum time.Duration
	for _, r := range rec {
		sum += r.wait
	}
	return sum / time.Duration(len(rec))
}
