package trend

import (
	"math"
	"testing"
	"time"
)

func TestJain(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name     string
		jobs     []Job
		jain     float64
		hasJain  bool
		entities int
	}{
		{"two entities holding alike", []Job{{ID: 1, Entity: "a", Running: true, Power: 2}, {ID: 2, Entity: "b", Running: true, Power: 2}}, 1, true, 2},
		{"one of two holds all", []Job{{ID: 1, Entity: "a", Running: true, Power: 4}, {ID: 2, Entity: "b"}}, 0.5, true, 2},
		{"speed counts", []Job{{ID: 1, Entity: "a", Running: true, Power: 3}, {ID: 2, Entity: "b", Running: true, Power: 1}}, 16.0 / 20, true, 2},
		{"jobs of one entity add up", []Job{{ID: 1, Entity: "a", Running: true, Power: 1}, {ID: 2, Entity: "a", Running: true, Power: 1},
			{ID: 3, Entity: "b", Running: true, Power: 2}}, 1, true, 2},
		{"nothing held: no index", []Job{{ID: 1, Entity: "a"}}, 0, false, 1},
		{"empty queue", nil, 0, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(4, time.Hour).Observe(t0, tc.jobs)
			if s.HasJain != tc.hasJain || math.Abs(s.Jain-tc.jain) > 1e-9 || s.Entities != tc.entities {
				t.Fatalf("sample %+v, want jain %v (%v) over %d", s, tc.jain, tc.hasJain, tc.entities)
			}
		})
	}
}

// A job that ran and left the queue finished; one cancelled while pending
// did not; the window forgets old ones.
func TestJCT(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	s := New(10, 10*time.Minute)
	s.Observe(t0, []Job{
		{ID: 1, Submit: t0.Add(-time.Minute), Running: true},
		{ID: 2, Submit: t0.Add(-3 * time.Minute), Running: true},
		{ID: 3, Submit: t0},
		{ID: 4, Submit: t0.Add(-5 * time.Minute), Running: true},
	})
	// 1 and 2 finish, 3 is cancelled, 4 is requeued (pending again).
	got := s.Observe(t0.Add(time.Minute), []Job{{ID: 4, Submit: t0.Add(-5 * time.Minute)}})
	if got.Finished != 2 || got.MeanJCT != 180 || got.P50JCT != 180 {
		t.Fatalf("after two finish: %+v, want 2 finished, mean and median 180 s", got)
	}
	got = s.Observe(t0.Add(2*time.Minute), []Job{{ID: 4, Submit: t0.Add(-5 * time.Minute), Running: true}})
	if got.Finished != 2 {
		t.Fatalf("the requeued job finished? %+v", got)
	}
	got = s.Observe(t0.Add(3*time.Minute), nil)
	if got.Finished != 3 || got.P50JCT != 240 || got.MeanJCT != (120+240+480)/3.0 {
		t.Fatalf("after the requeued one: %+v", got)
	}
	got = s.Observe(t0.Add(20*time.Minute), nil)
	if got.Finished != 0 || got.MeanJCT != 0 {
		t.Fatalf("out of the window: %+v", got)
	}
}

func TestRingKeepsTheLatest(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	s := New(3, time.Hour)
	for i := range 5 {
		s.Observe(t0.Add(time.Duration(i)*time.Second), nil)
	}
	got := s.Samples()
	if len(got) != 3 || !got[0].At.Equal(t0.Add(2*time.Second)) || !got[2].At.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("samples %v", got)
	}
}
