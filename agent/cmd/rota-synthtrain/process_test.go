package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rota-hpc/rota/agent/progress"
	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/internal/eventually"
)

// The test binary doubles as the program: with SYNTHTRAIN_TEST_MAIN=1 it
// runs main's code on its arguments, so these tests drive a real process
// with real signals.
func TestMain(m *testing.M) {
	if os.Getenv("SYNTHTRAIN_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
	err    error
}

// start runs the program with args; env adds to a clean Slurm-free
// environment.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{"SYNTHTRAIN_TEST_MAIN=1", "PATH=" + os.Getenv("PATH")}, env...)
	p := &proc{t: t, cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the exit status, failing the test after 20 s.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.t.Fatalf("program still running after 20 s; stderr: %s", p.stderr)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return 0
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

func readLog(t *testing.T, path string) []Event {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// waitProgress waits until the progress file shows at least step.
func waitProgress(t *testing.T, path string, step uint64) progress.Reading {
	t.Helper()
	var r progress.Reading
	eventually.True(t, 15*time.Second, fmt.Sprintf("%s to reach step %d", path, step), func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		r, err = progress.Parse(b)
		return err == nil && r.Step >= step
	})
	return r
}

func lastOf(evs []Event, kind string) (Event, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Ev == kind {
			return evs[i], true
		}
	}
	return Event{}, false
}

// One job's life: checkpoint on USR1 and exit 0; a second attempt resumes
// from it, ignores a user signal that is not its checkpoint signal, and is
// stopped by SIGTERM without saving; the third resumes from the same
// checkpoint, reports the steps the second lost, and runs to the end.
func TestCheckpointStopResume(t *testing.T) {
	table := gavelTable(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "job.log")
	prog := filepath.Join(dir, "progress")
	// p100, ResNet-18 (batch size 64): 22.3 steps/s x 50 = 1115 steps/s;
	// 6000 steps take about 5.4 s in all.
	args := []string{"--model", "ResNet-18 (batch size 64)", "--steps", "6000", "--throughputs", table,
		"--time-scale", "50", "--ckpt-dir", filepath.Join(dir, "ckpt"), "--log", logPath, "--progress-every", "50ms"}
	env := func(restart string) []string {
		return []string{"SLURM_JOB_ID=77", "SLURMD_NODENAME=node-p100", "ROTA_PROGRESS_FILE=" + prog,
			"SLURM_RESTART_COUNT=" + restart, "ROTA_CHECKPOINT_SIGNAL=USR1"}
	}
	// The job is not in a real Slurm: name the type.
	args = append(args, "--gpu-type", "p100")

	// Attempt 1: USR1 checkpoints and exits 0.
	p := start(t, env("0"), args...)
	waitProgress(t, prog, 500)
	p.signal(syscall.SIGUSR1)
	if rc := p.wait(); rc != 0 {
		t.Fatalf("exit %d after the checkpoint signal, want 0; stderr: %s", rc, p.stderr)
	}
	evs := readLog(t, logPath)
	ck, ok := lastOf(evs, "checkpoint")
	if !ok || ck.Reason != "signal" || ck.Step == nil || *ck.Step < 500 {
		t.Fatalf("no checkpoint event at step >= 500 after USR1: %+v", evs)
	}
	saved := *ck.Step
	c, err := readCheckpoint(filepath.Join(dir, "ckpt", "77.ckpt"), "77", "ResNet-18 (batch size 64)", 6000)
	if err != nil || c.Step != saved || c.GPU != "p100" {
		t.Fatalf("checkpoint file %+v, %v; want step %d on p100", c, err, saved)
	}
	// The agent's acknowledgement: ckpt= in the progress file.
	r := waitProgress(t, prog, 0)
	if !r.HasCk || r.Ckpt != saved || r.Step != saved || r.Total != 6000 {
		t.Fatalf("progress after checkpoint %+v, want step=ckpt=%d total=6000", r, saved)
	}
	if _, ok := lastOf(evs, "end"); ok {
		t.Fatal("attempt 1 must not end")
	}

	// Attempt 2: resumes, survives USR2, SIGTERM stops it unsaved.
	p = start(t, env("1"), args...)
	waitProgress(t, prog, saved+500)
	p.signal(syscall.SIGUSR2)
	time.Sleep(100 * time.Millisecond) // time for USR2 to end it, if it wrongly did: nothing to wait for
	select {
	case <-p.done:
		t.Fatalf("a signal other than the checkpoint signal ended the program; stderr: %s", p.stderr)
	default:
	}
	p.signal(syscall.SIGTERM)
	if rc := p.wait(); rc != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d after SIGTERM, want %d", rc, 128+int(syscall.SIGTERM))
	}
	evs = readLog(t, logPath)
	st, _ := lastOf(evs, "start")
	if st.ResumedFrom == nil || *st.ResumedFrom != saved || st.Restart == nil || *st.Restart != 1 || st.GPU != "p100" {
		t.Fatalf("attempt 2 start %+v, want resumed_from %d, restart 1, gpu p100", st, saved)
	}
	stop, ok := lastOf(evs, "stop")
	if !ok || stop.Signal != "SIGTERM" || stop.Step == nil || *stop.Step <= saved+500 {
		t.Fatalf("stop event %+v, want SIGTERM past step %d", stop, saved+500)
	}
	reached := *stop.Step
	if c, _ := readCheckpoint(filepath.Join(dir, "ckpt", "77.ckpt"), "77", "ResNet-18 (batch size 64)", 6000); c.Step != saved {
		t.Fatalf("SIGTERM changed the checkpoint to step %d, want it kept at %d", c.Step, saved)
	}

	// Attempt 3: resumes from the same checkpoint, reports the loss, ends.
	p = start(t, env("2"), args...)
	if rc := p.wait(); rc != 0 {
		t.Fatalf("attempt 3 exit %d; stderr: %s", rc, p.stderr)
	}
	evs = readLog(t, logPath)
	lost, ok := lastOf(evs, "lost")
	if !ok || *lost.Steps != reached-saved || *lost.ResumedFrom != saved || *lost.Reached != reached {
		t.Fatalf("lost event %+v, want %d steps (reached %d, resumed from %d)", lost, reached-saved, reached, saved)
	}
	end, ok := lastOf(evs, "end")
	if !ok || *end.Step != 6000 {
		t.Fatalf("end event %+v, want step 6000", end)
	}
	// The pace is Gavel's: ~1115 steps/s for 6000 - saved steps.
	want := float64(6000-saved) / (22.30494387033663 * 50)
	if *end.Elapsed < want*0.95 || *end.Elapsed > want+1.0 {
		t.Fatalf("attempt 3 took %.2f s, want about %.2f s at Gavel's p100 rate x 50", *end.Elapsed, want)
	}

	// The driver's view of the same log.
	jobs, tot := summarize(evs, map[string]float64{"77": evs[0].T - 10})
	if len(jobs) != 1 {
		t.Fatalf("summary of %d jobs, want 1", len(jobs))
	}
	j := jobs[0]
	if j.State != "done" || j.Starts != 3 || j.Restarts != 2 || j.Checkpoints != 1 || j.Stops != 1 ||
		j.LostSteps != reached-saved || j.Types != "p100" || tot.LostSteps != reached-saved {
		t.Fatalf("summary %+v / %+v", j, tot)
	}
	if j.JCT < 10 {
		t.Fatalf("jct %.2f s, want at least the 10 s before the first start", j.JCT)
	}
}

