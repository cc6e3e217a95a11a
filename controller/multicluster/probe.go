package multicluster

// The link to each peer, measured: every ProbeInterval a small request
// (its round trip: the latency is half) and a large one (probeLarge bytes:
// the bandwidth is its bytes over the time it took beyond the small one's)
// to the peer's probe subject, which answers a few bytes; and every
// checkpoint sent, its bytes over its time. Each figure is a moving
// average with the time of its last sample. Predictions (routes, moves,
// `rota estimate`) take the measured figure while it is younger than
// LinkMaxAge, else the configured one (mc_link).

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/wire"
)

const (
	// probeSmall and probeLarge are the probes' bodies, in bytes; the
	// large one stays under NATS's 1 MiB max_payload.
	probeSmall = 64
	probeLarge = 512 << 10
)

// onProbe answers another cluster timing the link.
func (m *Manager) onProbe(msg *nats.Msg) { _ = msg.Respond([]byte("ok")) }

// probeLoop probes, every tick, the peers whose last probe is
// ProbeInterval old (a peer just seen: at once), until ctx ends.
func (m *Manager) probeLoop(ctx context.Context) {
	if m.cfg.ProbeInterval <= 0 {
		return
	}
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range m.links.due(m.views.names(), m.cfg.ProbeInterval) {
			if ctx.Err() != nil {
				return
			}
			m.probe(n)
		}
	}
}

// probe times the link to peer once: a small request, then a large one.
func (m *Manager) probe(peer string) {
	small, large := make([]byte, probeSmall), make([]byte, probeLarge)
	// Random, so a link that compresses does not flatter itself.
	_, _ = rand.Read(large)
	subj := wire.SubjectMCProbe(peer)
	t0 := time.Now()
	_, err := m.mc.Request(subj, small, m.cfg.AskTimeout)
	rtt := time.Since(t0)
	var tl time.Duration
	if err == nil {
		t1 := time.Now()
		_, err = m.mc.Request(subj, large, m.cfg.AskTimeout)
		tl = time.Since(t1)
	}
	m.links.probed(peer, err)
	if err != nil {
		m.warned.warn("peer", peer, err, "cannot time the link to cluster "+peer+
			" (its controller down or not leading, or the link cut); predictions use the configured mc_link figure once the measured one is older than mc_link_max_age")
		return
	}
	m.warned.clear("peer", peer)
	bw := -1.0
	if tl > rtt {
		bw = probeLarge / (tl - rtt).Seconds()
	}
	m.links.add(peer, bw, rtt.Seconds()/2)
	m.log.Debug().Str("peer", peer).Dur("rtt", rtt).Dur("large", tl).Float64("bandwidth", bw).Msg("link probed")
}

// Links are the other clusters and the links to them, configured and
// measured.
func (m *Manager) Links() []wire.MCPeer { return m.views.list(m.links) }

// link is the link to peer that predictions use (linkBook.fig).
func (m *Manager) link(peer string) linkFig { return m.links.fig(peer) }
