//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/decisions"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

// The round loop corrects a pending job's type: a job left on the K80
// (as if the type chosen at submission had gone stale) is moved to the
// type the policy gives it, with a walltime for that type.
func TestRoundRetypesPendingJob(t *testing.T) {
	logOff := controllerLogSize()
	// --begin keeps it pending without a hold (the loop leaves held jobs
	// alone): Reason=BeginTime.
	// The loop manages only jobs the plugin placed. The previous test
	// restarted the controller: wait until the plugin has its state; then
	// one job, which must be placed (a fail-open now is a failure).
	if err := waitPlaced(); err != nil {
		t.Fatal(err)
	}
	out, err := run("sbatch", "--parsable", "-o", "/dev/null", "--begin=now+1hour", "--gres=gpu:1",
		"--rota-steps=36000", "--rota-throughput=v100:10,p100:8,k80:3", "--wrap", "sleep 1")
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { run("scancel", id) })
	n, _ := strconv.ParseUint(id, 10, 32)
	if j := show(t, uint32(n)); !strings.HasPrefix(j.AdminComment, "rota:") {
		t.Fatalf("job %s has no Rota decision though the plugin was ready: it failed open (AdminComment %q)", id, j.AdminComment)
	} else if typeByGres() && j.Features != "" {
		// 24.11 and later: typed in the GPU request, where typed limits
		// count it, from the controller's first view on (it restarted
		// just before, in TestLimitFollowsProgress).
		t.Fatalf("job %s placed by node constraint %q on a release that types GPU requests", id, j.Features)
	}
	setType(t, id, "k80")
	if out, err := run("scontrol", "update", "JobId="+id, "TimeLimit=2-00:00:00"); err != nil {
		t.Fatalf("scontrol update: %v %s", err, out)
	}
	var j job
	retyped := false
	defer func() {
		if !retyped {
			logWhy(t, id, logOff)
			t.Logf("job %s last seen with type %q", id, rotaType(j))
		}
	}()
	eventually.True(t, 30*time.Second, "the round loop to retype job "+id+" to v100", func() bool {
		j = show(t, uint32(n))
		return rotaType(j) == "v100"
	})
	retyped = true
	// 36000 steps at 10/s, x1.5 margin, + 5 min.
	wantEq(t, "TimeLimit", j.TimeLimit, "01:35:00")
	if typeByGres() {
		wantEq(t, "Features", j.Features, "")
	} else {
		wantEq(t, "raw TresPerNode", j.Raw.TresPerNode, "gres:gpu:1")
	}
	// Ordered by nice (order = nice, the default): Slurm's multifactor
	// priority stays, Rota's order moves it by at most half the span.
	out, _ = run("squeue", "-h", "-j", id, "-o", "%Q %y")
	var prio, nice int
	if _, err := fmt.Sscan(out, &prio, &nice); err != nil || prio >= 1_000_000 || nice < -5000 || nice > 5000 {
		t.Errorf("priority and nice %q: want multifactor's priority (no admin priority) and a nice within ±5000", out)
	}
}

// The controller's queue read (squeue with its admin_comment field) finds
// the decision id the plugin wrote, the one `scontrol show job -o` shows:
// the round loop binds new jobs without a second read of every job.
func TestQueueReadCarriesDecision(t *testing.T) {
	id := sbatch(t, "--gres=gpu:1")
	j := show(t, id)
	want := slurm.DecisionInComment(j.AdminComment)
	if want == "" {
		t.Fatalf("job %d: no decision id in AdminComment %q", id, j.AdminComment)
	}
	cli := &slurm.CLI{Env: []string{"SLURM_CONF=" + filepath.Join(devDir, "slurm.conf")}}
	jobs, err := cli.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range jobs {
		if q.ID == id {
			found = true
			if !q.DecisionRead || q.Decision != want {
				t.Errorf("queue read: decision %q (read %v), want %q", q.Decision, q.DecisionRead, want)
			}
		}
	}
	if !found {
		t.Fatalf("job %d not in the queue read", id)
	}
	out, err := run("scontrol", "show", "job", "-o")
	if err != nil {
		t.Fatalf("scontrol show job -o: %v %s", err, out)
	}
	if got := slurm.ParseDecisionIDs(out)[id]; got != want {
		t.Errorf("scontrol show job -o: decision %q, want %q", got, want)
	}
}

