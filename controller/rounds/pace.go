package rounds

import (
	"context"
	"fmt"
	"time"

	"github.com/rota-hpc/rota/internal/tick"
)

// Pace spreads a round's updates over time. Each update is an RPC under
// slurmctld's job write lock, and on the slurmctld host each costs CPU
// (scontrol, munge, slurmctld itself); a round that retypes a thousand
// jobs in one burst keeps users' sbatch waiting behind it. So the round
// sends Batch updates, then waits (1-Share)/Share times as long as they
// took, at most MaxPause: slurmctld is busy with the round at most Share
// of the time, and a submission never waits behind more than one batch.
// docs/rounds.md, "At a site's size", has the figures behind the defaults.
type Pace struct {
	// Batch is the most updates sent at once (round_apply_batch).
	Batch int
	// Share is the share of the apply's time spent updating
	// (round_apply_share); 1 sends every batch at once.
	Share float64
	// MaxPause bounds one pause, so a slow batch does not stall the round.
	MaxPause time.Duration

	// sleep waits d or until ctx ends (tests replace it).
	sleep func(ctx context.Context, d time.Duration)
	// now is the clock (tests replace it).
	now func() time.Time
}

// DefaultPace: batches of 64, slurmctld busy with the round at most half
// the time, pauses of at most a second.
func DefaultPace() Pace { return Pace{Batch: 64, Share: 0.5, MaxPause: time.Second} }

// Check rejects a pace that cannot work. The zero Pace sends every
// update at once.
func (p Pace) Check() error {
	if p.Batch < 0 {
		return fmt.Errorf("round_apply_batch = %d: want at least 1", p.Batch)
	}
	if p.Share < 0 || p.Share > 1 {
		return fmt.Errorf("round_apply_share = %g: want more than 0 and at most 1", p.Share)
	}
	return nil
}

// each calls send for consecutive index ranges [lo, hi) of n updates, at
// most Batch long, pausing between them; it stops pausing (and sending)
// once ctx ends.
func (p Pace) each(ctx context.Context, n int, send func(lo, hi int)) {
	batch := p.Batch
	if batch < 1 {
		batch = n
	}
	now, sleep := p.now, p.sleep
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) { tick.Sleep(ctx, d) }
	}
	for lo := 0; lo < n; lo += batch {
		if lo > 0 && ctx.Err() != nil {
			return
		}
		hi := min(lo+batch, n)
		start := now()
		send(lo, hi)
		if hi == n || p.Share <= 0 || p.Share >= 1 {
			continue
		}
		wait := time.Duration(float64(now().Sub(start)) * (1 - p.Share) / p.Share)
		if p.MaxPause > 0 && wait > p.MaxPause {
			wait = p.MaxPause
		}
		if wait > 0 {
			sleep(ctx, wait)
		}
	}
}
