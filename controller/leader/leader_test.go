package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
)

// Short leases keep the tests quick; the renewal interval keeps the
// production ratio's margin (TTL/5).
const (
	testTTL   = 750 * time.Millisecond
	testRenew = 150 * time.Millisecond
)

// ledger records every term of every candidate, and how many lead at once.
type ledger struct {
	mu      sync.Mutex
	now     int
	most    int
	starts  map[string]int
	lost    map[string]int // terms ended with ErrLost
	history []string
}

func newLedger() *ledger {
	return &ledger{starts: map[string]int{}, lost: map[string]int{}}
}

// lead is a candidate's lead function: it holds its term until the
// leadership context ends.
func (g *ledger) lead(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		g.mu.Lock()
		g.now++
		g.most = max(g.most, g.now)
		g.starts[id]++
		g.history = append(g.history, "+"+id)
		g.mu.Unlock()
		<-ctx.Done()
		g.mu.Lock()
		g.now--
		if errors.Is(context.Cause(ctx), ErrLost) {
			g.lost[id]++
		}
		g.history = append(g.history, "-"+id)
		g.mu.Unlock()
	}
}

func (g *ledger) snapshot() (now, most int, starts, lost map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s, l := map[string]int{}, map[string]int{}
	for k, v := range g.starts {
		s[k] = v
	}
	for k, v := range g.lost {
		l[k] = v
	}
	return g.now, g.most, s, l
}

type candidate struct {
	id     string
	lease  *Lease
	cancel context.CancelFunc
	done   chan error
}

func startCandidate(t *testing.T, nc *nats.Conn, id string, g *ledger) *candidate {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := NewLease(ctx, js, Config{ID: id, TTL: testTTL, Renew: testRenew, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	c := &candidate{id: id, lease: l, cancel: rcancel, done: make(chan error, 1)}
	go func() { c.done <- l.Run(rctx, g.lead(id)) }()
	t.Cleanup(c.stop)
	return c
}

func (c *candidate) stop() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
		c.cancel = nil
	}
}

func (c *candidate) leads() bool { _, ok := c.lease.Holder(); return ok }

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// waitRevisions waits until the lease has been rewritten n more times,
// i.e. its holder renewed through n intervals.
func waitRevisions(t *testing.T, kv jetstream.KeyValue, n uint64) {
	t.Helper()
	rev := func() uint64 {
		e, err := kv.Get(context.Background(), DefaultKey)
		if err != nil {
			return 0
		}
		return e.Revision()
	}
	from := rev()
	eventually.True(t, 20*time.Second, fmt.Sprintf("%d renewals", n), func() bool { return rev() >= from+n })
}

func TestTwoCandidatesOneLeadsAndHandsOverOnShutdown(t *testing.T) {
	srv := natstest.StartJetStream(t)
	g := newLedger()
	a := startCandidate(t, connect(t, srv.URL()), "a", g)
	b := startCandidate(t, connect(t, srv.URL()), "b", g)
	eventually.True(t, 10*time.Second, "a leader", func() bool { return a.leads() || b.leads() })
	first, second := a, b
	if b.leads() {
		first, second = b, a
	}
	// Several renewals later, still the same single leader, and the
	// standby knows who it is.
	waitRevisions(t, first.lease.kv, 5)
	if now, most, starts, _ := g.snapshot(); now != 1 || most != 1 || starts[second.id] != 0 {
		t.Fatalf("leading now %d, at most %d, terms %v", now, most, starts)
	}
	if h, leads := second.lease.Holder(); h != first.id || leads {
		t.Fatalf("standby sees holder %q (leads %v), want %q", h, leads, first.id)
	}

	// A clean shutdown releases the lease and the standby takes it.
	first.stop()
	eventually.True(t, 10*time.Second, "the standby to lead", second.leads)
	if _, most, starts, lost := g.snapshot(); most != 1 || starts[second.id] != 1 || lost[first.id] != 0 {
		t.Fatalf("at most %d leading, terms %v, lost %v", most, starts, lost)
	}
	if _, err := first.lease.kv.Get(context.Background(), DefaultKey); err != nil {
		t.Fatalf("lease after takeover: %v", err)
	}
}

