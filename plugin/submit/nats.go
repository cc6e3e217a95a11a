package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/breaker"
	"github.com/rota-hpc/rota/plugin/natsync"
	"github.com/rota-hpc/rota/wire"
)

// Errors a placement request can end with; each means "pass unchanged".
var (
	ErrBreakerOpen  = errors.New("controller marked unresponsive (circuit breaker open); not asking")
	ErrNotConnected = errors.New("not connected to NATS")
	ErrNoController = errors.New("no controller serves placements (none running, or a standby is taking over)")
)

// Conn is the plugin's connection to the controller: it asks the controller over NATS request/reply within a hard
// deadline, behind a circuit breaker: a dead controller costs nothing (the
// connection is down, so the request is refused at once), a hung one costs
// the deadline Threshold times and then nothing until a probe gets through.
//
// It speaks through one of two clients. natsync (the default) does each
// request on the calling thread: slurmctld's, locked to its goroutine by
// cgo, so nothing else has to be woken (see plugin/natsync for why that
// matters). nats.go serves TLS, which natsync does not speak, and
// nats_sync = false.
type Conn struct {
	nc *nats.Conn      // nats.go, or nil
	sc *natsync.Client // natsync, or nil
	// serverErr hears natsync's refusals of a request (nats.go reports
	// them to its error handler): one clear log line, not one per job.
	serverErr func(error)
	deadline  time.Duration
	Breaker   *breaker.Breaker
	// local places jobs from the pushed state (placement = local); nil
	// for placement = remote.
	local *Local
	// onEvent hears what is worth a log line; lastStateErr dedups the
	// state messages the plugin cannot use (one line per kind, not one
	// every few seconds).
	onEvent      func(warn bool, msg string)
	lastStateErr atomic.Pointer[string]
	lastSendErr  atomic.Int64 // unix ns of the last lost record logged
}

// sendError logs a decision record lost after its job was placed, at
// most once every sendErrorEvery (a connection that drops mid-burst
// loses a queue's worth).
func (a *Conn) sendError(err error) {
	now := time.Now().UnixNano()
	last := a.lastSendErr.Load()
	if now-last < int64(sendErrorEvery) || !a.lastSendErr.CompareAndSwap(last, now) || a.onEvent == nil {
		return
	}
	a.onEvent(true, err.Error())
}

const sendErrorEvery = 10 * time.Second

// feed takes a state message in.
func (a *Conn) feed(data []byte) {
	err := a.local.Feed(data)
	if err == nil {
		if a.lastStateErr.Swap(nil) != nil && a.onEvent != nil {
			a.onEvent(false, "the controller's placement state is usable again")
		}
		return
	}
	msg := err.Error()
	if old := a.lastStateErr.Swap(&msg); (old == nil || *old != msg) && a.onEvent != nil {
		a.onEvent(true, fmt.Sprintf("cannot use the controller's placement state (%v); jobs pass through unchanged once the last good one is state_max_age old", err))
	}
}

// Hooks are what the plugin's host (plugin/jobsubmit) hears and lends.
type Hooks struct {
	// OnEvent hears connection changes worth a log line; warn marks the
	// ones that mean jobs now pass through unplaced.
	OnEvent func(warn bool, msg string)
	// OnBreaker hears the circuit breaker open and close.
	OnBreaker func(from, to breaker.State)
	// PassThrough, with placement = local: see Local.PassThrough.
	PassThrough func(d time.Duration)
	// Shelf, with placement = local and decide_ahead: where decisions
	// made ahead are kept (plugin/shelf).
	Shelf Shelf
	// OnState, with placement = local: see Local.OnState.
	OnState func(bytes int, decode time.Duration)
}

// Open returns the Handler the plugin runs for c: connected in the
// background to the controller's NATS, placing from the controller's
// pushed state (placement = local, the default) or asking the controller
// for each job (remote). With Rota disabled it has no connection. When
// the connection cannot be set up, the error says why and the Handler
// passes every GPU job unchanged.
func Open(c Config, hooks Hooks) (*Handler, error) {
	h := &Handler{Config: c}
	if !c.Enabled {
		return h, nil
	}
	conn, err := Dial(c, hooks)
	if err != nil {
		return h, err
	}
	h.conn, h.Placer = conn, conn
	if conn.local != nil {
		if c.DecideAhead && hooks.Shelf != nil {
			conn.local.SetShelf(hooks.Shelf)
		}
		h.Placer = conn.local
	}
	return h, nil
}

// Ready says whether a GPU job submitted now would be placed rather than
// passed through unchanged: connected to the controller's NATS, and with
// placement = local holding a usable state (Local.Usable); with remote,
// its breaker closed. For the plugin's stats file, which tests and
// benchmarks wait on instead of submitting until a job is placed.
func (h *Handler) Ready() bool {
	if h == nil || !h.Config.Enabled || h.conn == nil {
		return false
	}
	if l, ok := h.Placer.(*Local); ok {
		return l.Usable()
	}
	return h.conn.Connected() && h.conn.Breaker.State() == breaker.Closed
}

