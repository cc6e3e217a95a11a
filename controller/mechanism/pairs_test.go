package mechanism

import (
	"math/rand"
	"strconv"
	"testing"
)

// TestPairRunsItsMembers: a pair with the whole share of one GPU runs both
// its members on it every round, and neither also runs alone.
func TestPairRunsItsMembers(t *testing.T) {
	t.Parallel()
	m := New([]int{1}, 1, 360, 1)
	reqs := []Request{
		{ID: "a", Scale: 1, X: []float64{0}},
		{ID: "b", Scale: 1, X: []float64{0}},
		{ID: "a+b", Scale: 1, X: []float64{1}, Members: []int{0, 1}},
	}
	m.Reset(reqs)
	for round := 0; round < 5; round++ {
		r := m.Round(reqs)
		if r.Placed[2].Type != 0 || r.Via[0] != 2 || r.Via[1] != 2 || r.Placed[0].Type != 0 || r.Placed[1].Type != 0 {
			t.Fatalf("round %d: %+v", round, r)
		}
		if r.Migrations != 0 {
			t.Fatalf("round %d: %d migrations of jobs that stayed", round, r.Migrations)
		}
	}
}

// TestPairsShareAMember: two pairs with one member in common never run in
// the same round; each gets its half of the rounds, give or take the round
// the greedy order spends on b and c alone.
func TestPairsShareAMember(t *testing.T) {
	t.Parallel()
	m := New([]int{2}, 2, 360, 1)
	reqs := []Request{
		{ID: "a", Scale: 1, X: []float64{0}},
		{ID: "b", Scale: 1, X: []float64{0.5}},
		{ID: "c", Scale: 1, X: []float64{0.5}},
		{ID: "a+b", Scale: 1, X: []float64{0.5}, Members: []int{0, 1}},
		{ID: "a+c", Scale: 1, X: []float64{0.5}, Members: []int{0, 2}},
	}
	m.Reset(reqs)
	runs := map[int]int{}
	for round := 0; round < 20; round++ {
		r := m.Round(reqs)
		if r.Placed[3].Type >= 0 && r.Placed[4].Type >= 0 {
			t.Fatalf("round %d: both pairs of a run: %+v", round, r)
		}
		for i := 3; i <= 4; i++ {
			if r.Placed[i].Type >= 0 {
				runs[i]++
			}
		}
	}
	if runs[3] < 9 || runs[3] > 11 || runs[4] < 9 || runs[4] > 11 {
		t.Fatalf("pairs ran %v rounds of 20, want 10 each, give or take one", runs)
	}
}

// TestPairsRandom: whatever the shares, each round every job runs at most
// once (alone or in one pair), a member runs where its pair runs, no type
// holds more than its GPUs, and a pair without a share never runs.
func TestPairsRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(9))
	for it := 0; it < 200; it++ {
		K := 1 + rng.Intn(3)
		caps := make([]int, K)
		for k := range caps {
			caps[k] = 1 + rng.Intn(4)
		}
		m := New(caps, 2, 360, int64(it))
		n := 2 + rng.Intn(6)
		var reqs []Request
		for j := 0; j < n; j++ {
			reqs = append(reqs, Request{ID: strconv.Itoa(j), Scale: 1, X: randRow(rng, K)})
		}
		for q := 0; q < rng.Intn(2*n); q++ {
			a, b := rng.Intn(n), rng.Intn(n)
			if a == b {
				continue
			}
			reqs = append(reqs, Request{ID: strconv.Itoa(a) + "+" + strconv.Itoa(b) + "#" + strconv.Itoa(q), Scale: 1,
				X: randRow(rng, K), Members: []int{a, b}})
		}
		m.Reset(reqs)
		for round := 0; round < 8; round++ {
			r := m.Round(reqs)
			used := make([]int, K)
			seen := make([]int, n)
			for i, q := range reqs {
				pl := r.Placed[i]
				if len(q.Members) == 0 {
					if pl.Type >= 0 && r.Via[i] < 0 {
						used[pl.Type]++
						seen[i]++
					}
					continue
				}
				if pl.Type < 0 {
					continue
				}
				if q.X[pl.Type] <= 0 {
					t.Fatalf("it %d round %d: pair %s runs on type %d without a share", it, round, q.ID, pl.Type)
				}
				used[pl.Type]++
				for _, mb := range q.Members {
					seen[mb]++
					if r.Via[mb] != i || r.Placed[mb].Type != pl.Type {
						t.Fatalf("it %d round %d: member %d of %s placed %+v via %d", it, round, mb, q.ID, r.Placed[mb], r.Via[mb])
					}
				}
			}
			for j, c := range seen {
				if c > 1 {
					t.Fatalf("it %d round %d: job %d runs %d times", it, round, j, c)
				}
			}
			for k, u := range used {
				if u > caps[k] {
					t.Fatalf("it %d round %d: type %d holds %d of %d GPUs", it, round, k, u, caps[k])
				}
			}
		}
	}
}

func randRow(rng *rand.Rand, K int) []float64 {
	row := make([]float64, K)
	left := 1.0
	for k := range row {
		if rng.Intn(3) > 0 {
			row[k] = left * rng.Float64()
			left -= row[k]
		}
	}
	return row
}
