// Package app is the controller process, wired from its parts: it opens
// the bus (controller/bus), builds the placer, the estimators, the round
// loop and the chain manager, subscribes the request subjects
// (handlers.go), keeps the picture of the Slurm cluster fresh while
// leading, and serves the metrics and the web view. The logic lives in the
// parts; app holds what connects them. main only parses flags and signals
// and calls Run, so tests embed the whole thing.
package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/bus"
	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/decisions"
	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/controller/faulttol"
	"github.com/rota-hpc/rota/controller/leader"
	"github.com/rota-hpc/rota/controller/metrics"
	"github.com/rota-hpc/rota/controller/multicluster"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/controller/placer"
	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/controller/rounds"
	"github.com/rota-hpc/rota/controller/serve"
	"github.com/rota-hpc/rota/controller/site"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/trend"
	"github.com/rota-hpc/rota/wire"
)

// Options are what Run needs besides the config.
type Options struct {
	Config Config
	Log    zerolog.Logger
	// Slurm is the cluster; nil means the command-line tools (or
	// slurmrestd, as the config says). A stand-in embeds slurm.Unserved.
	Slurm slurm.Backend
	// Ready, when set, is called once the controller answers requests,
	// with the URL NATS clients reach it at.
	Ready func(clientURL string)
}

// Controller is a running controller.
type Controller struct {
	cfg   Config
	log   zerolog.Logger
	slurm slurm.Backend
	// bus is the controller's NATS; nc is its request connection.
	bus     *bus.Bus
	nc      *nats.Conn
	store   *decisions.Store
	journal *decisions.Journal // embedded mode only: see decisions.Journal
	placer  *placer.Placer
	snap    atomic.Pointer[cluster.Snapshot]
	lease   *leader.Lease // nil when alone (embedded server)
	obs     *observe.Observer
	started time.Time
	// estimator learns throughputs, walltimes and memory needs; rounds
	// is the round loop while leading (nil otherwise).
	estimator rounds.Estimator
	rounds    atomic.Pointer[rounds.Loop]
	// site is the knowledge base, the queue-wait model and the
	// throughput table (site.go).
	// The site: its knowledge base, the queue-wait predictor, and the
	// throughput table `rota estimate --model` reads (site.go).
	book     *site.Book
	waits    *live.Waits
	table    *workload.Table
	tableErr string                               // why there is no table
	chains   atomic.Pointer[chains.Manager]       // while leading, with rounds
	faulttol atomic.Pointer[faulttol.Manager]     // while leading, with rounds
	services atomic.Pointer[serve.Manager]        // while leading, with rounds
	mc       atomic.Pointer[multicluster.Manager] // while leading, with rounds and a cluster name
	// inst are the metrics observed as they happen (instruments.go).
	inst *metrics.Instruments

	// durable counts decisions being stored before their reply; writes
	// bounds how many, so a stalled JetStream pushes back on the request
	// subscription instead of piling up goroutines.
	durable sync.WaitGroup
	writes  chan struct{}
	// states pushes the placer's state to the plugins while leading.
	states *placer.Publisher

	// leading: this controller serves requests and reads Slurm now.
	leading atomic.Bool
	// nodes are the last refresh's Slurm nodes (the web view's agents
	// and node types).
	nodes atomic.Pointer[slurmNodes]
	// The web view's queue read and its fairness and JCT samples (web.go).
	queue *slurm.QueueCache
	trend *trend.Sampler
}

// The web view keeps trendSamples samples, one a round (five days of
// 5-minute rounds), JCTs averaged over the hour before each.
const (
	trendSamples = 1440
	trendWindow  = time.Hour
)

// maxDurableWrites bounds the decisions being stored at once.
const maxDurableWrites = 256