// Close drops the Handler's connection, if it has one.
func (h *Handler) Close() {
	if h.conn != nil {
		h.conn.Close()
	}
}

// Dial connects in the background: it returns at once even when the
// server is down, and keeps reconnecting for as long as the plugin lives.
func Dial(c Config, hooks Hooks) (*Conn, error) {
	if useSync(c) {
		return dialSync(c, hooks)
	}
	onEvent := hooks.OnEvent
	a := newConn(c, hooks)
	local := c.Placement == PlacementLocal
	// The breaker is made after the connection; the reconnect handler
	// reads it through this pointer, so no ordering is assumed.
	var br atomic.Pointer[breaker.Breaker]
	opts := []nats.Option{
		nats.Name("rota-job_submit"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		// Notice a frozen server within seconds, not the default minutes.
		nats.PingInterval(2 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.Timeout(2 * time.Second),
		// Nothing published while disconnected is worth sending later:
		// every request has long since timed out.
		nats.ReconnectBufSize(-1),
		nats.NoCallbacksAfterClientClose(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if onEvent != nil {
				onEvent(true, fmt.Sprintf("lost the controller's NATS connection (%v); jobs pass through unchanged until it is back", err))
			}
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			if local {
				_ = nc.Publish(wire.SubjectPlaceSync, nil) // the state now, not at the next heartbeat
			}
			if onEvent != nil {
				onEvent(false, "connected to the controller's NATS at "+nc.ConnectedUrlRedacted())
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			// Requests sent into a connection that had silently died
			// time out and may have opened the breaker; they said
			// nothing about the controller. On the new connection the
			// controller gets a fresh chance instead of breaker_cooldown
			// of unplaced jobs (a hung one opens it again after
			// breaker_failures deadlines).
			if b := br.Load(); b != nil {
				b.Success()
			}
			if local {
				_ = nc.Publish(wire.SubjectPlaceSync, nil)
			}
			if onEvent != nil {
				onEvent(false, "reconnected to the controller's NATS at "+nc.ConnectedUrlRedacted())
			}
		}),
	}
	// Authentication failures and permission violations come back
	// asynchronously and, while the server keeps refusing, on every
	// reconnect: say each distinct one once, not once a second.
	var seen errorSeen
	opts = append(opts,
		// Keep retrying after the server refused our key: the admin may be
		// restarting the controller with a fixed identities file, and the
		// plugin lives as long as slurmctld.
		nats.IgnoreAuthErrorAbort(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if seen.again(err) || onEvent == nil {
				return
			}
			if auth.IsPermissionError(err) {
				onEvent(true, refused(err))
				return
			}
			onEvent(true, fmt.Sprintf("NATS error: %v", err))
		}))
	if c.NATSTLSCA != "" {
		ao, err := auth.ClientOptions("", c.NATSTLSCA)
		if err != nil {
			return nil, err
		}
		opts = append(opts, ao...)
	}
	cr, err := readCredentials(c)
	if err != nil {
		return nil, err
	}
	switch {
	case cr.jwt != "":
		opts = append(opts, nats.UserJWT(func() (string, error) { return cr.jwt, nil }, cr.nkey.Sign))
	case cr.nkey != nil:
		opts = append(opts, nats.Nkey(cr.pub, cr.nkey.Sign))
	case cr.user != "":
		opts = append(opts, nats.UserInfo(cr.user, cr.password))
	}
	if cr.inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(cr.inbox))
	}
	nc, err := nats.Connect(c.NATSURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", c.NATSURL, err)
	}
	a.nc = nc
	br.Store(a.Breaker)
	if local {
		// nats.go buffers the publish and its flusher goroutine writes it:
		// nothing here waits for the network.
		a.placeLocally(c, hooks, func(batch [][]byte) error {
			for _, b := range batch {
				if err := nc.Publish(wire.SubjectPlaceDecision, b); err != nil {
					return err
				}
			}
			return nil
		})
		if _, err := nc.Subscribe(wire.SubjectPlaceState, func(m *nats.Msg) { a.feed(m.Data) }); err != nil {
			nc.Close()
			return nil, fmt.Errorf("subscribing to the placement state: %w", err)
		}
		// The connect handler's request may have beaten the subscription.
		_ = nc.Publish(wire.SubjectPlaceSync, nil)
	}
	return a, nil
}

