package multicluster

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/wire"
)

// TestLinkFigure: predictions take the measured figures while fresh, else
// the configured ones; neither, no link.
func TestLinkFigure(t *testing.T) {
	t.Parallel()
	now := time.Now()
	conf := []xcluster.Link{{A: "a", B: "b", Bandwidth: 100e6, Latency: 0.02}}
	for _, c := range []struct {
		name     string
		links    []xcluster.Link
		measure  *linkMeasure
		bw, lat  float64
		measured bool
		words    string
	}{
		{"neither", nil, nil, 0, 0, false, "no link"},
		{"configured", conf, nil, 100e6, 0.02, false, "100 MB/s configured"},
		{"measured", conf, &linkMeasure{bw: 5e6, lat: 0.1, bwAt: now.Add(-time.Minute), latAt: now.Add(-time.Minute)}, 5e6, 0.1, true, "5 MB/s measured 1m0s ago"},
		{"measured bandwidth, latency stale", conf, &linkMeasure{bw: 5e6, lat: 0.1, bwAt: now, latAt: now.Add(-time.Hour)}, 5e6, 0.02, true, "5 MB/s measured 0s ago"},
		{"measured, stale", conf, &linkMeasure{bw: 5e6, lat: 0.1, bwAt: now.Add(-16 * time.Minute), latAt: now}, 100e6, 0.02, false, "100 MB/s configured"},
		{"measured, no mc_link", nil, &linkMeasure{bw: 5e6, lat: 0.1, bwAt: now, latAt: now}, 5e6, 0.1, true, "5 MB/s measured 0s ago"},
		{"probed, never a bandwidth", conf, &linkMeasure{lat: 0.1, latAt: now}, 100e6, 0.02, false, "100 MB/s configured"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newLinkBook(Config{Name: "a", Links: c.links, ProbeInterval: 5 * time.Minute}, func() time.Time { return now })
			if c.measure != nil {
				b.m["b"] = c.measure
			}
			f := b.fig("b")
			if f.Bandwidth != c.bw || f.Latency != c.lat || f.Measured != c.measured || f.words() != c.words {
				t.Errorf("got %+v %q", f, f.words())
			}
		})
	}
}

// slowPeer answers cluster's probes as a link of latency lat (one way) and
// bw bytes/s would.
func slowPeer(t *testing.T, url, cluster string, lat time.Duration, bw float64) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe(wire.SubjectMCProbe(cluster), func(msg *nats.Msg) {
		time.Sleep(2*lat + time.Duration(float64(len(msg.Data))/bw*float64(time.Second)))
		_ = msg.Respond([]byte("ok"))
	}); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
}

