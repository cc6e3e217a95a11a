package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"

	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Errors of local placement; each means "pass unchanged".
var (
	ErrNoState    = errors.New("no placement state from the controller yet; not placing")
	ErrStaleState = errors.New("the controller's placement state is too old (controller gone?); not placing")
)

// Local places jobs on slurmctld's thread with the controller's own rule
// (package placement) from the state the controller pushes
// (placement = local, the default): no round trip on the submit path. Safe
// for concurrent use.
//
// Only the decision itself (placement.Decide: type, walltime, GPUs reserved)
// runs on slurmctld's thread. Explaining it (placement.Place again, from the
// same state and reservations, for the reason and the numbers), encoding
// the record and sending it run on Local's own goroutine: on a submit
// thread, which finds the CPU's caches cold, those took about 100 us of
// the 200 us a job cost slurmctld (bench-submit).
type Local struct {
	// MaxAge: a state received longer ago than this means the controller
	// stopped publishing (it sends one every few seconds): fail open.
	MaxAge time.Duration
	// Origin names this plugin instance in its decisions, so the
	// controller's state can say which of them it has counted.
	Origin string
	// Ready says whether a decision could be sent now (nil: always). A
	// job is placed only when it can: the controller must learn every id
	// written into a job.
	Ready func() error
	// Publish hands encoded wire.Decisions to the connection without
	// waiting, in one send where it can; it runs on Local's goroutine.
	Publish func(batch [][]byte) error
	// OnSendError hears a record that could not be sent after its job
	// was placed (the connection dropped in between; a full queue).
	OnSendError func(err error)
	// PassThrough, when set, hears that jobs must pass through unchanged
	// for a while (no usable state, or no connection to send decisions on), or
	// with 0 that they need not any more (a new state): the shim then
	// passes GPU jobs without entering Go, as the breaker spares jobs a
	// dead controller's deadline. Called with Local's lock held.
	PassThrough func(d time.Duration)
	// OnState hears each state taken in: its size and the time to decode
	// and check it (on the connection's goroutine, not slurmctld's thread).
	OnState func(bytes int, decode time.Duration)
	now     func() time.Time

	state atomic.Pointer[heldState]

	mu  sync.Mutex
	seq uint64
	// pending are our placements' reservations that the latest state
	// does not count yet, in seq order. Only ever trimmed at the front or
	// appended to (or replaced whole), never changed in place: decisions
	// queued for the sender hold sub-slices of it as their extra.
	pending []pendingRes
	// view is the state our decisions were last made in, plus pending:
	// kept up to date with each placement rather than summed again for
	// every job. Rebuilt when a new state arrives.
	view *placement.View
	// shelf, when set, holds decisions made in advance for jobs like the
	// last one placed here (shelf.go); stock is what it holds, nil when
	// it is empty. used is Take's buffer.
	shelf      Shelf
	stock      *stock
	used       []Used
	shelfTaken int // decisions taken from the shelf since the sender's last tick
	// recent are the last distinct requests placed here (nRecent of
	// them, the latest first): the shelf is stocked only once one repeats
	// (or while it holds a stock), so submissions that keep changing cost
	// no stocking (the work, and emptying the shelf at every job), and
	// then for all of them. Values, not pointers: no allocation per job.
	recent  [shelfKeys]shape
	nRecent int
	// stockNow asks the sender to stock the shelf now rather than at the
	// end of its linger: sent by the job that starts a stock, one in a run.
	stockNow chan struct{}

	out      chan outgoing
	stop     chan struct{}
	stopOnce sync.Once
}

// outgoing is one decision to explain, encode and send, or a flush marker.
type outgoing struct {
	s     *wire.PlaceState
	extra []pendingRes      // ours that s does not count, before this decision
	res   *placement.Result // the decision explained already (from the shelf), or nil
	req   wire.PlaceRequest
	reply wire.PlaceReply
	at    time.Time
	took  time.Duration // deciding, on slurmctld's thread; 0 from the shelf
	seq   uint64
	flush chan struct{}
}

// queueLen bounds decisions waiting to be sent: a burst of submissions
// far faster than slurmctld takes them. A full queue fails jobs open.
const queueLen = 4096