// A periodic checkpoint every 1000 steps, and a checkpoint signal taken
// from ROTA_CHECKPOINT_SIGNAL (what sbatch --rota-checkpoint-signal sets).
func TestPeriodicAndEnvSignal(t *testing.T) {
	table := gavelTable(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "job.log")
	p := start(t, []string{"SLURM_JOB_ID=5", "ROTA_CHECKPOINT_SIGNAL=USR2"},
		"--model", "A3C", "--steps", "100000", "--throughputs", table, "--time-scale", "500", "--gpu-type", "v100",
		"--ckpt-dir", dir, "--log", logPath, "--ckpt-every", "1000")
	// v100 A3C: 7.18 x 500 = 3588 steps/s: three periodic checkpoints within a second.
	var seen []Event // the log at the last look, shown if the wait fails
	n := 0
	defer func() {
		if n < 3 {
			t.Logf("the log: %+v", seen)
		}
	}()
	eventually.True(t, 10*time.Second, "3 periodic checkpoints", func() bool {
		seen, n = readLog(t, logPath), 0
		for _, e := range seen {
			if e.Ev == "checkpoint" && e.Reason == "periodic" {
				n++
			}
		}
		return n >= 3
	})
	p.signal(syscall.SIGUSR1) // not this job's checkpoint signal: ignored
	p.signal(syscall.SIGUSR2)
	if rc := p.wait(); rc != 0 {
		t.Fatalf("exit %d, want 0; stderr %s", rc, p.stderr)
	}
	evs := readLog(t, logPath)
	ck, _ := lastOf(evs, "checkpoint")
	if ck.Reason != "signal" {
		t.Fatalf("last checkpoint %+v, want the one on USR2", ck)
	}
	var prev uint64
	for _, e := range evs {
		if e.Ev == "checkpoint" && e.Reason == "periodic" {
			if *e.Step < prev+1000 {
				t.Fatalf("periodic checkpoints %d then %d, want >= 1000 apart", prev, *e.Step)
			}
			prev = *e.Step
		}
	}
}

