package app

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rota-hpc/rota/wire"
)

// stateMinGap spaces state publications: a burst of placements becomes
// one message per gap instead of one per job. Plugins count their own
// placements until a state includes them, so a late state costs nothing
// but a less even spread across plugins (slurmctld and its backup).
const stateMinGap = 20 * time.Millisecond

// absorbGap spaces the states whose only news is decisions plugins placed
// themselves (placement = local): the plugin that placed them counts them
// already, so telling it back is not urgent, while each state costs the
// controller an encoding and slurmctld's process a decoding, both on the
// CPUs that take the submissions. Changes of the cluster, the round
// loop's plan, and reservations made here (placement = remote) still go
// out after stateMinGap.
const absorbGap = time.Second

// publishStateSoon asks the publisher for a state message soon.
func (c *Controller) publishStateSoon() {
	select {
	case c.stateWanted <- struct{}{}:
	default:
	}
}

// absorbedState notes that a state message is due for decisions plugins
// placed: sent within absorbGap, or with the next state for other news.
func (c *Controller) absorbedState() { c.stateAbsorbed.Store(true) }

// publishStates pushes the placement state to the plugins while this
// controller leads: when it changes, when a plugin asks (it just
// connected), and every StateInterval regardless, which is the plugins'
// sign that a controller is alive (they fail open after state_max_age
// without one).
func (c *Controller) publishStates(ctx context.Context) {
	every := c.cfg.StateInterval
	if every <= 0 {
		every = DefaultConfig().StateInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	absorbed := time.NewTicker(min(absorbGap, every))
	defer absorbed.Stop()
	c.publishState()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-absorbed.C:
			if !c.stateAbsorbed.Load() {
				continue
			}
		case <-c.stateWanted:
			select {
			case <-ctx.Done():
				return
			case <-time.After(stateMinGap):
			}
		}
		c.publishState()
	}
}

func (c *Controller) publishState() {
	c.stateAbsorbed.Store(false) // this state counts them
	s := c.placer.State(time.Now())
	b, err := json.Marshal(s)
	if err != nil {
		c.log.Error().Err(err).Msg("cannot encode the placement state")
		return
	}
	if len(b) > wire.MaxMessageBytes {
		// Plugins refuse it and fail open once theirs is too old: say why.
		c.log.Error().Int("bytes", len(b)).Msg("placement state exceeds the message size limit; plugins placing locally will fail open")
		return
	}
	if err := c.nc.Publish(wire.SubjectPlaceState, b); err != nil {
		c.log.Debug().Err(err).Msg("cannot publish the placement state")
	}
}