// A leader that stops renewing (here its NATS connection is gone, as when
// its process is killed or its host cut off) loses the lease within the
// TTL, and the standby takes over only after the old leader stepped down.
func TestStandbyTakesOverWhenLeaderStopsRenewing(t *testing.T) {
	srv := natstest.StartJetStream(t)
	g := newLedger()
	ncA := connect(t, srv.URL())
	a := startCandidate(t, ncA, "a", g)
	eventually.True(t, 10*time.Second, "a to lead", a.leads)
	b := startCandidate(t, connect(t, srv.URL()), "b", g)
	waitRevisions(t, a.lease.kv, 3)

	ncA.Close() // a can neither renew nor release
	eventually.True(t, 20*time.Second, "b to take over", func() bool {
		// The ledger records a term just after leads() turns true.
		_, _, starts, _ := g.snapshot()
		return b.leads() && starts["b"] >= 1
	})
	_, most, starts, lost := g.snapshot()
	if most != 1 {
		t.Fatalf("%d controllers led at once: %v", most, g.history)
	}
	// Every term of a ended (a loaded machine can make a miss a renewal
	// and win the lease back before the cut, hence >= rather than ==),
	// and b leads now.
	if lost["a"] < 1 || lost["a"] != starts["a"] || starts["b"] < 1 || a.leads() {
		t.Fatalf("terms %v, lost %v, a still leads: %v", starts, lost, a.leads())
	}
}

// Many candidates contending for a free lease, then for one left by a
// holder that vanished: one leads, the others stand by.
func TestManyCandidatesOneLeads(t *testing.T) {
	srv := natstest.StartJetStream(t)
	nc := connect(t, srv.URL())
	js, _ := jetstream.New(nc)
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: DefaultBucket, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	for _, ghost := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale_holder=%v", ghost), func(t *testing.T) {
			if err := kv.Purge(context.Background(), DefaultKey); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				t.Fatal(err)
			}
			if ghost {
				if _, err := kv.Put(context.Background(), DefaultKey, []byte("gone")); err != nil {
					t.Fatal(err)
				}
			}
			g := newLedger()
			var cs []*candidate
			for i := 0; i < 6; i++ {
				cs = append(cs, startCandidate(t, connect(t, srv.URL()), fmt.Sprintf("c%d", i), g))
			}
			eventually.True(t, 20*time.Second, "a leader", func() bool { now, _, _, _ := g.snapshot(); return now == 1 })
			waitRevisions(t, kv, 5)
			now, most, starts, _ := g.snapshot()
			if now != 1 || most != 1 || len(starts) != 1 {
				t.Fatalf("leading now %d, at most %d, terms %v", now, most, starts)
			}
			for _, c := range cs {
				c.stop()
			}
		})
	}
}

// The step every standby takes, run by many at the same instant from the
// same view of the lease: exactly one write succeeds, the others are told
// they lost.
func TestSimultaneousAcquireHasOneWinner(t *testing.T) {
	srv := natstest.StartJetStream(t)
	var ls []*Lease
	for i := 0; i < 8; i++ {
		js, _ := jetstream.New(connect(t, srv.URL()))
		l, err := NewLease(context.Background(), js, Config{ID: fmt.Sprintf("c%d", i), TTL: testTTL, Renew: testRenew, Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	race := func(from uint64) (winners []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, l := range ls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _, err := l.acquire(context.Background(), from)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, l.ID())
				case !isConflict(err):
					t.Errorf("%s: %v is not a lost compare-and-set", l.ID(), err)
				}
			}()
		}
		close(start)
		wg.Wait()
		return winners
	}
	if w := race(0); len(w) != 1 {
		t.Fatalf("creating a free lease: winners %v", w)
	}
	e, err := ls[0].kv.Get(context.Background(), DefaultKey)
	if err != nil {
		t.Fatal(err)
	}
	if w := race(e.Revision()); len(w) != 1 {
		t.Fatalf("taking over revision %d: winners %v", e.Revision(), w)
	}
}

// A leader whose lease revision changed under it (another writer, e.g. a
// controller on the other side of a partition that saw it lapse) steps
// down at its next renewal instead of serving on.
func TestLeaderStepsDownWhenLeaseChangesUnderIt(t *testing.T) {
	srv := natstest.StartJetStream(t)
	g := newLedger()
	a := startCandidate(t, connect(t, srv.URL()), "a", g)
	eventually.True(t, 10*time.Second, "a to lead", a.leads)
	if _, err := a.lease.kv.Put(context.Background(), DefaultKey, []byte("intruder")); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "a to step down", func() bool { return !a.leads() })
	if _, _, _, lost := g.snapshot(); lost["a"] != 1 {
		t.Fatalf("a's term did not end as lost: %v", g.history)
	}
	if h, _ := a.lease.Holder(); h != "intruder" && h != "" {
		t.Fatalf("holder %q", h)
	}
	// The intruder never renews: a takes the lease back after a TTL.
	eventually.True(t, 10*time.Second, "a to lead again", a.leads)
}

