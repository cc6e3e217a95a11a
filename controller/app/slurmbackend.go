package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/conf"
)

// SlurmConfig says how the controller reads and changes Slurm
// (docs/rounds.md, "Reading Slurm: command line or slurmrestd").
type SlurmConfig struct {
	// Backend is "cli" (squeue, sinfo, scontrol; the default) or "restd"
	// (slurmrestd, with the CLI for what it cannot do).
	Backend string
	// RestdURL is slurmrestd's address (http://host:port or unix:/path).
	RestdURL string
	// RestdUser is the user the token is for (X-SLURM-USER-NAME): one
	// allowed to change others' jobs (root, SlurmUser or a Slurm admin).
	RestdUser string
	// RestdJWTKey is slurm.conf's jwt_key: the controller signs its own
	// tokens with it. RestdTokenFile instead names a file someone else
	// keeps a token in (`scontrol token`). One of the two.
	RestdJWTKey, RestdTokenFile string
	// RestdTokenLifetime is how long each signed token lives.
	RestdTokenLifetime time.Duration
	// RestdVersion forces an API version ("" negotiates).
	RestdVersion string
	// RestdTimeout bounds each request.
	RestdTimeout time.Duration
	// RestdQueueRead is how the whole queue is read with the restd
	// backend: "restd" (default) or "squeue".
	RestdQueueRead string
}

func loadSlurmBackend(v *conf.Values, c *Config) {
	v.String("slurm_backend", &c.Slurm.Backend)
	v.String("slurmrestd_url", &c.Slurm.RestdURL)
	v.String("slurmrestd_user", &c.Slurm.RestdUser)
	v.String("slurmrestd_jwt_key", &c.Slurm.RestdJWTKey)
	v.String("slurmrestd_token_file", &c.Slurm.RestdTokenFile)
	v.Duration("slurmrestd_token_lifetime", &c.Slurm.RestdTokenLifetime, time.Minute, 7*24*time.Hour)
	v.String("slurmrestd_version", &c.Slurm.RestdVersion)
	v.Duration("slurmrestd_timeout", &c.Slurm.RestdTimeout, time.Second, 10*time.Minute)
	v.String("slurmrestd_queue_read", &c.Slurm.RestdQueueRead)
}

// Check rejects a backend that cannot work.
func (s SlurmConfig) Check() error {
	switch s.Backend {
	case "", "cli":
		return nil
	case "restd":
	default:
		return fmt.Errorf("slurm_backend = %q: want cli or restd", s.Backend)
	}
	if s.RestdURL == "" {
		return fmt.Errorf("slurm_backend = restd needs slurmrestd_url (http://host:port or unix:/path/to/socket)")
	}
	if !strings.HasPrefix(s.RestdURL, "http://") && !strings.HasPrefix(s.RestdURL, "https://") && !strings.HasPrefix(s.RestdURL, "unix:") {
		return fmt.Errorf("slurmrestd_url = %q: want http://host:port, https://host:port or unix:/path/to/socket", s.RestdURL)
	}
	if (s.RestdJWTKey == "") == (s.RestdTokenFile == "") {
		return fmt.Errorf("slurm_backend = restd needs exactly one of slurmrestd_jwt_key (slurm.conf's jwt_key: the controller signs its tokens) and slurmrestd_token_file (a token from scontrol token)")
	}
	switch s.RestdQueueRead {
	case "", "restd", "squeue":
	default:
		return fmt.Errorf("slurmrestd_queue_read = %q: want restd or squeue", s.RestdQueueRead)
	}
	if s.RestdVersion != "" {
		ok := false
		for _, v := range slurm.SupportedAPIVersions {
			ok = ok || v == s.RestdVersion
		}
		if !ok {
			return fmt.Errorf("slurmrestd_version = %q: want one of %s, or nothing to negotiate", s.RestdVersion, strings.Join(slurm.SupportedAPIVersions, ", "))
		}
	}
	return nil
}

// newSlurm builds the Slurm client the config names.
func newSlurm(s SlurmConfig, log zerolog.Logger) slurm.Backend {
	if s.Backend != "restd" {
		// The round loop, the chain, fault-tolerance and service managers
		// and the refresh each read Slurm on their own tick; ticks of one
		// period start together, so they share one read (a write in
		// between makes the next read fresh).
		return &slurm.CLI{ShareReads: time.Second}
	}
	var tok slurm.TokenSource
	if s.RestdJWTKey != "" {
		tok = &slurm.KeyTokens{KeyFile: s.RestdJWTKey, Lifetime: s.RestdTokenLifetime}
	} else {
		tok = &slurm.FileTokens{Path: s.RestdTokenFile}
	}
	user := s.RestdUser
	if user == "" {
		user = "root"
	}
	log.Info().Str("url", s.RestdURL).Str("user", user).
		Msg("reading and changing Slurm through slurmrestd (slurm_backend = restd); requeues and priority hand-backs still run scontrol")
	return &slurm.Restd{CLI: &slurm.CLI{}, URL: s.RestdURL, User: user, Token: tok, Version: s.RestdVersion,
		Timeout: s.RestdTimeout, QueueBySqueue: s.RestdQueueRead == "squeue",
		Log: log.With().Str("component", "slurmrestd").Logger()}
}

// checkRestd negotiates slurmrestd's API version at start. No version in
// common stops the controller (a configuration to fix); slurmrestd not
// answering yet is logged, and every read tries again.
func (c *Controller) checkRestd(ctx context.Context) error {
	r, ok := c.slurm.(*slurm.Restd)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := r.APIVersion(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, slurm.ErrNoCommonAPIVersion):
		return err
	default:
		c.log.Error().Err(err).Str("url", r.URL).
			Msg("slurmrestd does not answer; the controller will keep trying at each read of Slurm (is slurmrestd running, and slurmrestd_url right?)")
		return nil
	}
}
