// Package bus is the controller's NATS: the embedded server (JetStream on,
// only the identities of creds_dir admitted) or a connection to the site's
// NATS cluster. The controller holds two connections, one for requests and
// one for the agents' reports, so that a flood of reports never queues
// placements behind it in one connection's reader.
package bus

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rs/zerolog"
)

// Config is where the controller's NATS is and how it is secured (the
// controller.conf keys of the same names).
type Config struct {
	// NATSURL is an external server or cluster ("" embeds one).
	NATSURL string
	// Listen is the embedded server's host:port (-1: any free port).
	Listen string
	// StateDir holds the embedded server's JetStream data.
	StateDir string
	// CredsDir holds the identities and the controller's seed ("" none).
	CredsDir string
	// TLSCA verifies an external server; TLSCert and TLSKey serve TLS on
	// the embedded one.
	TLSCA, TLSCert, TLSKey string
}

// Bus is the controller's NATS once open.
type Bus struct {
	// NC serves requests and publishes; Ingest takes the agents' reports.
	NC, Ingest *nats.Conn
	// Auth is how clients authenticate, in words for the log.
	Auth   string
	server *server.Server // nil when external
}

// ClientURL is where clients reach the bus: the embedded server's URL
// (its port chosen at start when Listen asked for any) or NATSURL.
func (b *Bus) ClientURL(cfg Config) string {
	if b.server != nil {
		return b.server.ClientURL()
	}
	return cfg.NATSURL
}

// Embedded says whether the server runs in this process.
func (b *Bus) Embedded() bool { return b.server != nil }

