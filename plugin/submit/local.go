package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"

	"github.com/rota-hpc/rota/controller/placement/rule"
	"github.com/rota-hpc/rota/wire"
)

// Errors of local placement; each means "pass unchanged".
var (
	ErrNoState    = errors.New("no placement state from the controller yet; not placing")
	ErrStaleState = errors.New("the controller's placement state is too old (controller gone?); not placing")
)

// Local places jobs on slurmctld's thread with the controller's own rule
// (controller/placement/rule) from the state the controller pushes
// (placement = local, the default): no round trip on the submit path. Each
// decision is then published for the controller to record, without
// waiting. Safe for concurrent use.
type Local struct {
	// MaxAge: a state received longer ago than this means the controller
	// stopped publishing (it sends one every few seconds): fail open.
	MaxAge time.Duration
	// Origin names this plugin instance in its decisions, so the
	// controller's state can say which of them it has counted.
	Origin string
	// Publish hands an encoded wire.Decision to the connection without
	// waiting; an error means it was not sent, and the job is not placed.
	Publish func(data []byte) error
	now     func() time.Time

	state atomic.Pointer[heldState]

	mu      sync.Mutex
	seq     uint64
	pending []pendingRes // own placements the latest state does not count yet
}

type heldState struct {
	s   *wire.PlaceState
	got time.Time // our clock: the controller's may differ
}

// pendingRes is one of our placements' reservations.
type pendingRes struct {
	seq   uint64
	type_ string
	gpus  int
}

// NewLocal returns a Local with no state yet: it fails open until Feed.
func NewLocal(maxAge time.Duration, publish func([]byte) error) *Local {
	return &Local{MaxAge: maxAge, Origin: nuid.Next(), Publish: publish, now: time.Now}
}

// Feed takes a state message from the controller. A message it cannot
// read is refused and the previous state kept (it ages out if no good one
// follows).
func (l *Local) Feed(data []byte) error {
	var s wire.PlaceState
	if err := wire.Decode(data, &s); err != nil {
		return err
	}
	if err := s.Check(); err != nil {
		return err
	}
	l.state.Store(&heldState{s: &s, got: l.now()})
	return nil
}

// extraLocked sums our reservations that s does not count yet, forgetting
// the ones it does.
func (l *Local) extraLocked(s *wire.PlaceState) map[string]int {
	absorbed := s.Absorbed[l.Origin]
	keep := l.pending[:0]
	var extra map[string]int
	for _, p := range l.pending {
		if p.seq <= absorbed {
			continue
		}
		keep = append(keep, p)
		if extra == nil {
			extra = map[string]int{}
		}
		extra[p.type_] += p.gpus
	}
	clear(l.pending[len(keep):])
	l.pending = keep
	return extra
}

// maxPending bounds our unconfirmed reservations: with a controller that
// stopped absorbing them the state goes stale long before.
const maxPending = 1 << 14

// Place implements Asker: decides locally, then publishes the decision.
func (l *Local) Place(_ context.Context, req *wire.PlaceRequest) (*wire.PlaceReply, error) {
	h := l.state.Load()
	if h == nil {
		return nil, ErrNoState
	}
	now := l.now()
	if age := now.Sub(h.got); age > l.MaxAge {
		return nil, fmt.Errorf("%w (%v old, state_max_age %v)", ErrStaleState, age.Round(time.Second), l.MaxAge)
	}
	s := h.s
	l.mu.Lock()
	res := rule.Place(s, l.extraLocked(s), req)
	l.seq++
	seq := l.seq
	if r := res.Reserve; r != nil && len(l.pending) < maxPending {
		l.pending = append(l.pending, pendingRes{seq: seq, type_: r.Type, gpus: r.GPUs})
	}
	l.mu.Unlock()

	reply := wire.PlaceReply{V: wire.Version, DecisionID: nuid.Next(), GPUType: res.GPUType, TimeLimitMin: res.TimeLimitMin,
		ByFeature: res.ByFeature, Policy: policyName(s), Reason: res.Reason}
	d := wire.Decision{V: wire.Version, ID: reply.DecisionID, At: now.UTC(), JobID: req.JobID, Asked: *req, Given: reply,
		Numbers: res.Numbers, Origin: l.Origin, Seq: seq, StateGen: s.Gen, Reserve: res.Reserve}
	b, err := json.Marshal(&d)
	if err == nil {
		err = l.Publish(b)
	}
	if err != nil {
		// Not sent: the controller would never know this id, so the job
		// must not carry it. Give the GPUs back and pass the job through.
		l.unreserve(seq)
		return nil, fmt.Errorf("cannot send the decision for recording: %w", err)
	}
	return &reply, nil
}

func (l *Local) unreserve(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range l.pending {
		if p.seq == seq {
			l.pending = append(l.pending[:i], l.pending[i+1:]...)
			return
		}
	}
}

func policyName(s *wire.PlaceState) string {
	if s.Policy != "" {
		return s.Policy
	}
	return "interim"
}
