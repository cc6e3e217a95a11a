// Package decisions keeps the controller's record of every placement so
// that `rota explain <jobid>` can show it: in memory for the recent ones,
// and in a JetStream key-value bucket so a restart keeps them.
package decisions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/wire"
)

// Bucket is the JetStream KV bucket holding decisions.
const Bucket = "rota_decisions"

// ErrNotFound is returned for an unknown decision or job.
var ErrNotFound = errors.New("no decision recorded")

// Store records decisions. Record never blocks the request path: writes to
// JetStream happen on a background goroutine (Run). Commit is the durable
// alternative: it returns once JetStream has the decision.
type Store struct {
	kv  jetstream.KeyValue
	js  jetstream.JetStream // Run's batched puts into kv
	log zerolog.Logger

	mu       sync.RWMutex
	changing sync.Mutex // one change (Bind, AddLimit) of a stored decision at a time
	recent   map[string]*wire.Decision
	order    []string // ids, oldest first, to bound recent
	limit    int

	queue   chan queued
	count   atomic.Uint64
	journal *Journal // nil: Record keeps decisions in memory until stored
}

// queued is a decision waiting for JetStream, encoded (once, for the
// journal and the bucket alike), with its journal sequence number (0 when
// not journaled).
type queued struct {
	d   *wire.Decision
	b   []byte
	seq uint64
}

// Open creates (or opens) the bucket. keep is how long decisions are kept;
// replicas how many copies JetStream keeps (an existing bucket is scaled to
// it).
func Open(ctx context.Context, js jetstream.JetStream, keep time.Duration, replicas int, log zerolog.Logger) (*Store, error) {
	if replicas < 1 {
		replicas = 1
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "Rota placement decisions, by decision id (d.<id>) and job id (job.<id>)",
		History:     1,
		TTL:         keep,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("opening JetStream bucket %s (replicas %d): %w", Bucket, replicas, err)
	}
	return &Store{
		kv:     kv,
		js:     js,
		log:    log,
		recent: map[string]*wire.Decision{},
		limit:  100_000,
		queue:  make(chan queued, 10_000),
	}, nil
}

// UseJournal makes Record append every decision to j before it returns,
// so a decision handed out survives the process (see Journal). Call
// Replay first.
func (s *Store) UseJournal(j *Journal) { s.journal = j }

// Record keeps d: in the journal when there is one (synchronously: a
// write(2), no fsync), then in memory, and in JetStream from Run.
func (s *Store) Record(d *wire.Decision) {
	b, err := json.Marshal(d)
	if err != nil {
		s.count.Add(1)
		s.log.Warn().Err(err).Str("decision", d.ID).Msg("cannot encode the decision; kept in memory only")
		s.remember(d)
		return
	}
	s.RecordEncoded(d, b)
}

// RecordEncoded is Record for a decision that arrived encoded: b is d's
// JSON encoding (a plugin's record as received), kept as it is for the
// journal and the bucket instead of encoding d again. b must stay
// unchanged; one with a line break is encoded again (the journal is one
// decision per line).
func (s *Store) RecordEncoded(d *wire.Decision, b []byte) {
	if bytes.IndexByte(b, '\n') >= 0 {
		s.Record(d)
		return
	}
	s.count.Add(1)
	var (
		seq uint64
		err error
	)
	if s.journal != nil {
		if seq, err = s.journal.Append(d.ID, b); err != nil {
			s.log.Warn().Err(err).Str("decision", d.ID).Msg("cannot journal the decision; it is stored shortly but a controller killed before then loses it")
		}
	}
	s.remember(d)
	select {
	case s.queue <- queued{d, b, seq}:
	default:
		s.journal.stored(seq, false)
		s.log.Warn().Str("decision", d.ID).Msg("decision write queue full (JetStream slow or down); decision kept in memory and journal only")
	}
}

// Commit stores d in JetStream and returns once the server acknowledged it
// (on a replicated bucket: once a quorum of replicas has it), so a decision
// Commit returned nil for survives the controller's death. On error d is
// neither stored nor counted; the caller must not hand it out.
func (s *Store) Commit(ctx context.Context, d *wire.Decision) error {
	if err := s.write(ctx, d); err != nil {
		return err
	}
	s.count.Add(1)
	s.remember(d)
	return nil
}

func (s *Store) remember(d *wire.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recent[d.ID]; !ok {
		s.order = append(s.order, d.ID)
	}
	s.recent[d.ID] = d
	for len(s.order) > s.limit {
		delete(s.recent, s.order[0])
		s.order = s.order[1:]
	}
}

// Count is the number of decisions recorded since start.
func (s *Store) Count() uint64 { return s.count.Load() }

// maxPutBatch bounds the decisions Run has in flight to JetStream at once.
const maxPutBatch = 64

// Run writes queued decisions until ctx ends, then flushes what is left.
// What queued up meanwhile goes out together (PublishAsync, then the
// acknowledgements): in a burst of submissions, one write to the server and
// one wait for several decisions instead of a round trip each.
func (s *Store) Run(ctx context.Context) {
	batch := make([]queued, 0, maxPutBatch)
	for {
		select {
		case q := <-s.queue:
			s.putBatch(s.gather(append(batch[:0], q)))
		case <-ctx.Done():
			for {
				select {
				case q := <-s.queue:
					s.putBatch(s.gather(append(batch[:0], q)))
				default:
					return
				}
			}
		}
	}
}

