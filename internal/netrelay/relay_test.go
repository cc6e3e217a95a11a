package netrelay

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves an echo server and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends n bytes through addr and reads them back.
func roundTrip(t *testing.T, addr string, n int) (time.Duration, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := bytes.Repeat([]byte("x"), n)
	t0 := time.Now()
	go c.Write(msg)
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		return 0, err
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("relayed bytes differ")
	}
	return time.Since(t0), nil
}

func TestRelayForwardsPacesCutsRestores(t *testing.T) {
	t.Parallel()
	r, err := Listen("127.0.0.1:0", echo(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := roundTrip(t, r.Addr(), 64<<10); err != nil {
		t.Fatalf("unlimited: %v", err)
	}

	// 200 KB each way at 1 MB/s: at least 0.2 s (the two directions
	// overlap); a relay that does not pace takes milliseconds.
	r.SetRate(1e6)
	d, err := roundTrip(t, r.Addr(), 200_000)
	if err != nil {
		t.Fatal(err)
	}
	if d < 180*time.Millisecond {
		t.Errorf("200 KB at 1 MB/s took %v, want >= 0.2 s", d)
	}
	r.SetRate(0)

	// An open connection drops when the link is cut; new ones are refused.
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	if _, err := io.ReadFull(c, one); err != nil {
		t.Fatal(err)
	}
	r.Cut()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Read(one); err == nil {
		t.Error("a relayed connection survived the cut")
	}
	if _, err := roundTrip(t, r.Addr(), 10); err == nil {
		t.Error("a new connection got through a cut link")
	}
	if err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(t, r.Addr(), 10); err != nil {
		t.Errorf("after restore: %v", err)
	}
}

// A delay holds every chunk that long each way: a round trip of a small
// message takes at least twice the delay (a lower bound only: never a
// timed upper bound on a shared machine).
func TestRelayDelay(t *testing.T) {
	t.Parallel()
	r, err := Listen("127.0.0.1:0", echo(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetDelay(100 * time.Millisecond)
	d, err := roundTrip(t, r.Addr(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if d < 200*time.Millisecond {
		t.Fatalf("round trip through a 100 ms relay took %v", d)
	}
	r.SetDelay(0)
	if _, err := roundTrip(t, r.Addr(), 100); err != nil {
		t.Fatal(err)
	}
}
