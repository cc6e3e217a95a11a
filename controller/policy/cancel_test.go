package policy

import (
	"context"
	"errors"
	"math/rand"
	"sync/atomic"
	"testing"
)

// countdownCtx reports itself cancelled from its n-th Err() call on: a
// cancellation in the middle of a solve, without timing.
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestAllocateHonoursCancellation: every policy returns the context's
// error when it is cancelled before the start, and every LP policy also
// when it is cancelled in the middle of its solve.
func TestAllocateHonoursCancellation(t *testing.T) {
	p := randomProblem(rand.New(rand.NewSource(9)), 600)
	for j := range p.Jobs {
		p.Jobs[j].Entity = string(rune('a' + j%8))
		p.Jobs[j].Elapsed = float64(j % 50)
		p.Jobs[j].IsolatedElapsed = float64(j % 30)
	}
	pre, cancel := context.WithCancel(context.Background())
	cancel()
	for _, name := range Names() {
		pol, _ := New(name, Options{})
		if _, err := pol.Allocate(pre, p); !errors.Is(err, context.Canceled) {
			t.Errorf("%s, cancelled before the start: got %v, want context.Canceled", name, err)
		}
		if _, ok := pol.(LPPolicy); !ok {
			continue
		}
		for _, at := range []int64{1, 2, 5} {
			ctx := &countdownCtx{Context: context.Background()}
			ctx.left.Store(at)
			if _, err := pol.Allocate(ctx, p); !errors.Is(err, context.Canceled) {
				t.Errorf("%s, cancelled at check %d: got %v, want context.Canceled", name, at, err)
			}
		}
	}
}
