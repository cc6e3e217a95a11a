package checkpoint

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/agent/jobs"
	"github.com/rota-hpc/rota/agent/progress"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/wire"
)

// The helper process: records every signal it gets in $MARK (one name per
// line) and reacts as $MODE says:
//
//	ack    on the checkpoint signal write ckpt= to $PROGRESS and exit
//	exit   exit on the checkpoint signal
//	keep   on any signal but SIGTERM write ckpt= to $PROGRESS and keep running
//	ignore keep running until SIGTERM
func TestMain(m *testing.M) {
	if os.Getenv("ROTA_CKPT_HELPER") == "1" {
		helper()
		return
	}
	os.Exit(m.Run())
}

func helper() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM)
	mark := os.Getenv("MARK")
	os.WriteFile(mark+".ready", nil, 0o644)
	for sig := range ch {
		f, _ := os.OpenFile(mark, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		fmt.Fprintln(f, SignalName(sig.(syscall.Signal)))
		f.Close()
		if sig == syscall.SIGTERM {
			os.Exit(0)
		}
		switch os.Getenv("MODE") {
		case "ack":
			p := os.Getenv("PROGRESS")
			os.WriteFile(p+".tmp", []byte("step=120 ckpt=120\n"), 0o644)
			os.Rename(p+".tmp", p)
			os.Exit(0)
		case "exit":
			os.Exit(0)
		case "keep":
			p := os.Getenv("PROGRESS")
			os.WriteFile(p+".tmp", []byte("step=130 ckpt=130\n"), 0o644)
			os.Rename(p+".tmp", p)
		}
	}
}

// node is a fake node: a fixture /proc whose entries name real child
// processes, so a test decides which job each process is in.
type node struct {
	t       *testing.T
	proc    string
	prog    string
	dir     string
	helpers map[string]*exec.Cmd
}

func newNode(t *testing.T) *node {
	return &node{t: t, proc: t.TempDir(), prog: t.TempDir(), dir: t.TempDir(), helpers: map[string]*exec.Cmd{}}
}

// spawn starts a helper named name in job (0: in no job) with mode.
func (n *node) spawn(name string, job uint32, mode string, env ...string) int {
	t := n.t
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ROTA_CKPT_HELPER=1", "MODE="+mode,
		"MARK="+filepath.Join(n.dir, name), "PROGRESS="+progress.Path(n.prog, job))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() // reap, so an exited helper disappears
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	n.helpers[name] = cmd
	cg := "0::/user.slice/user-0.slice/session-1.scope\n"
	if job != 0 {
		cg = fmt.Sprintf("0::/system.slice/slurmstepd.scope/job_%d/step_0/user/task_0\n", job)
		os.MkdirAll(filepath.Dir(progress.Path(n.prog, job)), 0o755)
		os.WriteFile(progress.Path(n.prog, job), []byte("step=100 ckpt=50\n"), 0o644)
	}
	d := filepath.Join(n.proc, strconv.Itoa(pid))
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "cgroup"), []byte(cg), 0o644)
	os.WriteFile(filepath.Join(d, "environ"), []byte(strings.Join(env, "\x00")), 0o644)
	eventually.True(t, 10*time.Second, "helper "+name+" to start", func() bool {
		_, err := os.Stat(filepath.Join(n.dir, name+".ready"))
		return err == nil
	})
	return pid
}

// got is the signals helper name received.
func (n *node) got(name string) []string {
	b, _ := os.ReadFile(filepath.Join(n.dir, name))
	return strings.Fields(string(b))
}

func (n *node) alive(name string) bool {
	return syscall.Kill(n.helpers[name].Process.Pid, 0) == nil
}

func (n *node) checkpointer() *Checkpointer {
	return &Checkpointer{Proc: jobs.Proc{Root: n.proc}, Progress: &progress.Tracker{Dir: n.prog}, Poll: 20 * time.Millisecond, Log: zerolog.Nop()}
}

func TestCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       string
		env        []string
		outcome    string
		signal     string
		exited     bool
		terminated int
		ckpt       uint64
	}{
		{"acknowledged", "ack", nil, wire.CheckpointAcknowledged, "SIGUSR1", true, 0, 120},
		{"exited", "exit", nil, wire.CheckpointExited, "SIGUSR1", true, 0, 0},
		{"timed out", "ignore", nil, wire.CheckpointTimedOut, "SIGUSR1", false, 2, 0},
		{"per-job signal", "exit", []string{"ROTA_CHECKPOINT_SIGNAL=USR2"}, wire.CheckpointExited, "SIGUSR2", true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			n.spawn("a", 100, tc.mode, tc.env...)
			n.spawn("b", 100, tc.mode, tc.env...)
			n.spawn("other-job", 200, "ack")
			n.spawn("no-job", 0, "ack")
			c := n.checkpointer()
			a, err := c.Start(100)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Signalled) != 2 {
				t.Errorf("signalled %v, want the 2 processes of job 100", a.Signalled)
			}
			grace := 5 * time.Second // ends early when the job exits
			if tc.terminated > 0 {
				grace = 300 * time.Millisecond
			}
			res := c.Wait(context.Background(), a, grace)
			if res.Outcome != tc.outcome || res.Signal != tc.signal || res.Signalled != 2 || res.Terminated != tc.terminated || res.CkptStep != tc.ckpt {
				t.Errorf("result = %+v", res)
			}
			// Both processes of the job got exactly the checkpoint signal,
			// plus SIGTERM where they ignored it.
			want := []string{tc.signal}
			if tc.terminated > 0 {
				want = append(want, "SIGTERM")
			}
			for _, h := range []string{"a", "b"} {
				eventually.True(t, 5*time.Second, fmt.Sprintf("%s to get %d signals (want %v)", h, len(want), want), func() bool {
					return len(n.got(h)) >= len(want)
				})
				if got := n.got(h); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s got signals %v, want %v", h, got, want)
				}
			}
			// No other process on the node got anything.
			time.Sleep(50 * time.Millisecond) // time for a stray signal to land: what is tested is that none does
			for _, h := range []string{"other-job", "no-job"} {
				if got := n.got(h); len(got) != 0 {
					t.Errorf("process outside the job (%s) got %v", h, got)
				}
				if !n.alive(h) {
					t.Errorf("process outside the job (%s) died", h)
				}
			}
		})
	}
}

// A periodic checkpoint (StartKeep) uses the job's periodic signal, ends
// at the acknowledgement, and never stops the job; a job without a
// periodic signal is refused untouched.
func TestCheckpointKeepRunning(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    string
		env     []string
		err     error
		outcome string
		signal  string
		ckpt    uint64
	}{
		{"acknowledged", "keep", []string{"ROTA_CHECKPOINT_SIGNAL=USR1", "ROTA_CHECKPOINT_PERIODIC_SIGNAL=USR2"}, nil, wire.CheckpointAcknowledged, "SIGUSR2", 130},
		{"no acknowledgement, not stopped", "ignore", []string{"ROTA_CHECKPOINT_PERIODIC_SIGNAL=USR2"}, nil, wire.CheckpointTimedOut, "SIGUSR2", 0},
		{"no periodic signal", "keep", []string{"ROTA_CHECKPOINT_SIGNAL=USR1"}, ErrNoPeriodicSignal, "", "", 0},
		{"unusable periodic signal", "keep", []string{"ROTA_CHECKPOINT_PERIODIC_SIGNAL=KILL"}, ErrNoPeriodicSignal, "", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t)
			n.spawn("a", 100, tc.mode, tc.env...)
			c := n.checkpointer()
			a, err := c.StartKeep(100)
			if err != tc.err {
				t.Fatalf("StartKeep: err = %v, want %v", err, tc.err)
			}
			if err == nil {
				res := c.Wait(context.Background(), a, 300*time.Millisecond)
				if res.Outcome != tc.outcome || res.Signal != tc.signal || res.CkptStep != tc.ckpt || res.Terminated != 0 || res.Exited {
					t.Errorf("result = %+v", res)
				}
			}
			time.Sleep(50 * time.Millisecond) // time for the job to die or get more, if it wrongly would: nothing to wait for
			if !n.alive("a") {
				t.Errorf("the job's process died: a periodic checkpoint must leave it running")
			}
			want := tc.signal
			if got := strings.Join(n.got("a"), " "); got != want {
				t.Errorf("the job got signals %q, want %q", got, want)
			}
		})
	}
}

