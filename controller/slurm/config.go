package slurm

import (
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/conf"
)

// Config says how the controller reads and changes Slurm
// (docs/rounds.md, "Reading Slurm: command line or slurmrestd").
type Config struct {
	// Backend is "cli" (squeue, sinfo, scontrol; the default) or "restd"
	// (slurmrestd, with the CLI for what it cannot do).
	Backend string
	// RestdURL is slurmrestd's address (http://host:port or unix:/path).
	RestdURL string
	// RestdUser is the user the token is for (X-SLURM-USER-NAME): one
	// allowed to change others' jobs (root, SlurmUser or a Slurm admin).
	RestdUser string
	// RestdJWTKey is conf's jwt_key: the controller signs its own
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

// Read reads the backend's keys over s (slurm_backend, slurmrestd_*).
func (s *Config) Read(v *conf.Values) {
	v.String("slurm_backend", &s.Backend)
	v.String("slurmrestd_url", &s.RestdURL)
	v.String("slurmrestd_user", &s.RestdUser)
	v.String("slurmrestd_jwt_key", &s.RestdJWTKey)
	v.String("slurmrestd_token_file", &s.RestdTokenFile)
	v.Duration("slurmrestd_token_lifetime", &s.RestdTokenLifetime, time.Minute, 7*24*time.Hour)
	v.String("slurmrestd_version", &s.RestdVersion)
	v.Duration("slurmrestd_timeout", &s.RestdTimeout, time.Second, 10*time.Minute)
	v.String("slurmrestd_queue_read", &s.RestdQueueRead)
}

// Check rejects a backend that cannot work.
func (s Config) Check() error {
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
		return fmt.Errorf("slurm_backend = restd needs exactly one of slurmrestd_jwt_key (conf's jwt_key: the controller signs its tokens) and slurmrestd_token_file (a token from scontrol token)")
	}
	switch s.RestdQueueRead {
	case "", "restd", "squeue":
	default:
		return fmt.Errorf("slurmrestd_queue_read = %q: want restd or squeue", s.RestdQueueRead)
	}
	if s.RestdVersion != "" {
		ok := false
		for _, v := range SupportedAPIVersions {
			ok = ok || v == s.RestdVersion
		}
		if !ok {
			return fmt.Errorf("slurmrestd_version = %q: want one of %s, or nothing to negotiate", s.RestdVersion, strings.Join(SupportedAPIVersions, ", "))
		}
	}
	return nil
}

// New builds the Slurm client the config names.
func New(s Config, log zerolog.Logger) Backend {
	if s.Backend != "restd" {
		// The round loop, the chain, fault-tolerance and service managers
		// and the refresh each read Slurm on their own tick; ticks of one
		// period start together, so they share one read (a write in
		// between makes the next read fresh).
		return &CLI{ShareReads: time.Second}
	}
	var tok TokenSource
	if s.RestdJWTKey != "" {
		tok = &KeyTokens{KeyFile: s.RestdJWTKey, Lifetime: s.RestdTokenLifetime}
	} else {
		tok = &FileTokens{Path: s.RestdTokenFile}
	}
	user := s.RestdUser
	if user == "" {
		user = "root"
	}
	log.Info().Str("url", s.RestdURL).Str("user", user).
		Msg("reading and changing Slurm through slurmrestd (slurm_backend = restd); requeues and priority hand-backs still run scontrol")
	return &Restd{CLI: &CLI{}, URL: s.RestdURL, User: user, Token: tok, Version: s.RestdVersion,
		Timeout: s.RestdTimeout, QueueBySqueue: s.RestdQueueRead == "squeue",
		Log: log.With().Str("component", "slurmrestd").Logger()}
}