// synthEvent is one line of rota-synthtrain's log.
type synthEvent struct {
	Ev          string  `json:"ev"`
	GPU         string  `json:"gpu"`
	Step        uint64  `json:"step"`
	ResumedFrom uint64  `json:"resumed_from"`
	Steps       uint64  `json:"steps"`
	Restart     int     `json:"restart"`
	Reason      string  `json:"reason"`
	T           float64 `json:"t"`
}

// trainScript writes dir/name, a batch script in which bin/rota-synthtrain
// trains ResNet-18 (batch size 64) for steps at Gavel's speed on the GPU
// type Slurm gave it (V100 24.09 steps/s, P100 22.30, K80 7.05),
// checkpointing into dir/ckpt and appending its events to logPath (the
// script expands it: $SLURM_JOB_ID works); it returns the script's path.
func trainScript(t *testing.T, dir, name string, steps int, logPath string) string {
	t.Helper()
	synth := filepath.Join(repo, "bin/rota-synthtrain")
	if _, err := os.Stat(synth); err != nil {
		t.Fatal("bin/rota-synthtrain missing: run make build")
	}
	table := filepath.Join(repo, "../shared/data/gavel/simulation_throughputs.json")
	if _, err := os.Stat(table); err != nil {
		t.Fatalf("Gavel's table: %v", err)
	}
	// --derive-type: Gavel measured no A100; the dev cluster's MIG node
	// (ROTA_DEV_MIG) takes it as twice a V100, as its speed.a100 does, and
	// a slice runs at its share of that.
	script := fmt.Sprintf("#!/bin/bash\nexec %s --model 'ResNet-18 (batch size 64)' --steps %d --time-scale 1 --derive-type 'a100=v100*2' --throughputs %s --ckpt-dir %s --log %s\n",
		synth, steps, table, filepath.Join(dir, "ckpt"), logPath)
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func readSynthLog(t *testing.T, path string) []synthEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var evs []synthEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e synthEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			evs = append(evs, e)
		}
	}
	return evs
}

// A migration end to end: a job that could only start on a K80 moves to
// the V100 once one frees up: the node agent checkpoints it on its
// signal, Slurm requeues it constrained to the V100, and it resumes from
// its checkpoint there, losing no step.
func TestMigrationEndToEnd(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	// Fill the V100 and P100 nodes with jobs whose users chose their type.
	blockers := fillFastNodes(t)
	logf := filepath.Join(dir, "train.log")
	// ResNet-18 (batch size 64) at time scale 1: about 18 steps/s on a
	// V100 and 3 on a K80 (Gavel's table); 3000 steps = ~17 min on the K80.
	sf := trainScript(t, dir, "train.sh", 3000, logf)
	// A name of its own, new at every run: the estimators pool rates by
	// user and job name, and what other tests' train.sh jobs taught them
	// (TestChainPastMaxTime runs the same model on a V100), or this test's
	// own earlier runs on a dev cluster whose state is kept, would make this
	// job wait for a V100 instead of starting on the free K80.
	out, err := run("sbatch", "--parsable", "-J", uniqueName("migration-e2e"), "-o", filepath.Join(dir, "out"), "--requeue", "--gres=gpu:1",
		"--rota-checkpoint-signal=USR1", "--rota-steps=3000", sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run("scontrol", "show", "job", id)
			t.Logf("the job at the failure:\n%s", out)
		}
		// Gone before its temporary directory is removed: on SIGTERM it
		// still writes there.
		cancelWait(id)
	})
	eventually.True(t, 60*time.Second, "job "+id+" training on the K80", func() bool {
		evs := readSynthLog(t, logf)
		return len(evs) > 0 && evs[0].Ev == "start" && evs[0].GPU == "k80"
	})
	// Past the dev cluster's minimum lease (20 s) and with a measured
	// rate, free the V100s.
	time.Sleep(20 * time.Second)
	run("scancel", blockers[0])
	var evs []synthEvent
	eventually.True(t, 120*time.Second, "job "+id+" resumed on the V100", func() bool {
		evs = readSynthLog(t, logf)
		for _, e := range evs {
			if e.Ev == "start" && e.GPU == "v100" {
				return true
			}
		}
		return false
	})
	var ckpt, resumed uint64
	for _, e := range evs {
		switch {
		case e.Ev == "checkpoint":
			ckpt = e.Step
		case e.Ev == "start" && e.GPU == "v100":
			resumed = e.ResumedFrom
		case e.Ev == "lost" && e.Steps > 0:
			t.Errorf("the job lost %d steps across the migration", e.Steps)
		}
	}
	if ckpt == 0 || resumed != ckpt {
		t.Errorf("checkpoint at step %d, resumed from %d; log %+v", ckpt, resumed, evs)
	}
	st := status(t)
	if st.Rounds == nil || st.Rounds.Migrations < 1 {
		t.Errorf("rota status: rounds %+v, want at least one migration", st.Rounds)
	}
	// And Prometheus sees it.
	m := scrape(t)
	if !regexp.MustCompile(`(?m)^rota_controller_migrations_total [1-9]`).MatchString(m) ||
		!regexp.MustCompile(`(?m)^rota_controller_round_duration_seconds_count [1-9]`).MatchString(m) ||
		!regexp.MustCompile(`(?m)^rota_controller_decisions_total [1-9]`).MatchString(m) {
		t.Errorf("/metrics:\n%s", m)
	}
}

