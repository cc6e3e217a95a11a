// Package trend keeps the controller's fairness and job completion times
// over time: a bounded ring of samples, one per round, each computed from
// the GPU jobs in Slurm's queue at that moment. The web view plots it.
//
// Fairness is Jain's index over the entities (accounts, else users) with
// GPU jobs in the queue, of what each holds: the GPUs of its running jobs,
// each weighted by its type's relative speed. 1 means every such entity
// holds as much as every other; 1/n that one of n holds everything. It is
// unweighted: an account with more fair-share shares that holds more
// lowers it.
//
// A job's completion time (JCT) is from its submission to the first sample
// that no longer finds it in the queue, having seen it run: a job cancelled
// while pending is not counted, and one requeued (a migration) keeps its
// id and so its submission time.
package trend

import (
	"slices"
	"sync"
	"time"
)

// Job is one GPU job in the queue at a sample.
type Job struct {
	ID uint32
	// Entity is its account, else its user.
	Entity  string
	Submit  time.Time
	Running bool
	// Power is what it holds while running: its GPUs, each weighted by
	// the type's relative speed (1 when unknown).
	Power float64
}

// Sample is the queue at one moment.
type Sample struct {
	At               time.Time
	Running, Pending int
	// Entities is how many entities have GPU jobs in the queue; Jain
	// their fairness index, meaningful only when HasJain (some entity
	// holds GPUs).
	Entities int
	Jain     float64
	HasJain  bool
	// Finished is how many jobs left the queue within the window before
	// At; MeanJCT and P50JCT their completion times in seconds (0 when
	// none finished).
	Finished        int
	MeanJCT, P50JCT float64
}

// Sampler takes samples and keeps the latest ones.
type Sampler struct {
	mu     sync.Mutex
	size   int
	window time.Duration
	ring   []Sample // oldest first once full: ring[next:] then ring[:next]
	next   int
	// queue is the last sample's jobs: submission time, and whether it
	// was seen running.
	queue map[uint32]queued
	done  []finish // within window, oldest first
}

type queued struct {
	submit time.Time
	ran    bool
}

type finish struct {
	at  time.Time
	jct float64
}

// New keeps size samples; JCTs are averaged over jobs finished within
// window of each sample.
func New(size int, window time.Duration) *Sampler {
	return &Sampler{size: max(size, 1), window: window, queue: map[uint32]queued{}}
}

// Observe takes a sample of jobs (the queue's GPU jobs) at now, keeps it
// and returns it.
func (s *Sampler) Observe(now time.Time, jobs []Job) Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	smp := Sample{At: now}
	held := map[string]float64{}
	next := make(map[uint32]queued, len(jobs))
	for _, j := range jobs {
		q := s.queue[j.ID]
		if q.submit.IsZero() || !j.Submit.IsZero() {
			q.submit = j.Submit
		}
		q.ran = q.ran || j.Running
		next[j.ID] = q
		held[j.Entity] += 0 // an entity that only waits counts, holding nothing
		if j.Running {
			smp.Running++
			held[j.Entity] += max(j.Power, 0)
		} else {
			smp.Pending++
		}
	}
	for id, q := range s.queue {
		if _, still := next[id]; !still && q.ran && !q.submit.IsZero() {
			s.done = append(s.done, finish{at: now, jct: now.Sub(q.submit).Seconds()})
		}
	}
	s.queue = next
	cut := 0
	for cut < len(s.done) && now.Sub(s.done[cut].at) > s.window {
		cut++
	}
	s.done = slices.Delete(s.done, 0, cut)

	smp.Entities = len(held)
	var sum, sq float64
	for _, x := range held {
		sum += x
		sq += x * x
	}
	if sum > 0 {
		smp.Jain, smp.HasJain = sum*sum/(float64(len(held))*sq), true
	}
	if n := len(s.done); n > 0 {
		jcts := make([]float64, n)
		var tot float64
		for i, f := range s.done {
			jcts[i] = f.jct
			tot += f.jct
		}
		slices.Sort(jcts)
		smp.Finished, smp.MeanJCT = n, tot/float64(n)
		if n%2 == 1 {
			smp.P50JCT = jcts[n/2]
		} else {
			smp.P50JCT = (jcts[n/2-1] + jcts[n/2]) / 2
		}
	}
	if len(s.ring) < s.size {
		s.ring = append(s.ring, smp)
	} else {
		s.ring[s.next] = smp
		s.next = (s.next + 1) % s.size
	}
	return smp
}

// Samples returns the kept samples, oldest first.
func (s *Sampler) Samples() []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, 0, len(s.ring))
	out = append(out, s.ring[s.next:]...)
	return append(out, s.ring[:s.next]...)
}
