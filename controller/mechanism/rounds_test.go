package mechanism

import (
	"fmt"
	"math/rand"
	"testing"
)

// TestLeaseExtension: a job that stays on its type keeps exactly its GPUs,
// even when another job is placed on the same type around it.
func TestLeaseExtension(t *testing.T) {
	m := New([]int{4}, 4, 360, 1)
	a := Request{ID: "a", Scale: 2, X: []float64{1}}
	m.Reset([]Request{a})
	r1 := m.Round([]Request{a})
	if r1.Placed[0].Type != 0 || len(r1.Placed[0].Nodes) != 2 || r1.LeaseExtensions != 0 {
		t.Fatalf("round 1: %+v", r1)
	}
	b := Request{ID: "b", Scale: 2, X: []float64{1}}
	m.Reset([]Request{a, b})
	r2 := m.Round([]Request{a, b})
	if r2.Placed[0].Type != 0 || r2.Placed[1].Type != 0 {
		t.Fatalf("round 2: both should run: %+v", r2)
	}
	if fmt.Sprint(r2.Placed[0].Nodes) != fmt.Sprint(r1.Placed[0].Nodes) || r2.LeaseExtensions != 1 || r2.Migrations != 0 {
		t.Fatalf("a lost its GPUs or was miscounted: %+v then %+v", r1, r2)
	}
}

// TestMigrationCounting on a hand-made case: one GPU of each of two types,
// job a's share moves from type 0 to type 1 while it keeps running, which
// is one migration; job b, placed for the first time, is none.
func TestMigrationCounting(t *testing.T) {
	m := New([]int{1, 1}, 1, 360, 1)
	a := Request{ID: "a", Scale: 1, X: []float64{1, 0}}
	m.Reset([]Request{a})
	if r := m.Round([]Request{a}); r.Placed[0].Type != 0 || r.Migrations != 0 {
		t.Fatalf("round 1: %+v", r)
	}
	a.X = []float64{0, 1}
	b := Request{ID: "b", Scale: 1, X: []float64{1, 0}}
	m.Reset([]Request{a, b})
	r := m.Round([]Request{a, b})
	if r.Placed[0].Type != 1 || r.Placed[1].Type != 0 {
		t.Fatalf("round 2 placement: %+v", r)
	}
	if r.Migrations != 1 || !r.Migrated[0] || r.Migrated[1] {
		t.Fatalf("round 2 migrations: %+v", r)
	}
	// Staying put afterwards: no more migrations, both leases extended.
	r = m.Round([]Request{a, b})
	if r.Migrations != 0 || r.LeaseExtensions != 2 {
		t.Fatalf("round 3: %+v", r)
	}
}

// TestSharesFollowAllocation: two jobs on one GPU with shares 3/4 and 1/4
// get 3 and 1 of every 4 rounds, as the priorities (allocation over time
// received) demand.
func TestSharesFollowAllocation(t *testing.T) {
	m := New([]int{1}, 1, 360, 1)
	reqs := []Request{{ID: "a", Scale: 1, X: []float64{0.75}}, {ID: "b", Scale: 1, X: []float64{0.25}}}
	m.Reset(reqs)
	got := [2]int{}
	for i := 0; i < 40; i++ {
		r := m.Round(reqs)
		for j, p := range r.Placed {
			if p.Type == 0 {
				got[j]++
			}
		}
	}
	if got[0] != 30 || got[1] != 10 {
		t.Fatalf("rounds per job %v, want [30 10]", got)
	}
}

// TestCapacityNeverExceeded: random jobs, scales and allocations, with jobs
// coming and going: no round uses more GPUs of a type than it has, no node
// holds more than its GPUs, and every job runs on a type it can run on.
func TestCapacityNeverExceeded(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	capacity := []int{8, 6, 4}
	m := New(capacity, 4, 360, 2)
	var reqs []Request
	id := 0
	for round := 0; round < 300; round++ {
		changed := false
		for rng.Float64() < 0.5 {
			s := []int{1, 1, 1, 2, 4}[rng.Intn(5)]
			rates := []float64{1 + rng.Float64(), rng.Float64(), float64(rng.Intn(2))}
			reqs = append(reqs, Request{ID: fmt.Sprint(id), Scale: s, Rates: rates})
			id++
			changed = true
		}
		if len(reqs) > 0 && rng.Float64() < 0.3 {
			i := rng.Intn(len(reqs))
			m.Forget(reqs[i].ID)
			reqs = append(reqs[:i], reqs[i+1:]...)
			changed = true
		}
		if changed {
			for i := range reqs {
				x := make([]float64, 3)
				for k := range x {
					if reqs[i].Rates[k] > 0 {
						x[k] = rng.Float64() / 3
					}
				}
				reqs[i].X = x
			}
			m.Reset(reqs)
		}
		r := m.Round(reqs)
		used := make([]int, 3)
		nodes := map[[2]int]int{}
		for i, p := range r.Placed {
			if p.Type < 0 {
				continue
			}
			if reqs[i].Rates[p.Type] <= 0 || len(p.Nodes) != reqs[i].Scale {
				t.Fatalf("round %d: job %s placed badly: %+v", round, reqs[i].ID, p)
			}
			used[p.Type] += reqs[i].Scale
			for _, n := range p.Nodes {
				nodes[[2]int{p.Type, n}]++
			}
		}
		for k := range used {
			if used[k] > capacity[k] {
				t.Fatalf("round %d: type %d uses %d of %d GPUs", round, k, used[k], capacity[k])
			}
		}
		for tn, c := range nodes {
			if c > min(4, capacity[tn[0]]-4*tn[1]) {
				t.Fatalf("round %d: node %v holds %d GPUs", round, tn, c)
			}
		}
	}
}

// TestUnplaceKeepsTheHead: four jobs with equal shares wait for two GPUs
// that Slurm never frees. Without Unplace the mechanism gives the GPUs
// to the two jobs that have had them least, so the pair it names takes
// turns every round; with it (Rota's round loop: a pending job it names
// did not run), the same two stay at the head round after round.
func TestUnplaceKeepsTheHead(t *testing.T) {
	t.Parallel()
	for _, unplace := range []bool{false, true} {
		m := New([]int{2}, 2, 60, 1)
		var reqs []Request
		for _, id := range []string{"a", "b", "c", "d"} {
			reqs = append(reqs, Request{ID: id, Scale: 1, X: []float64{0.5}})
		}
		m.Reset(reqs)
		var heads []string
		for range 6 {
			r := m.Round(reqs)
			head := ""
			for i, p := range r.Placed {
				if p.Type >= 0 {
					head += reqs[i].ID
					if unplace {
						m.Unplace(reqs[i].ID)
					}
				}
			}
			heads = append(heads, head)
		}
		changes := 0
		for i := 1; i < len(heads); i++ {
			if heads[i] != heads[i-1] {
				changes++
			}
		}
		if unplace && changes != 0 {
			t.Errorf("with Unplace the head changed %d times: %v", changes, heads)
		}
		if !unplace && changes == 0 {
			t.Errorf("without Unplace the head never changed (%v): the test shows nothing", heads)
		}
	}
}