// useSync says whether the synchronous client can serve c: not with TLS.
func useSync(c Config) bool {
	if !c.NATSSync || c.NATSTLSCA != "" {
		return false
	}
	for _, u := range strings.Split(c.NATSURL, ",") {
		if strings.HasPrefix(strings.TrimSpace(u), "tls://") {
			return false
		}
	}
	return true
}

// dialSync is Dial with natsync: same credentials, same inbox, same
// events for the log.
func dialSync(c Config, hooks Hooks) (*Conn, error) {
	a := newConn(c, hooks)
	o := natsync.Options{Name: "rota-job_submit"}
	for _, u := range strings.Split(c.NATSURL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			o.URLs = append(o.URLs, u)
		}
	}
	cr, err := readCredentials(c)
	if err != nil {
		return nil, err
	}
	o.Nkey, o.JWT, o.User, o.Password, o.InboxPrefix = cr.nkey, cr.jwt, cr.user, cr.password, cr.inbox
	// Failed connects repeat every second while the server is down or
	// refuses us: say each distinct reason once per outage.
	var seen errorSeen
	event := func(warn bool, msg string) {
		if hooks.OnEvent != nil {
			hooks.OnEvent(warn, msg)
		}
	}
	o.OnConnect = func(url string, reconnect bool) {
		seen.reset()
		if reconnect {
			// As with nats.go: timeouts before the drop said nothing
			// about the controller; give it a fresh chance.
			a.Breaker.Success()
			event(false, "reconnected to the controller's NATS at "+url)
			return
		}
		event(false, "connected to the controller's NATS at "+url)
	}
	o.OnDisconnect = func(err error) {
		event(true, fmt.Sprintf("lost the controller's NATS connection (%v); jobs pass through unchanged until it is back", err))
	}
	o.OnError = func(err error) {
		switch {
		case seen.again(err):
		case errors.Is(err, natsync.ErrPermission), errors.Is(err, natsync.ErrAuthorization):
			event(true, refused(err))
		case errors.Is(err, natsync.ErrTLSRequired):
			event(true, fmt.Sprintf("cannot connect to the controller's NATS: %v", err))
		default:
			event(true, fmt.Sprintf("cannot connect to the controller's NATS (%v); jobs pass through unchanged until it answers", err))
		}
	}
	a.serverErr = o.OnError
	if c.Placement == PlacementLocal {
		// natsync's goroutine takes the states in as they arrive, off
		// slurmctld's threads; a submission then only reads the latest
		// (an atomic load) and hands its decision to the kernel in one
		// non-blocking send.
		o.Subscribe = []string{wire.SubjectPlaceState}
		o.OnMsg = func(_ string, data []byte) { a.feed(data) }
		o.Announce = wire.SubjectPlaceSync
		// Made before the client, whose goroutine may feed it at once;
		// the client is set below, before any job can call Place.
		a.placeLocally(c, hooks, func(batch [][]byte) error {
			return a.sc.PublishMany(wire.SubjectPlaceDecision, batch)
		})
	}
	sc, err := natsync.New(o)
	if err != nil {
		if a.local != nil {
			a.local.Close()
		}
		return nil, err
	}
	a.sc = sc
	return a, nil
}

func newConn(c Config, hooks Hooks) *Conn {
	a := &Conn{deadline: c.Deadline, Breaker: breaker.New(c.BreakerFailures, c.BreakerCooldown), onEvent: hooks.OnEvent}
	a.Breaker.OnChange = hooks.OnBreaker
	return a
}

// placeLocally makes the Local that places from the controller's state
// (placement = local), publishing its decision records with publish.
func (a *Conn) placeLocally(c Config, hooks Hooks, publish func([][]byte) error) {
	a.local = NewLocal(c.StateMaxAge, publish)
	a.local.PassThrough = hooks.PassThrough
	a.local.OnState = hooks.OnState
	a.local.Ready = func() error {
		if !a.Connected() {
			return ErrNotConnected // logged once, when the connection dropped
		}
		return nil
	}
	a.local.OnSendError = a.sendError
}

// credentials are who the plugin is to NATS, read once from its config
// for whichever client connects: an nkey (nats_nkey_seed_file), a user
// JWT with its nkey (nats_creds_file), or a user and password, in that
// order of precedence.
type credentials struct {
	nkey     nkeys.KeyPair
	pub, jwt string
	user     string
	password string
	inbox    string // the inbox prefix the server allows ("" the default)
}

