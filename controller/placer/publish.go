package placer

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/rota-hpc/rota/wire"
	"github.com/rs/zerolog"
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

// Publisher pushes the Placer's state to the plugins (wire.PlaceState on
// wire.SubjectPlaceState) while the controller leads.
type Publisher struct {
	Placer *Placer
	// Publish sends one encoded state (the controller's NATS connection).
	Publish func(data []byte) error
	// Every is the heartbeat (state_interval).
	Every time.Duration
	Log   zerolog.Logger

	wanted chan struct{}
	// absorbed: plugins' decisions were absorbed since the last state
	// (published within absorbGap).
	absorbed atomic.Bool
}

// NewPublisher returns a Publisher of p's state; Run publishes.
func NewPublisher(p *Placer, publish func([]byte) error, every time.Duration, log zerolog.Logger) *Publisher {
	return &Publisher{Placer: p, Publish: publish, Every: every, Log: log, wanted: make(chan struct{}, 1)}
}

// Soon asks for a state message soon (within stateMinGap).
func (s *Publisher) Soon() {
	select {
	case s.wanted <- struct{}{}:
	default:
	}
}

// Absorbed notes that a state message is due for decisions plugins
// placed: sent within absorbGap, or with the next state for other news.
func (s *Publisher) Absorbed() { s.absorbed.Store(true) }

// Run pushes the placement state to the plugins until ctx ends: when it changes, when a plugin asks (it just
// connected), and every StateInterval regardless, which is the plugins'
// sign that a controller is alive (they fail open after state_max_age
// without one).
func (s *Publisher) Run(ctx context.Context) {
	every := s.Every
	if every <= 0 {
		every = 2 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	absorbed := time.NewTicker(min(absorbGap, every))
	defer absorbed.Stop()
	s.publish()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-absorbed.C:
			if !s.absorbed.Load() {
				continue
			}
		case <-s.wanted:
			select {
			case <-ctx.Done():
				return
			case <-time.After(stateMinGap):
			}
		}
		s.publish()
	}
}

func (s *Publisher) publish() {
	s.absorbed.Store(false) // this state counts them
	b, err := json.Marshal(s.Placer.State(time.Now()))
	if err != nil {
		s.Log.Error().Err(err).Msg("cannot encode the placement state")
		return
	}
	if len(b) > wire.MaxMessageBytes {
		// Plugins refuse it and fail open once theirs is too old: say why.
		s.Log.Error().Int("bytes", len(b)).Msg("placement state exceeds the message size limit; plugins placing locally will fail open")
		return
	}
	if err := s.Publish(b); err != nil {
		s.Log.Debug().Err(err).Msg("cannot publish the placement state")
	}
}