// Run runs the controller until ctx is cancelled.
func Run(ctx context.Context, o Options) error {
	c := &Controller{cfg: o.Config, log: o.Log, slurm: o.Slurm, started: time.Now(),
		writes: make(chan struct{}, maxDurableWrites), inst: metrics.NewInstruments(),
		trend: trend.New(trendSamples, trendWindow)}
	if err := c.cfg.Check(); err != nil {
		return err
	}
	if c.slurm == nil {
		c.slurm = slurm.New(c.cfg.Slurm, c.log)
	}
	if err := c.checkRestd(ctx); err != nil {
		return err
	}
	// Page loads share one squeue, so many viewers cost Slurm one read
	// per 5 s.
	c.queue = &slurm.QueueCache{Client: c.slurm, MaxAge: 5 * time.Second}
	c.placer = placer.New(c.cfg.Placement)
	c.states = placer.NewPublisher(c.placer, nil, c.cfg.StateInterval, c.log)
	est := live.NewEstimator(c.cfg.Placement.Speed, c.cfg.Placement.WalltimeMargin, c.cfg.Placement.WalltimeOverheadMin)
	stopPlugins, err := est.StartPlugins(c.cfg.Estimators, c.log)
	defer stopPlugins()
	if err != nil {
		return err
	}
	c.estimator = est

	c.loadSite()
	// In the background: a week of a busy cluster's sacct must not hold
	// up placements.
	go c.readHistory(ctx)
	stopWaitPlugin, err := c.waits.StartPlugin(c.cfg.Estimators, c.log)
	defer stopWaitPlugin()
	if err != nil {
		return err
	}
	b, err := bus.Open(c.cfg.bus(), c.log)
	if err != nil {
		return err
	}
	defer b.Close()
	c.bus, c.nc = b, b.NC
	c.states.Publish = func(data []byte) error { return b.NC.Publish(wire.SubjectPlaceState, data) }

	js, err := jetstream.New(c.nc)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	c.store, err = decisions.Open(ctx, js, c.cfg.DecisionTTL, c.cfg.Replicas, c.log.With().Str("component", "decisions").Logger())
	if err != nil {
		return err
	}
	if !c.cfg.durableDecisions() {
		if err := c.openJournal(ctx); err != nil {
			return err
		}
		// Closed after the store's writer stops (defers run last first).
		defer c.journal.Close()
	}
	storeCtx, stopStore := context.WithCancel(context.Background())
	storeDone := make(chan struct{})
	go func() { c.store.Run(storeCtx); close(storeDone) }()
	defer func() { stopStore(); <-storeDone }()

	// Agent reports: taken in by every controller, leader or not, so a
	// standby that takes over already knows what the agents measured.
	c.obs = observe.New(c.cfg.Observe, c.log.With().Str("component", "observe").Logger())
	if err := c.obs.Start(ctx, b.Ingest); err != nil {
		return err
	}
	if c.cfg.MetricsListen != "" {
		if err := c.serveMetrics(ctx, c.cfg.MetricsListen); err != nil {
			return fmt.Errorf("metrics_listen %s: %w (set metrics_listen = \"\" to turn /metrics off)", c.cfg.MetricsListen, err)
		}
	}
	if c.cfg.ProfileListen != "" {
		if err := c.serveProfile(ctx, c.cfg.ProfileListen); err != nil {
			return fmt.Errorf("profile_listen %s: %w (leave profile_listen unset to turn profiles off)", c.cfg.ProfileListen, err)
		}
	}
	// Every controller serves the view, a standby too (it says so).
	if c.cfg.Web.Listen != "" {
		if err := c.serveWeb(ctx); err != nil {
			return err
		}
	}

	// Only the leader answers requests and reads Slurm. The embedded
	// server's controller is alone by construction; on an external NATS
	// others may share the subjects, so the controllers elect one.
	var elector leader.Runner = leader.Solo{}
	if c.cfg.elected() {
		l, err := leader.NewLease(ctx, js, leader.Config{TTL: c.cfg.LeaseTTL, Replicas: c.cfg.Replicas,
			Log: c.log.With().Str("component", "leader").Logger()})
		if err != nil {
			return err
		}
		c.lease = l
		elector = l
		c.log.Info().Str("candidate", l.ID()).Str("lease_ttl", c.cfg.LeaseTTL.String()).
			Msg("contending for the controller lease; only its holder serves requests")
	}
	var readyOnce sync.Once
	ready := func() {
		if o.Ready == nil {
			return
		}
		readyOnce.Do(func() { o.Ready(b.ClientURL(c.cfg.bus())) })
	}
	var leadErr error
	err = elector.Run(ctx, func(lctx context.Context) {
		if err := c.lead(lctx, ready); err != nil {
			leadErr = err
		}
	})
	c.log.Info().Msg("controller stopping")
	return errors.Join(err, leadErr)
}

