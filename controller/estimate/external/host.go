package external

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config says which executable to run and how patient to be with it.
type Config struct {
	// Command is the executable's absolute path, optionally followed by
	// arguments, split at white space (no quoting).
	Command string
	// Timeout bounds every call: past it the built-in answers. Default
	// 200 ms. The submit path waits no longer than this for a plugin.
	Timeout time.Duration
	// StartTimeout bounds a start (launch and handshake). Default 10 s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before restarting a plugin
	// that exited, hung or would not start; it doubles after each such
	// failure and is back at MinBackoff once a plugin ran StableAfter.
	// Defaults 1 s, 5 min and 5 min.
	MinBackoff, MaxBackoff, StableAfter time.Duration
	// MaxTimeouts in a row mark the plugin hung: it is killed and
	// restarted (after the backoff). Default 3.
	MaxTimeouts int
	// Log gets one line per kind of failure, not one per call.
	Log zerolog.Logger
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 200 * time.Millisecond
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 10 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(5*time.Minute, c.MinBackoff)
	}
	if c.StableAfter <= 0 {
		c.StableAfter = 5 * time.Minute
	}
	if c.MaxTimeouts <= 0 {
		c.MaxTimeouts = 3
	}
	return c
}

// CheckCommand says what is wrong with a configured command, before the
// controller starts: not an absolute path, not an executable file.
func CheckCommand(command string) error {
	f := strings.Fields(command)
	if len(f) == 0 {
		return errors.New("no executable named")
	}
	if !filepath.IsAbs(f[0]) {
		return fmt.Errorf("%s: give the executable's absolute path", f[0])
	}
	if _, err := exec.LookPath(f[0]); err != nil {
		return fmt.Errorf("%s: not an executable file: %w", f[0], err)
	}
	return nil
}

// Why a call was answered by the built-in instead of the plugin.
const (
	// FailStart: the executable did not start or failed the handshake.
	FailStart = "start"
	// FailCrash: the plugin exited or its connection broke.
	FailCrash = "crash"
	// FailTimeout: no answer within Config.Timeout.
	FailTimeout = "timeout"
	// FailHung: MaxTimeouts timeouts in a row; the plugin was killed.
	FailHung = "hung"
	// FailError: the plugin answered with an error.
	FailError = "error"
	// FailNonsense: the answer was not a usable number (NaN, infinite,
	// negative, absurd) or not for the types asked.
	FailNonsense = "nonsense"
	// FailDown: the plugin was not running (restarting after one of the
	// failures above); counted, never logged, since its cause was.
	FailDown = "down"
)

// Stats are a host's counters since it started.
type Stats struct {
	// Answered counts calls the plugin answered (unknowns included).
	Answered uint64
	// Fallbacks counts calls the built-in answered, by Fail* reason.
	Fallbacks map[string]uint64
	// Starts counts launches of the executable, failed ones included;
	// StartFailures the failed ones.
	Starts, StartFailures uint64
}

// proc runs one estimator executable for one kind of estimator and
// keeps the accounts of its failures. Calls never wait for a start: a
// plugin that is not up has the built-in answer for it.
type proc struct {
	kind string
	cfg  Config
	args []string
	log  zerolog.Logger

	mu        sync.Mutex
	client    *plugin.Client
	stub      any // the dispensed gRPC client; nil while down
	upSince   time.Time
	starting  bool
	nextStart time.Time
	backoff   time.Duration
	timeouts  int // in a row
	logged    map[string]bool
	stats     Stats
	closed    bool
	bg        sync.WaitGroup // starts and kills in flight
}

// newProc starts the executable and waits for it (up to StartTimeout):
// at the controller's start, not on a request's path. A start that
// fails is logged and retried later; the built-in answers meanwhile.
func newProc(kind string, cfg Config) (*proc, error) {
	cfg = cfg.withDefaults()
	if err := CheckCommand(cfg.Command); err != nil {
		return nil, fmt.Errorf("%s estimator: %w", kind, err)
	}
	p := &proc{kind: kind, cfg: cfg, args: strings.Fields(cfg.Command), logged: map[string]bool{},
		backoff: cfg.MinBackoff, stats: Stats{Fallbacks: map[string]uint64{}}}
	p.log = cfg.Log.With().Str("estimator", kind).Str("plugin", p.args[0]).Logger()
	p.mu.Lock()
	p.starting = true
	p.mu.Unlock()
	p.bg.Add(1)
	p.start()
	return p, nil
}

// start launches the executable; the caller has set p.starting and
// added to p.bg.
func (p *proc) start() {
	defer p.bg.Done()
	// go-plugin passes the controller's environment and the cookie.
	cmd := exec.Command(p.args[0], p.args[1:]...)
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          pluginSet(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     p.cfg.StartTimeout,
		AutoMTLS:         true,
		Logger:           hclogToZerolog(p.log),
	})
	stub, err := dispense(c, p.kind)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Starts++
	p.starting = false
	if err == nil && p.closed {
		err = errors.New("host closed")
	}
	if err != nil {
		p.stats.StartFailures++
		p.failLocked(FailStart, err)
		p.killLocked(c)
		p.scheduleLocked()
		return
	}
	p.client, p.stub, p.upSince, p.timeouts = c, stub, time.Now(), 0
	if p.stats.Answered == 0 && p.stats.StartFailures == 0 && p.stats.Starts == 1 {
		p.log.Info().Msg("external estimator started; it answers in front of the built-in")
	} else {
		p.log.Debug().Msg("estimator plugin restarted")
	}
}

