package rounds

import (
	"context"
	"fmt"
	"time"

	"github.com/rota-hpc/rota/internal/tick"
)

// Pace spreads a round's updates over time. Each update is an RPC to
// slurmctld, and a burst of them, a thousand for a round that retypes a
// thousand jobs, keeps users' sbatch waiting for most of the burst, even
// for RPCs that take no lock. So the round sends its updates one after
// another through one client (slurm.PacedUpdater) and after every Batch
// of them waits (1-Share)/Share times as long as they took, at most
// MaxPause: slurmctld is busy with the round at most Share of the time,
// and a submission waits behind one batch at most, one update by
// default. docs/rounds.md, "Pacing the apply", has the figures behind
// the defaults.
type Pace struct {
	// Batch is the updates sent between pauses (round_apply_batch).
	Batch int
	// Share is the share of the apply's time spent updating
	// (round_apply_share); 1 never pauses.
	Share float64
	// MaxPause bounds one pause, so a slow batch does not stall the round.
	MaxPause time.Duration

	// sleep waits d or until ctx ends (tests replace it).
	sleep func(ctx context.Context, d time.Duration)
	// now is the clock (tests replace it).
	now func() time.Time
}

// DefaultPace: one update at a time, slurmctld busy with the round at
// most half the time, pauses of at most a second. Two thirds sent 45%
// more updates a second but raised sbatch's median during the round from
// 1.13x to 1.24x at 10,000 pending (docs/rounds.md, "One update at a
// time").
func DefaultPace() Pace { return Pace{Batch: 1, Share: 0.5, MaxPause: time.Second} }

// Check rejects a pace that cannot work. The zero Pace never pauses.
func (p Pace) Check() error {
	if p.Batch < 0 {
		return fmt.Errorf("round_apply_batch = %d: want at least 1", p.Batch)
	}
	if p.Share < 0 || p.Share > 1 {
		return fmt.Errorf("round_apply_share = %g: want more than 0 and at most 1", p.Share)
	}
	return nil
}

// pause is how long to wait after updates that took took.
func (p Pace) pause(took time.Duration) time.Duration {
	if p.Share <= 0 || p.Share >= 1 {
		return 0
	}
	wait := time.Duration(float64(took) * (1 - p.Share) / p.Share)
	if p.MaxPause > 0 && wait > p.MaxPause {
		wait = p.MaxPause
	}
	return wait
}

// Hold says how long, from now, the next update should wait for a moment
// of slurmctld's own that updates would make worse for users' sbatch (a
// job state save: slurm.StateSaves); 0: none. Asked again after each wait.
type Hold func(now time.Time) time.Duration

// holdPoll bounds one wait on a Hold, which is asked again after it: the
// moment it waits for ends when slurmctld says so (a file written), not
// at a time known ahead.
const holdPoll = 20 * time.Millisecond

// gaps is the gap function for a slurm.PacedUpdater: it is called after
// each update sent, and after every Batch of them it pauses as each
// does, then for as long as hold (nil: none) says; false once ctx has
// ended.
func (p Pace) gaps(ctx context.Context, hold Hold) func() bool {
	batch := max(p.Batch, 1)
	now, sleep := p.now, p.sleep
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) { tick.Sleep(ctx, d) }
	}
	start, sent := now(), 0
	return func() bool {
		if sent++; sent%batch == 0 {
			if wait := p.pause(now().Sub(start)); wait > 0 {
				sleep(ctx, wait)
			}
			for hold != nil && ctx.Err() == nil {
				h := hold(now())
				if h <= 0 {
					break
				}
				sleep(ctx, min(h, holdPoll))
			}
			start = now()
		}
		return ctx.Err() == nil
	}
}
