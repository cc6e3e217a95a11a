// Package leader decides which of several controllers sharing a NATS
// cluster serves requests. One holds a lease, a key in a JetStream KV
// bucket that it rewrites (compare-and-set on the key's revision) every
// renewal interval; the others read the key twice per interval and take it
// over, again by compare-and-set, once it has not changed for a whole TTL.
//
// The lease never relies on clocks agreeing across machines: a standby
// measures "unchanged for TTL" on its own monotonic clock from the moment
// it saw the current revision (restarting whenever it could not read the
// key), and a leader counts its lease as valid only
// until TTL minus one renewal interval after it *sent* its last successful
// renewal. The standby saw that revision after it was written, so it cannot
// take over before the old leader has stepped down, by at least one renewal
// interval of margin. Only the compare-and-set decides who wins a race: two
// standbys that try at once from the same revision cannot both succeed.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"
)

// Runner runs lead whenever this process is the leader.
type Runner interface {
	// Run blocks until ctx ends. Each time this process becomes the
	// leader it calls lead with a context that is cancelled when it stops
	// being one (context.Cause is ErrLost then, or ctx's error on
	// shutdown); lead must return promptly once it is. Run calls lead
	// from one goroutine, never twice at once.
	Run(ctx context.Context, lead func(ctx context.Context)) error
}

// ErrLost is the cause of a leadership context cancelled because the lease
// was lost (taken over, or not renewed in time), as opposed to shutdown.
var ErrLost = errors.New("lost the controller lease")

// Solo is the Runner of a controller that is alone by construction (it
// runs its own embedded NATS server): always the leader, no lease.
type Solo struct{}

// Run calls lead once with ctx.
func (Solo) Run(ctx context.Context, lead func(ctx context.Context)) error {
	lead(ctx)
	return nil
}

// Defaults.
const (
	DefaultBucket = "rota_leader"
	DefaultKey    = "controller"
	DefaultTTL    = 5 * time.Second
)

// Config configures a Lease.
type Config struct {
	// Bucket and Key name the lease; defaults DefaultBucket, DefaultKey.
	Bucket, Key string
	// ID names this candidate in the lease and in logs; default
	// hostname:pid:random, unique per process.
	ID string
	// TTL is how long an unrenewed lease stays valid: a standby takes
	// over at most about TTL after the leader dies. Default DefaultTTL.
	TTL time.Duration
	// Renew is the renewal interval (standbys read the lease twice per
	// interval); default TTL/5,
	// at most TTL/2 so a leader gets more than one try before its lease
	// lapses.
	Renew time.Duration
	// Replicas of the lease bucket: 3 on a 3-node cluster, so the lease
	// survives losing one NATS node.
	Replicas int
	Log      zerolog.Logger
}

// Lease is a Runner that contends for a JetStream KV lease.
type Lease struct {
	cfg Config
	kv  jetstream.KeyValue
	log zerolog.Logger

	mu     sync.Mutex
	holder string // last holder seen, "" if none
	leads  bool
}

// NewLease creates (or opens) the lease bucket.
func NewLease(ctx context.Context, js jetstream.JetStream, cfg Config) (*Lease, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Key == "" {
		cfg.Key = DefaultKey
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Renew <= 0 {
		cfg.Renew = cfg.TTL / 5
	}
	if cfg.Renew > cfg.TTL/2 {
		return nil, fmt.Errorf("lease renewal interval %v must be at most half the lease TTL %v", cfg.Renew, cfg.TTL)
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), nuid.Next()[:8])
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "Rota controller leader lease (holder id under key " + cfg.Key + ")",
		History:     1,
		// On disk, though the lease is worth little after a restart of
		// every server: a memory stream would vanish with them, and the
		// handles the candidates hold would point at nothing.
		Storage:  jetstream.FileStorage,
		Replicas: cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the lease bucket %s (replicas %d): %w", cfg.Bucket, cfg.Replicas, err)
	}
	return &Lease{cfg: cfg, kv: kv, log: cfg.Log.With().Str("candidate", cfg.ID).Logger()}, nil
}

// ID is this candidate's name in the lease.
func (l *Lease) ID() string { return l.cfg.ID }

// Holder is the last lease holder this candidate saw ("" if none) and
// whether it is this candidate, leading now.
func (l *Lease) Holder() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder, l.leads
}

func (l *Lease) setHolder(h string, leads bool) {
	l.mu.Lock()
	l.holder, l.leads = h, leads
	l.mu.Unlock()
}

