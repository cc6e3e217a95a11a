package rounds

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestPace(t *testing.T) {
	t.Parallel()
	// Each batch takes 10 ms per update on the fake clock.
	cases := []struct {
		name    string
		pace    Pace
		n       int
		batches string
		pauses  string
	}{
		{"the zero pace sends everything at once", Pace{}, 5, "[0,5)", ""},
		{"batches, half the time spent updating", Pace{Batch: 2, Share: 0.5}, 5, "[0,2)[2,4)[4,5)", "20ms 20ms "},
		{"a quarter: three times as long paused", Pace{Batch: 3, Share: 0.25}, 6, "[0,3)[3,6)", "90ms "},
		{"share 1: no pause", Pace{Batch: 2, Share: 1}, 4, "[0,2)[2,4)", ""},
		{"a pause is bounded", Pace{Batch: 4, Share: 0.1, MaxPause: 100 * time.Millisecond}, 8, "[0,4)[4,8)", "100ms "},
		{"nothing to send", DefaultPace(), 0, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := time.Unix(0, 0)
			var batches, pauses string
			p := c.pace
			p.now = func() time.Time { return clock }
			p.sleep = func(_ context.Context, d time.Duration) { pauses += d.String() + " "; clock = clock.Add(d) }
			p.each(context.Background(), c.n, func(lo, hi int) {
				batches += fmt.Sprintf("[%d,%d)", lo, hi)
				clock = clock.Add(time.Duration(hi-lo) * 10 * time.Millisecond)
			})
			if batches != c.batches || pauses != c.pauses {
				t.Errorf("batches %q pauses %q, want %q and %q", batches, pauses, c.batches, c.pauses)
			}
		})
	}
}

func TestPaceStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var sent int
	p := Pace{Batch: 2, Share: 0.5, sleep: func(context.Context, time.Duration) { cancel() }}
	p.each(ctx, 10, func(lo, hi int) { sent += hi - lo })
	if sent != 2 {
		t.Errorf("sent %d updates after the context ended mid-pause, want 2 (the first batch)", sent)
	}
}

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
