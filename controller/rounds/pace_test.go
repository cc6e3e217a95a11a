package rounds

import (
	"context"
	"testing"
	"time"
)

func TestPaceCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p  Pace
		ok bool
	}{{DefaultPace(), true}, {Pace{}, true}, {Pace{Batch: -1}, false}, {Pace{Batch: 1, Share: 1.5}, false}, {Pace{Batch: 1, Share: -0.1}, false}} {
		if err := c.p.Check(); (err == nil) != c.ok {
			t.Errorf("%+v: Check() = %v, want ok=%v", c.p, err, c.ok)
		}
	}
}

// TestPaceGaps: the gap function a slurm.PacedUpdater calls after each
// update pauses after every Batch of them, as each does.
func TestPaceGaps(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		pace   Pace
		n      int
		pauses string
	}{
		{"the zero pace never pauses", Pace{}, 5, ""},
		{"one at a time, half the time spent updating", Pace{Batch: 1, Share: 0.5}, 3, "10ms 10ms 10ms "},
		{"every second update, a quarter", Pace{Batch: 2, Share: 0.25}, 5, "60ms 60ms "},
		{"a pause is bounded", Pace{Batch: 1, Share: 0.01, MaxPause: 50 * time.Millisecond}, 2, "50ms 50ms "},
		{"share 1: no pause", Pace{Batch: 1, Share: 1}, 3, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := time.Unix(0, 0)
			var pauses string
			p := c.pace
			p.now = func() time.Time { return clock }
			p.sleep = func(_ context.Context, d time.Duration) { pauses += d.String() + " "; clock = clock.Add(d) }
			gap := p.gaps(context.Background(), nil)
			for range c.n {
				clock = clock.Add(10 * time.Millisecond) // the update
				if !gap() {
					t.Fatal("gap stopped with the context live")
				}
			}
			if pauses != c.pauses {
				t.Errorf("pauses %q, want %q", pauses, c.pauses)
			}
		})
	}
	t.Run("false once the context ends", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		clock := time.Unix(0, 0)
		p := Pace{Batch: 1, Share: 0.5, sleep: func(context.Context, time.Duration) { cancel() },
			now: func() time.Time { clock = clock.Add(time.Millisecond); return clock }}
		if p.gaps(ctx, nil)() {
			t.Error("gap went on after the context ended mid-pause")
		}
	})
}

// TestPaceHolds: after an update's pause the gap waits, in polls of at
// most holdPoll, for as long as the hold asks, and asks again after each.
func TestPaceHolds(t *testing.T) {
	t.Parallel()
	clock := time.Unix(0, 0)
	var pauses string
	p := Pace{Batch: 1, Share: 0.5, now: func() time.Time { return clock },
		sleep: func(_ context.Context, d time.Duration) { pauses += d.String() + " "; clock = clock.Add(d) }}
	// A save due at 30 ms, written (the hold ends) at 75 ms.
	hold := func(now time.Time) time.Duration {
		if ms := now.Sub(time.Unix(0, 0)).Milliseconds(); ms >= 30 && ms < 75 {
			return time.Duration(75-ms) * time.Millisecond
		}
		return 0
	}
	gap := p.gaps(context.Background(), hold)
	for range 3 {
		clock = clock.Add(10 * time.Millisecond)
		if !gap() {
			t.Fatal("gap stopped with the context live")
		}
	}
	// 10 ms update, 10 ms pause (20); 10 ms, 10 ms (40), held 20+15 to 75;
	// 10 ms, 10 ms.
	if want := "10ms 10ms 20ms 15ms 10ms "; pauses != want {
		t.Errorf("pauses %q, want %q", pauses, want)
	}
}