// A leader that stepped down because JetStream was gone longer than its
// TTL finds the lease still naming it when JetStream is back: no one took
// over, so it takes the lease back at once, before a standby that saw the
// same lease waits out its TTL.
func TestLeaderReclaimsItsOwnLapsedLease(t *testing.T) {
	srv := natstest.StartJetStream(t)
	g := newLedger()
	a := startCandidate(t, connect(t, srv.URL()), "a", g)
	eventually.True(t, 10*time.Second, "a to lead", a.leads)
	b := startCandidate(t, connect(t, srv.URL()), "b", g)
	eventually.True(t, 10*time.Second, "b to stand by", func() bool { h, _ := b.lease.Holder(); return h == "a" })

	srv.Stop()
	eventually.True(t, 10*time.Second, "a to step down", func() bool { return !a.leads() })
	srv.Restart()
	eventually.True(t, 20*time.Second, "a leader again", func() bool { return a.leads() || b.leads() })
	waitRevisions(t, a.lease.kv, 3)
	_, most, starts, lost := g.snapshot()
	if most != 1 || lost["a"] != 1 || starts["a"] != 2 || starts["b"] != 0 {
		t.Fatalf("at most %d leading, terms %v, lost %v: %v", most, starts, lost, g.history)
	}
}

// flakyKV fails the lease's writes while reads still work, as when the
// lease's stream has lost its leader but a replica answers reads.
type flakyKV struct {
	jetstream.KeyValue
	fail atomic.Bool
}

var errNoStream = errors.New("no response from stream (test)")

func (f *flakyKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if f.fail.Load() {
		return 0, errNoStream
	}
	return f.KeyValue.Update(ctx, key, value, rev)
}

func (f *flakyKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if f.fail.Load() {
		return 0, errNoStream
	}
	return f.KeyValue.Create(ctx, key, value, opts...)
}

// A leader whose writes fail (reads working) lapses, keeps trying to take
// its own lease back while writes fail, and succeeds once they work.
func TestLeaderReclaimsAfterWritesFailed(t *testing.T) {
	srv := natstest.StartJetStream(t)
	js, _ := jetstream.New(connect(t, srv.URL()))
	l, err := NewLease(context.Background(), js, Config{ID: "a", TTL: testTTL, Renew: testRenew, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	kv := &flakyKV{KeyValue: l.kv}
	l.kv = kv
	g := newLedger()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, g.lead("a")) }()
	defer func() { cancel(); <-done }()
	leads := func() bool { _, ok := l.Holder(); return ok }
	eventually.True(t, 10*time.Second, "a to lead", leads)

	kv.fail.Store(true)
	eventually.True(t, 10*time.Second, "a to lapse", func() bool { return !leads() })
	// Several standby reads (each a failed reclaim) while writes fail.
	for range 3 {
		time.Sleep(testRenew)
	}
	kv.fail.Store(false)
	eventually.True(t, 10*time.Second, "a to take its lease back", leads)
	if _, most, starts, lost := g.snapshot(); most != 1 || starts["a"] != 2 || lost["a"] != 1 {
		t.Fatalf("terms %v, lost %v, at most %d", starts, lost, most)
	}
}

// On a 3-node cluster with the lease replicated 3 times, a leader whose
// only NATS server dies steps down, and a standby on another node takes
// over: the lease survives losing one node.
func TestPartitionedLeaderStepsDownOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node NATS cluster")
	}
	cl := natstest.StartCluster(t, 3)
	g := newLedger()
	mk := func(node int, id string) *candidate {
		nc := cl.Connect(node)
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		l, err := NewLease(ctx, js, Config{ID: id, TTL: testTTL, Renew: testRenew, Replicas: 3, Log: zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger()})
		if err != nil {
			t.Fatal(err)
		}
		rctx, rcancel := context.WithCancel(context.Background())
		c := &candidate{id: id, lease: l, cancel: rcancel, done: make(chan error, 1)}
		go func() { c.done <- l.Run(rctx, g.lead(id)) }()
		t.Cleanup(c.stop)
		return c
	}
	a := mk(0, "a")
	eventually.True(t, 20*time.Second, "a to lead", a.leads)
	b := mk(1, "b")
	waitRevisions(t, b.lease.kv, 3)

	cl.StopNode(0)
	eventually.True(t, 60*time.Second, "b to take over", b.leads)
	_, most, _, lost := g.snapshot()
	if most != 1 || lost["a"] != 1 || a.leads() {
		t.Fatalf("at most %d leading, lost %v, a leads %v: %v", most, lost, a.leads(), g.history)
	}
}

func TestSolo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	led := false
	go cancel()
	if err := (Solo{}).Run(ctx, func(ctx context.Context) { led = true; <-ctx.Done() }); err != nil || !led {
		t.Fatalf("Solo: led %v, err %v", led, err)
	}
}

func TestConfigChecks(t *testing.T) {
	srv := natstest.StartJetStream(t)
	js, _ := jetstream.New(connect(t, srv.URL()))
	if _, err := NewLease(context.Background(), js, Config{TTL: time.Second, Renew: 600 * time.Millisecond}); err == nil {
		t.Fatal("renewal interval over half the TTL accepted")
	}
	l, err := NewLease(context.Background(), js, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if l.cfg.TTL != DefaultTTL || l.cfg.Renew != DefaultTTL/5 || l.ID() == "" {
		t.Fatalf("defaults: %+v", l.cfg)
	}
}
