package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rota-hpc/rota/agent/checkpoint"
	"github.com/rota-hpc/rota/internal/conf"
)

// DefaultConfigFile is where the packages put the agent's settings.
const DefaultConfigFile = "/etc/rota/agent.conf"

// Options is everything the agent is told. Precedence, in one place:
// command-line flags, then the config file, then Defaults().
type Options struct {
	// Node is the Slurm node name (default: the host name).
	Node string
	// GPUType is the node's Slurm GPU type, e.g. "v100".
	GPUType string
	// Backend is "nvml" (real GPUs), "sim" (synthetic GPUs following the
	// jobs' progress), or "nvml-mock" (go-nvml's mock, for benchmarks).
	Backend string
	// SimGPUs is how many GPUs "sim" and "nvml-mock" pretend to have.
	SimGPUs int
	// NATS is the controller's NATS URL.
	NATS string
	// NATSNkeySeedFile is this node's nkey seed from `rota-controller
	// creds add-agent <node>` (mode 0600); "" connects without
	// credentials (a controller without creds_dir).
	NATSNkeySeedFile string
	// NATSTLSCA is the CA (PEM) of the server's certificate when NATS
	// uses TLS.
	NATSTLSCA string
	// Interval between samples.
	Interval time.Duration
	// MetricsAddr serves Prometheus /metrics; "" turns it off.
	MetricsAddr string
	// ProgressDir holds <jobid>/progress files (the SPANK plugin's
	// ROTA_PROGRESS_FILE points there).
	ProgressDir string
	// ProcRoot is the process table ("/proc"; a fixture in tests).
	ProcRoot string
	// CheckpointSignal is the default checkpoint signal (USR1).
	CheckpointSignal string
	// Backlog is how many reports are kept while NATS is unreachable.
	Backlog int
	// JobNodeFromEnviron attributes progress files to this node only when
	// a process of the job here has SLURMD_NODENAME=<node> in its
	// environment. For clusters without cgroup process tracking where one
	// progress directory serves several nodes (the dev cluster).
	JobNodeFromEnviron bool
	// LogLevel is debug, info, warn or error.
	LogLevel string
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

// LoadFile overlays the file at path (key = value, as controller.conf) on
// o. A missing file is an error wrapping fs.ErrNotExist, which the caller
// may forgive, except when the YAML file of earlier releases sits beside
// it: then it is an error of its own, saying how to convert that file.
func LoadFile(path string, o *Options) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if old := OldConfig(path); old != "" {
			return fmt.Errorf(`%s does not exist but %s does: rota-agent reads key = value lines now, not YAML; `+
				`write its settings into %s, one line per key, without quotes `+
				`(node: gpu01 becomes node = gpu01, metrics_addr: ":9410" becomes metrics_addr = :9410); see docs/agent.md`,
				path, old, path)
		}
	}
	if err != nil {
		return fmt.Errorf("reading the config file: %w", err)
	}
	defer f.Close()
	err = Parse(f, path, o)
	if err != nil && isYAMLName(path) {
		// An old unit or script still naming the YAML file.
		err = fmt.Errorf("%w\n%s: rota-agent reads key = value lines now, not YAML; see docs/agent.md", err, path)
	}
	return err
}

// OldConfig is the YAML file of earlier releases beside path (agent.yaml
// for agent.conf) when it exists, else "".
func OldConfig(path string) string {
	if filepath.Ext(path) != ".conf" {
		return ""
	}
	old := strings.TrimSuffix(path, ".conf") + ".yaml"
	if _, err := os.Stat(old); err != nil {
		return ""
	}
	return old
}

func isYAMLName(path string) bool {
	ext := filepath.Ext(path)
	return ext == ".yaml" || ext == ".yml"
}

// Parse overlays the key = value lines of r on o; name labels the errors.
// Unknown keys and bad values are errors, all reported at once with their
// line numbers, so a typo stops the agent at start instead of being
// ignored. On error o is left as it was.
func Parse(r io.Reader, name string, o *Options) error {
	v, syntaxErr := conf.Parse(r, name)
	c := *o
	v.String("node", &c.Node)
	v.String("gpu_type", &c.GPUType)
	v.String("backend", &c.Backend)
	v.Int("sim_gpus", &c.SimGPUs, 1, 64)
	v.String("nats_url", &c.NATS)
	v.String("nats_nkey_seed_file", &c.NATSNkeySeedFile)
	v.String("nats_tls_ca", &c.NATSTLSCA)
	v.Duration("interval", &c.Interval, 100*time.Millisecond, time.Hour)
	v.String("metrics_addr", &c.MetricsAddr)
	v.String("progress_dir", &c.ProgressDir)
	v.String("proc_root", &c.ProcRoot)
	v.String("checkpoint_signal", &c.CheckpointSignal)
	v.Int("backlog", &c.Backlog, 1, 1<<20)
	v.Bool("job_node_from_environ", &c.JobNodeFromEnviron)
	v.String("log_level", &c.LogLevel)
	// Syntax and values together: one start shows every mistake.
	if err := errors.Join(syntaxErr, v.Err()); err != nil {
		return err
	}
	*o = c
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