// lead is the leader's work: read Slurm, serve the request subjects, and
// refresh the view periodically, until ctx ends. A lost lease stops
// serving at once; a shutdown first answers what is already queued.
func (c *Controller) lead(ctx context.Context, ready func()) error {
	// A first look at the cluster before answering: until it succeeds the
	// placer keeps every request as it is, which is safe.
	c.book.Restore(ctx)
	// The round loop first: it knows how this Slurm takes a type (in the
	// GPU request on 24.11 and later), which the first view must carry,
	// or the first placements go by node constraint.
	c.startRounds(ctx)
	if err := c.refresh(ctx); err != nil {
		c.log.Warn().Err(err).Msg("cannot read the cluster from Slurm yet; requests are kept as they are until a refresh succeeds")
	}
	subs, err := c.subscribe()
	if err != nil {
		return err
	}
	c.leading.Store(true)
	defer c.leading.Store(false)
	if c.cfg.Web.Listen != "" {
		go c.sampleTrend(ctx)
	}
	go c.states.Run(ctx)
	where := c.cfg.NATSURL
	if where == "" {
		where = "embedded server on " + c.cfg.Listen
	}
	c.log.Info().Str("nats", where).Str("auth", c.bus.Auth).Str("policy", c.placer.Name()).Str("refresh", c.cfg.Refresh.String()).
		Bool("durable_decisions", c.cfg.durableDecisions()).Int("replicas", c.cfg.Replicas).Msg("controller ready")
	ready()

	t := time.NewTicker(c.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			lost := errors.Is(context.Cause(ctx), leader.ErrLost)
			for _, s := range subs {
				if lost {
					// Another controller may lead already: stop now.
					_ = s.Unsubscribe()
				} else {
					_ = s.Drain()
				}
			}
			if !lost {
				for _, s := range subs {
					for i := 0; i < 100 && s.IsValid(); i++ {
						time.Sleep(20 * time.Millisecond)
					}
				}
			}
			// Decisions being stored are answered (they were made while
			// leading) before a successor may start.
			c.durable.Wait()
			if lost {
				c.log.Warn().Msg("stopped serving requests; standing by for the controller lease")
			}
			return nil
		case <-t.C:
			if err := c.refresh(ctx); err != nil {
				c.log.Warn().Err(err).Msg("cannot refresh the cluster from Slurm; keeping the last view")
			}
		}
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
	c.nodes.Store(&slurmNodes{at: time.Now(), nodes: nodes})
	s := cluster.Build(time.Now(), nodes, parts)
	if loop := c.rounds.Load(); loop != nil && loop.TypeByGres() {
		s.GresOnly() // as the round loop's snapshots (rounds.Loop.TypeByGres)
	}
	c.snap.Store(s)
	c.placer.Update(s)
	c.refreshSite(ctx, nodes, parts)
	c.states.Soon()
	c.log.Debug().Int("nodes", len(nodes)).Int("gpu_types", len(s.Types)).Int("partitions", len(parts)).Msg("cluster refreshed")
	return nil
}

// openJournal gives the store its decision journal (see
// decisions.Journal) after storing what a killed controller left in it;
// the controller answers nothing before. A journal it cannot replay
// (JetStream refusing writes) is kept for the next start, and decisions
// are journaled after it.
func (c *Controller) openJournal(ctx context.Context) error {
	j, err := decisions.OpenJournal(c.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("%w (state_dir must be writable)", err)
	}
	n, err := c.store.Replay(ctx, j)
	switch {
	case err != nil:
		c.log.Warn().Err(err).Str("journal", j.Path()).
			Msg("could not replay the decision journal into JetStream; kept for the next start (those decisions are not explainable until then)")
	case n > 0:
		c.log.Info().Int("decisions", n).Str("journal", j.Path()).
			Msg("stored decisions that the last controller handed out but had not stored before it stopped")
	}
	c.store.UseJournal(j)
	c.journal = j
	return nil
}
