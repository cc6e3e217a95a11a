// Command rota-loadgen measures a controller under a site's load: N node
// agents x 8 GPUs reporting every interval, plus a stream of placement
// requests. It is a benchmark, apart from the user's rota CLI so that rota
// does not link the controller it starts (docs/operations.md, "The load
// generator").
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rota-hpc/rota/controller/loadgen"
	"github.com/rota-hpc/rota/internal/buildinfo"
)

const loadgenHelp = `rota-loadgen plays N node agents x 8 GPUs reporting every interval, plus a
stream of placement requests, and measures the controller: ingest rate,
drops, CPU and memory, placement latency. The last line, for scripts:

  ingest_msgs_per_s=<x> placement_p99_ms=<y> dropped=<n>

Where the controller runs:
  (default)        a controller child process started here, whose Slurm is
                   the simulated fleet; its CPU and memory are measured
  --in-process     the same controller inside this process (figures then
                   include the generator)
  --nats URL       a running controller (give --controller-pid to measure it)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs one command line and returns the exit status: 0, 1 for a
// failure, 2 for a mistake in how the command was called.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprintf(stderr, "rota-loadgen: %s\nRun 'rota-loadgen --help' for usage.\n", u.msg)
		return 2
	}
	fmt.Fprintf(stderr, "rota-loadgen: %v\n", err)
	return 1
}

// usageError marks a mistake in how the command was called (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func newCmd() *cobra.Command {
	var o loadgen.Options
	var natsURL, logLevel string
	var inProcess, serve bool
	cmd := &cobra.Command{
		Use:     "rota-loadgen [flags]",
		Short:   "play N agents and a stream of placements against a controller; measure it",
		Long:    loadgenHelp,
		Example: "  rota-loadgen --nodes 1000 --duration 20s\n  rota-loadgen --nats nats://127.0.0.1:4222 --controller-pid $(pidof rota-controller)",
		Version: buildinfo.Version,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Sprintf("unexpected argument %q", args[0])}
			}
			return nil
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	fs := cmd.Flags()
	fs.IntVar(&o.Fleet.Nodes, "nodes", 5000, "simulated nodes (agents)")
	fs.IntVar(&o.Fleet.GPUsPerNode, "gpus-per-node", 8, "GPUs per node")
	fs.IntVar(&o.Fleet.JobsPerNode, "jobs-per-node", 2, "jobs per node (each reports on its own subject too)")
	fs.DurationVar(&o.Fleet.Interval, "interval", time.Second, "agent report interval")
	fs.IntVar(&o.Conns, "conns", 4, "NATS connections the simulated agents share")
	fs.Float64Var(&o.PlaceRate, "place-rate", 50, "placement requests per second (0: none)")
	fs.DurationVar(&o.Warmup, "warmup", 5*time.Second, "load before measuring")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "how long to measure")
	fs.StringVar(&natsURL, "nats", "", "a running controller's NATS URL; default: start one (see above)")
	fs.IntVar(&o.ControllerPID, "controller-pid", 0, "with --nats: the controller's pid, to measure its CPU and memory")
	fs.BoolVar(&inProcess, "in-process", false, "run the controller in this process")
	fs.BoolVar(&serve, "serve-controller", false, "internal: run the controller for a parent loadgen and print its URL")
	_ = fs.MarkHidden("serve-controller")
	fs.StringVar(&logLevel, "log-level", "warn", "controller log level when started here")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runLoadgen(cmd.Context(), o, natsURL, logLevel, inProcess, serve, changedFlags(fs), cmd.OutOrStdout())
	}
	return cmd
}

// changedFlags are the flags given, as --name=value in their current
// spelling, to pass on to a child process.
func changedFlags(fs *pflag.FlagSet) []string {
	var args []string
	fs.Visit(func(f *pflag.Flag) {
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return args
}

func runLoadgen(ctx context.Context, o loadgen.Options, natsURL, logLevel string, inProcess, serve bool, args []string, stdout io.Writer) error {
	if o.Fleet.Nodes < 1 || o.Fleet.GPUsPerNode < 1 || o.Duration <= 0 || o.PlaceRate < 0 {
		return usageError{"--nodes and --gpus-per-node must be positive, --duration too, --place-rate not negative"}
	}
	lvl, err := zerolog.ParseLevel(logLevel)
	if err != nil {
		return usageError{err.Error()}
	}
	log := zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Str("service", "rota-controller").Logger()

	if serve {
		return serveController(ctx, o.Fleet, log, stdout)
	}
	switch {
	case natsURL != "":
		o.NATSURL = natsURL
	case inProcess:
		dir, err := os.MkdirTemp("", "rota-loadgen-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		url, stop, err := loadgen.StartController(ctx, o.Fleet, dir, log)
		if err != nil {
			return err
		}
		defer stop()
		o.NATSURL, o.ControllerPID, o.InProcess = url, os.Getpid(), true
	default:
		url, pid, stop, err := spawnController(ctx, args)
		if err != nil {
			return err
		}
		defer stop()
		o.NATSURL, o.ControllerPID = url, pid
	}
	where := "controller at " + o.NATSURL
	if o.ControllerPID > 0 && !o.InProcess {
		where += fmt.Sprintf(" (pid %d)", o.ControllerPID)
	} else if o.InProcess {
		where += " (in this process)"
	}
	fmt.Fprintf(stdout, "loadgen: %d nodes x %d GPUs every %v, %d jobs per node, %.0f placements/s; %v warm-up, %v measured; %s\n",
		o.Fleet.Nodes, o.Fleet.GPUsPerNode, o.Fleet.Interval, o.Fleet.JobsPerNode, o.PlaceRate, o.Warmup, o.Duration, where)
	o.Log = log
	res, err := loadgen.Run(ctx, o)
	if err != nil {
		return err
	}
	res.Print(stdout)
	return nil
}

// serveController is the child side of the default mode: a controller on
// a random port, its URL on stdout, until the parent stops it.
func serveController(ctx context.Context, fleet loadgen.FleetConfig, log zerolog.Logger, stdout io.Writer) error {
	dir, err := os.MkdirTemp("", "rota-loadgen-controller-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url, stop, err := loadgen.StartController(ctx, fleet, dir, log)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, url)
	<-ctx.Done()
	return stop()
}

// spawnController starts `rota-loadgen --serve-controller` with the same
// fleet flags, so the controller is its own process and its CPU and
// memory are its own, and waits for its URL.
func spawnController(ctx context.Context, args []string) (url string, pid int, stop func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(exe, append([]string{"--serve-controller"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, fmt.Errorf("starting the controller: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "nats://") {
			stop()
			return "", 0, nil, fmt.Errorf("the controller did not start (said %q)", l)
		}
		return l, cmd.Process.Pid, stop, nil
	case <-ctx.Done():
		stop()
		return "", 0, nil, ctx.Err()
	case <-time.After(60 * time.Second):
		stop()
		return "", 0, nil, errors.New("the controller did not start in 60 s")
	}
}