// Rota's periodic checkpoint: the periodic signal (from
// ROTA_CHECKPOINT_PERIODIC_SIGNAL) saves, stands training still for
// --ckpt-cost, acknowledges, and trains on; the checkpoint signal still
// saves and exits.
func TestPeriodicSignalKeepsTraining(t *testing.T) {
	table := gavelTable(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "job.log")
	prog := filepath.Join(dir, "progress")
	p := start(t, []string{"SLURM_JOB_ID=6", "ROTA_CHECKPOINT_SIGNAL=USR1", "ROTA_CHECKPOINT_PERIODIC_SIGNAL=USR2", "ROTA_PROGRESS_FILE=" + prog},
		"--model", "A3C", "--steps", "1000000", "--throughputs", table, "--time-scale", "100", "--gpu-type", "v100",
		"--ckpt-dir", dir, "--log", logPath, "--ckpt-cost", "300ms")
	waitProgress(t, prog, 100)
	var last progress.Reading
	for i := 0; i < 2; i++ {
		sent := time.Now()
		p.signal(syscall.SIGUSR2)
		last = waitProgressCkpt(t, prog, last)
		if took := time.Since(sent); took < 300*time.Millisecond {
			t.Errorf("checkpoint %d acknowledged after %s, before its 300 ms cost", i+1, took)
		}
	}
	// Still training after both.
	before := waitProgress(t, prog, 0).Step
	after := waitProgress(t, prog, before+100).Step
	if after <= before {
		t.Fatalf("no progress after the periodic checkpoints (%d then %d)", before, after)
	}
	p.signal(syscall.SIGUSR1)
	if rc := p.wait(); rc != 0 {
		t.Fatalf("exit %d, want 0; stderr %s", rc, p.stderr)
	}
	var reasons []string
	for _, e := range readLog(t, logPath) {
		if e.Ev == "checkpoint" {
			reasons = append(reasons, e.Reason)
			if e.Cost == nil || *e.Cost != 0.3 {
				t.Errorf("checkpoint %+v: want cost_s 0.3", e)
			}
		}
	}
	if strings.Join(reasons, " ") != "request request signal" {
		t.Errorf("checkpoints %v, want two on request and one on the signal", reasons)
	}
}

// A coarse --tick (fewer wake-ups: hundreds of jobs on one host in
// scripts/trace-replay; progress is written at ticks) does not lengthen a
// job: it ends at its last step, also after a periodic checkpoint's pause
// moved that step on.
func TestCoarseTickEndsOnTime(t *testing.T) {
	table := gavelTable(t)
	// A3C on a v100: 7.18 steps/s x 100; 3000 steps take 4.18 s.
	rate, _, err := stepRate(table, "v100", "A3C", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		periodic bool // one periodic checkpoint of 500 ms on the way
	}{{name: "plain"}, {name: "after a periodic checkpoint", periodic: true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			logPath := filepath.Join(dir, "job.log")
			prog := filepath.Join(dir, "progress")
			began := time.Now()
			p := start(t, []string{"SLURM_JOB_ID=9", "ROTA_CHECKPOINT_PERIODIC_SIGNAL=USR2", "ROTA_PROGRESS_FILE=" + prog},
				"--model", "A3C", "--steps", "3000", "--throughputs", table, "--time-scale", "100", "--gpu-type", "v100",
				"--ckpt-dir", dir, "--log", logPath, "--tick", "3s", "--progress-every", "100ms", "--ckpt-cost", "500ms")
			want := 3000 / rate
			if c.periodic {
				waitProgress(t, prog, 500)
				p.signal(syscall.SIGUSR2)
				want += 0.5
			}
			if rc := p.wait(); rc != 0 {
				t.Fatalf("exit %d; stderr %s", rc, p.stderr)
			}
			end, ok := lastOf(readLog(t, logPath), "end")
			if !ok || end.Elapsed == nil || *end.Step != 3000 {
				t.Fatalf("no end at step 3000: %+v", end)
			}
			if *end.Elapsed < want || *end.Elapsed > want+0.5 {
				t.Errorf("ended after %.3f s of training, want %.3f s (+ scheduling)", *end.Elapsed, want)
			}
			if took := time.Since(began).Seconds(); took > want+3 {
				t.Errorf("the process took %.1f s, want about %.1f", took, want)
			}
		})
	}
}

