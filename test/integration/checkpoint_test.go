//go:build integration

package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/wire"
)

// trapScript records every checkpoint-like signal it gets in marker, and on
// USR2 reports a checkpoint through its progress file and exits, as a
// training loop would. It waits on a FIFO (marker.fifo, made by the
// caller) rather than with sleep, so that it has no child processes: the
// test counts a job's processes and compares with what the agent signalled.
func trapScript(marker string) string {
	return `trap 'echo USR1 >> ` + marker + `' USR1
trap 'echo USR2 >> ` + marker + `; [ -n "$ROTA_PROGRESS_FILE" ] && echo "step=10 ckpt=10" > "$ROTA_PROGRESS_FILE"; exit 0' USR2
exec 9<>` + marker + `.fifo; while true; do read -t 0.2 -u 9 _; done`
}

// A checkpoint command sent to a node's agent reaches exactly the processes
// of that job, identified from their cgroups: not a second job on the same
// node, not a process outside Slurm, and nothing on another node.
func TestCheckpointReachesOnlyThatJob(t *testing.T) {
	nodeCgroupRoot(t, devDir, node("v100")) // fails when Slurm tracks no cgroups
	t.Logf("jobs tracked in cgroup %s", cgroupMode(devDir))
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	markA, markB, markHost := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "host")
	for _, m := range []string{markA, markB, markHost} {
		if err := syscall.Mkfifo(m+".fifo", 0o666); err != nil {
			t.Fatal(err)
		}
	}

	submit := func(marker string, extra ...string) string {
		args := append([]string{"--parsable", "-o", "/dev/null", "-w", node("v100"), "--gres=gpu:v100:1", "-t", "5"}, extra...)
		args = append(args, "--wrap", trapScript(marker))
		out, err := run("sbatch", args...)
		if err != nil {
			t.Fatalf("sbatch: %v %s", err, out)
		}
		id := strings.TrimSpace(out)
		t.Cleanup(func() { run("scancel", id) })
		return id
	}
	jobA := submit(markA, "--rota-checkpoint-signal=USR2")
	jobB := submit(markB)
	for _, id := range []string{jobA, jobB} {
		eventually.True(t, 60*time.Second, "job "+id+" running", func() bool {
			out, _ := run("squeue", "-h", "-j", id, "-o", "%T")
			return strings.TrimSpace(out) == "RUNNING"
		})
	}
	// A process outside Slurm with the same traps.
	host := exec.Command("bash", "-c", trapScript(markHost))
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	time.Sleep(500 * time.Millisecond) // let every trap be installed

	creds, err := auth.ClientOptions(filepath.Join(devDir, "creds", "controller.nk"), "")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natsURL, creds...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	results := make(chan *nats.Msg, 8)
	if _, err := nc.ChanSubscribe(wire.SubjectAgentCheckpointResult(node("v100")), results); err != nil {
		t.Fatal(err)
	}
	ask := func(node string, job string) wire.CheckpointReply {
		t.Helper()
		id, _ := strconv.ParseUint(job, 10, 32)
		b, _ := json.Marshal(wire.CheckpointRequest{V: wire.Version, JobID: uint32(id), GraceSeconds: 10, ID: "it-" + job + "-" + node})
		m, err := nc.Request(wire.SubjectAgentCheckpoint(node), b, 10*time.Second)
		if err != nil {
			t.Fatalf("checkpoint request to %s: %v", node, err)
		}
		var r wire.CheckpointReply
		if err := wire.Decode(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}

	// The k80 node's agent has none of job A's processes.
	if r := ask(node("k80"), jobA); r.Accepted || r.Processes != 0 {
		t.Fatalf("node-k80 agent signalled job %s, which runs on node-v100: %+v", jobA, r)
	}
	// The job's own tasks, as Slurm placed them: its step cgroups (the
	// job-level cgroup holds Slurm's slurmstepd, which must not be hit).
	// On cgroup v2 a step's tasks are in step_<s>/user/..., its slurmstepd
	// in step_<s>/slurm.
	jobDir := jobCgroup(t, testCluster, node("v100"), jobA)
	t.Logf("job %s's cgroup: %s", jobA, jobDir)
	tasks := 0
	filepath.WalkDir(jobDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" || !strings.Contains(p, "/step_") || strings.Contains(p, "/slurm/") {
			return nil
		}
		b, _ := os.ReadFile(p)
		tasks += len(strings.Fields(string(b)))
		return nil
	})
	r := ask(node("v100"), jobA)
	if !r.Accepted || r.Processes == 0 || r.Signal != "SIGUSR2" {
		t.Fatalf("checkpoint reply %+v", r)
	}
	if r.Processes != tasks {
		t.Errorf("signalled %d processes; job %s has %d tasks in its step cgroups", r.Processes, jobA, tasks)
	}
	var res wire.CheckpointResult
	select {
	case m := <-results:
		if err := wire.Decode(m.Data, &res); err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no checkpoint result within 20 s")
	}
	if res.Outcome != wire.CheckpointAcknowledged && res.Outcome != wire.CheckpointExited {
		t.Fatalf("outcome %+v", res)
	}
	t.Logf("job %s: %s by %s, %d processes signalled", jobA, res.Outcome, res.Signal, res.Signalled)

	if b, _ := os.ReadFile(markA); !strings.Contains(string(b), "USR2") {
		t.Errorf("job %s never got its checkpoint signal (marker %q)", jobA, b)
	}
	if b, err := os.ReadFile(markB); err == nil {
		t.Errorf("job %s, on the same node, was signalled: %q", jobB, b)
	}
	if b, err := os.ReadFile(markHost); err == nil {
		t.Errorf("a process outside Slurm was signalled: %q", b)
	}
	if err := host.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process outside Slurm is gone: %v", err)
	}
	if out, _ := run("squeue", "-h", "-j", jobB, "-o", "%T"); strings.TrimSpace(out) != "RUNNING" {
		t.Errorf("job %s is %q, want still RUNNING", jobB, strings.TrimSpace(out))
	}
}
