//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/wire"
)

// A node failure under a checkpointable job: Rota has asked it for
// periodic checkpoints (node_mtbf = 2m and a 1 s checkpoint cost: one
// about every 15 s); the node dies (its slurmd, its agent, the job's
// slurmstepd and processes, all killed, and Slurm told it is DOWN); Slurm
// requeues the job, which restarts on another node of a faster type and
// resumes from its latest periodic checkpoint, and `rota explain` shows
// the failure, the requeue and the restart.
func TestNodeFailureResume(t *testing.T) {
	// A move cost of an hour keeps the round loop from migrating the job
	// off the K80 meanwhile (it would, towards the V100 the blocker holds:
	// the blocker is not Rota's, so the policy does not count it).
	restartController(t, "ROTA_DEV_NODE_MTBF=2m", "ROTA_DEV_MOVE_COST=1h")
	t.Cleanup(func() {
		restartController(t)
		// The next test's submissions must find the plugin connected.
		if err := waitPlaced(); err != nil {
			t.Error(err)
		}
	})
	// The blockers below must go through the plugin (a job submitted
	// while it reconnects passes unchanged, and the round loop then does
	// not count its GPUs, so it would send this test's job to them).
	if err := waitPlaced(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	// The job starts on the K80: the simulated agents report 60 % of the
	// GPU's memory in use, so a job that started on a V100 (32 GB) fits
	// nowhere else, one from a K80 (12 GB) fits everywhere. 10,000 steps
	// are 24 min there (7.05 steps/s): no chain, no end within the test.
	blockers := fillFastNodes(t)
	logf := filepath.Join(dir, "train.log")
	sf := filepath.Join(dir, "train.sh")
	script := fmt.Sprintf("#!/bin/bash\nexport ROTA_CHECKPOINT_PERIODIC_SIGNAL=USR2\n"+
		"exec %s --model 'ResNet-18 (batch size 64)' --steps 10000 --throughputs %s --ckpt-dir %s --log %s --ckpt-cost 1s\n",
		filepath.Join(repo, "bin/rota-synthtrain"), filepath.Join(repo, "../shared/data/gavel/simulation_throughputs.json"),
		filepath.Join(dir, "ckpt"), logf)
	if err := os.WriteFile(sf, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := run("sbatch", "--parsable", "-J", uniqueName("ft-e2e"), "-o", filepath.Join(dir, "out"), "--requeue", "--gres=gpu:1",
		"--rota-checkpoint-signal=USR1", sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	id := strings.TrimSpace(out)
	failed := node("k80")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run("scontrol", "show", "job", id)
			t.Logf("the job at the failure:\n%s", out)
		}
		cancelWait(id)
		restoreNode(t, failed)
	})
	eventually.True(t, 60*time.Second, "job "+id+" training on the K80", func() bool {
		evs := readSynthLog(t, logf)
		return len(evs) > 0 && evs[0].Ev == "start" && evs[0].GPU == "k80"
	})
	// Two periodic checkpoints, then a few seconds more of work that the
	// failure will cost.
	var ckpt synthEvent
	eventually.True(t, 90*time.Second, "two periodic checkpoints of job "+id, func() bool {
		n := 0
		for _, e := range readSynthLog(t, logf) {
			if e.Ev == "checkpoint" && e.Reason == "request" {
				n, ckpt = n+1, e
			}
		}
		return n >= 2
	})
	time.Sleep(4 * time.Second) // work past the checkpoint, for the failure to lose
	killNode(t, failed)
	failedAt := time.Now()
	// The V100 frees up: the job's restart goes there.
	run("scancel", blockers[0])

	var evs []synthEvent
	eventually.True(t, 120*time.Second, "job "+id+" restarted after the failure", func() bool {
		evs = readSynthLog(t, logf)
		for _, e := range evs {
			if e.Ev == "start" && e.Restart > 0 {
				return true
			}
		}
		return false
	})
	var last, resumed, lost uint64
	var gpu string
	for _, e := range evs {
		switch {
		case e.Ev == "checkpoint":
			last = e.Step
		case e.Ev == "start" && e.Restart > 0 && gpu == "":
			resumed, gpu = e.ResumedFrom, e.GPU
		case e.Ev == "lost":
			lost = e.Steps
		}
	}
	t.Logf("last checkpoint at step %d, resumed from %d on %s, %d steps lost, restart %s after the failure",
		last, resumed, gpu, lost, time.Since(failedAt).Round(time.Second))
	if last < ckpt.Step || resumed != last || gpu == "k80" || gpu == "" {
		t.Errorf("resumed from step %d on %s; the last checkpoint was at %d: want it, on another type; log %+v", resumed, gpu, last, evs)
	}
	// K80: 7.05 steps/s; at most the time since the last checkpoint (4 s
	// plus the wait for the second one to show) is lost, never more than
	// an interval.
	if lost == 0 || lost > 7*20 {
		t.Errorf("%d steps lost, want some (4 s of work) and at most an interval's", lost)
	}

	var rep wire.ExplainReply
	eventually.True(t, 30*time.Second, "rota explain "+id+" to show the restart", func() bool {
		out, err := run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, "--json", id)
		if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Fault == nil {
			return false
		}
		for _, e := range rep.Fault.Events {
			if e.Kind == "restarted" {
				return true
			}
		}
		return false
	})
	var kinds []string
	for _, e := range rep.Fault.Events {
		kinds = append(kinds, e.Kind)
	}
	b, _ := json.MarshalIndent(rep.Fault, "", "  ")
	t.Logf("explain: %s", b)
	if !strings.HasPrefix(strings.Join(kinds, " "), "node_failed requeued restarted") || rep.Fault.Events[0].Node != failed ||
		!strings.Contains(rep.Fault.Events[2].Text, "step "+strconv.FormatUint(last, 10)) || rep.Fault.Checkpoints < 2 ||
		!strings.Contains(rep.Fault.MTBFSource, "node_mtbf") {
		t.Errorf("explain's fault tolerance part: %s", b)
	}
}

