package app

import (
	"fmt"
	"time"

	"github.com/rota-hpc/rota/controller/bus"
	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/controller/faulttol"
	"github.com/rota-hpc/rota/controller/leader"
	"github.com/rota-hpc/rota/controller/multicluster"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/controller/placer"
	"github.com/rota-hpc/rota/controller/rounds"
	"github.com/rota-hpc/rota/controller/serve"
	"github.com/rota-hpc/rota/controller/site"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/web"
	"github.com/rota-hpc/rota/internal/conf"
	"github.com/rota-hpc/rota/wire"
)

// Config is the controller's configuration: /etc/rota/controller.conf
// (key = value), then command-line flags over it.
type Config struct {
	// StateDir holds the embedded NATS server's JetStream data.
	StateDir string
	// NATSURL, when set, is an external NATS server or cluster (with
	// JetStream); the controller then runs no server of its own.
	NATSURL string
	// Listen is the embedded server's client address.
	Listen string
	// Replicas is how many copies JetStream keeps of the controller's
	// buckets (decisions, leader lease): 1 with the embedded server, 3 on
	// a 3-node cluster so that losing a node loses nothing.
	Replicas int
	// LeaseTTL matters with an external NATS, where controllers elect a
	// leader through a lease: a standby takes over about this long after
	// the leader dies. The embedded server's controller is alone and
	// always leads.
	LeaseTTL time.Duration
	// AsyncDecisions answers the plugin before its decision is stored: a
	// shorter submit path, but the decisions still in flight die with the
	// controller (kill -9) or the leader.
	AsyncDecisions bool
	// CredsDir holds the NATS identities (see controller/creds). Set, the
	// embedded server admits only the listed nkeys, each with its role's
	// permissions, and the controller authenticates with its own seed
	// (also to an external NATS). Empty, the embedded server is open and
	// must listen on loopback only.
	CredsDir string
	// TLSCert and TLSKey (PEM files) turn on TLS for the embedded server's
	// clients; every client then needs the CA (TLSCA on their side).
	TLSCert, TLSKey string
	// TLSCA is the CA the controller trusts when it joins an external NATS
	// over TLS; "" means the system's roots.
	TLSCA string
	// Refresh is how often the controller re-reads Slurm's nodes and
	// partitions.
	Refresh time.Duration
	// StateInterval is the longest gap between two placement states the
	// controller pushes to plugins placing locally (it also pushes one on
	// every change); plugins treat a state older than their state_max_age
	// as a dead controller.
	StateInterval time.Duration
	// DecisionTTL is how long decisions stay explainable.
	DecisionTTL time.Duration
	// LogLevel: debug, info, warn, error.
	LogLevel string
	// Slurm says how the controller reads and changes Slurm.
	Slurm slurm.Config
	// Placement holds the rule's knobs (speed table, retyping, margins).
	Placement placer.Config
	// Observe sizes the intake of agent reports (zero values: defaults).
	Observe observe.Config
	// Rounds drives Slurm round by round with the policy (retyping and
	// ordering pending jobs, migrating running ones); RoundsOff leaves
	// jobs to the submit-time placement alone.
	Rounds    rounds.Config
	RoundsOff bool
	// ApplyAroundSaves holds a round's updates while slurmctld's job
	// state save is due (round_apply_around_saves; slurm.StateSaves),
	// where the controller can read its StateSaveLocation.
	ApplyAroundSaves bool
	// MC is several clusters under one Rota (docs/multicluster.md): this
	// cluster's name, the links, the routing rule; off without a name.
	MC multicluster.Config
	// The link between sites (bus.Config's Leaf* fields).
	MCLeafListen     string
	MCLeafRemotes    []string
	MCLinkSecretFile string
	// MCHold holds a job whose allowed types are on no node here for the
	// manager to send elsewhere (placer.Config.ElsewhereHoldS).
	MCHold time.Duration
	// Chains runs jobs past MaxTime as chains of segments (docs/chains.md).
	Chains chains.Config
	// FaultTol asks checkpointable jobs for periodic checkpoints and
	// follows them through node failures (docs/faulttolerance.md).
	FaultTol faulttol.Config
	// Serve spreads inference services' replicas and rolls them over
	// (docs/serve.md).
	Serve serve.Config
	// MetricsListen is where /metrics is served ("" off).
	MetricsListen string
	// ProfileListen is where Go's profiles (/debug/pprof/) are served
	// ("" off, the default).
	ProfileListen string
	// Web is the read-only web view (controller/web; serving it, web.go).
	Web web.Config
	// Estimators names external estimators (docs/estimators.md).
	Estimators live.Plugins
	// Site is the admin's part of the knowledge base (charging rates,
	// debug partitions, GPU memory per type); docs/estimate.md.
	Site site.Config
	// QueueWaitModel is a model file from `rota queuewait train --out`
	// ("" none: queue waits are unknown).
	QueueWaitModel string
	// HistoryWindow is how far back the controller reads slurmdbd's
	// job history (sacct) at start, to seed its queue-wait history; 0
	// does not read it.
	HistoryWindow time.Duration
	// ThroughputTable is Gavel's simulation_throughputs.json, whose job
	// types `rota estimate --model` names ("" none).
	ThroughputTable string
}

