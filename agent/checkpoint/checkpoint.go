// Package checkpoint carries out the controller's checkpoint(job, grace)
// on one node: signal the job's processes, and only them, wait for the job
// to acknowledge through its progress file or exit, and SIGTERM what is
// left when the grace period ends.
//
// Which processes belong to the job is read from their cgroup (package
// jobs), never taken from the message. The job's own slurmstepd (at the
// job level of the cgroup tree in v1, in step_*/slurm in v2) and its
// "extern" step (Slurm's placeholder) are left alone.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/agent/jobs"
	"github.com/rota-hpc/rota/agent/progress"
	"github.com/rota-hpc/rota/wire"
)

// EnvSignal is the job environment variable that overrides the checkpoint
// signal for that job (set by the user, or by the SPANK option
// --rota-checkpoint-signal which exports it).
const EnvSignal = "ROTA_CHECKPOINT_SIGNAL"

// EnvPeriodicSignal is the job environment variable naming the signal on
// which the job saves a checkpoint and keeps running. The checkpoint
// signal (EnvSignal) means "save and exit" (a migration or a chain's
// segment end); a periodic checkpoint for fault tolerance must not stop
// the job, so it needs a signal of its own, and a job that declares none
// gets no periodic checkpoints.
const EnvPeriodicSignal = "ROTA_CHECKPOINT_PERIODIC_SIGNAL"

// ErrNoPeriodicSignal means the job declares no periodic signal.
var ErrNoPeriodicSignal = errors.New("the job declares no periodic checkpoint signal (" + EnvPeriodicSignal + " in its environment), and its checkpoint signal stops it")

var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "ALRM": syscall.SIGALRM,
	"TERM": syscall.SIGTERM, "CONT": syscall.SIGCONT, "URG": syscall.SIGURG,
	"PWR": syscall.SIGPWR, "XCPU": syscall.SIGXCPU,
}

// ParseSignal reads "USR1", "SIGUSR1", "usr1" or a number. KILL and STOP
// are refused: a checkpoint signal must be one a job can catch.
func ParseSignal(s string) (syscall.Signal, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if sig, ok := signals[name]; ok {
		return sig, nil
	}
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 && n != int(syscall.SIGKILL) && n != int(syscall.SIGSTOP) {
		return syscall.Signal(n), nil
	}
	return 0, fmt.Errorf("%q is not a signal a job can catch (use e.g. USR1, USR2, TERM)", s)
}

// SignalName is "SIGUSR1" for SIGUSR1.
func SignalName(sig syscall.Signal) string {
	for n, s := range signals {
		if s == sig {
			return "SIG" + n
		}
	}
	return strconv.Itoa(int(sig))
}

// Checkpointer signals jobs on this node.
type Checkpointer struct {
	Proc     jobs.Proc
	Progress *progress.Tracker
	// Signal is the default checkpoint signal (SIGUSR1 when zero).
	Signal syscall.Signal
	// Poll is how often the grace wait looks at the job (default 200 ms).
	Poll time.Duration
	Log  zerolog.Logger

	// One read of /proc (jobs.Proc.Scan) at most Poll old serves every
	// checkpoint in flight and every command that comes meanwhile: each
	// read opens every process's cgroup, and with one read per command
	// and per wait's poll, a node's agent answered the sixth of six
	// commands of a round after the controller's 5 s (66 agents and
	// 1,200 jobs on 2 cores).
	scanMu  sync.Mutex
	scanAt  time.Time
	scanned map[uint32][]jobs.Process
	scans   int // reads of /proc, for tests
}

// Attempt is a checkpoint in flight.
type Attempt struct {
	Job       uint32
	Signal    syscall.Signal
	Signalled []int
	// Keep: the job keeps running after this checkpoint (periodic): Wait
	// returns at the acknowledgement and never SIGTERMs.
	Keep  bool
	start time.Time
	ckpt  uint64
	hasCk bool
}

// ErrNoProcesses means the job has no process on this node.
var ErrNoProcesses = errors.New("the job has no process on this node")

