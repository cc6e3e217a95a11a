// Package mechanism turns a policy's fractional allocation into concrete
// rounds, as Gavel's round-based mechanism does (Narayanan et al., OSDI
// 2020, section 5):
//
//   - Every job keeps, per GPU type, the time it has run there since the
//     allocation was last reset (starting at half a round, so a new job's
//     priority is large but finite), and every type keeps the sum of those
//     times. The priority of (job j, type k) is X[j][k] divided by j's
//     fraction of type k's time; a pair with X = 0 has priority 0 and only
//     gets GPUs nobody with a share wants.
//   - When the allocation changes (Reset), each job's shortfall against the
//     old allocation is added to a per-type deficit (the tie breaker) and
//     the times start over.
//   - Each round the types are visited in a seeded random order; within a
//     type, jobs are taken by (priority, deficit, allocation) until the type
//     is full; a job runs on at most one type.
//   - A job that stays on its type keeps its GPUs (lease extension); the
//     others are packed largest first, on as few nodes as possible.
//
// It only applies decisions; it never makes them.
package mechanism

import (
	"math/rand"
	"slices"
)

// Mechanism keeps the per-job history priorities need.
type Mechanism struct {
	Capacity    []int   // GPUs per type
	GPUsPerNode int     // node size used for packing (>= 1)
	RoundLength float64 // round length, seconds
	// NoStick turns off the rule that a job holding a type where it has a
	// share competes there first (Gavel's plain greedy; more migrations).
	NoStick bool

	jobs       map[string]*jobState
	workerTime []float64 // per type: sum over jobs of time so far
	sinceReset float64   // seconds of rounds since the last Reset
	rounds     int       // rounds decided so far
	rng        *rand.Rand

	// scratch, reused between rounds
	entries  []entry
	order    []int
	left     []int
	chosen   []int
	nodeFree [][]int
	movers   []int
}

type jobState struct {
	timeSoFar []float64 // per type, seconds since the last reset (+ round/2)
	deficit   []float64 // per type, seconds owed by past allocations
	x         []float64 // allocation row in force since the last reset
	last      Placement
	ran       bool // last is meaningful
	lastRound int  // round in which it last ran
	combo     bool // the state of a pair of jobs sharing GPUs
	// shared: last round it ran in a pair, on the pair's GPUs (which are
	// not its own to keep).
	shared bool
}

type entry struct {
	req        int
	prio, def  float64
	allocation float64
}

// Placement is where a job runs this round.
type Placement struct {
	Type  int   // -1: not running this round
	Nodes []int // node index within the type, one entry per GPU
}

// Request is one job as the mechanism sees it.
type Request struct {
	ID    string
	Scale int
	X     []float64 // the policy's allocation row (nil: no share yet)
	Rates []float64 // throughput per type; 0 = cannot run there (nil: runs anywhere)
	// Members, where set, makes this request a pair of jobs sharing the
	// same GPUs (Gavel's space sharing): the indexes, in the same request
	// list, of the jobs it runs together. It is placed as one unit of
	// Scale GPUs, only while none of its members is placed otherwise, and
	// only where its X gives it a share; its members are placed with it.
	Members []int
}

// Result is one round's outcome, indexed like the requests.
type Result struct {
	Placed []Placement
	// Migrated[i]: request i ran last round on another type.
	Migrated        []bool
	Migrations      int
	LeaseExtensions int // jobs that kept exactly the GPUs they had last round
	// Via[i] is the pair request that placed job request i (Placed[i] is
	// the pair's placement), -1 where it runs alone or not at all.
	Via []int
}

// New makes a mechanism for a cluster; seed drives the per-round order of
// GPU types (Gavel shuffles it each round so no type is always filled
// first).
func New(capacity []int, gpusPerNode int, round float64, seed int64) *Mechanism {
	if gpusPerNode < 1 {
		gpusPerNode = 1
	}
	K := len(capacity)
	m := &Mechanism{Capacity: capacity, GPUsPerNode: gpusPerNode, RoundLength: round,
		jobs: map[string]*jobState{}, workerTime: make([]float64, K), rng: rand.New(rand.NewSource(seed)),
		left: make([]int, K), order: make([]int, K), nodeFree: make([][]int, K)}
	for k, c := range capacity {
		m.nodeFree[k] = make([]int, (c+gpusPerNode-1)/gpusPerNode)
	}
	return m
}

