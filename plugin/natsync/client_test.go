package natsync

import (
	"bufio"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"

	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
)

const subject = "rota.v1.place"

// echo answers every request on subject with "re:<data>" after delay(data).
func echo(t testing.TB, url string, opts []nats.Option, delay func(string) time.Duration) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		if delay != nil {
			if d := delay(string(m.Data)); d > 0 {
				time.Sleep(d) // a slow responder, as the test asks: not a wait
			}
		}
		m.Respond(append([]byte("re:"), m.Data...))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return nc
}

func newClient(t testing.TB, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func waitConnected(t testing.TB, c *Client) {
	t.Helper()
	eventually.True(t, 5*time.Second, "natsync connected", c.Connected)
}

func TestRequestReply(t *testing.T) {
	s := natstest.Start(t)
	echo(t, s.URL(), nil, nil)
	c := newClient(t, Options{URLs: []string{s.URL()}})
	waitConnected(t, c)
	for _, body := range []string{"a", "", strings.Repeat("x", 100<<10)} {
		got, err := c.Request(subject, []byte(body), time.Second)
		if err != nil || string(got) != "re:"+body {
			t.Fatalf("request %d bytes: got %d bytes %v", len(body), len(got), err)
		}
	}
}

// A reply with headers comes as HMSG; its body is the answer.
func TestReplyWithHeaders(t *testing.T) {
	s := natstest.Start(t)
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Subscribe(subject, func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header.Set("X-Rota", "1")
		r.Data = []byte("body")
		m.RespondMsg(r)
	})
	nc.Flush()
	c := newClient(t, Options{URLs: []string{s.URL()}})
	waitConnected(t, c)
	got, err := c.Request(subject, []byte("q"), time.Second)
	if err != nil || string(got) != "body" {
		t.Fatalf("got %q %v", got, err)
	}
}

func TestNoResponders(t *testing.T) {
	s := natstest.Start(t)
	c := newClient(t, Options{URLs: []string{s.URL()}})
	waitConnected(t, c)
	start := time.Now()
	if _, err := c.Request(subject, []byte("q"), 2*time.Second); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("err %v, want ErrNoResponders", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("no responders took %v; the server says so at once", d)
	}
}

// A frozen responder costs the deadline and no more; the connection stays
// usable, and the late answer is never taken for the next request's.
func TestDeadlineAndLateReply(t *testing.T) {
	s := natstest.Start(t)
	var frozen atomic.Bool
	frozen.Store(true)
	echo(t, s.URL(), nil, func(d string) time.Duration {
		if d == "first" {
			return 150 * time.Millisecond
		}
		return 0
	})
	c := newClient(t, Options{URLs: []string{s.URL()}})
	waitConnected(t, c)
	start := time.Now()
	_, err := c.Request(subject, []byte("first"), 30*time.Millisecond)
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v, want ErrTimeout", err)
	}
	if took < 30*time.Millisecond || took > 100*time.Millisecond {
		t.Fatalf("timed out after %v, want about 30ms", took)
	}
	time.Sleep(200 * time.Millisecond) // the late reply (150 ms) is now in the socket: unseen from here, so time passes
	got, err := c.Request(subject, []byte("second"), time.Second)
	if err != nil || string(got) != "re:second" {
		t.Fatalf("got %q %v, want re:second", got, err)
	}
	if !c.Connected() {
		t.Fatal("a timeout dropped the connection")
	}
}

