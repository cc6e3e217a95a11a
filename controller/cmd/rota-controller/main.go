// Command rota-controller runs Rota's controller: see controller/app.
// This file only reads flags and config and turns signals into a
// cancelled context; `rota-controller creds ...` (creds.go) manages the
// NATS credentials.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/app"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "creds" {
		os.Exit(runCreds(os.Args[2:], os.Stdout, os.Stderr))
	}
	fs := flag.NewFlagSet("rota-controller", flag.ExitOnError)
	configPath := fs.String("config", "", "config file (key = value); default: /etc/rota/controller.conf when it exists")
	natsURL := fs.String("nats", "", "external NATS server or cluster URLs, comma-separated; controllers sharing it elect a leader (default: run an embedded server)")
	replicas := fs.Int("replicas", 0, "JetStream replicas of the controller's buckets: 1 embedded, 3 on a 3-node cluster (default 1)")
	leaseTTL := fs.Duration("lease-ttl", 0, "with --nats: a standby takes over this long after the leader dies (default 5s)")
	listen := fs.String("listen", "", "embedded NATS server address (default 127.0.0.1:4222)")
	stateDir := fs.String("state-dir", "", "state directory (default /var/lib/rota)")
	credsDir := fs.String("creds-dir", "", "NATS credentials directory (see 'rota-controller creds'); default: none, an open server on loopback")
	refresh := fs.Duration("refresh", 0, "how often to re-read the cluster from Slurm (default 1m)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (default info)")
	pidFile := fs.String("pid-file", "", "write the process id here")
	fs.Parse(os.Args[1:])

	path := *configPath
	if path == "" {
		if _, err := os.Stat("/etc/rota/controller.conf"); err == nil {
			path = "/etc/rota/controller.conf"
		}
	}
	cfg, err := app.LoadConfig(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-controller: %v\n", err)
		os.Exit(2)
	}
	// Flags override the file.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["nats"] {
		cfg.NATSURL = *natsURL
	}
	if set["replicas"] {
		cfg.Replicas = *replicas
	}
	if set["lease-ttl"] {
		cfg.LeaseTTL = *leaseTTL
	}
	if set["listen"] {
		cfg.Listen = *listen
	}
	if set["creds-dir"] {
		cfg.CredsDir = *credsDir
	}
	if set["state-dir"] {
		cfg.StateDir = *stateDir
	}
	if set["refresh"] {
		cfg.Refresh = *refresh
	}
	if set["log-level"] {
		cfg.LogLevel = *logLevel
	}
	if err := cfg.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "rota-controller: %v\n", err)
		os.Exit(2)
	}
	lvl, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-controller: log level %q: %v\n", cfg.LogLevel, err)
		os.Exit(2)
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	log := zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Str("service", "rota-controller").Logger()

	if *pidFile != "" {
		if err := os.WriteFile(*pidFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o644); err != nil {
			log.Fatal().Err(err).Msg("cannot write pid file")
		}
		defer os.Remove(*pidFile)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, app.Options{Config: cfg, Log: log}); err != nil {
		log.Error().Err(err).Msg("controller failed")
		os.Exit(1)
	}
}