// gather adds to batch what else is queued, up to maxPutBatch.
func (s *Store) gather(batch []queued) []queued {
	for len(batch) < maxPutBatch {
		select {
		case q := <-s.queue:
			batch = append(batch, q)
		default:
			return batch
		}
	}
	return batch
}

// putBatch stores the batch's decisions, and says to the journal which
// it could, in order.
func (s *Store) putBatch(batch []queued) {
	acks := make([]jetstream.PubAckFuture, len(batch))
	errs := make([]error, len(batch))
	for i, q := range batch {
		// The subject kv.Put("d.<id>") publishes to.
		acks[i], errs[i] = s.js.PublishAsync("$KV."+Bucket+".d."+q.d.ID, q.b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, q := range batch {
		if errs[i] == nil {
			select {
			case <-acks[i].Ok():
			case errs[i] = <-acks[i].Err():
			case <-ctx.Done():
				errs[i] = errors.New("no acknowledgement from JetStream within 5s")
			}
		}
		if errs[i] == nil && hasJobID(q.d) { // rare: decisions at submission have no job id yet
			errs[i] = s.putIndex(ctx, q.d)
		}
		if errs[i] != nil {
			s.log.Warn().Err(errs[i]).Str("decision", q.d.ID).Msg("cannot store decision in JetStream; kept in memory (and the journal, if on) only")
		}
		s.journal.stored(q.seq, errs[i] == nil)
	}
}

// put stores d and says whether it could.
func (s *Store) put(ctx context.Context, d *wire.Decision) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.write(ctx, d); err != nil {
		s.log.Warn().Err(err).Str("decision", d.ID).Msg("cannot store decision in JetStream; kept in memory (and the journal, if on) only")
		return false
	}
	return true
}

// write puts the decision, then its job index when it has a job id.
func (s *Store) write(ctx context.Context, d *wire.Decision) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encoding decision %s: %w", d.ID, err)
	}
	if _, err := s.kv.Put(ctx, "d."+d.ID, b); err != nil {
		return fmt.Errorf("storing decision %s: %w", d.ID, err)
	}
	if hasJobID(d) {
		return s.putIndex(ctx, d)
	}
	return nil
}

// putIndex stores the job index of a decision that names its job.
func (s *Store) putIndex(ctx context.Context, d *wire.Decision) error {
	if _, err := s.kv.Put(ctx, jobKey(d.JobID), []byte(d.ID)); err != nil {
		return fmt.Errorf("storing the job index of job %d: %w", d.JobID, err)
	}
	return nil
}

// hasJobID: the decision names its job. At submission Slurm has not
// assigned the id yet (job_submit runs first): 0, or NO_VAL from older
// plugins, for which every decision rewrote one "job.4294967294" key.
func hasJobID(d *wire.Decision) bool { return d.JobID != 0 && d.JobID < 0xfffffffe }

func jobKey(id uint32) string { return "job." + strconv.FormatUint(uint64(id), 10) }

// Get returns a decision by id.
func (s *Store) Get(ctx context.Context, id string) (*wire.Decision, error) {
	s.mu.RLock()
	d, ok := s.recent[id]
	s.mu.RUnlock()
	if ok {
		return d, nil
	}
	e, err := s.kv.Get(ctx, "d."+id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: decision %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading decision %s: %w", id, err)
	}
	var dec wire.Decision
	if err := json.Unmarshal(e.Value(), &dec); err != nil {
		return nil, fmt.Errorf("decision %s is corrupt: %w", id, err)
	}
	return &dec, nil
}

// ByJob returns the decision bound to a job id, if one was bound.
func (s *Store) ByJob(ctx context.Context, jobID uint32) (*wire.Decision, error) {
	e, err := s.kv.Get(ctx, jobKey(jobID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: job %d", ErrNotFound, jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("reading job index %d: %w", jobID, err)
	}
	return s.Get(ctx, string(e.Value()))
}

// Bind records that decision id became Slurm job jobID (learned later from
// the job's annotation), and stores it synchronously.
func (s *Store) Bind(ctx context.Context, id string, jobID uint32) (*wire.Decision, error) {
	return s.change(ctx, id, func(d *wire.Decision) bool {
		changed := d.JobID != jobID
		d.JobID = jobID
		return changed
	})
}

// AddLimit adds a change of job jobID's time limit to its decision id
// (binding it to the job too), stored synchronously, and returns the
// decision as it now is.
func (s *Store) AddLimit(ctx context.Context, id string, jobID uint32, c wire.LimitChange) (*wire.Decision, error) {
	return s.change(ctx, id, func(d *wire.Decision) bool {
		d.JobID = jobID
		d.Limits = append(slices.Clip(d.Limits), c) // never into the original's array
		return true
	})
}

// change applies f to a copy of decision id and, when f says it changed
// it, keeps and stores the copy synchronously. One change at a time, so
// an explain binding a job and the round loop recording its limit do not
// undo each other.
func (s *Store) change(ctx context.Context, id string, f func(*wire.Decision) bool) (*wire.Decision, error) {
	s.changing.Lock()
	defer s.changing.Unlock()
	d, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	cp := *d
	if !f(&cp) {
		return d, nil
	}
	s.remember(&cp)
	s.put(ctx, &cp)
	return &cp, nil
}
