package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rota-hpc/rota/agent/checkpoint"
	"github.com/rota-hpc/rota/agent/progress"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

type trainConfig struct {
	model         string
	steps         uint64
	throughputs   string
	derive        map[string]workload.Derivation // --derive-type
	timeScale     float64
	sharingFactor float64 // --sharing-factor
	sharing       bool    // it runs on shards of a GPU ($SLURM_SHARDS_ON_NODE)
	shareDir      string  // --share-dir: where the GPU's sharers find each other (share.go)
	pairTable     string  // --pair-throughputs: Gavel's table with its pairs
	gpus          string  // $CUDA_VISIBLE_DEVICES: which of the node's GPUs
	ckptDir       string
	logPath       string
	gpuType       string
	job           string
	node          string
	restart       int
	ckptSignal    syscall.Signal
	keepSignal    syscall.Signal // 0: none
	ckptEvery     uint64
	ckptCost      time.Duration
	progressFile  string
	progressEvery time.Duration
	tick          time.Duration
}

// jobKeyRE keeps the job key usable as a file name (no path separators).
var jobKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func parseTrainFlags(args []string) (trainConfig, error) {
	c := trainConfig{
		job:          jobKey(),
		node:         os.Getenv("SLURMD_NODENAME"),
		progressFile: os.Getenv("ROTA_PROGRESS_FILE"),
		sharing:      os.Getenv("SLURM_SHARDS_ON_NODE") != "",
		gpus:         os.Getenv("CUDA_VISIBLE_DEVICES"),
	}
	fs := flag.NewFlagSet("rota-synthtrain", flag.ContinueOnError)
	fs.StringVar(&c.model, "model", "", "job type as in Gavel's table, e.g. 'ResNet-18 (batch size 64)' (required)")
	fs.Uint64Var(&c.steps, "steps", 0, "total training steps (required)")
	fs.StringVar(&c.throughputs, "throughputs", "../shared/data/gavel/simulation_throughputs.json", "Gavel's simulation_throughputs.json")
	var derive []string
	fs.Func("derive-type", "a GPU type the table never measured, as TYPE=FROM*FACTOR (a100=v100*2; repeat); a MIG slice (a100_3g.20gb) runs at its whole GPU's rate times its share of the compute", func(v string) error {
		derive = append(derive, v)
		return nil
	})
	fs.Float64Var(&c.timeScale, "time-scale", 1, "multiplies Gavel's steps/s, so a job lasts seconds to minutes")
	fs.Float64Var(&c.sharingFactor, "sharing-factor", 1, "multiplies its steps/s while it runs on shards of a GPU ($SLURM_SHARDS_ON_NODE set): a pair that slows each other more than the table says")
	fs.StringVar(&c.shareDir, "share-dir", "", "on shards of a GPU, train at the speed Gavel's table measured beside the models of the GPU's other sharers, found in this directory (every job of the workload given the same one; shared file system), and at full speed alone")
	fs.StringVar(&c.pairTable, "pair-throughputs", "", "Gavel's table with its pairs, for --share-dir (default --throughputs)")
	fs.StringVar(&c.ckptDir, "ckpt-dir", envOr("ROTA_SYNTHTRAIN_CKPT_DIR", "synthtrain-ckpt"), "directory of checkpoints, one file <job>.ckpt per job; must survive the requeue (shared file system)")
	fs.StringVar(&c.logPath, "log", "", "append JSON-line events to this file (default: standard output)")
	fs.StringVar(&c.gpuType, "gpu-type", "", "GPU type to run as (default: the type Slurm allocated, from scontrol)")
	fs.StringVar(&c.job, "job", c.job, "job key naming the checkpoint (default $ROTA_CHAIN_ID, which every segment of a Rota chain shares, else $SLURM_JOB_ID, which a requeue keeps)")
	sigName := envOr(checkpoint.EnvSignal, "USR1")
	fs.StringVar(&sigName, "signal", sigName, "checkpoint signal (default $"+checkpoint.EnvSignal+", which sbatch --rota-checkpoint-signal sets, else USR1)")
	keepName := os.Getenv(checkpoint.EnvPeriodicSignal)
	fs.StringVar(&keepName, "periodic-signal", keepName, "signal to checkpoint on and keep training (Rota's periodic checkpoints; default $"+checkpoint.EnvPeriodicSignal+", else none)")
	fs.Uint64Var(&c.ckptEvery, "ckpt-every", 0, "also checkpoint every this many steps (0: only on the signal)")
	fs.DurationVar(&c.ckptCost, "ckpt-cost", 0, "how long a checkpoint takes: training pauses this long before it is saved (a real job's write time)")
	fs.DurationVar(&c.progressEvery, "progress-every", 500*time.Millisecond, "how often to rewrite $ROTA_PROGRESS_FILE")
	fs.DurationVar(&c.tick, "tick", 50*time.Millisecond, "stepping granularity (steps advance by elapsed time x rate)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.pairTable == "" {
		c.pairTable = c.throughputs
	}
	var err error
	if c.derive, err = workload.ParseDerivations(derive); err != nil {
		return c, err
	}
	if c.ckptSignal, err = checkpoint.ParseSignal(sigName); err != nil {
		return c, fmt.Errorf("--signal: %w", err)
	}
	if keepName != "" {
		if c.keepSignal, err = checkpoint.ParseSignal(keepName); err != nil {
			return c, fmt.Errorf("--periodic-signal: %w", err)
		}
		if c.keepSignal == c.ckptSignal {
			return c, fmt.Errorf("--periodic-signal %s is the checkpoint signal, on which the job exits", keepName)
		}
	}
	if rc := os.Getenv("SLURM_RESTART_COUNT"); rc != "" {
		if c.restart, err = strconv.Atoi(rc); err != nil || c.restart < 0 {
			return c, fmt.Errorf("SLURM_RESTART_COUNT=%q is not a count", rc)
		}
	}
	switch {
	case c.model == "":
		return c, errors.New("--model is required")
	case c.steps == 0:
		return c, errors.New("--steps must be > 0")
	case !(c.timeScale > 0) || math.IsInf(c.timeScale, 0):
		return c, fmt.Errorf("--time-scale %v must be > 0", c.timeScale)
	case !(c.sharingFactor > 0) || c.sharingFactor > 1:
		return c, fmt.Errorf("--sharing-factor %v must be in (0, 1]", c.sharingFactor)
	case c.job == "":
		return c, errors.New("no job key: not in a Slurm job (SLURM_JOB_ID unset) and no --job")
	case !jobKeyRE.MatchString(c.job):
		return c, fmt.Errorf("job key %q must be letters, digits, '_', '.', '-'", c.job)
	case c.progressEvery <= 0 || c.tick <= 0:
		return c, errors.New("--progress-every and --tick must be > 0")
	case c.ckptCost < 0:
		return c, errors.New("--ckpt-cost must be >= 0")
	}
	return c, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// stepRate is steps/s for model on gpuType: Gavel's isolated throughput at
// scale factor 1 times timeScale; a type the table lacks is derived
// (workload.LoadDerived: derive, or a MIG slice from its whole GPU), and
// basis says how ("" measured).
func stepRate(table, gpuType, model string, timeScale float64, derive map[string]workload.Derivation) (rate float64, basis string, err error) {
	t, err := workload.LoadDerived(table, []string{gpuType}, derive)
	if err != nil {
		return 0, "", fmt.Errorf("throughputs: %w", err)
	}
	r := t.Rates(model, 1)
	if r == nil {
		return 0, "", fmt.Errorf("throughputs %s: no job type %q at scale factor 1 (known: %s)", table, model, strings.Join(t.JobTypes, "; "))
	}
	if !(r[0] > 0) {
		return 0, "", fmt.Errorf("throughputs %s: %q cannot run on %s (throughput %v)", table, model, gpuType, r[0])
	}
	return r[0] * timeScale, t.Derived[gpuType], nil
}

// trainer is one attempt of a job: from its checkpoint (or 0) to the end,
// a checkpoint signal, or a stop signal.
type trainer struct {
	c        trainConfig
	log      *eventLog
	rate     float64
	solo     float64    // its rate without the GPU's other sharers
	co       *coRunners // on shards with --share-dir; else nil
	resumed  uint64
	lastCkpt uint64
	hasCkpt  bool
	now      func() time.Time
	warned   bool
}

func (t *trainer) ckptPath() string    { return filepath.Join(t.c.ckptDir, t.c.job+".ckpt") }
func (t *trainer) reachedPath() string { return filepath.Join(t.c.ckptDir, t.c.job+".reached") }

// train runs the program's main mode and returns its exit status.
func train(args []string) int {
	// Catch the signals first: until Notify a SIGUSR1 would kill the
	// process (its default action), losing the checkpoint the agent asked for.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	c, err := parseTrainFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-synthtrain: %v\n", err)
		return 2
	}
	if c.ckptSignal != syscall.SIGUSR1 && c.ckptSignal != syscall.SIGUSR2 && c.ckptSignal != syscall.SIGTERM &&
		c.ckptSignal != syscall.SIGINT && c.ckptSignal != syscall.SIGHUP {
		signal.Notify(sigc, c.ckptSignal)
	}
	log, err := openEventLog(c.logPath, c.job, time.Now)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-synthtrain: %v\n", err)
		return 1
	}
	defer log.close()
	t := &trainer{c: c, log: log, now: time.Now}
	if err := t.setup(context.Background(), runScontrol); err != nil {
		fmt.Fprintf(os.Stderr, "rota-synthtrain: job %s: %v\n", c.job, err)
		log.emit(Event{Ev: "error", Msg: err.Error()})
		return 1
	}
	return t.loop(sigc)
}

