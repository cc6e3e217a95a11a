// Package breaker is a small circuit breaker for calls on a latency budget.
//
// Closed: every call is allowed. After Threshold consecutive failures it
// opens: calls are refused at once for Cooldown, so a dead or hung peer
// costs nearly nothing. Then it lets exactly one probe through (half-open);
// the probe's success closes it, its failure opens it for another Cooldown.
package breaker

import (
	"sync"
	"time"
)

// State is the breaker's position.
type State int

const (
	Closed State = iota
	Open
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	default:
		return "half-open"
	}
}

// Breaker is safe for concurrent use.
type Breaker struct {
	Threshold int
	Cooldown  time.Duration
	// Now is the clock; tests replace it.
	Now func() time.Time
	// OnChange, when set, is called (outside the lock) on every transition.
	OnChange func(from, to State)

	mu        sync.Mutex
	state     State
	failures  int
	openUntil time.Time
	probing   bool
}

// New returns a closed breaker.
func New(threshold int, cooldown time.Duration) *Breaker {
	if threshold < 1 {
		threshold = 1
	}
	return &Breaker{Threshold: threshold, Cooldown: cooldown, Now: time.Now}
}

// Allow reports whether a call may go ahead. A true from a half-open
// breaker makes that call the probe: report its outcome with Success or
// Failure.
func (b *Breaker) Allow() bool {
	b.mu.Lock()
	from := b.state
	allow := true
	switch b.state {
	case Open:
		if b.Now().Before(b.openUntil) {
			allow = false
			break
		}
		b.state, b.probing = HalfOpen, true
	case HalfOpen:
		// One probe at a time; the others pass through unasked.
		if b.probing {
			allow = false
		} else {
			b.probing = true
		}
	}
	to := b.state
	b.mu.Unlock()
	b.changed(from, to)
	return allow
}

// Success records a call that answered in time.
func (b *Breaker) Success() {
	b.mu.Lock()
	from := b.state
	b.state, b.failures, b.probing = Closed, 0, false
	b.mu.Unlock()
	b.changed(from, Closed)
}

// Failure records a call that failed or ran out of time.
func (b *Breaker) Failure() {
	b.mu.Lock()
	from := b.state
	b.failures++
	if b.state == HalfOpen || b.failures >= b.Threshold {
		b.state = Open
		b.openUntil = b.Now().Add(b.Cooldown)
		b.probing = false
	}
	to := b.state
	b.mu.Unlock()
	b.changed(from, to)
}

// State returns the current position.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func (b *Breaker) changed(from, to State) {
	if from != to && b.OnChange != nil {
		b.OnChange(from, to)
	}
}
