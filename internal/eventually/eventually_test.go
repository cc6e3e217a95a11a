package eventually

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder catches a Fatalf without ending the calling goroutine's test.
type recorder struct {
	testing.TB
	failed atomic.Value
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed.Store(format)
	panic(r)
}

func TestTrue(t *testing.T) {
	t.Parallel()
	n := 0
	True(t, time.Second, "the third check", func() bool { n++; return n >= 3 })
	if n != 3 {
		t.Fatalf("checked %d times, want 3", n)
	}
	r := &recorder{TB: t}
	start := time.Now()
	func() {
		defer func() { _ = recover() }()
		True(r, 120*time.Millisecond, "nothing", func() bool { return false })
	}()
	if f, _ := r.failed.Load().(string); !strings.Contains(f, "timed out after") {
		t.Fatalf("a condition that never holds did not fail the test (%q)", f)
	}
	if d := time.Since(start); d < 120*time.Millisecond {
		t.Fatalf("gave up after %v, before its deadline", d)
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	n := 0
	if !Within(time.Second, func() bool { n++; return n >= 3 }) || n != 3 {
		t.Fatalf("held after %d checks: want true after 3", n)
	}
	start := time.Now()
	if Within(100*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("gave up after %v, before its deadline", d)
	}
}

func TestTrueEvery(t *testing.T) {
	t.Parallel()
	n := 0
	start := time.Now()
	TrueEvery(t, time.Second, 20*time.Millisecond, "the third check", func() bool { n++; return n >= 3 })
	if n != 3 {
		t.Fatalf("checked %d times, want 3", n)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("three checks 20 ms apart took %v", d)
	}
	r := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		TrueEvery(r, 60*time.Millisecond, 20*time.Millisecond, "nothing", func() bool { return false })
	}()
	if f, _ := r.failed.Load().(string); !strings.Contains(f, "timed out after") {
		t.Fatalf("a condition that never holds did not fail the test (%q)", f)
	}
}
