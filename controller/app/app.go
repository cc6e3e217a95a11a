// Package app is the controller process: it runs (or joins) NATS, keeps a
// picture of the Slurm cluster fresh, answers the plugin's placement
// requests and the CLI's questions, and records every decision. main only
// parses flags and signals and calls Run, so tests embed the whole thing.
package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/decisions"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/controller/placement"
	"github.com/rota-hpc/rota/controller/slurm"
)

// Options are what Run needs besides the config.
type Options struct {
	Config Config
	Log    zerolog.Logger
	// Slurm reads the cluster; nil means the command-line tools.
	Slurm slurm.Client
	// Ready, when set, is called once the controller answers requests,
	// with the URL NATS clients reach it at.
	Ready func(clientURL string)
}

// Controller is a running controller.
type Controller struct {
	cfg     Config
	log     zerolog.Logger
	slurm   slurm.Client
	nc      *nats.Conn
	store   *decisions.Store
	placer  placement.Placer
	snap    atomic.Pointer[cluster.Snapshot]
	ns      *server.Server // embedded server, nil when external
	obs     *observe.Observer
	started time.Time
}

// Run runs the controller until ctx is cancelled.
func Run(ctx context.Context, o Options) error {
	c := &Controller{cfg: o.Config, log: o.Log, slurm: o.Slurm, started: time.Now()}
	if c.slurm == nil {
		c.slurm = &slurm.CLI{}
	}
	c.placer = placement.NewInterim(c.cfg.Placement)

	if err := c.connect(); err != nil {
		return err
	}
	defer c.shutdown()

	js, err := jetstream.New(c.nc)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	c.store, err = decisions.Open(ctx, js, c.cfg.DecisionTTL, c.log.With().Str("component", "decisions").Logger())
	if err != nil {
		return err
	}
	storeCtx, stopStore := context.WithCancel(context.Background())
	storeDone := make(chan struct{})
	go func() { c.store.Run(storeCtx); close(storeDone) }()
	defer func() { stopStore(); <-storeDone }()

	// A first look at the cluster before answering: until it succeeds the
	// placer keeps every request as it is, which is safe.
	if err := c.refresh(ctx); err != nil {
		c.log.Warn().Err(err).Msg("cannot read the cluster from Slurm yet; requests are kept as they are until a refresh succeeds")
	}
	if err := c.subscribe(); err != nil {
		return err
	}
	// Agent reports: taken in by every controller, leader or not, so a
	// standby that takes over already knows what the agents measured.
	c.obs = observe.New(c.cfg.Observe, c.log.With().Str("component", "observe").Logger())
	if err := c.obs.Start(ctx, c.nc); err != nil {
		return err
	}
	where := c.cfg.NATSURL
	if where == "" {
		where = "embedded server on " + c.cfg.Listen
	}
	c.log.Info().Str("nats", where).Str("policy", c.placer.Name()).
		Str("refresh", c.cfg.Refresh.String()).Msg("controller ready")
	if o.Ready != nil {
		url := c.cfg.NATSURL
		if c.ns != nil {
			url = c.ns.ClientURL()
		}
		o.Ready(url)
	}

	t := time.NewTicker(c.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.log.Info().Msg("controller stopping")
			return nil
		case <-t.C:
			if err := c.refresh(ctx); err != nil {
				c.log.Warn().Err(err).Msg("cannot refresh the cluster from Slurm; keeping the last view")
			}
		}
	}
}

// connect starts the embedded NATS server (JetStream on, data under the
// state dir) or connects to the configured external one.
func (c *Controller) connect() error {
	opts := []nats.Option{nats.Name("rota-controller"), nats.MaxReconnects(-1)}
	if c.cfg.NATSURL != "" {
		nc, err := nats.Connect(c.cfg.NATSURL, opts...)
		if err != nil {
			return fmt.Errorf("connecting to NATS at %s: %w", c.cfg.NATSURL, err)
		}
		c.nc = nc
		return nil
	}
	host, port, err := splitHostPort(c.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %q: %w", c.cfg.Listen, err)
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "rota-controller",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(c.cfg.StateDir, "jetstream"),
		NoSigs:     true, // signals belong to main
		NoLog:      true,
	})
	if err != nil {
		return fmt.Errorf("embedded NATS server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return fmt.Errorf("embedded NATS server did not start on %s (port in use? state dir %s writable?)", c.cfg.Listen, c.cfg.StateDir)
	}
	c.ns = ns
	nc, err := nats.Connect("", append(opts, nats.InProcessServer(ns))...)
	if err != nil {
		return fmt.Errorf("connecting to the embedded NATS server: %w", err)
	}
	c.nc = nc
	return nil
}

func (c *Controller) shutdown() {
	if c.nc != nil {
		if err := c.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			c.nc.Close()
		}
		for i := 0; i < 100 && !c.nc.IsClosed(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if c.ns != nil {
		c.ns.Shutdown()
		c.ns.WaitForShutdown()
	}
}

// refresh re-reads nodes and partitions and hands the placer a new view.
func (c *Controller) refresh(ctx context.Context) error {
	nodes, err := c.slurm.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("reading nodes: %w", err)
	}
	parts, err := c.slurm.Partitions(ctx)
	if err != nil {
		return fmt.Errorf("reading partitions: %w", err)
	}
	s := cluster.Build(time.Now(), nodes, parts)
	c.snap.Store(s)
	c.placer.Update(s)
	c.log.Debug().Int("nodes", len(nodes)).Int("gpu_types", len(s.Types)).Int("partitions", len(parts)).Msg("cluster refreshed")
	return nil
}
