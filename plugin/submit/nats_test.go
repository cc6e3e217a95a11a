package submit

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/internal/breaker"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

func testConfig(url string) Config {
	c := DefaultConfig()
	c.NATSSync = true
	c.NATSURL = url
	// These tests ask the controller for each job; local placement has
	// its own (local_test.go).
	c.Placement = PlacementRemote
	c.Deadline = 30 * time.Millisecond
	c.BreakerFailures = 2
	c.BreakerCooldown = 300 * time.Millisecond
	return c
}

// eachClient runs a test with the synchronous client (natsync) and with
// nats.go: both must keep the same fail-open behaviour.
func eachClient(t *testing.T, test func(t *testing.T, testConfig func(string) Config)) {
	for _, sync := range []bool{true, false} {
		name := "natsync"
		if !sync {
			name = "nats.go"
		}
		t.Run(name, func(t *testing.T) {
			test(t, func(url string) Config {
				c := testConfig(url)
				c.NATSSync = sync
				return c
			})
		})
	}
}

// responder answers placement requests on a real server; with hang set it
// receives them but never answers, like a frozen controller.
func responder(t *testing.T, url string, hang *atomic.Bool, seen *atomic.Int64) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	_, err = nc.Subscribe(wire.SubjectPlace, func(m *nats.Msg) {
		seen.Add(1)
		if hang.Load() {
			return
		}
		b, _ := json.Marshal(wire.PlaceReply{V: wire.Version, DecisionID: "x", GPUType: "v100", Policy: "test"})
		m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
}

func waitConnected(t *testing.T, a *Conn) {
	eventually.True(t, 5*time.Second, "plugin connected", a.Connected)
}

func TestConnAnswers(t *testing.T) {
	eachClient(t, func(t *testing.T, testConfig func(string) Config) {
		s := natstest.Start(t)
		var hang atomic.Bool
		var seen atomic.Int64
		responder(t, s.URL(), &hang, &seen)
		a, err := Dial(testConfig(s.URL()), Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		waitConnected(t, a)
		r, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version})
		if err != nil || r.GPUType != "v100" {
			t.Fatalf("reply %+v err %v", r, err)
		}
	})
}

// A frozen controller costs the deadline for BreakerFailures requests, then
// the breaker stops asking: later requests never reach it. After the
// cooldown one probe goes through, and a recovered controller closes it.
func TestConnBreakerOnHungController(t *testing.T) {
	eachClient(t, func(t *testing.T, testConfig func(string) Config) {
		s := natstest.Start(t)
		var hang atomic.Bool
		var seen atomic.Int64
		hang.Store(true)
		responder(t, s.URL(), &hang, &seen)
		a, err := Dial(testConfig(s.URL()), Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		waitConnected(t, a)

		for i := 0; i < 50; i++ {
			if _, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version}); err == nil {
				t.Fatal("a hung controller cannot answer")
			}
		}
		if got := seen.Load(); got != 2 {
			t.Fatalf("hung controller received %d requests, want exactly BreakerFailures=2", got)
		}
		if a.Breaker.State() != breaker.Open {
			t.Fatalf("breaker %v, want open", a.Breaker.State())
		}
		_, err = a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version})
		if !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("err %v, want ErrBreakerOpen", err)
		}

		hang.Store(false)
		eventually.True(t, 5*time.Second, "probe closes the breaker", func() bool {
			r, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version})
			return err == nil && r.GPUType == "v100"
		})
		if a.Breaker.State() != breaker.Closed {
			t.Fatalf("breaker %v after recovery", a.Breaker.State())
		}
	})
}

// With no controller subscribed (during a failover) NATS answers "no
// responders" at once: the request fails cheaply and the breaker stays
// closed, so the first request after a new leader subscribes is placed.
func TestConnNoControllerKeepsBreakerClosed(t *testing.T) {
	eachClient(t, func(t *testing.T, testConfig func(string) Config) {
		s := natstest.Start(t)
		cfg := testConfig(s.URL())
		// The "no responders" answer comes at once; a loaded CI machine
		// must not let the 30 ms deadline pass first.
		cfg.Deadline = 2 * time.Second
		a, err := Dial(cfg, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		waitConnected(t, a)
		for i := 0; i < 10; i++ {
			if _, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version}); !errors.Is(err, ErrNoController) {
				t.Fatalf("err %v, want ErrNoController", err)
			}
		}
		if a.Breaker.State() != breaker.Closed {
			t.Fatalf("breaker %v, want closed", a.Breaker.State())
		}
		var hang atomic.Bool
		var seen atomic.Int64
		responder(t, s.URL(), &hang, &seen)
		if r, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version}); err != nil || r.GPUType != "v100" {
			t.Fatalf("first request after a controller appeared: %+v, %v", r, err)
		}
	})
}