// Run contends for the lease until ctx ends; see Runner.
func (l *Lease) Run(ctx context.Context, lead func(ctx context.Context)) error {
	for {
		rev, sent, err := l.standBy(ctx)
		if err != nil {
			return nil // ctx ended while standing by
		}
		if err := l.hold(ctx, rev, sent, lead); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// op is a deadline for one KV operation: never longer than a renewal
// interval, so a hung server cannot hold the loop past a lease decision.
func (l *Lease) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.cfg.Renew)
}

// standBy watches the lease until this candidate acquires it, and returns
// the revision it wrote and when it sent that write.
func (l *Lease) standBy(ctx context.Context) (uint64, time.Time, error) {
	var (
		lastRev      uint64
		holder       string
		writeFailing bool
		expiry       = time.NewTimer(time.Hour)
		announce     = true
		// Polling (a plain read) rather than a JetStream watcher: creating
		// a watcher blocks for seconds while the lease's stream elects a
		// new leader, exactly when a standby must be quick. A renewal is
		// seen at most one poll late, which only delays a takeover (the
		// TTL then counts from later): safe.
		poll = time.NewTicker(l.cfg.Renew / 2)
	)
	expiry.Stop()
	defer poll.Stop()
	// seen handles one view of the key; it returns the revision to take
	// the lease over from (0: create it) and true when this candidate
	// should try now: the key is free, or it still names this candidate,
	// which stepped down because it could not renew (say JetStream lost a
	// stream leader for longer than the TTL): no one else has written
	// since, so taking it back at once is as safe as any other takeover
	// (the compare-and-set still decides) and saves waiting out a TTL.
	seen := func(e jetstream.KeyValueEntry) (uint64, bool) {
		if e.Operation() != jetstream.KeyValuePut {
			return 0, true
		}
		h := string(e.Value())
		if h == l.cfg.ID {
			// At every read, not only when the revision changed: an
			// earlier try may have failed for want of JetStream.
			lastRev = max(lastRev, e.Revision())
			return e.Revision(), true
		}
		if e.Revision() <= lastRev {
			// Unchanged, or a replica that is behind answered the poll;
			// a later read brings the real revision.
			return 0, false
		}
		lastRev = e.Revision()
		if h != holder || announce {
			holder = h
			announce = false
			l.setHolder(h, false)
			l.log.Info().Str("leader", h).Msg("another controller holds the lease; standing by")
		}
		// Unchanged for a whole TTL from now means the holder is gone.
		expiry.Reset(l.cfg.TTL)
		return 0, false
	}
	// read reads the key. When it cannot, the TTL clock stops and starts
	// afresh at the next successful read: a standby that could not see
	// the lease for a while has no evidence that the holder is gone (the
	// holder may be cut off from JetStream just as long, and take its own
	// lease back at once when it returns; see seen). Counting through an
	// outage would make the standby race the returning holder for a lease
	// nobody needs to take over. This only delays a takeover: safe.
	read := func() (uint64, bool) {
		from, ok, err := l.readNow(ctx, seen)
		if err != nil {
			expiry.Stop()
			lastRev = 0
		}
		return from, ok
	}
	try := func(from uint64) (uint64, time.Time, bool) {
		// Twice at most: when the first write loses, the key is read
		// again, and it may be free or ours after all.
		for range 2 {
			rev, sent, err := l.acquire(ctx, from)
			if err == nil {
				return rev, sent, true
			}
			if !isConflict(err) {
				// Once per outage: a standby retries twice a second.
				ev := l.log.Debug()
				if !writeFailing {
					ev, writeFailing = l.log.Warn(), true
				}
				ev.Err(err).Msg("cannot write the controller lease (NATS or its JetStream unavailable?); will retry")
			}
			// Someone else wrote first (or we cannot tell): read the key
			// again and count the TTL from what is there now.
			lastRev = 0
			var ok bool
			if from, ok = read(); !ok || ctx.Err() != nil {
				break
			}
		}
		return 0, time.Time{}, false
	}

	if from, ok := read(); ok {
		if rev, sent, ok := try(from); ok {
			return rev, sent, nil
		}
	}
	for {
		select {
		case <-ctx.Done():
			return 0, time.Time{}, ctx.Err()
		case <-poll.C:
			if from, ok := read(); ok {
				if rev, sent, ok := try(from); ok {
					return rev, sent, nil
				}
			}
		case <-expiry.C:
			l.log.Warn().Str("leader", holder).Str("lease_ttl", l.cfg.TTL.String()).
				Msg("the controller lease was not renewed within its TTL; taking over")
			if rev, sent, ok := try(lastRev); ok {
				return rev, sent, nil
			}
		}
	}
}

