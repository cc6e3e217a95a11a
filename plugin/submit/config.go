// Package submit is the logic of the job_submit/rota plugin, in plain Go so
// tests reach it without cgo or slurmctld: which jobs Rota handles, what it
// asks the controller, and how the answer rewrites the job. The cgo layer in
// plugin/jobsubmit only converts Slurm's structures to Job and back.
package submit

import (
	"fmt"
	"strconv"
	"time"

	"github.com/rota-hpc/rota/internal/conf"
)

// Config is job_submit_rota.conf, found beside slurm.conf. Every key is
// optional; see contrib/job_submit_rota.conf for the annotated file.
type Config struct {
	// Enabled false makes the plugin pass every job through untouched.
	Enabled bool
	// NATSURL is the controller's NATS server (or cluster, comma-separated).
	NATSURL string
	// NATSNkeySeedFile is the plugin's nkey seed from `rota-controller
	// creds init` (plugin.nk, owned by SlurmUser, mode 0600): the identity
	// the controller's server lets publish placement requests and read
	// their replies, and nothing else.
	NATSNkeySeedFile string
	// NATSUser / NATSPasswordFile / NATSCredsFile (a JWT .creds file) are
	// for an external NATS run with its own users or operator.
	NATSUser         string
	NATSPasswordFile string
	NATSCredsFile    string
	// NATSTLSCA is the CA certificate (PEM) that signed the server's
	// certificate, when the controller's NATS uses TLS.
	NATSTLSCA string
	// NATSSync uses the plugin's own synchronous NATS client (plugin/
	// natsync), which does each request on slurmctld's calling thread;
	// false, or TLS, uses nats.go.
	NATSSync bool
	// Placement is "local" (the default: decide on slurmctld's thread
	// from the state the controller pushes, then send the decision to be
	// recorded; nothing waits for the controller) or "remote" (ask the
	// controller for every job, within Deadline).
	Placement string
	// StateMaxAge: in local placement, a state older than this (the
	// controller pushes one every few seconds) means no controller: jobs
	// pass through unchanged.
	StateMaxAge time.Duration
	// DecideAhead: in local placement, decide ahead for submissions
	// identical to one of the last few placed, and let the C shim give
	// them those decisions without entering Go (the shelf, shelf.go).
	DecideAhead bool
	// StatsFile, when set, is where the plugin writes its counters (jobs
	// placed, time per call, from the shelf, passed while the controller
	// was away) once a second while they change, as one key=value line.
	StatsFile string
	// Deadline bounds each placement request: slurmctld holds its job lock
	// while job_submit runs, so this is what a slow controller can cost.
	Deadline time.Duration
	// BreakerFailures consecutive failures open the breaker for
	// BreakerCooldown, during which jobs pass through without asking.
	BreakerFailures int
	BreakerCooldown time.Duration
	// OptOutAccounts are accounts whose jobs Rota never touches.
	OptOutAccounts []string
	// TrustedUIDs are users whose job updates pass through untouched: the
	// controller's own `scontrol update` calls, and Slurm administrators.
	TrustedUIDs []uint32
	// Debug logs every decision at info level in slurmctld's log.
	Debug bool
	// FaultPanicJobName: a job of this name makes the plugin panic inside
	// Go, to show on a live slurmctld that a panic costs the job nothing
	// (it passes unchanged) and slurmctld stays up. For tests; "" (the
	// default) never.
	FaultPanicJobName string
}

// Placement modes.
const (
	PlacementLocal  = "local"
	PlacementRemote = "remote"
)

// DefaultConfig is what an empty or missing file means.
func DefaultConfig() Config {
	return Config{
		Enabled:         true,
		NATSURL:         "nats://127.0.0.1:4222",
		NATSSync:        true,
		Placement:       PlacementLocal,
		StateMaxAge:     30 * time.Second,
		DecideAhead:     true,
		Deadline:        50 * time.Millisecond,
		BreakerFailures: 3,
		BreakerCooldown: 10 * time.Second,
		TrustedUIDs:     []uint32{0},
	}
}

// LoadConfig reads path over the defaults. On error it still returns the
// defaults with Enabled=false, so a broken file passes jobs through.
func LoadConfig(path string) (Config, error) {
	c := DefaultConfig()
	v, err := conf.ReadFile(path)
	if err != nil {
		c.Enabled = false
		return c, err
	}
	var uids []string
	v.Bool("enabled", &c.Enabled)
	v.String("nats_url", &c.NATSURL)
	v.String("nats_user", &c.NATSUser)
	v.String("nats_password_file", &c.NATSPasswordFile)
	v.String("nats_creds_file", &c.NATSCredsFile)
	v.String("nats_nkey_seed_file", &c.NATSNkeySeedFile)
	v.String("nats_tls_ca", &c.NATSTLSCA)
	v.Bool("nats_sync", &c.NATSSync)
	v.String("placement", &c.Placement)
	v.Duration("state_max_age", &c.StateMaxAge, time.Second, time.Hour)
	v.Bool("decide_ahead", &c.DecideAhead)
	v.String("stats_file", &c.StatsFile)
	v.Duration("deadline_ms", &c.Deadline, time.Millisecond, 2*time.Second)
	v.Int("breaker_failures", &c.BreakerFailures, 1, 1000)
	v.Duration("breaker_cooldown", &c.BreakerCooldown, 100*time.Millisecond, time.Hour)
	v.List("opt_out_accounts", &c.OptOutAccounts)
	v.List("trusted_uids", &uids)
	v.Bool("debug", &c.Debug)
	v.String("fault_panic_job_name", &c.FaultPanicJobName)
	if uids != nil {
		c.TrustedUIDs = nil
		for _, s := range uids {
			n, perr := strconv.ParseUint(s, 10, 32)
			if perr != nil {
				c.Enabled = false
				return c, fmt.Errorf("%s: trusted_uids: %q is not a uid", path, s)
			}
			c.TrustedUIDs = append(c.TrustedUIDs, uint32(n))
		}
	}
	if err := v.Err(); err != nil {
		c.Enabled = false
		return c, err
	}
	if c.Placement != PlacementLocal && c.Placement != PlacementRemote {
		c.Enabled = false
		return c, fmt.Errorf("%s: placement = %q: want %s or %s", path, c.Placement, PlacementLocal, PlacementRemote)
	}
	n := 0
	for _, set := range []bool{c.NATSNkeySeedFile != "", c.NATSCredsFile != "", c.NATSUser != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		c.Enabled = false
		return c, fmt.Errorf("%s: nats_nkey_seed_file, nats_creds_file and nats_user are alternatives; set one", path)
	}
	return c, nil
}
