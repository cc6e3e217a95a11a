package tick

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A failed restore and failed ticks are logged and the loop goes on,
// ticking at once and then every period, until its context ends; it does
// not tick after that.
func TestLoopGoesOnThroughErrors(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var ticks atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Loop{Every: time.Millisecond, Log: zerolog.New(&buf),
			Restore: func(context.Context) error { return errors.New("bucket gone") },
			Tick: func(context.Context) error {
				if ticks.Add(1) == 3 {
					cancel()
					// Let the ticker fire too: both of the loop's
					// channels are ready, and it must still stop.
					time.Sleep(20 * time.Millisecond)
				}
				return errors.New("squeue failed")
			},
			RestoreFailed: "restore failed", TickFailed: "tick failed"}.Run(ctx)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
	log := buf.String()
	if ticks.Load() != 3 || !strings.Contains(log, "restore failed") || strings.Count(log, "tick failed") != 2 {
		t.Fatalf("%d ticks, log:\n%s", ticks.Load(), log)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep with a live context returned false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep with an ended context returned true")
	}
	if time.Since(start) > time.Second {
		t.Error("Sleep did not return when its context ended")
	}
}