// A reconnect closes the breaker: the timeouts that opened it may have
// been requests lost with the old connection (a NATS node that died), and
// keeping it open would pass jobs unplaced for breaker_cooldown after the
// plugin is connected again.
func TestConnReconnectClosesBreaker(t *testing.T) {
	eachClient(t, func(t *testing.T, testConfig func(string) Config) {
		s := natstest.Start(t)
		var hang atomic.Bool
		var seen atomic.Int64
		hang.Store(true)
		responder(t, s.URL(), &hang, &seen)
		cfg := testConfig(s.URL())
		cfg.BreakerCooldown = time.Hour
		a, err := Dial(cfg, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		waitConnected(t, a)
		for i := 0; i < cfg.BreakerFailures; i++ {
			a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version})
		}
		if a.Breaker.State() != breaker.Open {
			t.Fatalf("breaker %v, want open", a.Breaker.State())
		}
		s.Restart()
		eventually.True(t, 10*time.Second, "the breaker to close on reconnect", func() bool {
			return a.Connected() && a.Breaker.State() == breaker.Closed
		})
	})
}

// With the server gone the request is refused at once (not connected), and
// the plugin reconnects by itself when a server is back on the same port.
func TestConnDeadServer(t *testing.T) {
	eachClient(t, func(t *testing.T, testConfig func(string) Config) {
		s := natstest.Start(t)
		url := s.URL()
		a, err := Dial(testConfig(url), Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		waitConnected(t, a)
		s.Stop()
		eventually.True(t, 5*time.Second, "disconnect noticed", func() bool { return !a.Connected() })
		if _, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version}); !errors.Is(err, ErrNotConnected) {
			t.Fatalf("err %v, want ErrNotConnected", err)
		}
	})
}

// The plugin starts even when no server runs yet (slurmctld may start
// before the controller) and connects once one appears.
func TestDialWithoutServer(t *testing.T) {
	eachClient(t, func(t *testing.T, testConfig func(string) Config) {
		a, err := Dial(testConfig("nats://127.0.0.1:1"), Hooks{})
		if err != nil {
			t.Fatalf("Dial must not fail when the server is down: %v", err)
		}
		defer a.Close()
		if _, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version}); !errors.Is(err, ErrNotConnected) {
			t.Fatalf("err %v, want ErrNotConnected", err)
		}
	})
}

// natsync serves plain TCP only; TLS in any form goes to nats.go.
func TestUseSync(t *testing.T) {
	for _, c := range []struct {
		url, ca string
		sync    bool
		want    bool
	}{
		{"nats://127.0.0.1:4222", "", true, true},
		{"nats://a:4222, nats://b:4222", "", true, true},
		{"nats://127.0.0.1:4222", "", false, false},
		{"nats://127.0.0.1:4222", "/etc/rota/ca.pem", true, false},
		{"nats://a:4222,tls://b:4222", "", true, false},
	} {
		cfg := DefaultConfig()
		cfg.NATSURL, cfg.NATSTLSCA, cfg.NATSSync = c.url, c.ca, c.sync
		if got := useSync(cfg); got != c.want {
			t.Errorf("useSync(%q, ca %q, sync %v) = %v, want %v", c.url, c.ca, c.sync, got, c.want)
		}
	}
}

// A connection the server closed since the last job is noticed by the next
// request itself (natsync reads what arrived before publishing): it fails
// as "not connected", logged at debug level, not as a controller error.
func TestSyncConnNoticesClosedConnection(t *testing.T) {
	s := natstest.Start(t)
	a, err := Dial(testConfig(s.URL()), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.sc == nil {
		t.Fatal("testConfig must pick natsync")
	}
	waitConnected(t, a)
	s.Stop()
	if !a.Connected() {
		t.Skip("the keep-alive noticed first; nothing left to test")
	}
	if _, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version}); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("err %v, want ErrNotConnected", err)
	}
}