// waitProgressCkpt waits for a ckpt= in the file other than prev's.
func waitProgressCkpt(t *testing.T, path string, prev progress.Reading) progress.Reading {
	t.Helper()
	var r progress.Reading
	eventually.True(t, 10*time.Second, "a new checkpoint acknowledged in "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		r, err = progress.Parse(b)
		return err == nil && r.HasCk && (!prev.HasCk || r.Ckpt != prev.Ckpt)
	})
	return r
}

// Errors before training: each exits non-zero with a clear message on
// stderr and, where the log is open, an error event; none starts training.
func TestStartupErrors(t *testing.T) {
	table := gavelTable(t)
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt")
	os.MkdirAll(corrupt, 0o755)
	os.WriteFile(filepath.Join(corrupt, "9.ckpt"), []byte(`{"v":1,"job":"9","model":"A3C","tot`), 0o644)
	base := []string{"--model", "A3C", "--steps", "100", "--throughputs", table}
	cases := []struct {
		name   string
		env    []string
		args   []string
		rc     int
		stderr string
	}{
		{"corrupt checkpoint", []string{"SLURM_JOB_ID=9"}, []string{"--gpu-type", "k80", "--ckpt-dir", corrupt}, 1, "is corrupt"},
		{"GPU type not in the table", []string{"SLURM_JOB_ID=9"}, []string{"--gpu-type", "h100", "--ckpt-dir", dir}, 1, `no GPU type "h100"`},
		{"no GPU type outside Slurm", []string{}, []string{"--job", "x", "--ckpt-dir", dir}, 1, "SLURM_JOB_ID is not set"},
		{"no job key", []string{}, []string{"--gpu-type", "k80"}, 2, "no job key"},
		{"job key with a slash", []string{}, []string{"--gpu-type", "k80", "--job", "../x"}, 2, "must be letters"},
		{"KILL as checkpoint signal", []string{"SLURM_JOB_ID=9"}, []string{"--gpu-type", "k80", "--signal", "KILL"}, 2, "not a signal a job can catch"},
		{"sharing factor 0", []string{"SLURM_JOB_ID=9"}, []string{"--gpu-type", "k80", "--sharing-factor", "0"}, 2, "--sharing-factor 0 must be in (0, 1]"},
		{"scontrol missing", []string{"SLURM_JOB_ID=9", "PATH=/nonexistent"}, []string{"--ckpt-dir", dir}, 1, "cannot detect the GPU type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "log")
			args := append(append(append([]string{}, base...), c.args...), "--log", logPath)
			p := start(t, c.env, args...)
			if rc := p.wait(); rc != c.rc {
				t.Fatalf("exit %d, want %d; stderr: %s", rc, c.rc, p.stderr)
			}
			if !strings.Contains(p.stderr.String(), c.stderr) {
				t.Fatalf("stderr %q, want it to say %q", p.stderr, c.stderr)
			}
			evs := readLog(t, logPath)
			if _, ok := lastOf(evs, "start"); ok {
				t.Fatalf("training started: %+v", evs)
			}
			if c.rc == 1 {
				if e, ok := lastOf(evs, "error"); !ok || !strings.Contains(e.Msg, c.stderr) {
					t.Fatalf("log %+v, want an error event saying %q", evs, c.stderr)
				}
			}
		})
	}
}

// TestSharingFactor: on shards of a GPU ($SLURM_SHARDS_ON_NODE) the job
// trains at --sharing-factor times its rate, and says so; alone, at its
// rate.
func TestSharingFactor(t *testing.T) {
	table := gavelTable(t)
	want, _, err := stepRate(table, "k80", "A3C", 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		env    []string
		factor float64
	}{
		{"on shards", []string{"SLURM_JOB_ID=9", "SLURM_SHARDS_ON_NODE=1"}, 0.5},
		{"a whole GPU", []string{"SLURM_JOB_ID=9"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "log")
			p := start(t, c.env, "--model", "A3C", "--steps", "20", "--time-scale", "1000", "--throughputs", table, "--gpu-type", "k80",
				"--ckpt-dir", t.TempDir(), "--sharing-factor", "0.5", "--log", logPath)
			if rc := p.wait(); rc != 0 {
				t.Fatalf("exit %d; stderr: %s", rc, p.stderr)
			}
			e, ok := lastOf(readLog(t, logPath), "start")
			if !ok || math.Abs(e.Rate-want*c.factor) > 1e-9 {
				t.Fatalf("start event %+v, want rate %v", e, want*c.factor)
			}
			if c.factor != 1 && !strings.Contains(e.Msg, "--sharing-factor") {
				t.Errorf("start event does not say why it is slower: %q", e.Msg)
			}
		})
	}
}

