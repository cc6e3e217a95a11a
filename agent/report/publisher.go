// Package report sends the agent's reports to the controller over NATS and
// keeps a bounded backlog while the server cannot be reached.
//
// Delivery is at most once: a report handed to a live connection is gone
// from the agent. While the connection is down (or a publish fails) reports
// wait in a ring of at most Backlog messages, oldest dropped first, and are
// sent, oldest first, ahead of the next report once the connection is back.
package report

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// DefaultBacklog is how many reports are kept across an outage: at one
// node report plus a few job reports per interval, about ten minutes.
const DefaultBacklog = 1024

// Publisher owns the NATS connection.
type Publisher struct {
	nc      *nats.Conn
	log     zerolog.Logger
	backlog int

	mu      sync.Mutex
	queue   []msg
	dropped uint64
	sent    uint64
	// dropping is set while the backlog overflows, so the warning is
	// logged once per outage.
	dropping bool
	lastErr  string // last async NATS error logged
}

type msg struct {
	subject string
	data    []byte
}

// Options configure Connect.
type Options struct {
	URL     string
	Name    string        // client name shown by the server
	Backlog int           // reports kept while disconnected (DefaultBacklog)
	Reconn  time.Duration // wait between reconnect attempts (2 s)
	Log     zerolog.Logger
	// Auth are the credential and TLS options (internal/auth).
	Auth []nats.Option
}

// Connect dials NATS without waiting for the server: a server that is down
// at start is retried forever in the background, like one that goes away
// later.
func Connect(o Options) (*Publisher, error) {
	if o.Backlog <= 0 {
		o.Backlog = DefaultBacklog
	}
	if o.Reconn <= 0 {
		o.Reconn = 2 * time.Second
	}
	p := &Publisher{log: o.Log, backlog: o.Backlog}
	opts := append([]nats.Option{
		nats.Name(o.Name),
		// A refused key is retried like a server that is down: the admin
		// may be restarting the controller with the node added.
		nats.IgnoreAuthErrorAbort(),
		nats.ErrorHandler(p.onError),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(o.Reconn),
		// Our own backlog replaces the client's byte buffer, so that a
		// publish during an outage fails at once and is queued here.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				p.log.Warn().Err(err).Str("url", o.URL).Msg("lost the NATS server; keeping reports until it is back")
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			p.log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("reconnected to NATS")
		}),
		nats.ConnectHandler(func(c *nats.Conn) {
			p.log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("connected to NATS")
		}),
	}, o.Auth...)
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", o.URL, err)
	}
	p.nc = nc
	return p, nil
}

// onError logs what the server refused, each distinct error once in a
// row: while the key is refused, every reconnect brings the same one.
func (p *Publisher) onError(_ *nats.Conn, sub *nats.Subscription, err error) {
	p.mu.Lock()
	seen := err.Error() == p.lastErr
	p.lastErr = err.Error()
	p.mu.Unlock()
	if seen {
		return
	}
	ev := p.log.Error().Err(err)
	if sub != nil {
		ev = ev.Str("subject", sub.Subject)
	}
	switch {
	case errors.Is(err, nats.ErrPermissionViolation):
		ev.Msg("NATS refused this agent an action: is nats_nkey_seed_file this node's seed (rota-controller creds add-agent <node>) and node its Slurm name?")
	case errors.Is(err, nats.ErrAuthorization):
		ev.Msg("NATS refused this agent's credentials: set nats_nkey_seed_file to this node's seed, listed in the controller's creds dir (restart the controller after add-agent)")
	default:
		ev.Msg("NATS error")
	}
}

// Conn is the underlying connection, for subscriptions.
func (p *Publisher) Conn() *nats.Conn { return p.nc }

// Publish sends data on subject, after any backlog, or queues it.
func (p *Publisher) Publish(subject string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, msg{subject, data})
	p.drainLocked()
	if over := len(p.queue) - p.backlog; over > 0 {
		p.queue = append(p.queue[:0], p.queue[over:]...)
		p.dropped += uint64(over)
		if !p.dropping {
			p.dropping = true
			p.log.Warn().Int("dropped", over).Uint64("dropped_total", p.dropped).Msg("report backlog full; dropping the oldest reports until NATS is back")
		}
	}
}

func (p *Publisher) drainLocked() {
	if !p.nc.IsConnected() {
		return
	}
	n := 0
	for _, m := range p.queue {
		if err := p.nc.Publish(m.subject, m.data); err != nil {
			if !errors.Is(err, nats.ErrReconnectBufExceeded) {
				p.log.Debug().Err(err).Msg("publish failed; keeping the report")
			}
			break
		}
		n++
	}
	p.sent += uint64(n)
	p.queue = append(p.queue[:0], p.queue[n:]...)
	if len(p.queue) == 0 {
		p.dropping = false
	}
}

// Stats are the publisher's counters.
type Stats struct {
	Queued  int
	Dropped uint64
	Sent    uint64
}

// Stats returns the current counters.
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Queued: len(p.queue), Dropped: p.dropped, Sent: p.sent}
}

// Close flushes what it can within a second and closes the connection.
func (p *Publisher) Close() {
	p.mu.Lock()
	p.drainLocked()
	p.mu.Unlock()
	if p.nc.IsConnected() {
		_ = p.nc.FlushTimeout(time.Second)
	}
	p.nc.Close()
}