// setup finds the GPU type and rate, and the step to resume from.
func (t *trainer) setup(ctx context.Context, sc scontrolFunc) error {
	if t.c.gpuType == "" {
		g, err := detectGPUType(ctx, sc, os.Getenv("SLURM_JOB_ID"), t.c.node)
		if err != nil {
			return err
		}
		t.c.gpuType = g
	}
	rate, basis, err := stepRate(t.c.throughputs, t.c.gpuType, t.c.model, t.c.timeScale, t.c.derive)
	if err != nil {
		return err
	}
	if basis != "" {
		basis = "rate derived: " + basis
	}
	if t.c.sharing && t.c.sharingFactor != 1 {
		rate *= t.c.sharingFactor
		basis = strings.TrimPrefix(basis+fmt.Sprintf("; on shards of a GPU: x %g (--sharing-factor)", t.c.sharingFactor), "; ")
	}
	t.solo, t.rate = rate, rate
	if t.c.sharing && t.c.shareDir != "" {
		if t.co, err = newCoRunners(t.c.shareDir, t.c.node, t.c.gpus, t.c.job, t.c.model, t.c.gpuType, t.c.pairTable, t.c.progressEvery); err != nil {
			return err
		}
		f, why, err := t.pairFactor(t.now())
		if err != nil {
			return err
		}
		t.rate = t.solo * f
		basis = strings.TrimPrefix(basis+"; "+why, "; ")
	}
	if err := os.MkdirAll(t.c.ckptDir, 0o755); err != nil {
		return fmt.Errorf("--ckpt-dir: %w", err)
	}
	ck, err := readCheckpoint(t.ckptPath(), t.c.job, t.c.model, t.c.steps)
	switch {
	case errors.Is(err, errNoCheckpoint):
	case err != nil:
		return err
	default:
		t.resumed, t.lastCkpt, t.hasCkpt = ck.Step, ck.Step, true
	}
	restart := t.c.restart
	t.log.emit(Event{Ev: "start", Restart: &restart, GPU: t.c.gpuType, Model: t.c.model, Total: t.c.steps,
		Rate: t.rate, ResumedFrom: u64(t.resumed), Msg: basis})
	// What the previous attempt reached beyond its checkpoint is lost.
	if reached, ok := t.readReached(); ok && reached > t.resumed {
		t.log.emit(Event{Ev: "lost", Steps: u64(reached - t.resumed), Reached: u64(reached), ResumedFrom: u64(t.resumed)})
	}
	t.writeProgress(t.resumed, t.now())
	return nil
}