// sendLinger is how long the sender gathers decisions after the first
// before sending them together, and maxBatch how many at most: in a burst,
// one wake of the sending goroutine and one write for several jobs
// instead of one each, in slurmctld's process and on its CPUs. A record
// reaches the controller at most sendLinger later; nothing waits for it.
const (
	sendLinger = 20 * time.Millisecond
	maxBatch   = 64
)

// ErrQueueFull: the decision records are not being sent (the sending
// goroutine is stuck); jobs pass through unchanged.
var ErrQueueFull = errors.New("decision records are not being sent fast enough; not placing")

type heldState struct {
	s   *wire.PlaceState
	got time.Time // our clock: the controller's may differ
}

// pendingRes is one of our placements' reservations.
type pendingRes struct {
	seq uint64
	res wire.Reservation
}

// NewLocal returns a Local with no state yet: it fails open until Feed.
// Its goroutine runs until Close.
func NewLocal(maxAge time.Duration, publish func([][]byte) error) *Local {
	l := &Local{MaxAge: maxAge, Origin: nuid.Next(), Publish: publish, now: time.Now,
		out: make(chan outgoing, queueLen), stop: make(chan struct{}), stockNow: make(chan struct{}, 1)}
	go l.send()
	return l
}

// Close empties the shelf, sends what is queued (waiting at most
// closeWait) and stops the sending goroutine; decisions still queued then
// are dropped. slurmctld unloads the plugin when it stops (a restart, an
// upgrade) and when JobSubmitPlugins changes: without the flush, the jobs
// of the last poll would lose their records.
func (l *Local) Close() {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.emptyShelfLocked()
		l.mu.Unlock()
		flushed := make(chan struct{})
		go func() { l.Flush(); close(flushed) }()
		t := time.NewTimer(closeWait)
		select {
		case <-flushed:
		case <-t.C: // a stuck connection must not hold slurmctld's fini
		}
		t.Stop()
		close(l.stop)
	})
}

// closeWait bounds Close's flush.
const closeWait = time.Second

// Flush waits until every decision made so far, the shelf's included,
// has been handed to Publish (or dropped), or Close.
func (l *Local) Flush() {
	l.mu.Lock()
	l.takeLocked()
	l.mu.Unlock()
	done := make(chan struct{})
	select {
	case l.out <- outgoing{flush: done}:
	case <-l.stop:
		return
	}
	select {
	case <-done:
	case <-l.stop:
	}
}

// send explains, encodes and publishes queued decisions, in batches. It
// never listens to the queue while decisions keep coming: a goroutine
// waiting on the channel is woken by the next job's send, a futex call on
// slurmctld's submit thread (about 6 % of the plugin's time there, perf).
// Instead, once a decision has come, it sleeps sendLinger and takes what
// gathered meanwhile, and goes on so until a sleep gathered nothing; only
// then does it wait on the queue again. After a full batch it does not
// sleep: a burst is sent as fast as it is encoded.
//
// While it polls it also keeps the shelf (tick): jobs placed from it
// reach this goroutine only that way, so it goes back to waiting only
// once the shelf is empty.
func (l *Local) send() {
	batch := make([]outgoing, 0, maxBatch)
	linger := time.NewTimer(sendLinger)
	linger.Stop()
	idle, full := true, false
	for {
		batch = batch[:0]
		if idle {
			select {
			case <-l.stop:
				return
			case o := <-l.out:
				batch = append(batch, o)
			}
			l.tick() // stock the shelf now, not a poll later
		}
		if !full && (len(batch) == 0 || batch[0].flush == nil) {
			linger.Reset(sendLinger)
			select {
			case <-l.stop:
				return
			case <-linger.C:
			case <-l.stockNow: // a new stock is wanted: now (and gather early)
				linger.Stop()
			}
		}
		busy := l.tick()
	gather:
		for (len(batch) == 0 || batch[len(batch)-1].flush == nil) && len(batch) < maxBatch {
			select {
			case o := <-l.out:
				batch = append(batch, o) // a flush waits for what came before it
			default:
				break gather
			}
		}
		idle, full = len(batch) == 0 && !busy, len(batch) == maxBatch
		l.sendBatch(batch)
	}
}

