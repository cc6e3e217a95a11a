package natsync

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
)

// TestSubscribeAnnouncePublish: each connection subscribes and announces
// itself; messages on the subscription reach OnMsg in order, without any
// request reading them; Publish reaches subscribers.
func TestSubscribeAnnouncePublish(t *testing.T) {
	s := natstest.Start(t)
	other, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	hello := make(chan *nats.Msg, 4)
	decisions := make(chan *nats.Msg, 4)
	other.ChanSubscribe("t.hello", hello)
	other.ChanSubscribe("t.decision", decisions)
	other.Flush()

	var mu sync.Mutex
	var got []string
	c := newClient(t, Options{URLs: []string{s.URL()}, Subscribe: []string{"t.state"}, Announce: "t.hello",
		OnMsg: func(subj string, data []byte) { mu.Lock(); got = append(got, subj+"="+string(data)); mu.Unlock() }})
	waitConnected(t, c)
	select {
	case <-hello:
	case <-time.After(3 * time.Second):
		t.Fatal("no announcement on connect")
	}
	for i := range 20 {
		other.Publish("t.state", fmt.Appendf(nil, "%d", i))
	}
	other.Flush()
	eventually.True(t, 3*time.Second, "20 states delivered", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 20 })
	for i, g := range got {
		if g != fmt.Sprintf("t.state=%d", i) {
			t.Fatalf("message %d is %q: out of order", i, g)
		}
	}
	if err := c.Publish("t.decision", []byte("d1")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-decisions:
		if string(m.Data) != "d1" {
			t.Fatalf("published %q", m.Data)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Publish did not arrive")
	}
	// Several in one send arrive as as many messages, in order.
	if err := c.PublishMany("t.decision", [][]byte{[]byte("d2"), []byte("d3 with spaces"), {}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"d2", "d3 with spaces", ""} {
		select {
		case m := <-decisions:
			if string(m.Data) != want {
				t.Fatalf("PublishMany: got %q, want %q", m.Data, want)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("PublishMany: %q did not arrive", want)
		}
	}
	// A restarted server gets the subscription and announcement again.
	s.Restart()
	eventually.True(t, 10*time.Second, "reconnected", c.Connected)
	other2, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer other2.Close()
	other2.Publish("t.state", []byte("after"))
	other2.Flush()
	eventually.True(t, 3*time.Second, "a state after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1] == "t.state=after"
	})
}

// TestPublishNeverWaits: a server that stops reading fills the socket;
// Publish then drops messages (or the connection) instead of waiting, and
// no call takes more than a small bound.
func TestPublishNeverWaits(t *testing.T) {
	url := fakeServer(t, func(r *bufio.Reader, w net.Conn) { time.Sleep(10 * time.Second) })
	c := newClient(t, Options{URLs: []string{url}, PingInterval: time.Hour})
	waitConnected(t, c)
	body := make([]byte, 32<<10)
	var slowest time.Duration
	var err error
	for range 20000 {
		start := time.Now()
		err = c.Publish("t.decision", body)
		slowest = max(slowest, time.Since(start))
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ErrWouldBlock) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("a server that stopped reading: %v", err)
	}
	if errors.Is(err, ErrWouldBlock) && c.Dropped() != 1 {
		t.Fatalf("dropped %d", c.Dropped())
	}
	// PublishWait is 1ms; the rest is copying 32 KiB on a busy machine.
	if slowest > 50*time.Millisecond {
		t.Fatalf("a Publish took %v", slowest)
	}
	t.Logf("stopped with %v; slowest Publish %v", err, slowest)
}