// scrape reads the controller's /metrics.
func scrape(t *testing.T) string {
	t.Helper()
	port := strings.TrimPrefix(natsURL, "nats://127.0.0.1:")
	p, _ := strconv.Atoi(port)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", p+1))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitRunning(t *testing.T, id string) {
	t.Helper()
	eventually.True(t, 60*time.Second, "job "+id+" running", func() bool {
		out, _ := run("squeue", "-h", "-j", id, "-o", "%T")
		return strings.TrimSpace(out) == "RUNNING"
	})
}

// status is `rota status --jobs --json`.
func status(t *testing.T) wire.StatusReply {
	t.Helper()
	out, err := run(filepath.Join(repo, "bin/rota"), "status", "--nats", natsURL, "--jobs", "--json")
	if err != nil {
		t.Fatalf("rota status: %v %s", err, out)
	}
	var st wire.StatusReply
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("rota status --json: %v: %s", err, out)
	}
	return st
}

// kill -9 of the controller mid-workload loses nothing it acknowledged:
// after the restart the round loop's counters, jobs and moves are where
// the last round left them, every decision still explains its job, and a
// running job carries on.
func TestControllerKill9KeepsState(t *testing.T) {
	// A pending job the loop has taken in (it retypes it) and a running one.
	out, err := run("sbatch", "--parsable", "-o", "/dev/null", "--begin=now+1hour", "--gres=gpu:1",
		"--rota-steps=36000", "--rota-throughput=v100:10,p100:8,k80:3", "--wrap", "sleep 1")
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	pending := strings.TrimSpace(out)
	t.Cleanup(func() { run("scancel", pending) })
	out, err = run("sbatch", "--parsable", "-o", "/dev/null", "--gres=gpu:1", "-t", "10", "--wrap", "sleep 300")
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	running := strings.TrimSpace(out)
	t.Cleanup(func() { run("scancel", running) })
	waitRunning(t, running)
	setType(t, pending, "k80")
	n, _ := strconv.ParseUint(pending, 10, 32)
	eventually.True(t, 30*time.Second, "the loop to retype job "+pending, func() bool { return rotaType(show(t, uint32(n))) == "v100" })
	before := status(t).Rounds
	if before == nil || before.Rounds == 0 {
		t.Fatalf("rounds before the kill: %+v", before)
	}
	// Both jobs are explained (their decisions bound to them) before the
	// kill. Let one more round save its state, then kill.
	for _, id := range []string{pending, running} {
		// A loaded machine can take longer than the CLI's 5 s to answer.
		eventually.True(t, 60*time.Second, "rota explain "+id+" before the kill", func() bool {
			_, err := run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, id)
			return err == nil
		})
	}
	r0 := status(t).Rounds.Rounds
	eventually.True(t, 60*time.Second, "two more rounds, which save the loop's state", func() bool { return status(t).Rounds.Rounds >= r0+2 })
	before = status(t).Rounds
	pid := controllerPid(t)
	// A third job submitted the instant before the kill: its decision
	// (very likely) reached the controller's journal but not yet
	// JetStream; the journal survives kill -9. With local placement the
	// plugin sends the record as the job is created; the kill waits until
	// the journal has it (a record still in flight when a controller dies
	// is lost: docs/architecture.md).
	out, err = run("sbatch", "--parsable", "-o", "/dev/null", "--begin=now+1hour", "--gres=gpu:1", "--wrap", "sleep 1")
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	late := strings.TrimSpace(out)
	t.Cleanup(func() { run("scancel", late) })
	lateID, _ := strconv.ParseUint(late, 10, 32)
	did := wire.DecisionIDFromComment(show(t, uint32(lateID)).AdminComment)
	if did == "" {
		t.Fatalf("job %s was not placed", late)
	}
	eventually.True(t, 5*time.Second, "decision "+did+" in the controller's journal", func() bool {
		b, _ := os.ReadFile(filepath.Join(devDir, "controller", decisions.JournalFile))
		return bytes.Contains(b, []byte(did))
	})
	if out, err := run("kill", "-9", strconv.Itoa(pid)); err != nil {
		t.Fatalf("kill -9: %v %s", err, out)
	}
	eventually.True(t, 10*time.Second, "the killed controller gone", func() bool { return syscall.Kill(pid, 0) != nil })
	if out, err := dev("controller", "start"); err != nil {
		t.Fatalf("controller start: %v %s", err, out)
	}
	var after *wire.RoundsStatus
	eventually.True(t, 30*time.Second, "the restarted controller's round loop", func() bool {
		out, err := run(filepath.Join(repo, "bin/rota"), "status", "--nats", natsURL, "--json")
		if err != nil {
			return false
		}
		var st wire.StatusReply
		if json.Unmarshal([]byte(out), &st) != nil || st.Rounds == nil {
			return false
		}
		after = st.Rounds
		return true
	})
	if after.Rounds < before.Rounds || after.Migrations < before.Migrations || after.Retyped < before.Retyped {
		t.Errorf("counters went back: before %+v after %+v", before, after)
	}
	for _, id := range []string{pending, running, late} {
		if out, err := run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, id); err != nil {
			t.Errorf("rota explain %s after the restart: %v %s", id, err, out)
		}
	}
	if out, _ := run("squeue", "-h", "-j", running, "-o", "%T"); strings.TrimSpace(out) != "RUNNING" {
		t.Errorf("job %s: %q after the controller's restart, want RUNNING", running, out)
	}
	// The loop goes on: the pending job keeps its type (no flip back).
	r1 := after.Rounds
	eventually.True(t, 60*time.Second, "two rounds after the restart", func() bool { return status(t).Rounds.Rounds >= r1+2 })
	if f := rotaType(show(t, uint32(n))); f != "v100" {
		t.Errorf("pending job's type %q after the restart", f)
	}
}