// sendBatch publishes the decisions in batch, then releases its flush
// markers (only ever last).
func (l *Local) sendBatch(batch []outgoing) {
	msgs := make([][]byte, 0, len(batch))
	var ids []string
	for i := range batch {
		o := &batch[i]
		if o.flush != nil {
			continue
		}
		var res placement.Result
		if o.res != nil {
			res = *o.res
		} else {
			res = viewOf(o.s, o.extra).Place(&o.req) // the same decision, explained
		}
		o.reply.Reason = res.Reason
		d := wire.Decision{V: wire.Version, ID: o.reply.DecisionID, At: o.at.UTC(), JobID: o.req.JobID, Asked: o.req, Given: o.reply,
			Numbers: res.Numbers, Origin: l.Origin, Seq: o.seq, StateGen: o.s.Gen, Reserve: res.Reserve, DecideNs: o.took.Nanoseconds()}
		b, err := json.Marshal(&d)
		if err != nil {
			l.sendError(fmt.Errorf("decision %s (job placed, record not encoded; rota explain will not find it): %w", d.ID, err))
			continue
		}
		msgs = append(msgs, b)
		ids = append(ids, d.ID)
	}
	if len(msgs) > 0 {
		if err := l.Publish(msgs); err != nil {
			l.sendError(fmt.Errorf("%d decisions, %s to %s (jobs placed, records not sent; rota explain will not find them): %w",
				len(ids), ids[0], ids[len(ids)-1], err))
		}
	}
	for _, o := range batch {
		if o.flush != nil {
			close(o.flush)
		}
	}
}

func (l *Local) sendError(err error) {
	if l.OnSendError != nil {
		l.OnSendError(err)
	}
}

// Feed takes a state message from the controller. A message it cannot
// read is refused and the previous state kept (it ages out if no good one
// follows).
func (l *Local) Feed(data []byte) error {
	start := time.Now()
	var s wire.PlaceState
	if err := wire.Decode(data, &s); err != nil {
		return err
	}
	if err := s.Check(); err != nil {
		return err
	}
	if l.OnState != nil {
		l.OnState(len(data), time.Since(start))
	}
	l.state.Store(&heldState{s: &s, got: l.now()})
	// What the shelf holds was decided in the last state: it is emptied,
	// and the sender stocks it for the same requests in this one at once
	// (a job that comes before is placed in Go, in this one). During a
	// burst a state comes every second or two (absorbGap): without this,
	// each would send the next job to Go.
	l.mu.Lock()
	var keys []shape
	if l.stock != nil {
		keys = l.stock.keys
	}
	l.emptyShelfLocked()
	if keys != nil {
		l.stock = &stock{keys: keys, at: -1}
		select {
		case l.stockNow <- struct{}{}:
		default:
		}
	}
	if l.PassThrough != nil {
		l.PassThrough(0)
	}
	l.mu.Unlock()
	return nil
}

// Usable says whether a one-GPU job placed now would be typed from the
// controller's state (not passed through, not left as asked for want of
// a node): a state is held, fresh and sendable, and some type has a
// usable node with a GPU. Right after slurmctld restarts (scontrol
// reconfigure on 24.11 and later) its nodes are not responding for a
// moment, and the controller's state says so.
func (l *Local) Usable() bool {
	h := l.state.Load()
	if l.unusable(h, l.now()) != nil || h.s.Cluster == nil {
		return false
	}
	one := gpureq.NeedOf(wire.GPUAsk{PerNode: 1})
	for t := range h.s.Cluster.Types {
		if placement.Holds(h.s.Cluster, t, one, "", "") {
			return true
		}
	}
	return false
}

// unusable says why no decision may be made at now from held state h
// (nil: it may).
func (l *Local) unusable(h *heldState, now time.Time) error {
	if h == nil {
		return ErrNoState
	}
	if age := now.Sub(h.got); age > l.MaxAge {
		return fmt.Errorf("%w (%v old, state_max_age %v)", ErrStaleState, age.Round(time.Second), l.MaxAge)
	}
	if l.Ready != nil {
		if err := l.Ready(); err != nil {
			// Not sendable: the controller would never know the id, so
			// the job must not carry one.
			return fmt.Errorf("cannot send the decision for recording: %w", err)
		}
	}
	return nil
}