// view makes m hold cluster's view as if it had just come over the link.
func view(t *testing.T, m *Manager, v wire.MCView) {
	t.Helper()
	v.V, v.At = wire.Version, time.Now().UTC().Format(time.RFC3339Nano)
	if v.DefaultPartition == "" {
		v.DefaultPartition = "gpu"
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	m.views.onView(&nats.Msg{Data: b})
}

// TestProbe: a probe of a peer that answers as a 2 MB/s link of 10 ms
// gives that bandwidth and latency; `rota estimate`'s transfer and the
// status take them over the configured 1 GB/s, until they are older than
// the max age.
func TestProbe(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	slowPeer(t, url, "b", 10*time.Millisecond, 2e6)
	nc, mc := conn(t, url, "a")
	ca := testConfig("a")
	ca.RouteOff, ca.ProbeInterval = true, time.Minute // measured figures last 3 min
	ma, _ := New(ca, zerolog.Nop(), newFake(100), fakeLocal{snap: snap(map[string]int{"v100": 4})}, nc, mc, nil)
	view(t, ma, wire.MCView{Cluster: "b", Types: map[string]wire.MCType{"v100": {GPUs: 4}}})
	ma.tick(context.Background()) // this cluster's own view, for the estimate
	xferB := func() float64 {
		for _, r := range ma.Estimate(Job{GPUs: 1, LimitS: 600, DataBytes: 2e6}) {
			if r.Cluster == "b" {
				return r.TransferSeconds
			}
		}
		t.Fatal("no row for b")
		return 0
	}
	if x := xferB(); math.Abs(x-0.022) > 1e-9 {
		t.Fatalf("configured: transfer %g, want 0.022 (2 MB at 1 GB/s + 20 ms)", x)
	}
	ma.probe("b")
	p := ma.Links()[0]
	// 512 KiB at 2 MB/s is 0.26 s beyond the small probe's 20 ms round
	// trip; the host's own time for 512 KiB only adds to it (up to
	// 0.5 s seen under -race beside the other tests on 2 CPUs).
	if p.MeasuredBandwidth < 0.4e6 || p.MeasuredBandwidth > 2.1e6 || p.MeasuredLatencySeconds < 0.009 || p.MeasuredLatencySeconds > 0.2 ||
		p.Used != "measured" || p.BandwidthAgeSeconds < 0 || p.Bandwidth != 1e9 {
		t.Fatalf("after a probe: %+v", p)
	}
	want := p.MeasuredLatencySeconds + 2e6/p.MeasuredBandwidth
	if x := xferB(); math.Abs(x-want) > 1e-9 || x < 0.9 {
		t.Fatalf("measured: transfer %g, want %g (2 MB at the measured ~2 MB/s)", x, want)
	}
	// A second probe moves the average, not replaces it.
	before := p.MeasuredBandwidth
	ma.links.add("b", 10e6, -1)
	if got := ma.Links()[0].MeasuredBandwidth; math.Abs(got-(0.3*10e6+0.7*before)) > 1 {
		t.Errorf("average after a 10 MB/s sample: %g from %g", got, before)
	}
	// Four minutes on: stale, the configured figure again.
	ma.mu.Lock()
	ma.now = func() time.Time { return time.Now().Add(4 * time.Minute) }
	ma.mu.Unlock()
	if x := xferB(); math.Abs(x-0.022) > 1e-9 {
		t.Errorf("stale: transfer %g, want the configured 0.022", x)
	}
	if p := ma.Links()[0]; p.Used != "configured" || p.BandwidthAgeSeconds < 239 {
		t.Errorf("stale: %+v", p)
	}
}

// TestMoveByLink: the planned rule with the link as predictions take it.
// A running job with a 2 GB checkpoint would gain ~4 min on b: over the
// configured 1 GB/s the move pays; over a link measured at ~1 MB/s it is
// refused as a slow link, in words that give the measured figure; and a
// job with a checkpoint file does not go to a cluster that takes none.
func TestMoveByLink(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		probe   bool
		maxGB   float64
		script  string
		state   string // the route's, "" none
		whyHas  string
		refused int
	}{
		{"configured link: moves", false, 100, "#ROTA --checkpoint-gb=2\n", OutAsked, "1 GB/s configured", 0},
		{"measured slow link: refused", true, 100, "#ROTA --checkpoint-gb=2\n", "refused_slow", "", 1},
		{"no transfer dir there: stays", false, 0, "#ROTA --checkpoint-gb=2 --checkpoint-file=/x/ckpt\n", "", "", 0},
		{"a file over its cap: stays", false, 1, "#ROTA --checkpoint-gb=2 --checkpoint-file=/x/ckpt\n", "", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := startNATS(t)
			if c.probe {
				slowPeer(t, url, "b", time.Millisecond, 1e6)
			}
			sa := newFake(100)
			h := wire.Hints{Steps: 6000, Throughput: map[string]float64{"v100": 10, "p100": 9, "k80": 3}, CheckpointSignal: "USR1"}
			la := fakeLocal{snap: snap(map[string]int{"v100": 4, "p100": 4}), hint: map[uint32]wire.Hints{}, left: map[uint32]float64{}}
			id := sa.add("gres:gpu:1")
			sa.jobs[id].State, sa.jobs[id].RunSeconds = "RUNNING", 600
			la.hint[id], la.left[id] = h, 3000
			sa.scripts = map[uint32]string{id: c.script}
			for i := 0; i < 15; i++ {
				sa.add("gres:gpu:p100:1") // a is loaded
			}
			nc, mc := conn(t, url, "a")
			ca := testConfig("a")
			ca.RouteOff, ca.Moves, ca.MoveCost, ca.MinStay = true, true, 10*time.Second, time.Minute
			ma, _ := New(ca, zerolog.Nop(), sa, la, nc, mc, nil)
			view(t, ma, wire.MCView{Cluster: "b", Types: map[string]wire.MCType{"v100": {GPUs: 8}, "k80": {GPUs: 8}}, CheckpointMaxGB: c.maxGB})
			if c.probe {
				ma.probe("b")
			}
			ma.tick(context.Background())
			r := ma.Explain(id)
			if r != nil {
				t.Log(r.Why)
			}
			if c.probe {
				// The words give the measured figure, ~1 MB/s (less on a
				// busy host).
				bw := ma.Links()[0].MeasuredBandwidth
				if bw < 0.2e6 || bw > 1.05e6 {
					t.Fatalf("measured %g B/s, want ~1 MB/s", bw)
				}
				c.whyHas = "(" + rate(bw) + " measured"
			}
			switch {
			case c.state == "" && r != nil:
				t.Fatalf("moved: %+v", r)
			case c.state == "":
			case r == nil:
				t.Fatalf("no route, want %s", c.state)
			case r.State != c.state || !strings.Contains(r.Why, c.whyHas):
				t.Fatalf("route %s: %s; want %s with %q", r.State, r.Why, c.state, c.whyHas)
			}
			if got := ma.buildView(nil).RefusedSlow; got != c.refused {
				t.Errorf("refused %d, want %d", got, c.refused)
			}
		})
	}
}