// Open starts the embedded NATS server (JetStream on, data under the
// state dir) or connects to the configured external one. With a creds dir
// the embedded server admits only the listed identities, each with its
// role's rights, and the controller signs in with its own seed.
func Open(cfg Config, log zerolog.Logger) (_ *Bus, err error) {
	b := &Bus{}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	opts := []nats.Option{nats.Name("rota-controller"), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			ev := log.Error().Err(err)
			if sub != nil {
				ev = ev.Str("subject", sub.Subject)
			}
			if auth.IsPermissionError(err) {
				ev.Msg("NATS refused the controller an action; an external server needs the permissions from 'rota-controller creds server-config'")
				return
			}
			ev.Msg("NATS error")
		})}
	var users []*server.NkeyUser
	if dir := cfg.CredsDir; dir != "" {
		ids, err := creds.ReadIdentities(dir)
		if err != nil {
			return nil, fmt.Errorf("creds_dir: %w", err)
		}
		me, ok := creds.Find(ids, creds.Controller, "")
		if !ok {
			return nil, fmt.Errorf("creds_dir: %s lists no controller identity; run 'rota-controller creds init --dir %s'", filepath.Join(dir, creds.IdentitiesFile), dir)
		}
		seed := creds.SeedPath(dir, creds.Controller, "")
		if pub, err := auth.PublicKey(seed); err != nil {
			return nil, fmt.Errorf("creds_dir: controller's %w", err)
		} else if pub != me.PublicKey {
			return nil, fmt.Errorf("creds_dir: %s is not the controller key listed in %s (%s); regenerate one or the other", seed, creds.IdentitiesFile, me.PublicKey)
		}
		ca := ""
		if cfg.NATSURL != "" {
			ca = cfg.TLSCA
		}
		ao, err := auth.ClientOptions(seed, ca)
		if err != nil {
			return nil, fmt.Errorf("creds_dir: %w", err)
		}
		opts = append(opts, ao...)
		users = creds.NkeyUsers(ids)
		b.Auth = fmt.Sprintf("nkeys (%d identities)", len(ids))
	} else if cfg.NATSURL != "" && cfg.TLSCA != "" {
		ao, err := auth.ClientOptions("", cfg.TLSCA)
		if err != nil {
			return nil, err
		}
		opts = append(opts, ao...)
	}
	if cfg.NATSURL != "" {
		// The URL may list several servers of a cluster (comma-separated);
		// the client moves to another when its server goes away.
		opts = append(opts,
			nats.ReconnectWait(250*time.Millisecond),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil {
					log.Warn().Err(err).Msg("lost the NATS connection; reconnecting (a leader that cannot renew its lease in time stands down)")
				}
			}),
			nats.ReconnectHandler(func(nc *nats.Conn) {
				log.Info().Str("server", nc.ConnectedUrlRedacted()).Msg("reconnected to NATS")
			}))
		nc, err := nats.Connect(cfg.NATSURL, opts...)
		if err != nil {
			return nil, fmt.Errorf("connecting to NATS at %s: %w", cfg.NATSURL, err)
		}
		b.NC = nc
		if b.Ingest, err = nats.Connect(cfg.NATSURL, append(opts, nats.Name("rota-controller-ingest"))...); err != nil {
			return nil, fmt.Errorf("connecting to NATS at %s for agent reports: %w", cfg.NATSURL, err)
		}
		if b.Auth == "" {
			b.Auth = "external server's"
		}
		return b, nil
	}
	host, port, err := splitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", cfg.Listen, err)
	}
	if users == nil {
		// An open server is anyone's controller: anyone who reaches it
		// can read every decision and impersonate every node. Only this
		// host's users may reach it on loopback; anything wider needs
		// credentials.
		if !auth.IsLoopback(host) {
			return nil, fmt.Errorf("listen %s without creds_dir would let anyone on the network use the controller's NATS; set creds_dir (see 'rota-controller creds init') or listen on 127.0.0.1", cfg.Listen)
		}
		log.Warn().Str("listen", cfg.Listen).Msg("NATS authentication is off (no creds_dir): any local user can talk to the controller and act as any agent; set creds_dir for production")
		b.Auth = "none (loopback only)"
	}
	// The server, with its log off, would only time out below on a port
	// already taken: say so at once. (-1 is "any free port", for tests.)
	if port > 0 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
		if err != nil {
			return nil, fmt.Errorf("embedded NATS server cannot listen on %s (another process has the port? set listen): %w", cfg.Listen, err)
		}
		l.Close()
	}
	sopts := &server.Options{
		ServerName: "rota-controller",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.StateDir, "jetstream"),
		NoSigs:     true, // signals belong to main
		NoLog:      true,
		Nkeys:      users,
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		if cfg.TLSCert == "" || cfg.TLSKey == "" {
			return nil, errors.New("tls_cert and tls_key go together: set both or neither")
		}
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("TLS for the embedded NATS server: %w", err)
		}
		sopts.TLSConfig, sopts.TLS, sopts.TLSTimeout = tc, true, 2
		b.Auth += ", TLS"
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded NATS server did not start on %s (port in use? state dir %s writable?)", cfg.Listen, cfg.StateDir)
	}
	b.server = ns
	// In-process: no TLS on this connection, but the same nkey check.
	nc, err := nats.Connect("", append(opts, nats.InProcessServer(ns))...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the embedded NATS server: %w", err)
	}
	b.NC = nc
	if b.Ingest, err = nats.Connect("", append(opts, nats.InProcessServer(ns), nats.Name("rota-controller-ingest"))...); err != nil {
		return nil, fmt.Errorf("connecting to the embedded NATS server for agent reports: %w", err)
	}
	return b, nil
}

// Close drains the connections (what the controller published goes out)
// and stops the embedded server.
func (b *Bus) Close() {
	if b.Ingest != nil {
		b.Ingest.Close()
	}
	if b.NC != nil {
		if err := b.NC.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			b.NC.Close()
		}
		for i := 0; i < 100 && !b.NC.IsClosed(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if b.server != nil {
		b.server.Shutdown()
		b.server.WaitForShutdown()
	}
}

func splitHostPort(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	// -1 asks the NATS server for a random port (tests).
	if err != nil || port < -1 || port > 65535 {
		return "", 0, &net.AddrError{Err: "bad port", Addr: addr}
	}
	return host, port, nil
}