// passThroughFor is how long jobs pass through without entering Go once
// Local found it could not place: a new state ends it sooner; after it,
// the next job checks again.
const passThroughFor = time.Second

// passThrough tells PassThrough, if the state is still unusable: checked
// again under the lock that Feed holds to say the opposite, so a state
// arriving meanwhile is never followed by a stale pass-through.
func (l *Local) passThrough() {
	if l.PassThrough == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unusable(l.state.Load(), l.now()) != nil {
		l.PassThrough(passThroughFor)
	}
}

// viewLocked is the view for state s: the one held when it is for s,
// else a new one with our reservations that s does not count yet (which
// also forgets the ones it does).
func (l *Local) viewLocked(s *wire.PlaceState) *placement.View {
	if l.view != nil && l.view.State() == s {
		return l.view
	}
	absorbed := s.Absorbed[l.Origin]
	i := 0
	for i < len(l.pending) && l.pending[i].seq <= absorbed {
		i++
	}
	l.pending = l.pending[i:]
	l.view = viewOf(s, l.pending)
	return l.view
}

// viewOf is s with our reservations ps counted too.
func viewOf(s *wire.PlaceState, ps []pendingRes) *placement.View {
	v := placement.NewView(s, nil)
	for _, p := range ps {
		v.Add(p.res)
	}
	return v
}

// maxPending bounds our unconfirmed reservations: with a controller that
// stopped absorbing them the state goes stale long before.
const maxPending = 1 << 14

// Place implements Placer: decides locally and queues the decision to be
// recorded. With a shelf, submissions like job (nil: none) that follow
// take decisions made in advance.
func (l *Local) Place(_ context.Context, job *Job, req *wire.PlaceRequest) (*wire.PlaceReply, error) {
	h, now := l.state.Load(), l.now()
	if err := l.unusable(h, now); err != nil {
		l.passThrough()
		return nil, err
	}
	s := h.s
	l.mu.Lock()
	stocking := l.stock != nil
	l.emptyShelfLocked() // its stock did not count on this decision
	v := l.viewLocked(s)
	extra := l.pending // a snapshot: see pending
	res := v.Decide(req)
	l.seq++
	seq := l.seq
	if r := res.Reserve; r != nil && len(l.pending) < maxPending {
		l.pending = append(l.pending, pendingRes{seq: seq, res: *r})
		v.Add(*r)
	}
	// Only batch scripts are stocked for: the shim serves no allocation
	// (salloc, srun) from the shelf, whose kind differs (KindOf).
	if job != nil && l.shelf != nil && !job.Modify && job.ScriptHash != "" {
		if l.noteRecentLocked(job, req, res.Learned) || stocking {
			l.stock = &stock{keys: slices.Clone(l.recent[:l.nRecent]), at: -1}
			select {
			case l.stockNow <- struct{}{}:
			default:
			}
		}
	}
	l.mu.Unlock()

	reply := wire.PlaceReply{V: wire.Version, DecisionID: nuid.Next(), GPUType: res.GPUType, TimeLimitMin: res.TimeLimitMin,
		ByFeature: res.ByFeature, Policy: policyName(s), Kind: res.Kind, HoldS: res.HoldS}
	select {
	case l.out <- outgoing{s: s, extra: extra, req: *req, reply: reply, at: now, took: l.now().Sub(now), seq: seq}:
	default:
		l.unreserve(seq)
		return nil, ErrQueueFull
	}
	return &reply, nil
}

// unreserve takes back placement seq, which was not made after all.
// Decisions queued before it may hold pending's array, so it gets a new
// one; the view is rebuilt without seq on the next placement.
func (l *Local) unreserve(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.emptyShelfLocked() // nor is a stock for jobs like it
	for i, p := range l.pending {
		if p.seq == seq {
			l.pending = slices.Delete(slices.Clone(l.pending), i, i+1)
			l.view = nil
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