func dispense(c *plugin.Client, kind string) (any, error) {
	rc, err := c.Client()
	if err != nil {
		return nil, err
	}
	return rc.Dispense(kind)
}

// acquire returns the plugin's client, or nil and why while it is down:
// then it starts one in the background once the backoff has passed.
func (p *proc) acquire() (any, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	why := FailDown
	if p.client != nil && p.client.Exited() {
		p.failLocked(FailCrash, errors.New("the estimator process exited"))
		p.downLocked()
		why = FailCrash
	}
	if p.stub == nil && !p.starting && !p.closed && !time.Now().Before(p.nextStart) {
		p.starting = true
		p.bg.Add(1)
		go p.start()
	}
	if p.stub == nil {
		p.stats.Fallbacks[why]++
	}
	return p.stub, why
}

// done accounts for a call to the plugin client used: reason is "" for an answer
// that was used, else the Fail* reason the built-in answered instead.
func (p *proc) done(used any, reason string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reason == "" {
		p.stats.Answered++
		p.timeouts = 0
		return
	}
	p.stats.Fallbacks[reason]++
	p.failLocked(reason, err)
	switch reason {
	case FailTimeout:
		p.timeouts++
		if p.timeouts >= p.cfg.MaxTimeouts && p.stub == used {
			p.failLocked(FailHung, fmt.Errorf("%d calls in a row got no answer within %v", p.timeouts, p.cfg.Timeout))
			p.downLocked()
		}
	case FailCrash:
		if p.stub == used {
			p.downLocked()
		}
	default:
		p.timeouts = 0
	}
}

// What an admin reads the first time each kind of failure happens.
var failWords = map[string]string{
	FailStart:    "estimator plugin did not start; the built-in estimator answers until it does (check the executable and that it serves Rota's estimator protocol, docs/estimators.md); retrying with backoff",
	FailCrash:    "estimator plugin exited; the built-in estimator answers until it is restarted (with backoff); its stderr is in the controller's debug log",
	FailTimeout:  "estimator plugin did not answer in time; the built-in estimator answered (make the plugin faster or raise estimator_timeout)",
	FailHung:     "estimator plugin stopped answering; killed it, the built-in estimator answers until it is restarted (with backoff)",
	FailError:    "estimator plugin answered with an error; the built-in estimator answered",
	FailNonsense: "estimator plugin answered nonsense; the built-in estimator answered",
}

// failLocked logs a failure if it is the first of its kind: a plugin
// failing every call must not flood the log. The calls it costs are
// counted (Stats, /metrics rota_controller_estimator_plugin_fallbacks_total).
func (p *proc) failLocked(reason string, err error) {
	if p.logged[reason] {
		return
	}
	p.logged[reason] = true
	p.log.Warn().Err(err).Str("failure", reason).
		Msg(failWords[reason] + "; further failures of this kind are counted, not logged")
}

// downLocked drops the running plugin (killed in the background: Kill
// waits for a graceful exit) and schedules its restart.
func (p *proc) downLocked() {
	if p.client != nil {
		if time.Since(p.upSince) >= p.cfg.StableAfter {
			p.backoff = p.cfg.MinBackoff
		}
		p.killLocked(p.client)
	}
	p.client, p.stub, p.timeouts = nil, nil, 0
	p.scheduleLocked()
}

func (p *proc) killLocked(c *plugin.Client) {
	if p.closed {
		// Close is waiting on bg already: kill without joining it.
		go c.Kill()
		return
	}
	p.bg.Add(1)
	go func() { defer p.bg.Done(); c.Kill() }()
}

func (p *proc) scheduleLocked() {
	p.nextStart = time.Now().Add(p.backoff)
	p.log.Debug().Dur("in", p.backoff).Msg("estimator plugin restart scheduled")
	p.backoff = min(2*p.backoff, p.cfg.MaxBackoff)
}

// classify maps a call's error to a Fail* reason. A call the caller
// cancelled is no fault of the plugin's: an error, with no restart.
func (p *proc) classify(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		return FailTimeout
	case ctx.Err() == nil && status.Code(err) == codes.Unavailable:
		return FailCrash
	}
	return FailError
}

// Stats returns a copy of the counters.
func (p *proc) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Fallbacks = make(map[string]uint64, len(p.stats.Fallbacks))
	for k, v := range p.stats.Fallbacks {
		s.Fallbacks[k] = v
	}
	return s
}

// Close stops the plugin and waits for it to exit.
func (p *proc) Close() {
	p.mu.Lock()
	p.closed = true
	c := p.client
	p.client, p.stub = nil, nil
	p.mu.Unlock()
	if c != nil {
		c.Kill()
	}
	p.bg.Wait()
}

// hclogToZerolog passes go-plugin's own log (and the plugin's stderr,
// which go-plugin relays) to the controller's log at debug level: what
// a plugin prints is for whoever debugs it, not for every controller log.
func hclogToZerolog(l zerolog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "estimator-plugin", Level: hclog.Debug,
		Output: lineWriter{l}, DisableTime: true})
}

type lineWriter struct{ l zerolog.Logger }

func (w lineWriter) Write(b []byte) (int, error) {
	if s := strings.TrimSpace(string(b)); s != "" {
		w.l.Debug().Msg(s)
	}
	return len(b), nil
}

var _ io.Writer = lineWriter{}
