// Command rota-agent is Rota's per-node agent: it samples the node's GPUs
// and jobs, publishes reports to the controller over NATS, and carries out
// checkpoint commands. Flags override the config file, which overrides the
// defaults; see docs/agent.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/agent"
)

func main() {
	err := run(os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp): // -h, --help: the usage was printed
	case err != nil:
		fmt.Fprintln(os.Stderr, "rota-agent:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o, cfg, err := options(args, agent.DefaultConfigFile)
	if err != nil {
		return err
	}
	level, err := zerolog.ParseLevel(o.LogLevel)
	if err != nil {
		return fmt.Errorf("log_level: %w", err)
	}
	zerolog.TimeFieldFormat = time.RFC3339
	log := zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger()
	if old := agent.OldConfig(cfg); old != "" {
		// dpkg keeps an obsolete conffile on upgrade: say its settings
		// no longer count, or they are lost unseen.
		log.Warn().Str("ignored", old).Str("config", cfg).Msg("the YAML config of earlier releases is not read; move its settings into the config file and remove it")
	}

	a, err := agent.New(o, agent.Deps{Log: log})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return a.Run(ctx)
}

// options reads the flags and the config file they name (defaultConfig
// when none; missing, that one is fine) over the defaults, and returns
// them with the config file's path.
func options(args []string, defaultConfig string) (agent.Options, string, error) {
	o := agent.Defaults()
	fs_ := flag.NewFlagSet("rota-agent", flag.ContinueOnError)
	fs_.Usage = func() {
		fmt.Fprintf(fs_.Output(), "rota-agent: Rota's node agent: samples this node's GPUs (NVML) and host, maps their\n"+
			"processes to Slurm jobs, reports measured throughput to the controller and\n"+
			"checkpoints jobs by signal (docs/agent.md). Settings come from the config file\n"+
			"(key = value, default %s) and these flags, which override it.\n\nUsage: rota-agent [flags]\n\n", defaultConfig)
		fs_.PrintDefaults()
	}
	cfg := fs_.String("config", defaultConfig, "config file, key = value (a missing default file is fine)")
	// Flags are parsed into a scratch copy, then applied over the file for
	// the flags actually given.
	f := o
	fs_.StringVar(&f.Node, "node", o.Node, "this node's Slurm name")
	fs_.StringVar(&f.GPUType, "gpu-type", o.GPUType, "this node's Slurm GPU type, e.g. v100")
	fs_.StringVar(&f.Backend, "backend", o.Backend, "GPU backend: nvml, sim or nvml-mock")
	fs_.IntVar(&f.SimGPUs, "sim-gpus", o.SimGPUs, "GPUs the sim and nvml-mock backends pretend to have")
	fs_.StringVar(&f.NATS, "nats", o.NATS, "NATS URL of the controller")
	fs_.StringVar(&f.NATSNkeySeedFile, "nats-nkey-seed", o.NATSNkeySeedFile, "this node's nkey seed file (rota-controller creds add-agent)")
	fs_.StringVar(&f.NATSTLSCA, "nats-tls-ca", o.NATSTLSCA, "CA certificate (PEM) of the NATS server, when it uses TLS")
	fs_.DurationVar(&f.Interval, "interval", o.Interval, "sampling interval")
	fs_.StringVar(&f.MetricsAddr, "metrics-addr", o.MetricsAddr, "address for Prometheus /metrics (\"\" turns it off)")
	fs_.StringVar(&f.ProgressDir, "progress-dir", o.ProgressDir, "directory of <jobid>/progress files")
	fs_.StringVar(&f.ProcRoot, "proc-root", o.ProcRoot, "process table to read (for tests)")
	fs_.StringVar(&f.CheckpointSignal, "checkpoint-signal", o.CheckpointSignal, "default checkpoint signal")
	fs_.StringVar(&f.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	if err := fs_.Parse(args); err != nil {
		return o, "", err
	}
	given := map[string]bool{}
	fs_.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if err := agent.LoadFile(*cfg, &o); err != nil {
		if !(errors.Is(err, fs.ErrNotExist) && !given["config"]) {
			return o, "", err
		}
	}
	for name, apply := range map[string]func(){
		"node": func() { o.Node = f.Node }, "gpu-type": func() { o.GPUType = f.GPUType },
		"backend": func() { o.Backend = f.Backend }, "sim-gpus": func() { o.SimGPUs = f.SimGPUs },
		"nats": func() { o.NATS = f.NATS }, "interval": func() { o.Interval = f.Interval },
		"nats-nkey-seed": func() { o.NATSNkeySeedFile = f.NATSNkeySeedFile }, "nats-tls-ca": func() { o.NATSTLSCA = f.NATSTLSCA },
		"metrics-addr": func() { o.MetricsAddr = f.MetricsAddr }, "progress-dir": func() { o.ProgressDir = f.ProgressDir },
		"proc-root": func() { o.ProcRoot = f.ProcRoot }, "checkpoint-signal": func() { o.CheckpointSignal = f.CheckpointSignal },
		"log-level": func() { o.LogLevel = f.LogLevel },
	} {
		if given[name] {
			apply()
		}
	}
	return o, *cfg, nil
}
