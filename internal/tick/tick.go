// Package tick runs the controller's managers (chains, fault tolerance,
// services) the one way they all run: restore what was saved, then a tick
// at once and one every period until the context ends. A failed restore
// or tick is logged and the next tick tries again: a manager never stops
// on an error of Slurm's or NATS's.
package tick

import (
	"context"
	"time"

	"github.com/rs/zerolog"
)

// Loop is one manager's loop; the messages say, in an admin's words, what
// a failed restore and a failed tick mean for the jobs.
type Loop struct {
	Every         time.Duration
	Restore, Tick func(context.Context) error
	RestoreFailed string
	TickFailed    string
	Log           zerolog.Logger
}

// Run restores, then ticks until ctx ends.
func (l Loop) Run(ctx context.Context) {
	if err := l.Restore(ctx); err != nil {
		l.Log.Warn().Err(err).Msg(l.RestoreFailed)
	}
	t := time.NewTicker(l.Every)
	defer t.Stop()
	for {
		if err := l.Tick(ctx); err != nil && ctx.Err() == nil {
			l.Log.Warn().Err(err).Msg(l.TickFailed)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Both may be ready at once and select picks either: a
			// loop whose context ended does not tick again.
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// Sleep waits d, or until ctx ends; false when ctx ended first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
