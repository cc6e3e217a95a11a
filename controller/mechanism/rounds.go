// Package mechanism turns a policy's fractional allocation into concrete
// rounds, as Gavel's round-based mechanism does: each round every (job,
// type) pair gets priority = allocated share / share received so far, jobs
// are placed greedily by priority, a job that stays on its type keeps its
// GPUs (lease extension), and multi-GPU jobs are packed on as few nodes as
// possible. It only applies decisions; it never makes them.
package mechanism

import (
	"math"
	"sort"
)

// Mechanism keeps the per-job history priorities need.
type Mechanism struct {
	Capacity    []int // GPUs per type
	GPUsPerNode int   // node size used for packing (>= 1)

	received map[string][]float64 // rounds run per type
	rounds   map[string]float64   // rounds the job has been eligible
	last     map[string]Placement
}

// Placement is where a job runs this round.
type Placement struct {
	Type  int
	Nodes []int // node index within the type, one entry per GPU
}

// Request is one job as the mechanism sees it.
type Request struct {
	ID    string
	Scale int
	X     []float64 // the policy's allocation row
}

// Result is one round's outcome.
type Result struct {
	Placed     map[string]Placement
	Migrations []string // jobs whose type changed since they last ran
}

// New makes a mechanism for a cluster.
func New(capacity []int, gpusPerNode int) *Mechanism {
	if gpusPerNode < 1 {
		gpusPerNode = 1
	}
	return &Mechanism{Capacity: capacity, GPUsPerNode: gpusPerNode,
		received: map[string][]float64{}, rounds: map[string]float64{}, last: map[string]Placement{}}
}

// Forget drops a finished job's history.
func (m *Mechanism) Forget(id string) {
	delete(m.received, id)
	delete(m.rounds, id)
	delete(m.last, id)
}

// Round decides one round.
func (m *Mechanism) Round(reqs []Request) Result {
	K := len(m.Capacity)
	type pair struct {
		i, k int
		prio float64
	}
	var pairs []pair
	for i, r := range reqs {
		if m.received[r.ID] == nil {
			m.received[r.ID] = make([]float64, K)
		}
		m.rounds[r.ID]++
		for k, x := range r.X {
			if x <= 1e-9 {
				continue
			}
			got := m.received[r.ID][k] / m.rounds[r.ID]
			prio := x / math.Max(got, 1e-9)
			pairs = append(pairs, pair{i, k, prio})
		}
	}
	// Highest priority first; ties go to the job that already runs there
	// (so leases extend), then to the lower index for determinism.
	sort.SliceStable(pairs, func(a, b int) bool {
		if pairs[a].prio != pairs[b].prio {
			return pairs[a].prio > pairs[b].prio
		}
		return false
	})
	free := make([]int, K)
	copy(free, m.Capacity)
	chosen := map[int]int{}
	for _, p := range pairs {
		if _, done := chosen[p.i]; done {
			continue
		}
		s := scale(reqs[p.i])
		if free[p.k] >= s {
			free[p.k] -= s
			chosen[p.i] = p.k
		}
	}
	// Placement: staying jobs keep their GPUs first, then the rest are
	// packed largest first onto the fullest nodes that fit them.
	nodesFree := make([][]int, K)
	for k, c := range m.Capacity {
		n := (c + m.GPUsPerNode - 1) / m.GPUsPerNode
		nodesFree[k] = make([]int, n)
		for i := range nodesFree[k] {
			nodesFree[k][i] = min(m.GPUsPerNode, c-i*m.GPUsPerNode)
		}
	}
	res := Result{Placed: map[string]Placement{}}
	var movers []int
	for i, k := range chosen {
		r := reqs[i]
		if old, ok := m.last[r.ID]; ok && old.Type == k {
			for _, n := range old.Nodes {
				nodesFree[k][n]--
			}
			res.Placed[r.ID] = old
			continue
		}
		movers = append(movers, i)
	}
	sort.Slice(movers, func(a, b int) bool {
		sa, sb := scale(reqs[movers[a]]), scale(reqs[movers[b]])
		if sa != sb {
			return sa > sb
		}
		return reqs[movers[a]].ID < reqs[movers[b]].ID
	})
	for _, i := range movers {
		r, k := reqs[i], chosen[i]
		res.Placed[r.ID] = Placement{Type: k, Nodes: pack(nodesFree[k], scale(r))}
		if old, ok := m.last[r.ID]; ok && old.Type != k {
			res.Migrations = append(res.Migrations, r.ID)
		}
	}
	sort.Strings(res.Migrations)
	for id, pl := range res.Placed {
		m.received[id][pl.Type]++
		m.last[id] = pl
	}
	return res
}

func scale(r Request) int {
	if r.Scale < 1 {
		return 1
	}
	return r.Scale
}

// pack takes s GPUs: from the single node with the least room that still
// fits them all, else from the nodes with the most room first.
func pack(free []int, s int) []int {
	best := -1
	for n, f := range free {
		if f >= s && (best < 0 || f < free[best]) {
			best = n
		}
	}
	var out []int
	if best >= 0 {
		free[best] -= s
		for i := 0; i < s; i++ {
			out = append(out, best)
		}
		return out
	}
	order := make([]int, len(free))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return free[order[a]] > free[order[b]] })
	for _, n := range order {
		for free[n] > 0 && len(out) < s {
			free[n]--
			out = append(out, n)
		}
	}
	return out
}
