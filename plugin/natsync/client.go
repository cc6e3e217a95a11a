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
	"golang.org/x/sys/unix"
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
	// ErrWouldBlock: Publish found the socket's send buffer full and
	// dropped the message rather than wait.
	ErrWouldBlock = errors.New("send buffer full; message dropped")
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

	// Subscribe lists subjects subscribed on every connection. Their
	// messages go to OnMsg, in order, on the client's goroutine, without
	// the client's lock held; the goroutine then waits for the socket to
	// be readable, so a message is taken in as soon as it arrives, not
	// when the next request happens to read.
	Subscribe []string
	OnMsg     func(subject string, data []byte)
	// Announce, when set, is published with an empty body right after
	// each connection's subscriptions ("I am here, send me your state").
	Announce string
	// PublishWait bounds how long Publish may wait to finish a message the
	// socket took in part; 1ms by default.
	PublishWait time.Duration
}

// inMsg is a message for OnMsg, copied out of the read buffer.
type inMsg struct {
	subject string
	data    []byte
}

// Client is safe for concurrent use; requests are serialised.
type Client struct {
	opts Options
	urls []string

	mu        sync.Mutex
	cn        *conn // nil while disconnected
	seq       uint64
	connected atomic.Bool

	// redial wakes the loop to reconnect at once after a drop.
	redial chan struct{}
	done   chan struct{}

	// inbound holds messages for OnMsg until the client's goroutine
	// delivers them; guarded by mu. wake tells that goroutine there are
	// some (a request read them).
	inbound []inMsg
	wake    chan struct{}
	// dropped counts Publish calls that found the send buffer full.
	dropped atomic.Uint64
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
	if opts.PublishWait <= 0 {
		opts.PublishWait = time.Millisecond
	}
	if len(opts.Subscribe) > 0 && opts.OnMsg == nil {
		return nil, errors.New("natsync: Subscribe without OnMsg")
	}
	for _, s := range append(append([]string(nil), opts.Subscribe...), opts.Announce) {
		if strings.ContainsAny(s, " \t\r\n") {
			return nil, fmt.Errorf("natsync: subject %q contains white space", s)
		}
	}
	c := &Client{opts: opts, urls: urls, redial: make(chan struct{}, 1), done: make(chan struct{}), wake: make(chan struct{}, 1)}
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
	out := appendPub(cn.out[:0], subject, reply, data)
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
			if ctl.sid != inboxSID {
				c.queueLocked(ctl, payload)
				continue
			}
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
		ctl, payload, err := cn.readFrame(now)
		if errors.Is(err, ErrTimeout) {
			return nil
		}
		if err != nil {
			return err
		}
		switch ctl.op {
		case opMsg, opHMsg:
			if ctl.sid != inboxSID {
				c.queueLocked(ctl, payload)
			}
			// else a late reply: nobody waits for it any more
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

// inboxSID is the subscription id of the reply inbox; Options.Subscribe
// get 2, 3, ...
const inboxSID = 1

// maxInbound bounds the messages waiting for OnMsg: a receiver that stalls
// loses the oldest, never grows memory inside slurmctld without end.
const maxInbound = 64

// queueLocked keeps a subscription message (headers stripped) for OnMsg.
func (c *Client) queueLocked(ctl control, payload []byte) {
	if c.opts.OnMsg == nil {
		return
	}
	if ctl.op == opHMsg {
		payload = payload[ctl.hdrLen:]
	}
	if len(c.inbound) >= maxInbound {
		c.inbound = c.inbound[1:]
	}
	c.inbound = append(c.inbound, inMsg{subject: string(ctl.subject), data: append([]byte(nil), payload...)})
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Publish sends data to subject without waiting for anything: no reply,
// no flush, no lock held by housekeeping for long. The message goes to the
// kernel in one non-blocking send; if the send buffer is full (the server
// stopped reading) it is dropped and counted (Dropped) instead of waited
// on, and a send the kernel took only part of is finished within
// PublishWait or the connection is dropped (a partial message would
// corrupt the stream).
func (c *Client) Publish(subject string, data []byte) error {
	return c.PublishMany(subject, [][]byte{data})
}

// PublishMany is Publish for several messages to one subject, handed to
// the kernel together in one send: all of them are sent or, when the send
// buffer is full, all dropped (each counted).
func (c *Client) PublishMany(subject string, msgs [][]byte) error {
	if len(msgs) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cn := c.cn
	if cn == nil {
		return ErrNotConnected
	}
	out := cn.out[:0]
	for _, data := range msgs {
		if len(data) > cn.maxPayload {
			return fmt.Errorf("natsync: %d-byte message above the server's max_payload %d", len(data), cn.maxPayload)
		}
		out = appendPub(out, subject, "", data)
	}
	cn.out = out
	n, err := cn.send(out)
	switch {
	case err != nil:
		c.dropLocked(err)
		return err
	case n == 0:
		c.dropped.Add(uint64(len(msgs)))
		return ErrWouldBlock
	case n < len(out):
		if err := cn.write(out[n:], time.Now().Add(c.opts.PublishWait)); err != nil {
			c.dropLocked(fmt.Errorf("finishing a message the socket took in part: %w", err))
			return err
		}
	}
	return nil
}

// appendPub appends the protocol line and payload of a PUB to subject,
// with reply as its reply subject unless "".
func appendPub(out []byte, subject, reply string, data []byte) []byte {
	out = append(out, "PUB "...)
	out = append(out, subject...)
	out = append(out, ' ')
	if reply != "" {
		out = append(out, reply...)
		out = append(out, ' ')
	}
	out = strconv.AppendInt(out, int64(len(data)), 10)
	out = append(out, "\r\n"...)
	out = append(out, data...)
	return append(out, "\r\n"...)
}

// Dropped counts messages Publish dropped because the send buffer was full.
func (c *Client) Dropped() uint64 { return c.dropped.Load() }

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
	case c.redial <- struct{}{}:
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
		if c.opts.OnMsg != nil {
			// Subscribed: wait on the socket itself, briefly, so
			// messages are taken in as they arrive; channels are checked
			// between waits.
			c.readOnce(readWait)
			c.deliver()
			select {
			case <-c.done:
				return
			case <-c.redial:
			case <-tick.C:
				c.keepalive()
				c.deliver()
			default:
			}
			continue
		}
		select {
		case <-c.done:
			return
		case <-c.redial:
		case <-tick.C:
			c.keepalive()
		}
	}
}

// readWait is how long the client's goroutine waits on the socket before
// looking at its channels (close, reconnect, keep-alive) again.
const readWait = 100 * time.Millisecond

// readOnce waits up to d for the connection to be readable, without the
// lock (a request or Publish never waits for it), then takes in what
// arrived. The socket may be closed and its descriptor number reused while
// we wait: the connection is checked again under the lock before any read,
// so at worst a wait ends early.
func (c *Client) readOnce(d time.Duration) {
	c.mu.Lock()
	cn := c.cn
	fd := -1
	if cn != nil {
		fd = cn.fd
	}
	c.mu.Unlock()
	if cn == nil {
		select {
		case <-c.done:
		case <-c.redial:
		case <-time.After(d):
		}
		return
	}
	select {
	case <-c.wake:
		return // a request read messages for OnMsg: deliver them first
	default:
	}
	if err := waitFD(fd, unix.POLLIN, time.Now().Add(d)); err != nil {
		return // timeout, or an error the next read reports
	}
	if !c.mu.TryLock() {
		// A request or Publish holds the connection and reads for
		// itself; do not spin on the readiness it is about to consume.
		time.Sleep(time.Millisecond)
		return
	}
	defer c.mu.Unlock()
	if c.cn != cn {
		return
	}
	if err := c.drainLocked(cn); err != nil {
		c.dropLocked(err)
	}
}

// deliver hands the queued messages to OnMsg, in order, without the lock.
func (c *Client) deliver() {
	select {
	case <-c.wake:
	default:
	}
	c.mu.Lock()
	in := c.inbound
	c.inbound = nil
	c.mu.Unlock()
	for _, m := range in {
		select {
		case <-c.done:
			return // no callback after Close
		default:
		}
		c.opts.OnMsg(m.subject, m.data)
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
	out = append(out, "* 1\r\n"...)
	for i, subj := range c.opts.Subscribe {
		out = append(out, "SUB "...)
		out = append(out, subj...)
		out = append(out, ' ')
		out = strconv.AppendInt(out, int64(inboxSID+1+i), 10)
		out = append(out, "\r\n"...)
	}
	if c.opts.Announce != "" {
		out = appendPub(out, c.opts.Announce, "", nil)
	}
	out = append(out, "PING\r\n"...)
	if err := cn.write(out, deadline); err != nil {
		return err
	}
	for {
		ctl, payload, err := cn.readFrame(deadline)
		if err != nil {
			return fmt.Errorf("waiting for the server to accept CONNECT: %w", err)
		}
		switch ctl.op {
		case opMsg, opHMsg:
			// A subscription's first message can beat our PONG.
			if ctl.sid != inboxSID {
				c.mu.Lock()
				c.queueLocked(ctl, payload)
				c.mu.Unlock()
			}
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
