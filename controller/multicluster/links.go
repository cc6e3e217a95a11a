package multicluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/wire"
)

const (
	// ewmaWeight is the newest sample's weight in the moving averages.
	ewmaWeight = 0.3
)

// linkBook is what this cluster knows of its links to the others: the
// configured figures (mc_link) and the measured ones, which the probes
// (probe.go) and the checkpoints sent (transfer.go) add to. It has its own
// lock: the Manager may hold its own while it asks (never the reverse).
type linkBook struct {
	name   string          // this cluster
	conf   []xcluster.Link // mc_link
	maxAge time.Duration   // a measured figure older than this is not used
	now    func() time.Time

	mu sync.Mutex
	m  map[string]*linkMeasure
}

func newLinkBook(cfg Config, now func() time.Time) *linkBook {
	maxAge := 15 * time.Minute
	switch {
	case cfg.LinkMaxAge > 0:
		maxAge = cfg.LinkMaxAge
	case cfg.ProbeInterval > 0:
		maxAge = 3 * cfg.ProbeInterval
	}
	return &linkBook{name: cfg.Name, conf: cfg.Links, maxAge: maxAge, now: now, m: map[string]*linkMeasure{}}
}

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

// measure is peer's record (b.mu held).
func (b *linkBook) measure(peer string) *linkMeasure {
	lm := b.m[peer]
	if lm == nil {
		lm = &linkMeasure{}
		b.m[peer] = lm
	}
	return lm
}

// add adds a bandwidth (bytes/s) and a latency (s) sample of the link to
// peer; a negative value is no sample.
func (b *linkBook) add(peer string, bw, lat float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lm := b.measure(peer)
	now := b.now()
	if bw > 0 {
		lm.bw, lm.bwAt = ewma(lm.bw, bw, lm.bwAt.IsZero()), now
	}
	if lat >= 0 {
		lm.lat, lm.latAt = ewma(lm.lat, lat, lm.latAt.IsZero()), now
	}
}

// due are the peers whose last probe is interval old (a peer just seen: at
// once), each marked as probed now.
func (b *linkBook) due(peers []string, interval time.Duration) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	now := b.now()
	for _, n := range peers {
		if lm := b.measure(n); now.Sub(lm.tried) >= interval {
			lm.tried = now
			out = append(out, n)
		}
	}
	return out
}

// probed records how the last probe of peer went.
func (b *linkBook) probed(peer string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lm := b.measure(peer)
	lm.probeErr = ""
	if err != nil {
		lm.probeErr = err.Error()
	}
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

// fig is the link to peer that predictions use: the measured bandwidth
// (and latency, each while fresh) when it is younger than maxAge, else the
// configured one; Bandwidth 0: none, no transfer possible.
func (b *linkBook) fig(peer string) linkFig {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.figLocked(peer)
}

func (b *linkBook) figLocked(peer string) linkFig {
	f := linkFig{Link: linkOf(b.conf, b.name, peer)}
	lm := b.m[peer]
	now := b.now()
	if lm == nil || lm.bwAt.IsZero() || now.Sub(lm.bwAt) > b.maxAge {
		return f
	}
	f.Link = xcluster.Link{A: b.name, B: peer, Bandwidth: lm.bw, Latency: f.Latency}
	if !lm.latAt.IsZero() && now.Sub(lm.latAt) <= b.maxAge {
		f.Latency = lm.lat
	}
	f.Measured, f.Age = true, now.Sub(lm.bwAt)
	return f
}

// describe fills mp's link fields for peer n as `rota status` and the
// metrics show them: configured, measured (with ages; -1 never) and which
// one predictions use.
func (b *linkBook) describe(n string, mp *wire.MCPeer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	l := linkOf(b.conf, b.name, n)
	mp.Bandwidth, mp.LatencySeconds = l.Bandwidth, l.Latency
	mp.BandwidthAgeSeconds, mp.LatencyAgeSeconds, mp.Used = -1, -1, "none"
	if lm := b.m[n]; lm != nil {
		if !lm.bwAt.IsZero() {
			mp.MeasuredBandwidth, mp.BandwidthAgeSeconds = lm.bw, now.Sub(lm.bwAt).Seconds()
		}
		if !lm.latAt.IsZero() {
			mp.MeasuredLatencySeconds, mp.LatencyAgeSeconds = lm.lat, now.Sub(lm.latAt).Seconds()
		}
		mp.ProbeError = lm.probeErr
	}
	switch f := b.figLocked(n); {
	case f.Measured:
		mp.Used = "measured"
	case f.Bandwidth > 0:
		mp.Used = "configured"
	}
}