func (c *Checkpointer) poll() time.Duration {
	if c.Poll <= 0 {
		return 200 * time.Millisecond
	}
	return c.Poll
}

// processes are job's processes from a read of /proc at most maxAge old
// (0: a new one). Callers wait for one read rather than each make their
// own.
func (c *Checkpointer) processes(job uint32, maxAge time.Duration) ([]jobs.Process, error) {
	c.scanMu.Lock()
	defer c.scanMu.Unlock()
	if c.scanned == nil || time.Since(c.scanAt) >= maxAge {
		m, err := c.Proc.Scan()
		if err != nil {
			return nil, err
		}
		// Dated by its end: on a loaded node a read takes about a second,
		// and the commands queued behind it must still share it.
		c.scanned, c.scanAt = m, time.Now()
		c.scans++
	}
	return c.scanned[job], nil
}

// targets lists the job's processes that may be signalled, from a read
// of /proc at most maxAge old; where that read shows none, from a new
// one (the job may have started since).
func (c *Checkpointer) targets(job uint32, maxAge time.Duration) ([]int, error) {
	procs, err := c.processes(job, maxAge)
	if err == nil && len(procs) == 0 && maxAge > 0 {
		procs, err = c.processes(job, 0)
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pr := range procs {
		pid, ref := pr.PID, pr.Ref
		// Only the user's own tasks, which Slurm always puts in a step's
		// cgroup: a process at the job level (Step "") is the job's
		// slurmstepd (cgroup v1 keeps it there), never the user's.
		if ref.JobID != job || ref.Stepd || ref.Step == "" || ref.Step == "extern" {
			continue
		}
		// Gone already (or, with a fixture /proc, not a live process).
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			continue
		}
		out = append(out, pid)
	}
	sort.Ints(out)
	return out, nil
}

// signalFor is the job's own signal if one of its processes declares it,
// else the default.
func (c *Checkpointer) signalFor(pids []int) syscall.Signal {
	for _, pid := range pids {
		if v, ok := c.Proc.Env(pid, EnvSignal); ok && v != "" {
			sig, err := ParseSignal(v)
			if err == nil {
				return sig
			}
			c.Log.Warn().Int("pid", pid).Str(EnvSignal, v).Msg("job asks for an unusable checkpoint signal; using the default")
		}
	}
	if c.Signal == 0 {
		return syscall.SIGUSR1
	}
	return c.Signal
}

// send signals each pid after checking once more that it is still the
// job's, which narrows the window in which a PID could be reused.
func (c *Checkpointer) send(job uint32, pids []int, sig syscall.Signal) []int {
	var done []int
	for _, pid := range pids {
		if ref, err := c.Proc.JobOf(uint32(pid)); err != nil || ref.JobID != job {
			continue
		}
		if err := syscall.Kill(pid, sig); err != nil {
			if err != syscall.ESRCH {
				c.Log.Warn().Err(err).Int("pid", pid).Uint32("job", job).Str("signal", SignalName(sig)).Msg("could not signal a process of the job")
			}
			continue
		}
		done = append(done, pid)
	}
	return done
}

// periodicSignal is the signal a process of the job declares for
// checkpoints it survives; ok false when none does.
func (c *Checkpointer) periodicSignal(pids []int) (syscall.Signal, bool) {
	for _, pid := range pids {
		if v, ok := c.Proc.Env(pid, EnvPeriodicSignal); ok && v != "" {
			sig, err := ParseSignal(v)
			if err == nil {
				return sig, true
			}
			c.Log.Warn().Int("pid", pid).Str(EnvPeriodicSignal, v).Msg("job asks for an unusable periodic checkpoint signal; no periodic checkpoint")
		}
	}
	return 0, false
}

// Start signals job's processes. It returns ErrNoProcesses when there are
// none.
func (c *Checkpointer) Start(job uint32) (*Attempt, error) {
	return c.start(job, false)
}

