// Package eventually is the tests' one way to wait for a condition: check
// it until it holds or a deadline passes, and fail saying what never
// happened. A test waits for what it needs, never sleeps a guess.
package eventually

import (
	"testing"
	"time"
)

// The pause between checks starts at firstPoll and doubles up to maxPoll:
// a condition that holds soon is seen soon, and one that takes seconds
// (a Slurm job starting, a controller leading) costs what it reads (a
// squeue, a NATS request) four times a second, not a hundred.
const (
	firstPoll = 5 * time.Millisecond
	maxPoll   = 250 * time.Millisecond
)

// True waits until cond holds; after within it fails the test: "timed out
// after <within> waiting for <what>".
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(within, cond) {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// TrueEvery is True for a condition that costs enough to read (a
// scrape, a status request, a submission) to be checked once every
// interval, the first time at once.
func TrueEvery(t testing.TB, within, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(every)
	}
}

// Within checks cond as True does until it holds or within has passed,
// and says whether it held: for a helper that reports a timeout its own
// way (an error its caller wraps) instead of failing a test.
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	poll := firstPoll
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
		poll = min(2*poll, maxPoll)
	}
	return true
}