// readReached is the step the previous attempt last recorded; the file is
// advisory (a garbled one only costs the lost figure), so errors are
// reported and otherwise ignored.
func (t *trainer) readReached() (uint64, bool) {
	data, err := os.ReadFile(t.reachedPath())
	if errors.Is(err, os.ErrNotExist) {
		return 0, false
	}
	if err == nil {
		var r progress.Reading
		if r, err = progress.Parse(data); err == nil {
			return r.Step, true
		}
	}
	fmt.Fprintf(os.Stderr, "rota-synthtrain: job %s: %s: %v (lost steps of the previous attempt unknown)\n", t.c.job, t.reachedPath(), err)
	return 0, false
}

// writeProgress records step in $ROTA_PROGRESS_FILE (for the agent) and in
// <job>.reached (for the next attempt's lost count).
func (t *trainer) writeProgress(step uint64, at time.Time) {
	r := progress.Reading{Step: step, Ckpt: t.lastCkpt, HasCk: t.hasCkpt, Total: t.c.steps, Time: at}
	for _, p := range []string{t.c.progressFile, t.reachedPath()} {
		if p == "" {
			continue
		}
		if err := progress.WriteFile(p, r); err != nil && !t.warned {
			// Once: progress is advisory, training goes on.
			t.warned = true
			fmt.Fprintf(os.Stderr, "rota-synthtrain: job %s: progress: %v\n", t.c.job, err)
		}
	}
}