// A server restart drops the connection; requests fail at once while it is
// down, and the client reconnects by itself.
func TestServerRestart(t *testing.T) {
	s := natstest.Start(t)
	var connects, disconnects atomic.Int32
	c := newClient(t, Options{URLs: []string{s.URL()}, ReconnectWait: 50 * time.Millisecond, PingInterval: 50 * time.Millisecond,
		OnConnect: func(string, bool) { connects.Add(1) }, OnDisconnect: func(error) { disconnects.Add(1) }})
	echo(t, s.URL(), []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond)}, nil)
	waitConnected(t, c)
	if _, err := c.Request(subject, []byte("1"), time.Second); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	eventually.True(t, 5*time.Second, "the drop noticed", func() bool { return !c.Connected() })
	start := time.Now()
	if _, err := c.Request(subject, []byte("2"), time.Second); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("err %v, want ErrNotConnected", err)
	}
	if d := time.Since(start); d > 10*time.Millisecond {
		t.Fatalf("a request while disconnected took %v", d)
	}
	s.Restart()
	eventually.True(t, 10*time.Second, "answers after the restart", func() bool {
		got, err := c.Request(subject, []byte("3"), 200*time.Millisecond)
		return err == nil && string(got) == "re:3"
	})
	if connects.Load() < 2 || disconnects.Load() < 1 {
		t.Fatalf("connects %d disconnects %d", connects.Load(), disconnects.Load())
	}
}

// Rota's own identities: the plugin's key with its own inbox works; the
// CLI's key may not publish placements (refused at once, connection kept);
// the plugin's key with the shared _INBOX may not subscribe (never
// connects); an unknown key is refused at connect.
func TestNkeyAuthAndPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	if _, err := creds.Init(dir, nil); err != nil {
		t.Fatal(err)
	}
	ids, err := creds.ReadIdentities(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.StartWith(t, func(o *server.Options) { o.Nkeys = creds.NkeyUsers(ids) })
	ctlOpts, err := auth.ClientOptions(creds.SeedPath(dir, creds.Controller, ""), "")
	if err != nil {
		t.Fatal(err)
	}
	echo(t, s.URL(), ctlOpts, nil)

	stranger := filepath.Join(t.TempDir(), "other")
	if _, err := creds.Init(stranger, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		seed      string
		ownInbox  bool
		connects  bool
		wantErr   error // from the request, or from OnError when it never connects
		wantReply string
	}{
		{"plugin", creds.SeedPath(dir, creds.Plugin, ""), true, true, nil, "re:q"},
		{"cli may not publish placements", creds.SeedPath(dir, creds.CLI, ""), true, true, ErrPermission, ""},
		{"shared inbox refused", creds.SeedPath(dir, creds.Plugin, ""), false, false, ErrPermission, ""},
		{"unknown key", creds.SeedPath(stranger, creds.Plugin, ""), true, false, ErrAuthorization, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := auth.LoadSeed(tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			pub, _ := kp.PublicKey()
			o := Options{URLs: []string{s.URL()}, Nkey: kp, ReconnectWait: 50 * time.Millisecond}
			if tc.ownInbox {
				o.InboxPrefix = auth.InboxPrefix(pub)
			}
			var mu sync.Mutex
			var connErrs []error
			o.OnError = func(err error) { mu.Lock(); connErrs = append(connErrs, err); mu.Unlock() }
			c := newClient(t, o)
			if !tc.connects {
				eventually.True(t, 5*time.Second, "a refusal", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(connErrs) > 0
				})
				mu.Lock()
				defer mu.Unlock()
				if !errors.Is(connErrs[0], tc.wantErr) || c.Connected() {
					t.Fatalf("connect error %v (connected %v), want %v", connErrs[0], c.Connected(), tc.wantErr)
				}
				return
			}
			waitConnected(t, c)
			start := time.Now()
			got, err := c.Request(subject, []byte("q"), time.Second)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || time.Since(start) > 500*time.Millisecond {
					t.Fatalf("err %v after %v, want %v at once", err, time.Since(start), tc.wantErr)
				}
				if !c.Connected() {
					t.Fatal("a permissions violation dropped the connection")
				}
				return
			}
			if err != nil || string(got) != tc.wantReply {
				t.Fatalf("got %q %v", got, err)
			}
		})
	}
}