// TestShareDir: a job on shards of a GPU trains at the fraction of its
// speed Gavel's table measured beside the model of the job that joins its
// GPU, and at full speed again once that one ends; a job on another GPU of
// the node, or a sharer that died long ago, does not slow it.
func TestShareDir(t *testing.T) {
	table := gavelTable(t)
	tab, err := workload.LoadAll(table)
	if err != nil {
		t.Fatal(err)
	}
	const a, b, gpu, scale = "A3C", "ResNet-18 (batch size 64)", "v100", 1000.0
	ra, rb, sa, sb, ok := tab.Shared(a, b, gpu)
	if !ok || ra/sa > 0.95 {
		t.Fatalf("the table's %s + %s on %s (%v %v %v %v) is no test of a slowdown", a, b, gpu, ra, rb, sa, sb)
	}
	dir, share := t.TempDir(), t.TempDir()
	// A sharer of the same GPU that died without removing its file.
	stale := filepath.Join(share, "n1.gpu0.99")
	if err := os.WriteFile(stale, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	job := func(id, gpuIdx, model string, seconds float64) *proc {
		rate := sa * scale
		if model == b {
			rate = sb * scale
		}
		return start(t, []string{"SLURM_JOB_ID=" + id, "SLURMD_NODENAME=n1", "CUDA_VISIBLE_DEVICES=" + gpuIdx, "SLURM_SHARDS_ON_NODE=1",
			"ROTA_PROGRESS_FILE=" + filepath.Join(dir, id+".progress")},
			"--model", model, "--steps", fmt.Sprint(uint64(rate*seconds)), "--time-scale", fmt.Sprint(scale), "--throughputs", table,
			"--gpu-type", gpu, "--ckpt-dir", dir, "--share-dir", share, "--progress-every", "100ms", "--log", filepath.Join(dir, id+".log"))
	}
	pa := job("1", "0", a, 4)
	waitProgress(t, filepath.Join(dir, "1.progress"), 1)
	pb := job("2", "0", b, 1)   // joins job 1's GPU
	pc := job("3", "1", b, 1.5) // another GPU of the node
	for _, p := range []*proc{pb, pc, pa} {
		if rc := p.wait(); rc != 0 {
			t.Fatalf("exit %d; stderr: %s", rc, p.stderr)
		}
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6*want }
	evA := readLog(t, filepath.Join(dir, "1.log"))
	var rates []Event
	for _, e := range evA {
		if e.Ev == "rate" {
			rates = append(rates, e)
		}
	}
	if s, _ := lastOf(evA, "start"); !near(s.Rate, sa*scale) {
		t.Errorf("job 1 alone at first: start %+v, want rate %v", s, sa*scale)
	}
	if len(rates) != 2 || !near(rates[0].Rate, ra*scale) || !strings.Contains(rates[0].Msg, "job 2 ("+b+")") ||
		!near(rates[1].Rate, sa*scale) || !strings.Contains(rates[1].Msg, "alone") {
		t.Fatalf("job 1's rate changes %+v, want %v beside job 2 then %v alone", rates, ra*scale, sa*scale)
	}
	if s, _ := lastOf(readLog(t, filepath.Join(dir, "2.log")), "start"); !near(s.Rate, rb*scale) {
		t.Errorf("job 2 joined job 1: start %+v, want rate %v", s, rb*scale)
	}
	if s, _ := lastOf(readLog(t, filepath.Join(dir, "3.log")), "start"); !near(s.Rate, sb*scale) {
		t.Errorf("job 3 on another GPU: start %+v, want rate %v", s, sb*scale)
	}
	// Its steps follow the rates: 4 s of work, of which job 2's second ran
	// at ra/sa, takes longer than 4 s by about (sa/ra - 1) x job 2's time.
	if e, ok := lastOf(evA, "end"); !ok || e.Elapsed == nil || *e.Elapsed < 4+0.5*(sa/ra-1) {
		t.Errorf("job 1 ended %+v: sooner than its slowed second allows", e)
	}
	if _, err := os.Stat(filepath.Join(share, "n1.gpu0.1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job 1 left its share file behind: %v", err)
	}
	var out bytes.Buffer
	if rc := summarizeCmd([]string{"--log-dir", dir, "--json"}, &out); rc != 0 {
		t.Fatalf("summarize rc %d", rc)
	}
	var sum struct{ Totals Totals }
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.Totals.Shared != 2 {
		t.Errorf("summarize: %d jobs shared (%v), want 2 (jobs 1 and 2): %s", sum.Totals.Shared, err, out.String())
	}
}