// save checkpoints step. cost is how long the checkpoint holds training
// up (--ckpt-cost: a real job's write time); the step does not advance
// meanwhile, and the acknowledgement comes after it.
func (t *trainer) save(step uint64, reason string, cost time.Duration) error {
	if cost > 0 {
		time.Sleep(cost)
	}
	err := writeCheckpoint(t.ckptPath(), ckptFile{Job: t.c.job, Model: t.c.model, Total: t.c.steps, Step: step,
		GPU: t.c.gpuType, T: float64(t.now().UnixNano()) / 1e9})
	if err != nil {
		return err
	}
	t.lastCkpt, t.hasCkpt = step, true
	// The ckpt= change in the progress file is the agent's acknowledgement.
	t.writeProgress(step, t.now())
	ev := Event{Ev: "checkpoint", Step: u64(step), Reason: reason}
	if cost > 0 {
		c := cost.Seconds()
		ev.Cost = &c
	}
	t.log.emit(ev)
	return nil
}

// loop steps by elapsed time until the end or a signal. Steps are a pure
// function of time since the attempt started, so the speed does not depend
// on --tick or on how late the process is woken.
func (t *trainer) loop(sigc <-chan os.Signal) int {
	start := t.now()
	if t.co != nil {
		defer t.co.leave()
	}
	// paused is the time spent checkpointing, when training stands still;
	// base is the step at start, which a change of rate moves on to.
	var paused time.Duration
	base := float64(t.resumed)
	at := func(now time.Time) float64 { return base + max(now.Sub(start)-paused, 0).Seconds()*t.rate }
	stepAt := func(now time.Time) uint64 { return min(uint64(at(now)), t.c.steps) }
	begun := start // start moves on with a change of rate
	elapsed := func(now time.Time) *float64 { e := now.Sub(begun).Seconds(); return &e }
	tick := time.NewTicker(t.c.tick)
	defer tick.Stop()
	// The last step's moment (a millisecond past it, so that stepAt has
	// reached it): the job ends then, not at the next tick, so a coarse
	// --tick (fewer wake-ups, for hundreds of jobs on one host) does not
	// lengthen it. Moved on by each checkpoint's pause.
	untilEnd := func() time.Duration {
		left := max(float64(t.c.steps)-base, 0) / t.rate
		return start.Add(paused+time.Duration(left*float64(time.Second))).Sub(t.now()) + time.Millisecond
	}
	end := time.NewTimer(untilEnd())
	defer end.Stop()
	lastProgress := start
	for {
		select {
		case s := <-sigc:
			now := t.now()
			step := stepAt(now)
			sig := s.(syscall.Signal)
			if t.c.keepSignal != 0 && sig == t.c.keepSignal {
				// Rota's periodic checkpoint: save and train on.
				if err := t.save(step, "request", t.c.ckptCost); err != nil {
					fmt.Fprintf(os.Stderr, "rota-synthtrain: job %s: %v\n", t.c.job, err)
				}
				paused += t.c.ckptCost
				end.Reset(untilEnd())
				lastProgress = t.now()
				continue
			}
			if sig == t.c.ckptSignal {
				if err := t.save(step, "signal", t.c.ckptCost); err != nil {
					fmt.Fprintf(os.Stderr, "rota-synthtrain: job %s: %v\n", t.c.job, err)
					t.log.emit(Event{Ev: "error", Msg: err.Error()})
					return 1
				}
				// Exit at once: the controller requeues the job onto its
				// new GPU type.
				return 0
			}
			if sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2 {
				// A user signal that is not ours (e.g. scancel --signal to
				// the wrong job) must not end training.
				continue
			}
			// SIGTERM (scancel, requeue, time limit): stop without saving,
			// so everything since the last checkpoint is lost.
			t.writeProgress(step, now)
			t.log.emit(Event{Ev: "stop", Step: u64(step), Signal: checkpoint.SignalName(sig), Elapsed: elapsed(now)})
			return 128 + int(sig)
		case <-end.C:
			// Woken before its last step (the clock's rounding): the
			// timer again for what is left; the step below decides.
			if stepAt(t.now()) < t.c.steps {
				end.Reset(untilEnd())
			}
		case <-tick.C:
		}
		now := t.now()
		step := stepAt(now)
		if step >= t.c.steps {
			// A last checkpoint at the end: a requeue after completion
			// then resumes at the end instead of training again.
			if err := t.save(step, "end", 0); err != nil {
				fmt.Fprintf(os.Stderr, "rota-synthtrain: job %s: %v\n", t.c.job, err)
			}
			t.writeProgress(step, now)
			t.log.emit(Event{Ev: "end", Step: u64(step), Elapsed: elapsed(now)})
			return 0
		}
		if t.c.ckptEvery > 0 && step >= t.lastCkpt+t.c.ckptEvery {
			if err := t.save(step, "periodic", t.c.ckptCost); err != nil {
				// A failed periodic checkpoint is not fatal: the
				// previous one still stands.
				fmt.Fprintf(os.Stderr, "rota-synthtrain: job %s: %v\n", t.c.job, err)
			}
			paused += t.c.ckptCost
			end.Reset(untilEnd())
			lastProgress = t.now()
		}
		if now.Sub(lastProgress) >= t.c.progressEvery {
			t.writeProgress(step, now)
			lastProgress = now
			if t.co != nil {
				// A sharer came or went: train on at the new speed from here.
				if f, why, err := t.pairFactor(now); err != nil {
					fmt.Fprintf(os.Stderr, "rota-synthtrain: job %s: --share-dir: %v\n", t.c.job, err)
				} else if r := t.solo * f; r != t.rate {
					base, start, paused, t.rate = at(now), now, 0, r
					end.Reset(untilEnd())
					t.log.emit(Event{Ev: "rate", Step: u64(step), Rate: r, Msg: why})
				}
			}
		}
	}
}

// pairFactor says the job trains on its GPU and returns the fraction of
// its speed it keeps beside the GPU's other sharers now, and why.
func (t *trainer) pairFactor(now time.Time) (float64, string, error) {
	if err := t.co.beat(); err != nil {
		return 0, "", err
	}
	others, err := t.co.others(now)
	if err != nil {
		return 0, "", err
	}
	f, why := t.co.factor(others)
	return f, why, nil
}

// jobKey names the checkpoint: the chain's id in a segment of a Rota chain
// (each segment is a job of its own; docs/chains.md), else the job id.
func jobKey() string {
	if id := os.Getenv("ROTA_CHAIN_ID"); id != "" {
		return id
	}
	return os.Getenv("SLURM_JOB_ID")
}
