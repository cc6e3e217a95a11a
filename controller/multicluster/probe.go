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
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/wire"
)

const (
	// probeSmall and probeLarge are the probes' bodies, in bytes; the
	// large one stays under NATS's 1 MiB max_payload.
	probeSmall = 64
	probeLarge = 512 << 10
	// ewmaWeight is the newest sample's weight in the moving averages.
	ewmaWeight = 0.3
)

// linkMeasure is one peer's link as measured from here.
type linkMeasure struct {
	// Bandwidth (bytes/s) and latency (s), moving averages, and when
	// their last samples came (zero: never).
	bw, lat     float64
	bwAt, latAt time.Time
	// tried is the last probe; probeErr its failure ("" it answered).
	tried    time.Time
	probeErr string
}

func ewma(old, sample float64, first bool) float64 {
	if first {
		return sample
	}
	return ewmaWeight*sample + (1-ewmaWeight)*old
}

// addSample adds a bandwidth (bytes/s) and a latency (s) sample of the
// link to peer; a negative value is no sample.
func (m *Manager) addSample(peer string, bw, lat float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	lm := m.measure(peer)
	now := m.now()
	if bw > 0 {
		lm.bw, lm.bwAt = ewma(lm.bw, bw, lm.bwAt.IsZero()), now
	}
	if lat >= 0 {
		lm.lat, lm.latAt = ewma(lm.lat, lat, lm.latAt.IsZero()), now
	}
}

// measure is peer's record (m.mu held).
func (m *Manager) measure(peer string) *linkMeasure {
	lm := m.links[peer]
	if lm == nil {
		lm = &linkMeasure{}
		m.links[peer] = lm
	}
	return lm
}

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
		m.mu.Lock()
		var due []string
		now := m.now()
		for _, n := range sortedKeys(m.peers) {
			if lm := m.measure(n); now.Sub(lm.tried) >= m.cfg.ProbeInterval {
				lm.tried = now
				due = append(due, n)
			}
		}
		m.mu.Unlock()
		for _, n := range due {
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
	m.mu.Lock()
	lm := m.measure(peer)
	if err != nil {
		lm.probeErr = err.Error()
	} else {
		lm.probeErr = ""
	}
	m.mu.Unlock()
	if err != nil {
		m.warnOnce("peer", peer, err, "cannot time the link to cluster "+peer+
			" (its controller down or not leading, or the link cut); predictions use the configured mc_link figure once the measured one is older than mc_link_max_age")
		return
	}
	m.clearWarn("peer", peer)
	bw := -1.0
	if tl > rtt {
		bw = probeLarge / (tl - rtt).Seconds()
	}
	m.addSample(peer, bw, rtt.Seconds()/2)
	m.log.Debug().Str("peer", peer).Dur("rtt", rtt).Dur("large", tl).Float64("bandwidth", bw).Msg("link probed")
}

// linkMaxAge is how long a measured figure is used.
func (m *Manager) linkMaxAge() time.Duration {
	switch {
	case m.cfg.LinkMaxAge > 0:
		return m.cfg.LinkMaxAge
	case m.cfg.ProbeInterval > 0:
		return 3 * m.cfg.ProbeInterval
	}
	return 15 * time.Minute
}

// linkFig is the link to a peer as predictions take it, and whence.
type linkFig struct {
	xcluster.Link
	// Measured: the bandwidth is the measured one, Age old.
	Measured bool
	Age      time.Duration
}

func (f linkFig) words() string {
	switch {
	case f.Bandwidth <= 0:
		return "no link"
	case f.Measured:
		return fmt.Sprintf("%s measured %s ago", rate(f.Bandwidth), f.Age.Round(time.Second))
	}
	return rate(f.Bandwidth) + " configured"
}

// rate is a bandwidth in decimal units: "100 MB/s", "1.25 GB/s".
func rate(bps float64) string { return xcluster.RateWords(bps) }

// link is the link to peer that predictions use: the measured bandwidth
// (and latency, each while fresh) when it is younger than linkMaxAge,
// else the configured one; Bandwidth 0: none, no transfer possible.
func (m *Manager) link(peer string) linkFig {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.linkLocked(peer)
}

func (m *Manager) linkLocked(peer string) linkFig {
	f := linkFig{Link: linkOf(m.cfg.Links, m.cfg.Name, peer)}
	lm := m.links[peer]
	now, maxAge := m.now(), m.linkMaxAge()
	if lm == nil || lm.bwAt.IsZero() || now.Sub(lm.bwAt) > maxAge {
		return f
	}
	f.Link = xcluster.Link{A: m.cfg.Name, B: peer, Bandwidth: lm.bw, Latency: f.Latency}
	if !lm.latAt.IsZero() && now.Sub(lm.latAt) <= maxAge {
		f.Latency = lm.lat
	}
	f.Measured, f.Age = true, now.Sub(lm.bwAt)
	return f
}

// peersLocked are the peers as `rota status` and the metrics show them:
// each view, the configured link and the measured one (m.mu held).
func (m *Manager) peersLocked() []wire.MCPeer {
	now := m.now()
	var out []wire.MCPeer
	for _, n := range sortedKeys(m.peers) {
		p := m.peers[n]
		l := linkOf(m.cfg.Links, m.cfg.Name, n)
		mp := wire.MCPeer{View: p.view, AgeSeconds: now.Sub(p.got).Seconds(), Bandwidth: l.Bandwidth, LatencySeconds: l.Latency,
			BandwidthAgeSeconds: -1, LatencyAgeSeconds: -1, Used: "none"}
		if lm := m.links[n]; lm != nil {
			if !lm.bwAt.IsZero() {
				mp.MeasuredBandwidth, mp.BandwidthAgeSeconds = lm.bw, now.Sub(lm.bwAt).Seconds()
			}
			if !lm.latAt.IsZero() {
				mp.MeasuredLatencySeconds, mp.LatencyAgeSeconds = lm.lat, now.Sub(lm.latAt).Seconds()
			}
			mp.ProbeError = lm.probeErr
		}
		switch f := m.linkLocked(n); {
		case f.Measured:
			mp.Used = "measured"
		case f.Bandwidth > 0:
			mp.Used = "configured"
		}
		out = append(out, mp)
	}
	return out
}

// Links are the other clusters and the links to them, configured and
// measured.
func (m *Manager) Links() []wire.MCPeer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peersLocked()
}