// The keep-alive answers the server's PINGs between requests, so an idle
// plugin is not dropped as a stale client.
func TestServerPingsAnsweredWhileIdle(t *testing.T) {
	s := natstest.StartWith(t, func(o *server.Options) {
		o.PingInterval = 30 * time.Millisecond
		o.MaxPingsOut = 2
	})
	echo(t, s.URL(), nil, nil)
	var disconnects atomic.Int32
	c := newClient(t, Options{URLs: []string{s.URL()}, PingInterval: 10 * time.Millisecond,
		OnDisconnect: func(error) { disconnects.Add(1) }})
	waitConnected(t, c)
	time.Sleep(400 * time.Millisecond) // idle through many server PINGs: what is tested is that no drop comes
	if _, err := c.Request(subject, []byte("q"), time.Second); err != nil || disconnects.Load() != 0 {
		t.Fatalf("after idling: %v, %d disconnects", err, disconnects.Load())
	}
}

// fakeServer speaks just enough NATS to script what the real server would
// not do on cue: a PING in the middle of a request, frames split across
// writes, INFO updates, a server that stops answering.
func fakeServer(t *testing.T, script func(r *bufio.Reader, w net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				conn.Write([]byte("INFO {\"headers\":true,\"max_payload\":1048576}\r\n"))
				for { // CONNECT, SUB, PING
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "PING") {
						break
					}
				}
				conn.Write([]byte("PONG\r\n"))
				script(r, conn)
			}()
		}
	}()
	return "nats://" + l.Addr().String()
}

// readPub reads a PUB and its payload and returns the reply subject.
func readPub(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "PUB" {
		return "", errors.New("not a PUB: " + line)
	}
	if _, err := r.ReadString('\n'); err != nil {
		return "", err
	}
	return f[2], nil
}

func TestScriptedServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(t *testing.T, r *bufio.Reader, w net.Conn)
		want   string
		err    error
	}{
		{"PING during a request is answered", func(t *testing.T, r *bufio.Reader, w net.Conn) {
			reply, err := readPub(r)
			if err != nil {
				return
			}
			w.Write([]byte("PING\r\n"))
			if line, _ := r.ReadString('\n'); line != "PONG\r\n" {
				t.Errorf("client answered PING with %q", line)
				return
			}
			w.Write([]byte("MSG " + reply + " 1 2\r\nok\r\n"))
		}, "ok", nil},
		{"frames split byte by byte, with +OK and INFO between", func(t *testing.T, r *bufio.Reader, w net.Conn) {
			reply, err := readPub(r)
			if err != nil {
				return
			}
			msg := "+OK\r\nINFO {\"ldm\":true}\r\nMSG other.subject 1 3\r\nold\r\nMSG " + reply + " 1 5\r\nfresh\r\n"
			for i := range len(msg) {
				w.Write([]byte{msg[i]})
				time.Sleep(100 * time.Microsecond) // pace the bytes so that they arrive apart
			}
		}, "fresh", nil},
		{"no responders status", func(t *testing.T, r *bufio.Reader, w net.Conn) {
			reply, err := readPub(r)
			if err != nil {
				return
			}
			w.Write([]byte("HMSG " + reply + " 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"))
		}, "", ErrNoResponders},
		{"-ERR closes", func(t *testing.T, r *bufio.Reader, w net.Conn) {
			if _, err := readPub(r); err != nil {
				return
			}
			w.Write([]byte("-ERR 'Maximum Payload Violation'\r\n"))
		}, "", &ServerError{}},
		{"garbage is a protocol error", func(t *testing.T, r *bufio.Reader, w net.Conn) {
			if _, err := readPub(r); err != nil {
				return
			}
			w.Write([]byte("HELLO there\r\n"))
		}, "", errProtocol},
		{"payload without CRLF", func(t *testing.T, r *bufio.Reader, w net.Conn) {
			reply, err := readPub(r)
			if err != nil {
				return
			}
			w.Write([]byte("MSG " + reply + " 1 2\r\nokXX"))
		}, "", errProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := fakeServer(t, func(r *bufio.Reader, w net.Conn) { tc.script(t, r, w); time.Sleep(200 * time.Millisecond) }) // keep the connection open while the client reads
			c := newClient(t, Options{URLs: []string{url}, PingInterval: time.Hour})
			waitConnected(t, c)
			got, err := c.Request(subject, []byte("q"), 2*time.Second)
			if tc.err != nil {
				var se *ServerError
				if errors.As(tc.err, &se) {
					if !errors.As(err, &se) || c.Connected() {
						t.Fatalf("err %v connected %v, want a ServerError and a drop", err, c.Connected())
					}
					return
				}
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

// A server that accepts but stops answering PINGs is dropped after
// MaxPingsOut intervals (and dialled again: the fake accepts anew).
func TestStaleServerDropped(t *testing.T) {
	url := fakeServer(t, func(r *bufio.Reader, w net.Conn) { time.Sleep(5 * time.Second) }) // a server gone silent
	var mu sync.Mutex
	var why error
	c := newClient(t, Options{URLs: []string{url}, PingInterval: 20 * time.Millisecond, MaxPingsOut: 2,
		OnDisconnect: func(err error) { mu.Lock(); why = err; mu.Unlock() }})
	waitConnected(t, c)
	eventually.True(t, 2*time.Second, "the stale connection dropped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return why != nil
	})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(why.Error(), "stale") {
		t.Fatalf("dropped for %v, want a stale connection", why)
	}
}

// Close must not wait for a connect in progress (slurmctld's reconfigure
// runs it), and no callback may run after it.
func TestCloseDuringConnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // accepts (in the kernel) but never sends INFO
	var after atomic.Bool
	var closed atomic.Bool
	cb := func() {
		if closed.Load() {
			after.Store(true)
		}
	}
	c, err := New(Options{URLs: []string{l.Addr().String()}, ConnectTimeout: 300 * time.Millisecond, ReconnectWait: 10 * time.Millisecond,
		OnError: func(error) { cb() }, OnConnect: func(string, bool) { cb() }})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the connect get under way: unseen from here, so time passes
	start := time.Now()
	c.Close()
	closed.Store(true)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("Close took %v", d)
	}
	time.Sleep(500 * time.Millisecond) // past ConnectTimeout and retries: what is tested is that no callback comes
	if after.Load() {
		t.Fatal("a callback ran after Close")
	}
	if _, err := c.Request(subject, nil, time.Second); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("request after Close: %v", err)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"tls://127.0.0.1:4222", "http://x", "nats://"} {
		if _, err := New(Options{URLs: []string{u}}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
	if _, err := New(Options{}); err == nil {
		t.Error("no URL accepted")
	}
}

// FuzzReadFrame feeds arbitrary server bytes through the real reader on a
// socket pair: it must end in frames or errors, never a panic or a hang.
func FuzzReadFrame(f *testing.F) {
	for _, s := range []string{"PING\r\nMSG a 1 2\r\nok\r\n", "HMSG a 1 16 18\r\nNATS/1.0 503\r\n\r\nok\r\n",
		"MSG a 1 5\r\nab", "MSG a 1 2\r\nokXX", "INFO {}\r\n-ERR 'x'\r\n", strings.Repeat("x", 70000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Skip(err)
		}
		defer unix.Close(fds[1])
		cn := &conn{fd: fds[0], buf: make([]byte, 64), maxPayload: 1 << 20}
		defer cn.close()
		go func() {
			w := &conn{fd: fds[1]}
			w.write(data, time.Now().Add(time.Second))
			unix.Shutdown(fds[1], unix.SHUT_WR)
		}()
		for i := 0; i <= len(data); i++ {
			ctl, payload, err := cn.readFrame(time.Now().Add(time.Second))
			if err != nil {
				return
			}
			if ctl.op == opHMsg && len(payload) < ctl.hdrLen {
				t.Fatalf("payload %d bytes shorter than its headers %d", len(payload), ctl.hdrLen)
			}
		}
		t.Fatal("more frames than bytes")
	})
}
