// Package natsync is a minimal NATS request/reply client whose requests run
// entirely on the calling thread, with plain non-blocking syscalls and
// ppoll(2) for the deadline.
//
// Why: the job_submit plugin is called from slurmctld's C threads through
// cgo, so the calling goroutine is locked to that thread. With nats.go a
// request costs several cross-thread wake-ups (its flusher goroutine writes
// the PUB, its reader goroutine receives the reply through the netpoller on
// another thread, then wakes the locked thread): about 0.5 to 1 ms per job
// inside slurmctld against 0.1 ms from a plain Go process. Here the calling
// thread writes the PUB and sleeps in ppoll until the reply is readable, so
// the kernel wakes exactly the thread that waits.
//
// Scope: plain TCP (no TLS: the plugin keeps nats.go for TLS), one
// subscription to a private inbox per connection, PUB and the replies (MSG,
// and HMSG for the server's "no responders" status), PING/PONG, +OK, -ERR.
// Connecting, reconnecting and keep-alive PINGs happen on a background
// goroutine, never in a request: with no connection a request fails at once.
package natsync

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/nats-io/nuid"
)

// Errors a request can end with.
var (
	ErrNotConnected = errors.New("not connected to NATS")
	ErrTimeout      = errors.New("timed out")
	ErrNoResponders = errors.New("no responders")
	ErrClosed       = errors.New("client closed")
	// ErrTLSRequired: the server demands TLS, which this client does not
	// speak; configure TLS so the plugin uses nats.go.
	ErrTLSRequired = errors.New("the NATS server requires TLS; set the CA (nats_tls_ca) or a tls:// URL")
	// ErrPermission is wrapped by a ServerError that is a permissions
	// violation: the server refused a subscription or publish.
	ErrPermission = errors.New("permissions violation")
	// ErrAuthorization is wrapped by a ServerError refusing our
	// credentials at connect.
	ErrAuthorization = errors.New("authorization violation")
)

// ServerError is a -ERR from the server.
type ServerError struct{ Text string }

func (e *ServerError) Error() string { return "nats: server said: " + e.Text }

func (e *ServerError) Unwrap() error {
	t := strings.ToLower(e.Text)
	switch {
	case strings.HasPrefix(t, "permissions violation"):
		return ErrPermission
	case strings.HasPrefix(t, "authorization violation"), strings.HasPrefix(t, "authentication"), strings.Contains(t, "user authentication"):
		return ErrAuthorization
	}
	return nil
}

// Options configure a Client. URLs is required; the rest have defaults.
type Options struct {
	// URLs are nats://host:port (port 4222 when left out); tried in turn.
	URLs []string
	Name string
	// Nkey signs the server's nonce. With JWT set it is the key of that
	// user JWT (a .creds file); alone, its public key is the identity.
	Nkey           nkeys.KeyPair
	JWT            string
	User, Password string
	// InboxPrefix is where replies go ("_INBOX" by default); a server
	// with per-identity permissions allows only the identity's own.
	InboxPrefix    string
	ConnectTimeout time.Duration // each connect and handshake; 2s
	ReconnectWait  time.Duration // between failed attempts, plus jitter; 1s
	PingInterval   time.Duration // keep-alive; 2s
	MaxPingsOut    int           // unanswered PINGs before giving up; 2
	// Callbacks; they run on the client's goroutine or, for a disconnect
	// noticed by a request, on the requesting thread, always with the
	// client's lock held: they must not call back into the Client.
	OnConnect    func(url string, reconnect bool)
	OnDisconnect func(err error)
	OnError      func(err error) // failed connects, server errors outside requests
}

// Client is safe for concurrent use; requests are serialised.
type Client struct {
	opts Options
	urls []string

	mu        sync.Mutex
	cn        *conn // nil while disconnected
	seq       uint64
	connected atomic.Bool

	kick chan struct{}
	done chan struct{}
}