// killNode makes node fail as a real node does: its slurmd and agent die,
// and so do its jobs' slurmstepd and processes (on this one host they
// would outlive the slurmd); Slurm is told it is DOWN rather than left to
// notice after SlurmdTimeout (300 s).
func killNode(t *testing.T, node string) {
	t.Helper()
	for _, f := range []string{"slurmd-" + node + ".pid", "rota-agent-" + node + ".pid"} {
		b, err := os.ReadFile(filepath.Join(devDir, "run", f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Every process Slurm started for the node's jobs sits in its cgroup
	// tree (v1 /slurm_<node>/uid_U/job_J/..., v2
	// <node>_slurmstepd.scope/<job>/...).
	root := nodeCgroupRoot(t, devDir, node)
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("no cgroup tree for %s (%v): the dev cluster must track jobs in cgroups", node, err)
	}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return nil
	})
	if out, err := run("scontrol", "update", "NodeName="+node, "State=DOWN", "Reason=rota-test-node-failure"); err != nil {
		t.Fatalf("scontrol update %s State=DOWN: %v %s", node, err, out)
	}
}

// restoreNode starts node's slurmd and agent again (dev-cluster up is
// idempotent; ReturnToService=2 returns the node once it registers).
func restoreNode(t *testing.T, node string) {
	if out, err := dev("up"); err != nil {
		t.Errorf("dev-cluster up: %v %s", err, out)
		return
	}
	eventually.True(t, 60*time.Second, node+" back in service", func() bool {
		out, _ := run("sinfo", "-h", "-n", node, "-o", "%T")
		s := strings.TrimSpace(out)
		if strings.Contains(s, "down") || strings.Contains(s, "drain") {
			run("scontrol", "update", "NodeName="+node, "State=RESUME")
		}
		return s == "idle" || s == "mixed" || s == "allocated"
	})
}