// typeByGres: on 24.11 and later Rota writes a job's type into its GPU
// request, where Slurm can change it while the job waits; on 22.05 as a
// node constraint (docs/rounds.md, "How Rota writes a type").
func typeByGres() bool { return !onHostRelease() }

// onHostRelease: the tests run on the host's Slurm, 22.05 (ROTA_SLURM
// unset or 22.05).
func onHostRelease() bool { return release == "" || release == "22.05" }

// setType gives pending job id the type typ as Rota would write it: a
// stale choice for the round loop to correct.
func setType(t *testing.T, id, typ string) {
	t.Helper()
	set := "Features=" + typ
	if typeByGres() {
		set = "TresPerNode=gres/gpu:" + typ + ":1"
	}
	if out, err := run("scontrol", "update", "JobId="+id, set); err != nil {
		t.Fatalf("scontrol update %s: %v %s", set, err, out)
	}
}

// rotaType is the type Rota wrote on job j ("" none).
func rotaType(j job) string {
	if typeByGres() {
		if m := typed.FindStringSubmatch(j.Raw.TresPerNode); m != nil {
			return m[1]
		}
		return ""
	}
	return j.Features
}

// logWhy logs what the queue, Rota's explain and the controller's log
// (from byte off) say, for a job that did not get what a test waited for.
func logWhy(t *testing.T, id string, off int64) {
	t.Helper()
	out, _ := run("squeue", "-a", "-o", "%i %u %T %r %b %f %Q %y %N")
	t.Logf("squeue:\n%s", out)
	out, _ = run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, id)
	t.Logf("rota explain %s:\n%s", id, out)
	lines := strings.Split(strings.TrimSpace(controllerLogFrom(off)), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	t.Logf("controller log since the job's submission:\n%s", strings.Join(lines, "\n"))
}