func readCredentials(c Config) (credentials, error) {
	var cr credentials
	switch {
	case c.NATSNkeySeedFile != "":
		kp, err := auth.LoadSeed(c.NATSNkeySeedFile)
		if err != nil {
			return cr, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return cr, fmt.Errorf("nkey seed file %s: %w", c.NATSNkeySeedFile, err)
		}
		// The server lets the plugin subscribe to its own inbox only.
		cr.nkey, cr.pub, cr.inbox = kp, pub, auth.InboxPrefix(pub)
	case c.NATSCredsFile != "":
		b, err := os.ReadFile(c.NATSCredsFile)
		if err != nil {
			return cr, fmt.Errorf("reading nats_creds_file: %w", err)
		}
		if cr.jwt, err = nkeys.ParseDecoratedJWT(b); err != nil {
			return cr, fmt.Errorf("nats_creds_file %s: %w", c.NATSCredsFile, err)
		}
		if cr.nkey, err = nkeys.ParseDecoratedUserNKey(b); err != nil {
			return cr, fmt.Errorf("nats_creds_file %s: %w", c.NATSCredsFile, err)
		}
	case c.NATSUser != "":
		cr.user = c.NATSUser
		if c.NATSPasswordFile != "" {
			b, err := os.ReadFile(c.NATSPasswordFile)
			if err != nil {
				return cr, fmt.Errorf("reading nats_password_file: %w", err)
			}
			cr.password = strings.TrimSpace(string(b))
		}
	}
	return cr, nil
}

// refused is the log line for a server that refuses the plugin's identity.
func refused(err error) string {
	return fmt.Sprintf("the controller's NATS refused the plugin (%v); check that nats_nkey_seed_file is the plugin's seed from 'rota-controller creds init'", err)
}

// errorSeen remembers the last error logged, so that one repeated every
// reconnect is said once.
type errorSeen struct {
	mu   sync.Mutex
	last string
}

// again says whether err is the one said last, and remembers it.
func (s *errorSeen) again(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := err.Error() == s.last
	s.last = err.Error()
	return seen
}

func (s *errorSeen) reset() {
	s.mu.Lock()
	s.last = ""
	s.mu.Unlock()
}

// Connected reports whether the NATS connection is up.
func (a *Conn) Connected() bool {
	switch {
	case a.sc != nil:
		return a.sc.Connected()
	case a.nc != nil:
		return a.nc.IsConnected()
	}
	return false
}

// request is one request/reply through whichever client is in use, with
// the errors that matter here mapped to nats.go's.
func (a *Conn) request(ctx context.Context, data []byte) ([]byte, error) {
	if a.sc == nil {
		ctx, cancel := context.WithTimeout(ctx, a.deadline)
		defer cancel()
		msg, err := a.nc.RequestWithContext(ctx, wire.SubjectPlace, data)
		if err != nil {
			return nil, err
		}
		return msg.Data, nil
	}
	timeout := a.deadline
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	b, err := a.sc.Request(wire.SubjectPlace, data, timeout)
	switch {
	case errors.Is(err, natsync.ErrPermission):
		a.serverErr(err)
	case errors.Is(err, natsync.ErrNoResponders):
		return nil, nats.ErrNoResponders
	case errors.Is(err, natsync.ErrTimeout):
		return nil, context.DeadlineExceeded
	case errors.Is(err, natsync.ErrNotConnected):
		// The request found the connection closed (the drop is logged
		// once by OnDisconnect): the cgo layer logs it at debug level.
		return nil, fmt.Errorf("%w: %v", ErrNotConnected, err)
	}
	return b, err
}

// Place implements Placer for placement = remote: it sends req and waits
// at most the deadline for the answer.
func (a *Conn) Place(ctx context.Context, _ *Job, req *wire.PlaceRequest) (*wire.PlaceReply, error) {
	if !a.Connected() {
		return nil, ErrNotConnected
	}
	if !a.Breaker.Allow() {
		return nil, ErrBreakerOpen
	}
	data, err := json.Marshal(req)
	if err != nil {
		a.Breaker.Success() // our fault, not the controller's
		return nil, fmt.Errorf("encoding the placement request: %w", err)
	}
	resp, err := a.request(ctx, data)
	if errors.Is(err, nats.ErrNoResponders) {
		// NATS said at once that nobody listens: as cheap as being
		// disconnected, so not the breaker's business. Counting it would
		// open the breaker during a controller failover and keep jobs
		// unplaced for breaker_cooldown after the new leader is up.
		a.Breaker.Success()
		return nil, ErrNoController
	}
	if err != nil {
		a.Breaker.Failure()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("controller did not answer within %v", a.deadline)
		}
		return nil, fmt.Errorf("asking the controller: %w", err)
	}
	var reply wire.PlaceReply
	if err := wire.Decode(resp, &reply); err != nil {
		a.Breaker.Failure()
		return nil, fmt.Errorf("controller's answer: %w", err)
	}
	a.Breaker.Success()
	return &reply, nil
}

// Close drops the connection; pending requests fail at once.
func (a *Conn) Close() {
	if a.local != nil {
		a.local.Close()
	}
	if a.sc != nil {
		a.sc.Close()
		return
	}
	a.nc.Close()
}