// DefaultConfig is what no file and no flags mean.
func DefaultConfig() Config {
	return Config{
		StateDir:         "/var/lib/rota",
		Listen:           "127.0.0.1:4222",
		Replicas:         1,
		LeaseTTL:         leader.DefaultTTL,
		Refresh:          time.Minute,
		StateInterval:    2 * time.Second,
		DecisionTTL:      30 * 24 * time.Hour,
		LogLevel:         "info",
		Placement:        placer.DefaultConfig(),
		Rounds:           rounds.DefaultConfig(),
		ApplyAroundSaves: true,
		Chains:           chains.DefaultConfig(),
		FaultTol:         faulttol.DefaultConfig(),
		Serve:            serve.DefaultConfig(),
		MC:               multicluster.DefaultConfig(),
		MCHold:           time.Minute,
		HistoryWindow:    7 * 24 * time.Hour,
		Web:              web.DefaultConfig(),
	}
}

// LoadConfig reads path over the defaults; "" means defaults alone.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	if path == "" {
		c.holdServe()
		return c, nil
	}
	v, err := conf.ReadFile(path)
	if err != nil {
		return c, err
	}
	v.String("state_dir", &c.StateDir)
	v.String("nats_url", &c.NATSURL)
	v.String("listen", &c.Listen)
	v.Int("replicas", &c.Replicas, 1, 5)
	v.Duration("lease_ttl", &c.LeaseTTL, time.Second, 5*time.Minute)
	v.Bool("async_decisions", &c.AsyncDecisions)
	v.String("creds_dir", &c.CredsDir)
	v.String("tls_cert", &c.TLSCert)
	v.String("tls_key", &c.TLSKey)
	v.String("tls_ca", &c.TLSCA)
	v.Duration("refresh", &c.Refresh, time.Second, 24*time.Hour)
	v.Duration("state_interval", &c.StateInterval, 100*time.Millisecond, time.Minute)
	v.Duration("decision_ttl", &c.DecisionTTL, time.Hour, 10*365*24*time.Hour)
	v.String("log_level", &c.LogLevel)
	v.Duration("agent_forget_after", &c.Observe.ForgetAfter, 10*time.Second, 7*24*time.Hour)
	v.Duration("throughput_smoothing", &c.Observe.Smoothing, time.Second, 24*time.Hour)
	// The submit-time rule's keys (placer.Config.Read); the round loop
	// applies the same walltime, reserve and memory settings.
	if err := c.Placement.Read(v); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	v.String("metrics_listen", &c.MetricsListen)
	v.String("profile_listen", &c.ProfileListen)
	c.Web.Read(v)
	c.Estimators.Read(v)
	c.Slurm.Read(v)
	c.Rounds.Read(v)
	v.Bool("rounds_off", &c.RoundsOff)
	v.Bool("round_apply_around_saves", &c.ApplyAroundSaves)
	c.Rounds.WalltimeMargin, c.Rounds.WalltimeOverheadMin = c.Placement.WalltimeMargin, c.Placement.WalltimeOverheadMin
	c.Chains.Read(v)
	c.Chains.Grace = c.Rounds.CheckpointGrace
	c.FaultTol.Read(v)
	c.FaultTol.Grace = c.Rounds.CheckpointGrace
	// Services (docs/serve.md); successors outrank other pending jobs as
	// chain segments do.
	c.Serve.Read(v)
	c.Serve.Priority = c.Chains.Priority
	c.Rounds.InteractiveReserve = c.Placement.InteractiveReserve
	if err := loadMC(v, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	v.String("queuewait_model", &c.QueueWaitModel)
	var window string
	v.String("history_window", &window)
	if window != "" {
		d, err := conf.ParseWindow(window)
		if err != nil {
			return c, fmt.Errorf("%s: history_window: %w", path, err)
		}
		c.HistoryWindow = d
	}
	v.String("throughput_table", &c.ThroughputTable)
	sc, err := site.ReadConfig(v)
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	c.Site = sc
	// The submit-time rule keeps jobs off GPUs their memory does not fit:
	// the admin's gpu_mem.<type>, a MIG slice's from its name, and
	// slice_min_gpu_mem for jobs that do not say (docs/fractions.md).
	c.Placement.GPUMemory = sc.GPUMemory
	c.Rounds.GPUMemory = sc.GPUMemory
	c.Rounds.SliceMinMemory = c.Placement.SliceMinMemory
	if err := v.Err(); err != nil {
		return c, err
	}
	c.holdServe()
	return c, c.Check()
}