// fillFastNodes fills the V100 and P100 nodes with jobs whose users chose
// their type (cancelled after the test), and returns their ids once they
// run.
func fillFastNodes(t *testing.T) []string {
	t.Helper()
	var blockers []string
	for _, typ := range []string{"v100", "p100"} {
		out, err := run("sbatch", "--parsable", "-o", "/dev/null", "-w", node(typ), "--gres=gpu:"+typ+":4", "-t", "10", "--wrap", "sleep 600")
		if err != nil {
			t.Fatalf("sbatch blocker: %v %s", err, out)
		}
		blockers = append(blockers, strings.TrimSpace(out))
	}
	t.Cleanup(func() { run("scancel", blockers...) })
	for _, b := range blockers {
		waitRunning(t, b)
	}
	// Running is not yet placed-around: the plugin places from the state
	// the controller last published, which counts the blockers only after
	// its next read of Slurm (and a controller a test just restarted
	// publishes none at first). A held probe given the K80 says it does.
	if err := waitPlaced(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 30*time.Second, "the plugin placing around the filled V100 and P100", func() bool {
		out, err := run("sbatch", "--parsable", "-H", "-o", "/dev/null", "--gres=gpu:1", "--wrap", "true")
		if err != nil {
			return false
		}
		id := strings.TrimSpace(out)
		show, _ := run("scontrol", "show", "job", id)
		run("scancel", id)
		m := placedRe.FindStringSubmatch(show)
		return m != nil && m[1] == "k80"
	})
	return blockers
}

// uniqueName is prefix made new for this run: a job the estimators have
// learnt nothing about.
func uniqueName(prefix string) string {
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// An admin lowers the partition's MaxTime below the limit Rota gave a
// job that is still pending. Slurm then keeps it pending for good
// (PartitionTimeLimit), where plain Slurm would have started a job
// without --time under the new MaxTime; the round loop lowers the limit
// and the job runs.
func TestLoweredMaxTimeStrandsNoJob(t *testing.T) {
	if err := waitPlaced(); err != nil {
		t.Fatal(err)
	}
	// Held (sbatch's -H) while MaxTime changes: about 95 minutes of work.
	id := sbatch(t, "--gres=gpu:1", "--rota-steps=36000", "--rota-throughput=v100:10,p100:10,k80:10")
	j := show(t, id)
	if !strings.HasPrefix(j.AdminComment, "rota:") {
		t.Fatalf("job %d has no Rota decision though the plugin was ready: it failed open (AdminComment %q)", id, j.AdminComment)
	}
	if m, err := slurmtime.Parse(j.TimeLimit); err != nil || m <= 2 {
		t.Fatalf("job %d: limit %q from Rota, want one above 2 minutes", id, j.TimeLimit)
	}
	part, _ := run("scontrol", "show", "partition", "gpu", "-o")
	m := regexp.MustCompile(`MaxTime=(\S+)`).FindStringSubmatch(part)
	if m == nil {
		t.Fatalf("partition gpu: %s", part)
	}
	logOff := controllerLogSize()
	if out, err := run("scontrol", "update", "PartitionName=gpu", "MaxTime=2"); err != nil {
		t.Fatalf("scontrol update partition: %v %s", err, out)
	}
	t.Cleanup(func() { restoreMaxTime(t, m[1]) })
	ids := strconv.FormatUint(uint64(id), 10)
	if out, err := run("scontrol", "release", ids); err != nil {
		t.Fatalf("scontrol release: %v %s", err, out)
	}
	eventually.True(t, 90*time.Second, "the job to start under the lowered MaxTime", func() bool {
		out, _ := run("scontrol", "show", "job", ids)
		return !strings.Contains(out, "JobState=PENDING") && strings.Contains(out, "TimeLimit=00:02:00")
	})
	if log := controllerLogFrom(logOff); !strings.Contains(log, "lowering the time limit Rota gave a pending job") {
		t.Errorf("the controller's log does not say why it lowered the limit:\n%s", log)
	}
}
