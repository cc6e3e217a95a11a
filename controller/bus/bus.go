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
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/wire"
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
	// The link between sites (docs/multicluster.md), a NATS leaf node
	// connection: LeafListen (host:port) takes other sites' leaf
	// connections, LeafRemotes (nats-leaf://host:port) are the sites this
	// one connects to. Both sides authenticate the link as user LinkUser
	// with the password in LinkSecretFile, and the accepting side lets it
	// publish and subscribe the cross-cluster subjects only.
	LeafListen     string
	LeafRemotes    []string
	LinkSecretFile string
	// JSDomain is the embedded server's JetStream domain (the cluster's
	// name when joined to others), so the sites' JetStreams stay apart.
	JSDomain string
	// MCInbox, when set, opens the MC connection, whose requests take
	// their replies under this prefix (one the link carries).
	MCInbox string
}

// LinkUser is the name the link between sites authenticates as.
const LinkUser = "rota-link"

// Bus is the controller's NATS once open.
type Bus struct {
	// NC serves requests and publishes; Ingest takes the agents' reports.
	NC, Ingest *nats.Conn
	// MC makes the cross-cluster requests (Config.MCInbox); nil unless set.
	MC *nats.Conn
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
		if cfg.MCInbox != "" {
			if b.MC, err = nats.Connect(cfg.NATSURL, append(opts, nats.Name("rota-controller-mc"), nats.CustomInboxPrefix(cfg.MCInbox))...); err != nil {
				return nil, fmt.Errorf("connecting to NATS at %s for the link between sites: %w", cfg.NATSURL, err)
			}
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
	if err := leafOptions(cfg, sopts); err != nil {
		return nil, err
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
	ns.SetLogger(serverLog{log: log.With().Str("component", "nats").Logger()}, false, false)
	go ns.Start()
	if !serverReady(ns, embeddedStartWait, log) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded NATS server did not start on %s within %s (port in use? state dir %s writable?)", cfg.Listen, embeddedStartWait, cfg.StateDir)
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
	if cfg.MCInbox != "" {
		if b.MC, err = nats.Connect("", append(opts, nats.InProcessServer(ns), nats.Name("rota-controller-mc"), nats.CustomInboxPrefix(cfg.MCInbox))...); err != nil {
			return nil, fmt.Errorf("connecting to the embedded NATS server for the link between sites: %w", err)
		}
	}
	return b, nil
}

// leafOptions sets the embedded server's side of the link between sites:
// a leaf node listener where the link signs in as LinkUser, a user of the
// server's own (so its rights apply: nats-server ignores the permissions
// of a leafnode-only user) that may only make leaf connections and only
// publish and subscribe wire.SubjectMCAll, so another site can neither
// read this one's decisions nor reach its JetStream, plugins or agents;
// and leaf connections to other sites with the same secret, which deny
// this site's own subjects on their side too. A leaf node, not a gateway:
// each site stays a server of its own that works alone while the link is
// down, and a leaf connection takes per-subject rights, a gateway none.
func leafOptions(cfg Config, sopts *server.Options) error {
	if cfg.JSDomain != "" {
		sopts.JetStreamDomain = cfg.JSDomain
	}
	if cfg.LeafListen == "" && len(cfg.LeafRemotes) == 0 {
		return nil
	}
	if cfg.LinkSecretFile == "" {
		return errors.New("mc_leaf_listen and mc_leaf_remote need mc_link_secret_file (the password both sites share)")
	}
	raw, err := os.ReadFile(cfg.LinkSecretFile)
	if err != nil {
		return fmt.Errorf("mc_link_secret_file: %w", err)
	}
	secret := strings.TrimSpace(string(raw))
	if len(secret) < 16 {
		return fmt.Errorf("mc_link_secret_file %s: want a secret of 16 characters or more", cfg.LinkSecretFile)
	}
	if cfg.LeafListen != "" {
		if len(sopts.Nkeys) == 0 {
			// Without users of its own the server is open to every local
			// client; one password user would close it to them all.
			return errors.New("mc_leaf_listen needs creds_dir: the link is a user of the embedded server's beside the nkey identities")
		}
		host, port, err := splitHostPort(cfg.LeafListen)
		if err != nil {
			return fmt.Errorf("mc_leaf_listen %q: %w", cfg.LeafListen, err)
		}
		sopts.LeafNode.Host, sopts.LeafNode.Port = host, port
		// Not advertised: the other site keeps dialling the address it
		// was given (a relay, a NAT, a proxy), rather than this
		// listener's own address, which it may not reach.
		sopts.LeafNode.NoAdvertise = true
		sopts.Users = append(sopts.Users, &server.User{Username: LinkUser, Password: secret, Permissions: LinkPermissions(),
			AllowedConnectionTypes: map[string]struct{}{jwt.ConnectionTypeLeafnode: {}}})
	}
	for _, r := range cfg.LeafRemotes {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			return fmt.Errorf("mc_leaf_remote %q: want nats-leaf://host:port", r)
		}
		u.User = url.UserPassword(LinkUser, secret)
		sopts.LeafNode.Remotes = append(sopts.LeafNode.Remotes, &server.RemoteLeafOpts{URLs: []*url.URL{u},
			DenyImports: linkDeny, DenyExports: linkDeny})
	}
	sopts.LeafNode.ReconnectInterval = time.Second
	return nil
}

// linkDeny is what a site never lets through its own leaf connection,
// whatever the other side allows: everything of Rota's but the
// cross-cluster subjects, JetStream, and plain inboxes.
var linkDeny = []string{"rota.v1.place", "rota.v1.place.>", "rota.v1.agent.>", "rota.v1.explain", "rota.v1.status",
	"rota.v1.estimate", "rota.v1.admin.>", "$JS.>", "$KV.>", "_INBOX.>"}

// LinkPermissions are the link's rights on the accepting side.
func LinkPermissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{wire.SubjectMCAll}},
		Subscribe: &server.SubjectPermission{Allow: []string{wire.SubjectMCAll}},
	}
}

// Close drains the connections (what the controller published goes out)
// and stops the embedded server.
func (b *Bus) Close() {
	if b.Ingest != nil {
		b.Ingest.Close()
	}
	if b.MC != nil {
		b.MC.Close()
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

// embeddedStartWait bounds the embedded server's start. It listens only
// once JetStream has recovered its store, which on a busy host took more
// than the 15 s this once was (seen: two controllers of the test suite
// failing to start while three releases' suites ran on 2 cores).
const embeddedStartWait = 2 * time.Minute

// serverReady waits up to limit for ns to take connections, saying once
// in the log, after a few seconds, what the controller waits for.
func serverReady(ns *server.Server, limit time.Duration, log zerolog.Logger) bool {
	const first = 5 * time.Second
	if ns.ReadyForConnections(min(first, limit)) {
		return true
	}
	if limit <= first {
		return false
	}
	log.Info().Dur("waited", first).Msg("the embedded NATS server is still starting (JetStream recovers its store first); waiting")
	return ns.ReadyForConnections(limit - first)
}