// holdServe has the plugin hold named services' replicas for the serve
// manager, when one runs to release them.
func (c *Config) holdServe() {
	c.Placement.ServeHoldS = 0
	if !c.Serve.Off && !c.RoundsOff {
		c.Placement.ServeHoldS = uint32(c.Serve.Hold / time.Second)
	}
}

// Check rejects combinations no single setting can: run it again after
// flags change the config.
func (c Config) Check() error {
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("replicas = %d: must be 1 to 5", c.Replicas)
	}
	if c.Replicas > 1 && c.NATSURL == "" {
		return fmt.Errorf("replicas = %d needs a NATS cluster (nats_url); the embedded server is a single node", c.Replicas)
	}
	if c.LeaseTTL < time.Second {
		return fmt.Errorf("lease_ttl = %v: must be at least 1s", c.LeaseTTL)
	}
	if err := c.Web.Check(); err != nil {
		return err
	}
	if err := c.Slurm.Check(); err != nil {
		return err
	}
	if !c.Chains.Off && !c.RoundsOff {
		if err := c.Chains.Check(); err != nil {
			return fmt.Errorf("%w (or set chains_off = true)", err)
		}
	}
	if !c.RoundsOff {
		if err := c.FaultTol.Check(); err != nil {
			return err
		}
	}
	if !c.Serve.Off && !c.RoundsOff {
		if err := c.Serve.Check(); err != nil {
			return fmt.Errorf("%w (or set serve_off = true)", err)
		}
	}
	return nil
}

// elected says whether this controller contends for a lease: with an
// external NATS, others may share it; the embedded server is its own.
func (c Config) elected() bool { return c.NATSURL != "" }

// durableDecisions says whether a decision is stored in JetStream before
// the plugin gets it. Whenever a standby may take over (an external NATS),
// a decision the plugin acted on must outlive the leader's process, so
// the reply waits for JetStream's acknowledgement (from a quorum of
// replicas). The embedded server's controller answers first and writes
// in the background (milliseconds later): storing first there put a file
// write on the submit path that, on a loaded 2-core CI machine, overran
// the plugin's 50 ms deadline and failed jobs open. It journals each
// decision to a local file before answering instead (decisions.Journal),
// which a restart replays, so a kill -9 loses nothing it answered.
func (c Config) durableDecisions() bool { return c.NATSURL != "" && !c.AsyncDecisions }

// bus is where the controller's NATS is and how it is secured.
func (c Config) bus() bus.Config {
	b := bus.Config{NATSURL: c.NATSURL, Listen: c.Listen, StateDir: c.StateDir, CredsDir: c.CredsDir,
		TLSCA: c.TLSCA, TLSCert: c.TLSCert, TLSKey: c.TLSKey,
		LeafListen: c.MCLeafListen, LeafRemotes: c.MCLeafRemotes, LinkSecretFile: c.MCLinkSecretFile}
	if c.MC.Name != "" {
		b.MCInbox = wire.SubjectMCReplyPrefix(c.MC.Name)
		if c.MCLeafListen != "" || len(c.MCLeafRemotes) > 0 {
			b.JSDomain = c.MC.Name
		}
	}
	return b
}
