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
	l, h := benchLocal(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		nextState(b, l, i)
		if i%1024 == 0 {
			// The sender explains and encodes each record (several times
			// Handle's work, on its own goroutine); back to back, with no
			// pause as sbatch leaves, it would fall behind and fill the
			// queue, which fails jobs open.
			l.Flush()
		}
		handleOne(b, h)
	}
}

// BenchmarkLocalHandlePaced is BenchmarkLocalHandle with 5 ms between
// jobs (not counted), as sbatch's pace leaves them: the CPU's caches have
// gone cold by each job, as they have in slurmctld. handle-ns/op is the
// figure; ns/op includes the pause.
func BenchmarkLocalHandlePaced(b *testing.B) {
	l, h := benchLocal(b)
	i := 0
	var in time.Duration
	for b.Loop() {
		time.Sleep(5 * time.Millisecond)
		i++
		nextState(b, l, i)
		t0 := time.Now()
		handleOne(b, h)
		in += time.Since(t0)
	}
	b.ReportMetric(float64(in.Nanoseconds())/float64(b.N), "handle-ns/op")
}

// benchLocal is a Local with a state, publishing to a no-op, and a
// Handler on it, on a locked thread as slurmctld's calling thread is.
func benchLocal(b *testing.B) (*Local, *Handler) {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	l := NewLocal(DefaultConfig().StateMaxAge, func([][]byte) error { return nil })
	b.Cleanup(l.Close)
	if err := l.Feed(placeState(0, "other")); err != nil {
		b.Fatal(err)
	}
	return l, &Handler{Config: DefaultConfig(), Placer: l}
}

// nextState feeds job i a new state every 16 jobs that counts what was
// sent so far, as the controller's does within a second of each decision.
func nextState(b *testing.B, l *Local, i int) {
	if i%16 != 0 {
		return
	}
	l.mu.Lock()
	seq := l.seq
	l.mu.Unlock()
	if err := l.Feed(placeState(seq, l.Origin)); err != nil {
		b.Fatal(err)
	}
}

func handleOne(b *testing.B, h *Handler) {
	if _, o, err := h.Handle(context.Background(), gpuJob()); err != nil || o != Rewritten {
		b.Fatal(o, err)
	}
}