// acquire writes this candidate into the lease: it creates the key when
// from is 0, else replaces revision from. Either is a compare-and-set, so
// of any number of candidates trying from the same state one succeeds.
// sent is when the write was sent, the start of the lease's validity.
func (l *Lease) acquire(ctx context.Context, from uint64) (rev uint64, sent time.Time, err error) {
	octx, cancel := l.op(ctx)
	defer cancel()
	sent = time.Now()
	if from == 0 {
		rev, err = l.kv.Create(octx, l.cfg.Key, []byte(l.cfg.ID))
	} else {
		rev, err = l.kv.Update(octx, l.cfg.Key, []byte(l.cfg.ID), from)
	}
	return rev, sent, err
}

// readNow reads the key and passes what it finds to seen; err is a read
// that failed (the key's absence is not an error: the lease is free).
func (l *Lease) readNow(ctx context.Context, seen func(jetstream.KeyValueEntry) (uint64, bool)) (uint64, bool, error) {
	octx, cancel := l.op(ctx)
	defer cancel()
	e, err := l.kv.Get(octx, l.cfg.Key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return 0, true, nil
	case err != nil:
		if ctx.Err() == nil {
			l.log.Debug().Err(err).Msg("cannot read the controller lease")
		}
		return 0, false, err
	}
	from, ok := seen(e)
	return from, ok, nil
}

// isConflict tells a lost compare-and-set (someone else's write came
// first) from an error that says nothing about the key.
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return true
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}

// hold runs lead while renewing the lease written at rev (sent at sent),
// and returns once leadership ends: lost, lapsed, or ctx ended (then the
// lease is released so a standby takes over at once). Its error is lead
// returning while still leading, which Runner does not allow.
func (l *Lease) hold(ctx context.Context, rev uint64, sent time.Time, lead func(ctx context.Context)) error {
	valid := func(sent time.Time) time.Time { return sent.Add(l.cfg.TTL - l.cfg.Renew) }
	until := valid(sent)
	l.setHolder(l.cfg.ID, true)
	l.log.Info().Uint64("revision", rev).Str("lease_ttl", l.cfg.TTL.String()).Msg("acquired the controller lease; serving requests")

	leadCtx, stop := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() { defer close(done); lead(leadCtx) }()
	stepDown := func(why error) {
		stop(why)
		<-done
		l.setHolder("", false)
	}

	tick := time.NewTicker(l.cfg.Renew)
	defer tick.Stop()
	lapse := time.NewTimer(time.Until(until))
	defer lapse.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			stepDown(ctx.Err())
			l.release(rev)
			return nil
		case <-done:
			l.release(rev)
			l.setHolder("", false)
			return errors.New("the leader's work ended while it still held the lease")
		case <-lapse.C:
			l.log.Error().Time("valid_until", until).
				Msg("lost the controller lease: could not renew it in time (NATS or its JetStream unavailable?); standing by")
			stepDown(ErrLost)
			return nil
		case <-tick.C:
			octx, cancel := context.WithDeadline(ctx, minTime(time.Now().Add(l.cfg.Renew), until))
			s := time.Now()
			nrev, err := l.kv.Update(octx, l.cfg.Key, []byte(l.cfg.ID), rev)
			if err == nil {
				cancel()
				rev, until = nrev, valid(s)
				lapse.Reset(time.Until(until))
				if failing {
					l.log.Info().Msg("renewed the controller lease again")
					failing = false
				}
				continue
			}
			if isConflict(err) {
				// A renewal that timed out may still have landed: then
				// the key holds our id at a newer revision and the lease
				// is still ours (valid only as long as the last renewal
				// we know succeeded says).
				e, gerr := l.kv.Get(octx, l.cfg.Key)
				cancel()
				if gerr == nil && e.Operation() == jetstream.KeyValuePut && string(e.Value()) == l.cfg.ID && e.Revision() > rev {
					rev = e.Revision()
					continue
				}
				holder := "(unknown)"
				if gerr == nil {
					holder = string(e.Value())
				}
				l.log.Error().Str("leader", holder).Msg("lost the controller lease: another controller took it over; standing by")
				stepDown(ErrLost)
				return nil
			}
			cancel()
			if !failing && ctx.Err() == nil {
				l.log.Warn().Err(err).Time("valid_until", until).
					Msg("cannot renew the controller lease; still leading until it lapses, retrying")
				failing = true
			}
		}
	}
}

// release deletes the lease if it still holds rev, so a standby can take
// over without waiting out the TTL.
func (l *Lease) release(rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Renew)
	defer cancel()
	if err := l.kv.Delete(ctx, l.cfg.Key, jetstream.LastRevision(rev)); err != nil {
		l.log.Warn().Err(err).Msg("could not release the controller lease; a standby takes over when it lapses")
		return
	}
	l.log.Info().Msg("released the controller lease")
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
