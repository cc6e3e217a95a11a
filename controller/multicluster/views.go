package multicluster

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/wire"
)

// views is what this cluster knows of the others: the latest view each
// published, and the GPUs this cluster sent each since that view (which
// it does not show yet); and this cluster's own last view. The route
// state machine and the estimates read it; it reads nothing of theirs.
type views struct {
	name   string // this cluster's
	maxAge time.Duration
	now    func() time.Time
	log    zerolog.Logger

	mu    sync.Mutex
	peers map[string]*peer
	sent  []sent
	home  *wire.MCView
}

type peer struct {
	view wire.MCView
	at   time.Time // its own time stamp
	got  time.Time // when it arrived here
}

type sent struct {
	to   string
	at   time.Time
	gpus float64
}

func newViews(name string, maxAge time.Duration, now func() time.Time, log zerolog.Logger) *views {
	return &views{name: name, maxAge: maxAge, now: now, log: log, peers: map[string]*peer{}}
}

// onView takes a peer's view from the bus; an older one than held, one
// of this cluster, or one that does not decode is dropped.
func (b *views) onView(msg *nats.Msg) {
	var v wire.MCView
	if err := wire.Decode(msg.Data, &v); err != nil {
		b.log.Debug().Err(err).Str("subject", msg.Subject).Msg("ignoring a cluster view that does not decode")
		return
	}
	if v.Cluster == "" || v.Cluster == b.name {
		return
	}
	at, err := time.Parse(time.RFC3339Nano, v.At)
	if err != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.peers[v.Cluster]; p != nil && at.Before(p.at) {
		return
	}
	b.peers[v.Cluster] = &peer{view: v, at: at, got: b.now()}
}

// setHome keeps this cluster's view as last published; homeView is it
// (nil before the first).
func (b *views) setHome(v *wire.MCView) {
	b.mu.Lock()
	b.home = v
	b.mu.Unlock()
}

func (b *views) homeView() *wire.MCView {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.home
}

// sentTo records GPUs sent to a peer now, until its view shows them.
func (b *views) sentTo(to string, gpus float64) {
	b.mu.Lock()
	b.sent = append(b.sent, sent{to: to, at: b.now(), gpus: gpus})
	b.mu.Unlock()
}

// fresh are the peers whose views are recent enough to route to, with
// the GPUs sent to each since its view, and every peer's view's age in
// seconds.
func (b *views) fresh() (vs []*wire.MCView, extra, ages map[string]float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	extra, ages = map[string]float64{}, map[string]float64{}
	for _, n := range sortedKeys(b.peers) {
		p := b.peers[n]
		ages[n] = now.Sub(p.got).Seconds()
		if now.Sub(p.got) > b.maxAge {
			continue
		}
		v := p.view
		vs = append(vs, &v)
		for _, s := range b.sent {
			if s.to == n && s.at.After(p.at) {
				extra[n] += s.gpus
			}
		}
	}
	return vs, extra, ages
}

// stale are the views too old to route to, for the user to see.
func (b *views) stale() []*wire.MCView {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	var vs []*wire.MCView
	for _, n := range sortedKeys(b.peers) {
		if p := b.peers[n]; now.Sub(p.got) > b.maxAge {
			v := p.view
			vs = append(vs, &v)
		}
	}
	return vs
}

// names are the peers heard from, sorted.
func (b *views) names() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return sortedKeys(b.peers)
}

// defaultPartition is the peer's default partition ("" unknown).
func (b *views) defaultPartition(name string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.peers[name]; p != nil {
		return p.view.DefaultPartition
	}
	return ""
}

// list is every peer's view and its age, as `rota status` and the
// metrics show them, with what links says of the link to it.
func (b *views) list(links *linkBook) []wire.MCPeer {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	var out []wire.MCPeer
	for _, n := range sortedKeys(b.peers) {
		p := b.peers[n]
		mp := wire.MCPeer{View: p.view, AgeSeconds: now.Sub(p.got).Seconds()}
		links.describe(n, &mp)
		out = append(out, mp)
	}
	return out
}

// prune forgets sends older than a minute: a view that old shows them.
func (b *views) prune() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	keep := b.sent[:0]
	for _, s := range b.sent {
		if now.Sub(s.at) < time.Minute {
			keep = append(keep, s)
		}
	}
	b.sent = keep
}