func (m *Mechanism) state(id string) *jobState {
	s := m.jobs[id]
	if s == nil {
		K := len(m.Capacity)
		s = &jobState{timeSoFar: make([]float64, K), deficit: make([]float64, K), x: make([]float64, K),
			last: Placement{Type: -1}}
		for k := range s.timeSoFar {
			s.timeSoFar[k] = m.RoundLength / 2
			m.workerTime[k] += m.RoundLength / 2
		}
		m.jobs[id] = s
	}
	return s
}

// Forget drops a finished job's history.
func (m *Mechanism) Forget(id string) {
	delete(m.jobs, id)
}

// Reset is called when the allocation changes: shortfalls against the
// allocation in force so far become deficits, times start over, and each
// request's new row is taken.
func (m *Mechanism) Reset(reqs []Request) {
	for k := range m.workerTime {
		m.workerTime[k] = 0
	}
	for _, s := range m.jobs {
		for k := range s.timeSoFar {
			s.deficit[k] += s.x[k]*m.sinceReset - (s.timeSoFar[k] - m.RoundLength/2)
			s.timeSoFar[k] = m.RoundLength / 2
			m.workerTime[k] += m.RoundLength / 2
			s.x[k] = 0
		}
	}
	m.sinceReset = 0
	asked := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		asked[r.ID] = true
	}
	for id, s := range m.jobs {
		if s.combo && !asked[id] {
			delete(m.jobs, id)
		}
	}
	for _, r := range reqs {
		s := m.state(r.ID)
		s.combo = len(r.Members) > 0
		for k := range s.x {
			s.x[k] = 0
			if k < len(r.X) {
				s.x[k] = r.X[k]
			}
		}
	}
}