// Commands that come together share one read of /proc (each read opens
// every process's cgroup); a job the shared read does not show is looked
// for in a new one, so a job started since is found.
func TestCommandsShareOneScan(t *testing.T) {
	n := newNode(t)
	n.spawn("a", 100, "ack")
	n.spawn("b", 200, "ack")
	c := n.checkpointer()
	c.Poll = time.Hour // every read within it is shared
	for _, job := range []uint32{100, 200} {
		if a, err := c.Start(job); err != nil || len(a.Signalled) != 1 {
			t.Fatalf("job %d: %+v, %v", job, a, err)
		}
	}
	if c.scans != 1 {
		t.Errorf("%d reads of /proc for two commands, want 1", c.scans)
	}
	n.spawn("late", 300, "ack") // after the shared read
	if a, err := c.Start(300); err != nil || len(a.Signalled) != 1 {
		t.Fatalf("a job started after the shared read: %+v, %v", a, err)
	}
	if c.scans != 2 {
		t.Errorf("%d reads of /proc, want 2 (one more for the job the first did not show)", c.scans)
	}
	if _, err := c.Start(400); err != ErrNoProcesses {
		t.Errorf("a job with no process: %v, want ErrNoProcesses", err)
	}
}

func TestNoProcesses(t *testing.T) {
	n := newNode(t)
	n.spawn("other", 200, "ack")
	if _, err := n.checkpointer().Start(100); err != ErrNoProcesses {
		t.Errorf("err = %v, want ErrNoProcesses", err)
	}
	if len(n.got("other")) != 0 {
		t.Errorf("another job's process was signalled")
	}
}

// slurmstepd (cgroup v2 .../step_0/slurm; cgroup v1 at the job level, as
// seen on Slurm 22.05 with proctrack/cgroup) and the extern step are the
// job's but never signalled.
func TestSkipsStepdAndExtern(t *testing.T) {
	n := newNode(t)
	pid := n.spawn("stepd", 100, "ignore")
	os.WriteFile(filepath.Join(n.proc, strconv.Itoa(pid), "cgroup"), []byte("0::/system.slice/slurmstepd.scope/job_100/step_0/slurm\n"), 0o644)
	pid = n.spawn("stepd-v1", 100, "ignore")
	os.WriteFile(filepath.Join(n.proc, strconv.Itoa(pid), "cgroup"), []byte("6:freezer:/slurm_node-a/uid_0/job_100\n"), 0o644)
	pid = n.spawn("extern", 100, "ignore")
	os.WriteFile(filepath.Join(n.proc, strconv.Itoa(pid), "cgroup"), []byte("0::/system.slice/slurmstepd.scope/job_100/step_extern/user/task_0\n"), 0o644)
	if _, err := n.checkpointer().Start(100); err != ErrNoProcesses {
		t.Errorf("err = %v, want ErrNoProcesses", err)
	}
}

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want syscall.Signal
		ok   bool
	}{
		{"USR1", syscall.SIGUSR1, true}, {"sigusr2", syscall.SIGUSR2, true}, {" SIGTERM ", syscall.SIGTERM, true},
		{"10", syscall.SIGUSR1, true}, {"KILL", 0, false}, {"9", 0, false}, {"STOP", 0, false}, {"", 0, false}, {"100", 0, false},
	} {
		got, err := ParseSignal(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSignal(%q) = %v, %v", tc.in, got, err)
		}
	}
}
