package report

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
)

type inbox struct {
	mu  sync.Mutex
	got []string
}

func (b *inbox) add(m *nats.Msg) { b.mu.Lock(); b.got = append(b.got, string(m.Data)); b.mu.Unlock() }
func (b *inbox) list() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

func subscribe(t *testing.T, url string, box *inbox) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Subscribe("r.>", box.add); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestPublishAndBacklogAcrossRestart(t *testing.T) {
	srv := natstest.Start(t)
	box := &inbox{}
	sub := subscribe(t, srv.URL(), box)
	p, err := Connect(Options{URL: srv.URL(), Backlog: 5, Reconn: 20 * time.Millisecond, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	eventually.True(t, 5*time.Second, "publisher connected", p.Conn().IsConnected)

	p.Publish("r.a", []byte("0"))
	eventually.True(t, 5*time.Second, "first report", func() bool { return len(box.list()) == 1 })

	srv.Stop()
	eventually.True(t, 5*time.Second, "publisher to notice", func() bool { return !p.Conn().IsConnected() })
	for i := 1; i <= 8; i++ { // 8 reports into a backlog of 5: 1-3 dropped
		p.Publish("r.a", []byte(fmt.Sprint(i)))
	}
	if s := p.Stats(); s.Queued != 5 || s.Dropped != 3 {
		t.Fatalf("stats during outage = %+v", s)
	}

	srv.Restart()
	eventually.True(t, 5*time.Second, "both reconnected", func() bool { return p.Conn().IsConnected() && sub.IsConnected() })
	if err := sub.Flush(); err != nil { // the subscription is back on the server
		t.Fatal(err)
	}
	p.Publish("r.a", []byte("9"))
	want := []string{"0", "4", "5", "6", "7", "8", "9"}
	eventually.True(t, 5*time.Second, "backlog delivered", func() bool { return len(box.list()) == len(want) })
	got := box.list()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v (in order)", got, want)
		}
	}
	if s := p.Stats(); s.Queued != 0 || s.Sent != 7 {
		t.Errorf("stats after = %+v", s)
	}
}

// With no server at all at start, the agent still starts and queues.
func TestStartWithServerDown(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.URL()
	srv.Stop()
	p, err := Connect(Options{URL: url, Backlog: 10, Reconn: 20 * time.Millisecond, Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("Connect with the server down: %v", err)
	}
	defer p.Close()
	p.Publish("r.x", []byte("early"))
	if s := p.Stats(); s.Queued != 1 {
		t.Fatalf("stats = %+v", s)
	}
	srv.Restart()
	box := &inbox{}
	subscribe(t, url, box)
	eventually.True(t, 5*time.Second, "publisher connected", p.Conn().IsConnected)
	p.Publish("r.x", []byte("late"))
	eventually.True(t, 5*time.Second, "both reports", func() bool { return len(box.list()) == 2 })
}
