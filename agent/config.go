package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rota-hpc/rota/agent/checkpoint"
)

// Options is everything the agent is told. Precedence, in one place:
// command-line flags, then the config file, then Defaults().
type Options struct {
	// Node is the Slurm node name (default: the host name).
	Node string `yaml:"node"`
	// GPUType is the node's Slurm GPU type, e.g. "v100".
	GPUType string `yaml:"gpu_type"`
	// Backend is "nvml" (real GPUs), "sim" (synthetic GPUs following the
	// jobs' progress), or "nvml-mock" (go-nvml's mock, for benchmarks).
	Backend string `yaml:"backend"`
	// SimGPUs is how many GPUs "sim" and "nvml-mock" pretend to have.
	SimGPUs int `yaml:"sim_gpus"`
	// NATS is the controller's NATS URL.
	NATS string `yaml:"nats_url"`
	// NATSNkeySeedFile is this node's nkey seed from `rota-controller
	// creds add-agent <node>` (mode 0600); "" connects without
	// credentials (a controller without creds_dir).
	NATSNkeySeedFile string `yaml:"nats_nkey_seed_file"`
	// NATSTLSCA is the CA (PEM) of the server's certificate when NATS
	// uses TLS.
	NATSTLSCA string `yaml:"nats_tls_ca"`
	// Interval between samples.
	Interval time.Duration `yaml:"interval"`
	// MetricsAddr serves Prometheus /metrics; "" turns it off.
	MetricsAddr string `yaml:"metrics_addr"`
	// ProgressDir holds <jobid>/progress files (the SPANK plugin's
	// ROTA_PROGRESS_FILE points there).
	ProgressDir string `yaml:"progress_dir"`
	// ProcRoot is the process table ("/proc"; a fixture in tests).
	ProcRoot string `yaml:"proc_root"`
	// CheckpointSignal is the default checkpoint signal (USR1).
	CheckpointSignal string `yaml:"checkpoint_signal"`
	// Backlog is how many reports are kept while NATS is unreachable.
	Backlog int `yaml:"backlog"`
	// JobNodeFromEnviron attributes progress files to this node only when
	// a process of the job here has SLURMD_NODENAME=<node> in its
	// environment. For clusters without cgroup process tracking where one
	// progress directory serves several nodes (the dev cluster).
	JobNodeFromEnviron bool `yaml:"job_node_from_environ"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
}

// Defaults are the values used where neither flag nor file says.
func Defaults() Options {
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	return Options{
		Node:             host,
		Backend:          "nvml",
		SimGPUs:          4,
		NATS:             "nats://127.0.0.1:4222",
		Interval:         5 * time.Second,
		MetricsAddr:      ":9410",
		ProgressDir:      "/run/rota/progress",
		ProcRoot:         "/proc",
		CheckpointSignal: "USR1",
		Backlog:          1024,
		LogLevel:         "warn",
	}
}

// LoadFile overlays the YAML file at path on o. Unknown keys are errors,
// so a misspelt option is caught at start, not ignored.
func LoadFile(path string, o *Options) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading the config file: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(o); err != nil && !errors.Is(err, io.EOF) { // EOF: empty file
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// Validate checks the options together, reporting every mistake at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Node == "" {
		errs = append(errs, errors.New("node: empty; set --node to this node's Slurm name"))
	}
	switch o.Backend {
	case "nvml", "sim", "nvml-mock":
	default:
		errs = append(errs, fmt.Errorf("backend: %q; want nvml, sim or nvml-mock", o.Backend))
	}
	if (o.Backend == "sim" || o.Backend == "nvml-mock") && (o.SimGPUs < 1 || o.SimGPUs > 8 && o.Backend == "nvml-mock" || o.SimGPUs > 64) {
		errs = append(errs, fmt.Errorf("sim_gpus: %d; want 1-64 (1-8 for nvml-mock)", o.SimGPUs))
	}
	if o.Backend == "sim" && o.GPUType == "" {
		errs = append(errs, errors.New("gpu_type: empty; the sim backend needs the node's GPU type (--gpu-type v100)"))
	}
	if o.Interval < 100*time.Millisecond || o.Interval > time.Hour {
		errs = append(errs, fmt.Errorf("interval: %v; want between 100ms and 1h", o.Interval))
	}
	if o.NATS == "" {
		errs = append(errs, errors.New("nats_url: empty"))
	}
	if o.ProgressDir == "" {
		errs = append(errs, errors.New("progress_dir: empty"))
	}
	if _, err := checkpoint.ParseSignal(o.CheckpointSignal); err != nil {
		errs = append(errs, fmt.Errorf("checkpoint_signal: %w", err))
	}
	switch o.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level: %q; want debug, info, warn or error", o.LogLevel))
	}
	return errors.Join(errs...)
}