// Round decides one round from the allocation given at the last Reset and
// charges every placed job a full round of time on its type.
func (m *Mechanism) Round(reqs []Request) Result {
	K := len(m.Capacity)
	res := Result{Placed: make([]Placement, len(reqs)), Migrated: make([]bool, len(reqs)), Via: make([]int, len(reqs))}
	states := make([]*jobState, len(reqs))
	for i, r := range reqs {
		states[i] = m.state(r.ID)
		res.Placed[i].Type = -1
		res.Via[i] = -1
	}
	// free says whether request i (a job, or each member of a pair) is
	// still unplaced this round.
	free := func(i int) bool {
		if res.Placed[i].Type >= 0 {
			return false
		}
		for _, mb := range reqs[i].Members {
			if res.Placed[mb].Type >= 0 {
				return false
			}
		}
		return true
	}
	take := func(i, k int) {
		m.left[k] -= scale(reqs[i])
		res.Placed[i].Type = k
		m.chosen = append(m.chosen, i)
		for _, mb := range reqs[i].Members {
			res.Placed[mb].Type = k
			res.Via[mb] = i
		}
	}
	for k := range m.order {
		m.order[k] = k
	}
	m.rng.Shuffle(K, func(a, b int) { m.order[a], m.order[b] = m.order[b], m.order[a] })
	copy(m.left, m.Capacity)
	m.chosen = m.chosen[:0]
	// Pass 0 and 1, Gavel's greedy over shares; in pass 0 a job that ran
	// last round on a type where it has a share competes only there, so a
	// job whose share is split does not hop types every round (it moves
	// when it is outranked where it is). Pass 2: GPUs the shares leave free
	// go to jobs without a share there, a job first to the type it ran on
	// last round, then by deficit.
	for pass := 0; pass <= 2; pass++ {
		if pass == 2 {
			for i, s := range states {
				if k := s.last.Type; len(reqs[i].Members) == 0 && res.Placed[i].Type < 0 && s.ran &&
					s.lastRound == m.rounds-1 && scale(reqs[i]) <= m.left[k] {
					take(i, k)
				}
			}
		}
		for _, k := range m.order {
			if m.left[k] == 0 {
				continue
			}
			m.entries = m.entries[:0]
			w := m.workerTime[k]
			for i, r := range reqs {
				if !free(i) || scale(r) > m.Capacity[k] || (r.Rates != nil && r.Rates[k] <= 0) {
					continue
				}
				s := states[i]
				x := s.x[k]
				if (pass < 2) != (x > 0) || (pass == 2 && len(r.Members) > 0) {
					continue
				}
				// A job that shared a GPU last round competes, in pass 0,
				// only where it shared: its pairs there come first.
				if pass == 0 && !m.NoStick && s.ran && s.lastRound == m.rounds-1 && s.last.Type != k && (s.x[s.last.Type] > 0 || s.shared) {
					continue
				}
				prio := 0.0
				if x > 0 {
					prio = x / (s.timeSoFar[k] / w)
				}
				m.entries = append(m.entries, entry{req: i, prio: prio, def: s.deficit[k], allocation: x})
			}
			slices.SortFunc(m.entries, func(a, b entry) int {
				switch {
				case a.prio != b.prio:
					return cmpDesc(a.prio, b.prio)
				case a.def != b.def:
					return cmpDesc(a.def, b.def)
				case a.allocation != b.allocation:
					return cmpDesc(a.allocation, b.allocation)
				}
				return a.req - b.req
			})
			for _, e := range m.entries {
				if m.left[k] == 0 {
					break
				}
				// a pair may have lost a member to a pair ahead of it
				if scale(reqs[e.req]) > m.left[k] || !free(e.req) {
					continue
				}
				take(e.req, k)
			}
		}
	}
	// Placement: jobs staying on their type keep their GPUs; the rest are
	// packed largest first onto the fullest nodes that fit them.
	for k, c := range m.Capacity {
		for n := range m.nodeFree[k] {
			m.nodeFree[k][n] = min(m.GPUsPerNode, c-n*m.GPUsPerNode)
		}
	}
	m.movers = m.movers[:0]
	for _, i := range m.chosen {
		s, k := states[i], res.Placed[i].Type
		// Only a job that ran in the previous round holds GPUs to keep:
		// those of one preempted earlier may have gone to others since.
		if s.ran && !s.shared && s.last.Type == k && s.lastRound == m.rounds-1 {
			for _, n := range s.last.Nodes {
				m.nodeFree[k][n]--
			}
			res.Placed[i] = s.last
			res.LeaseExtensions++
			continue
		}
		m.movers = append(m.movers, i)
	}
	slices.SortFunc(m.movers, func(a, b int) int {
		if sa, sb := scale(reqs[a]), scale(reqs[b]); sa != sb {
			return sb - sa
		}
		return a - b
	})
	for _, i := range m.movers {
		s, k := states[i], res.Placed[i].Type
		res.Placed[i].Nodes = pack(m.nodeFree[k], scale(reqs[i]))
		if len(reqs[i].Members) == 0 && s.ran && s.lastRound == m.rounds-1 && s.last.Type != k {
			res.Migrated[i] = true
			res.Migrations++
		}
	}
	// A pair's members run where it runs; a member moves (its checkpoint
	// goes with it) when it ran last round on another type.
	for _, i := range m.chosen {
		for _, mb := range reqs[i].Members {
			s := states[mb]
			res.Placed[mb] = res.Placed[i]
			if s.ran && s.lastRound == m.rounds-1 && s.last.Type != res.Placed[i].Type {
				res.Migrated[mb] = true
				res.Migrations++
			}
		}
	}
	// A pair's time is its own (its priority is its share over the time it
	// had); its members' own times stay, as in Gavel's mechanism.
	for _, i := range m.chosen {
		s, pl := states[i], res.Placed[i]
		s.timeSoFar[pl.Type] += m.RoundLength
		m.workerTime[pl.Type] += m.RoundLength
		s.last, s.ran, s.lastRound, s.shared = pl, true, m.rounds, false
		for _, mb := range reqs[i].Members {
			ms := states[mb]
			ms.last, ms.ran, ms.lastRound, ms.shared = pl, true, m.rounds, true
		}
	}
	m.sinceReset += m.RoundLength
	m.rounds++
	return res
}

// Unplace takes back the round that Round just gave job id, which did
// not run it. Rota cannot start a pending job when the mechanism says so,
// only order Slurm's queue: a waiting job credited with rounds it spent
// waiting would fall behind others that waited as long, and the queue's
// order would turn over every round (one Slurm update for each job that
// moved). Its time and its type's stay as if it had not been chosen.
func (m *Mechanism) Unplace(id string) {
	s, ok := m.jobs[id]
	if !ok || !s.ran || s.lastRound != m.rounds-1 {
		return
	}
	k := s.last.Type
	s.timeSoFar[k] -= m.RoundLength
	m.workerTime[k] -= m.RoundLength
	s.ran = false
}

func cmpDesc(a, b float64) int {
	if a > b {
		return -1
	}
	return 1
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
	out := make([]int, 0, s)
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
	slices.SortStableFunc(order, func(a, b int) int { return free[b] - free[a] })
	for _, n := range order {
		for free[n] > 0 && len(out) < s {
			free[n]--
			out = append(out, n)
		}
	}
	return out
}