// StartKeep signals job's processes with its periodic signal, for a
// checkpoint it survives. It returns ErrNoProcesses when there are none,
// ErrNoPeriodicSignal when the job declares no such signal.
func (c *Checkpointer) StartKeep(job uint32) (*Attempt, error) {
	return c.start(job, true)
}

func (c *Checkpointer) start(job uint32, keep bool) (*Attempt, error) {
	pids, err := c.targets(job, c.poll())
	if err != nil {
		return nil, fmt.Errorf("finding the processes of job %d: %w", job, err)
	}
	if len(pids) == 0 {
		return nil, ErrNoProcesses
	}
	a := &Attempt{Job: job, Signal: c.signalFor(pids), Keep: keep, start: time.Now()}
	if keep {
		sig, ok := c.periodicSignal(pids)
		if !ok {
			return nil, ErrNoPeriodicSignal
		}
		a.Signal = sig
	}
	if c.Progress != nil {
		if r, err := c.Progress.Latest(job); err == nil {
			a.ckpt, a.hasCk = r.Ckpt, r.HasCk
		}
	}
	a.Signalled = c.send(job, pids, a.Signal)
	if len(a.Signalled) == 0 {
		return nil, ErrNoProcesses
	}
	c.Log.Info().Uint32("job", job).Str("signal", SignalName(a.Signal)).Bool("keep_running", keep).Ints("pids", a.Signalled).Msg("sent checkpoint signal")
	return a, nil
}

// acked reports whether the job's progress file shows a new checkpoint.
func (c *Checkpointer) acked(a *Attempt) (uint64, bool) {
	if c.Progress == nil {
		return 0, false
	}
	r, err := c.Progress.Latest(a.Job)
	if err != nil || !r.HasCk {
		return 0, false
	}
	if !a.hasCk || r.Ckpt != a.ckpt {
		return r.Ckpt, true
	}
	return 0, false
}

// Wait follows an attempt until the job's processes are gone or grace has
// passed, SIGTERMs what is left then, and says how it went. A Keep
// attempt ends at the acknowledgement instead, and its job is left
// running even when the grace passes without one.
func (c *Checkpointer) Wait(ctx context.Context, a *Attempt, grace time.Duration) wire.CheckpointResult {
	poll := c.poll()
	res := wire.CheckpointResult{V: wire.Version, JobID: a.Job, Signal: SignalName(a.Signal), Signalled: len(a.Signalled)}
	deadline := a.start.Add(grace)
	t := time.NewTicker(poll)
	defer t.Stop()
	ack := false
	for {
		if step, ok := c.acked(a); ok && !ack {
			ack, res.CkptStep = true, step
		}
		if ack && a.Keep {
			break
		}
		left, err := c.targets(a.Job, poll)
		if err == nil && len(left) == 0 {
			res.Exited = true
			break
		}
		if !time.Now().Before(deadline) {
			if a.Keep {
				break
			}
			// What is left now, children started since the last read
			// included.
			if now, err := c.targets(a.Job, 0); err == nil {
				left = now
			}
			res.Terminated = len(c.send(a.Job, left, syscall.SIGTERM))
			c.Log.Info().Uint32("job", a.Job).Int("terminated", res.Terminated).Dur("grace", grace).Msg("checkpoint grace over; sent SIGTERM")
			break
		}
		select {
		case <-ctx.Done():
			res.Error = "agent stopping: " + ctx.Err().Error()
			res.Outcome = wire.CheckpointTimedOut
			res.ElapsedSeconds = time.Since(a.start).Seconds()
			return res
		case <-t.C:
		}
	}
	if step, ok := c.acked(a); ok && !ack {
		ack, res.CkptStep = true, step
	}
	switch {
	case ack:
		res.Outcome = wire.CheckpointAcknowledged
	case res.Exited:
		res.Outcome = wire.CheckpointExited
	default:
		res.Outcome = wire.CheckpointTimedOut
	}
	res.ElapsedSeconds = time.Since(a.start).Seconds()
	return res
}