// New checks opts and starts connecting in the background; it returns at
// once, even when no server is up.
func New(opts Options) (*Client, error) {
	if len(opts.URLs) == 0 {
		return nil, errors.New("natsync: no server URL")
	}
	var urls []string
	for _, raw := range opts.URLs {
		hp, err := hostPort(raw)
		if err != nil {
			return nil, err
		}
		urls = append(urls, hp)
	}
	if opts.InboxPrefix == "" {
		opts.InboxPrefix = "_INBOX"
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 2 * time.Second
	}
	if opts.ReconnectWait <= 0 {
		opts.ReconnectWait = time.Second
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 2 * time.Second
	}
	if opts.MaxPingsOut <= 0 {
		opts.MaxPingsOut = 2
	}
	c := &Client{opts: opts, urls: urls, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go c.loop()
	return c, nil
}

// hostPort turns a nats:// URL (or bare host:port) into host:port.
func hostPort(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		raw = "nats://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("natsync: bad URL %q: %w", raw, err)
	}
	switch u.Scheme {
	case "nats":
	case "tls":
		return "", fmt.Errorf("natsync: %s: %w", raw, ErrTLSRequired)
	default:
		return "", fmt.Errorf("natsync: URL %q: scheme %q is not nats://", raw, u.Scheme)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("natsync: URL %q has no host", raw)
	}
	port := u.Port()
	if port == "" {
		port = "4222"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// Connected reports whether a connection is up now.
func (c *Client) Connected() bool { return c.connected.Load() }

// Request publishes data to subject and returns the first reply, waiting
// at most timeout, all on the calling thread. A timeout keeps the
// connection; a broken connection is dropped and reconnected in the
// background, and the request fails.
func (c *Client) Request(subject string, data []byte, timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	cn := c.cn
	if cn == nil {
		return nil, ErrNotConnected
	}
	// What arrived since the last request (server PINGs, late replies, a
	// close) is read first, without waiting: a connection the server
	// dropped is noticed before publishing into it.
	if err := c.drainLocked(cn); err != nil {
		c.dropLocked(err)
		return nil, fmt.Errorf("%w: %v", ErrNotConnected, err)
	}
	c.seq++
	reply := cn.inbox + strconv.FormatUint(c.seq, 10)
	out := append(cn.out[:0], "PUB "...)
	out = append(out, subject...)
	out = append(out, ' ')
	out = append(out, reply...)
	out = append(out, ' ')
	out = strconv.AppendInt(out, int64(len(data)), 10)
	out = append(out, "\r\n"...)
	out = append(out, data...)
	out = append(out, "\r\n"...)
	cn.out = out
	if err := cn.write(out, deadline); err != nil {
		// A partial PUB leaves the stream unusable.
		c.dropLocked(err)
		return nil, err
	}
	for {
		ctl, payload, err := cn.readFrame(deadline)
		if errors.Is(err, ErrTimeout) {
			return nil, ErrTimeout
		}
		if err != nil {
			c.dropLocked(err)
			return nil, err
		}
		switch ctl.op {
		case opMsg, opHMsg:
			if string(ctl.subject) != reply {
				continue // a late reply to an earlier, timed-out request
			}
			if ctl.op == opHMsg {
				code, desc, err := parseStatus(payload[:ctl.hdrLen])
				if err != nil {
					c.dropLocked(err)
					return nil, err
				}
				switch {
				case code == 503:
					return nil, ErrNoResponders
				case code != 0 && code != 200:
					return nil, fmt.Errorf("nats: status %d %s", code, desc)
				}
				payload = payload[ctl.hdrLen:]
			}
			return append([]byte(nil), payload...), nil
		case opErr:
			se := &ServerError{Text: string(ctl.text)}
			if !errors.Is(se, ErrPermission) {
				// The server closes the connection after any other -ERR.
				c.dropLocked(se)
			}
			return nil, se
		default:
			if err := c.handleLocked(cn, ctl); err != nil {
				c.dropLocked(err)
				return nil, err
			}
		}
	}
}

// handleLocked deals with PING, PONG, +OK and INFO.
func (c *Client) handleLocked(cn *conn, ctl control) error {
	switch ctl.op {
	case opPing:
		return cn.write([]byte("PONG\r\n"), time.Now().Add(c.opts.ConnectTimeout))
	case opPong:
		cn.pingsOut = 0
	}
	return nil
}

// drainLocked handles every complete frame already readable, without
// waiting for more.
func (c *Client) drainLocked(cn *conn) error {
	now := time.Now()
	for {
		ctl, _, err := cn.readFrame(now)
		if errors.Is(err, ErrTimeout) {
			return nil
		}
		if err != nil {
			return err
		}
		switch ctl.op {
		case opMsg, opHMsg:
			// late reply: nobody waits for it any more
		case opErr:
			se := &ServerError{Text: string(ctl.text)}
			if !errors.Is(se, ErrPermission) {
				return se
			}
			if c.opts.OnError != nil {
				c.opts.OnError(se)
			}
		default:
			if err := c.handleLocked(cn, ctl); err != nil {
				return err
			}
		}
	}
}

func (c *Client) dropLocked(err error) {
	if c.cn == nil {
		return
	}
	c.cn.close()
	c.cn = nil
	c.connected.Store(false)
	if c.opts.OnDisconnect != nil {
		c.opts.OnDisconnect(err)
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Close closes the connection and tells the background goroutine to stop;
// later requests fail with ErrNotConnected. It does not wait for a connect
// in progress (up to ConnectTimeout: slurmctld's reconfigure must not),
// whose connection is closed as soon as it is made, and no callback runs
// after Close returns.
func (c *Client) Close() {
	c.mu.Lock()
	select {
	case <-c.done:
		c.mu.Unlock()
		return
	default:
	}
	close(c.done)
	if c.cn != nil {
		c.cn.close()
		c.cn = nil
		c.connected.Store(false)
	}
	c.mu.Unlock()
}

// loop connects, reconnects after a drop, and keeps the connection alive.
func (c *Client) loop() {
	tick := time.NewTicker(c.opts.PingInterval)
	defer tick.Stop()
	ever := false
	next := 0
	for {
		if !c.connected.Load() {
			cn, err := c.connectAny(&next)
			if err == nil {
				c.mu.Lock()
				select {
				case <-c.done:
					c.mu.Unlock()
					cn.close()
					return
				default:
				}
				c.cn = cn
				c.connected.Store(true)
				if c.opts.OnConnect != nil {
					c.opts.OnConnect(cn.url, ever)
				}
				c.mu.Unlock()
				ever = true
			} else {
				c.mu.Lock()
				select {
				case <-c.done:
					c.mu.Unlock()
					return
				default:
				}
				if c.opts.OnError != nil {
					c.opts.OnError(err)
				}
				c.mu.Unlock()
				wait := c.opts.ReconnectWait + rand.N(c.opts.ReconnectWait)
				select {
				case <-c.done:
					return
				case <-time.After(wait):
				}
				continue
			}
		}
		select {
		case <-c.done:
			return
		case <-c.kick:
		case <-tick.C:
			c.keepalive()
		}
	}
}

// keepalive answers the server's PINGs, notices a closed connection, and
// sends our own PING; MaxPingsOut unanswered ones mean a frozen server. It
// skips its turn while a request holds the connection: never make a
// request wait for housekeeping.
func (c *Client) keepalive() {
	if !c.mu.TryLock() {
		return
	}
	defer c.mu.Unlock()
	cn := c.cn
	if cn == nil {
		return
	}
	if err := c.drainLocked(cn); err != nil {
		c.dropLocked(err)
		return
	}
	if cn.pingsOut >= c.opts.MaxPingsOut {
		c.dropLocked(fmt.Errorf("%s did not answer %d PINGs: stale connection", cn.url, cn.pingsOut))
		return
	}
	if err := cn.write([]byte("PING\r\n"), time.Now().Add(c.opts.ConnectTimeout)); err != nil {
		c.dropLocked(err)
		return
	}
	cn.pingsOut++
}

// connectAny tries every URL once, starting after the last one used.
func (c *Client) connectAny(next *int) (*conn, error) {
	var errs []error
	for range c.urls {
		hp := c.urls[*next%len(c.urls)]
		*next++
		cn, err := c.connect(hp)
		if err == nil {
			*next-- // stay on a server that works
			return cn, nil
		}
		errs = append(errs, err)
		select {
		case <-c.done:
			return nil, ErrClosed
		default:
		}
	}
	return nil, errors.Join(errs...)
}

// serverInfo is the part of INFO this client uses.
type serverInfo struct {
	Headers     bool   `json:"headers"`
	MaxPayload  int64  `json:"max_payload"`
	Nonce       string `json:"nonce"`
	TLSRequired bool   `json:"tls_required"`
}

type connectMsg struct {
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	TLSRequired  bool   `json:"tls_required"`
	Name         string `json:"name,omitempty"`
	Lang         string `json:"lang"`
	Version      string `json:"version"`
	Protocol     int    `json:"protocol"`
	Echo         bool   `json:"echo"`
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
	Nkey         string `json:"nkey,omitempty"`
	Sig          string `json:"sig,omitempty"`
	JWT          string `json:"jwt,omitempty"`
	User         string `json:"user,omitempty"`
	Pass         string `json:"pass,omitempty"`
}

// connect dials hp and does the handshake: INFO, CONNECT (signing the
// nonce), SUB to a fresh inbox, and a PING whose PONG proves the server
// took all of it.
func (c *Client) connect(hp string) (*conn, error) {
	deadline := time.Now().Add(c.opts.ConnectTimeout)
	addr, err := net.ResolveTCPAddr("tcp", hp)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", hp, err)
	}
	fd, err := dial(addr, c.opts.ConnectTimeout)
	if err != nil {
		return nil, err
	}
	cn := &conn{fd: fd, url: "nats://" + hp, buf: make([]byte, 32<<10), maxPayload: 1 << 20}
	if err := c.handshake(cn, deadline); err != nil {
		cn.close()
		return nil, fmt.Errorf("%s: %w", cn.url, err)
	}
	return cn, nil
}

func (c *Client) handshake(cn *conn, deadline time.Time) error {
	ctl, _, err := cn.readFrame(deadline)
	if err != nil {
		return fmt.Errorf("waiting for INFO: %w", err)
	}
	if ctl.op != opInfo {
		return fmt.Errorf("%w: expected INFO first", errProtocol)
	}
	var info serverInfo
	if err := json.Unmarshal(ctl.text, &info); err != nil {
		return fmt.Errorf("%w: INFO: %v", errProtocol, err)
	}
	if info.TLSRequired {
		return ErrTLSRequired
	}
	if info.MaxPayload > 0 && info.MaxPayload < 64<<20 {
		cn.maxPayload = int(info.MaxPayload)
	}
	cn.headers = info.Headers
	m := connectMsg{Name: c.opts.Name, Lang: "go", Version: "natsync-1", Protocol: 1, Echo: true,
		Headers: info.Headers, NoResponders: info.Headers, JWT: c.opts.JWT, User: c.opts.User, Pass: c.opts.Password}
	if c.opts.Nkey != nil {
		if c.opts.JWT == "" {
			if m.Nkey, err = c.opts.Nkey.PublicKey(); err != nil {
				return fmt.Errorf("nkey: %w", err)
			}
		}
		sig, err := c.opts.Nkey.Sign([]byte(info.Nonce))
		if err != nil {
			return fmt.Errorf("signing the server's nonce: %w", err)
		}
		m.Sig = base64.RawURLEncoding.EncodeToString(sig)
	}
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	cn.inbox = c.opts.InboxPrefix + "." + nuid.Next() + "."
	var out []byte
	out = append(out, "CONNECT "...)
	out = append(out, js...)
	out = append(out, "\r\nSUB "...)
	out = append(out, cn.inbox...)
	out = append(out, "* 1\r\nPING\r\n"...)
	if err := cn.write(out, deadline); err != nil {
		return err
	}
	for {
		ctl, _, err := cn.readFrame(deadline)
		if err != nil {
			return fmt.Errorf("waiting for the server to accept CONNECT: %w", err)
		}
		switch ctl.op {
		case opPong:
			return nil
		case opPing:
			if err := cn.write([]byte("PONG\r\n"), deadline); err != nil {
				return err
			}
		case opErr:
			// Authorization violations close the connection; a refused
			// SUB does not, but replies could never arrive: fail both.
			return &ServerError{Text: string(ctl.text)}
		}
	}
}
