package submit

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// BenchmarkLocalHandle is one submission's work in the plugin with local
// placement (parse, place from the pushed state, encode the decision,
// rewrite), a new state every 16 jobs, the decision handed to a no-op instead of a socket.
//
//	go test -run XXX -bench LocalHandle -benchmem ./plugin/submit/
func BenchmarkLocalHandle(b *testing.B) {
	runtime.LockOSThread() // as slurmctld's calling thread is
	defer runtime.UnlockOSThread()
	l := NewLocal(DefaultConfig().StateMaxAge, func([][]byte) error { return nil })
	defer l.Close()
	if err := l.Feed(placeState(0, "other")); err != nil {
		b.Fatal(err)
	}
	h := &Handler{Config: DefaultConfig(), Asker: l}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i++; i%16 == 0 {
			// The controller's next state counts what was sent so far,
			// as it does within a few ms of each decision.
			l.mu.Lock()
			seq := l.seq
			l.mu.Unlock()
			if err := l.Feed(placeState(seq, l.Origin)); err != nil {
				b.Fatal(err)
			}
		}
		if i%1024 == 0 {
			// The sender explains and encodes each record (several times
			// Handle's work, on its own goroutine); back to back, with no
			// pause as sbatch leaves, it would fall behind and fill the
			// queue, which fails jobs open.
			l.Flush()
		}
		j := gpuJob()
		if _, o, err := h.Handle(context.Background(), j); err != nil || o != Rewritten {
			b.Fatal(o, err)
		}
	}
}

// BenchmarkLocalHandlePaced is BenchmarkLocalHandle with 5 ms between
// jobs (not counted), as sbatch's pace leaves them: the CPU's caches have
// gone cold by each job, as they have in slurmctld. handle-ns/op is the
// figure; ns/op includes the pause.
func BenchmarkLocalHandlePaced(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l := NewLocal(DefaultConfig().StateMaxAge, func([][]byte) error { return nil })
	defer l.Close()
	if err := l.Feed(placeState(0, "other")); err != nil {
		b.Fatal(err)
	}
	h := &Handler{Config: DefaultConfig(), Asker: l}
	i := 0
	var in time.Duration
	for b.Loop() {
		time.Sleep(5 * time.Millisecond)
		if i++; i%16 == 0 {
			l.mu.Lock()
			seq := l.seq
			l.mu.Unlock()
			if err := l.Feed(placeState(seq, l.Origin)); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		j := gpuJob()
		if _, o, err := h.Handle(context.Background(), j); err != nil || o != Rewritten {
			b.Fatal(o, err)
		}
		in += time.Since(t0)
	}
	b.ReportMetric(float64(in.Nanoseconds())/float64(b.N), "handle-ns/op")
}
