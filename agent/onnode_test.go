package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rota-hpc/rota/agent/jobs"
	"github.com/rota-hpc/rota/wire"
)

// A requeued job keeps its id and progress file but may restart on
// another node: the agent of its old node must stop reporting it and the
// new node's must start, within a rescan.
func TestOnThisNodeFollowsRequeue(t *testing.T) {
	root := t.TempDir()
	proc := func(pid, node string) {
		dir := filepath.Join(root, pid)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "environ"), []byte("SLURM_JOB_ID=8\x00SLURMD_NODENAME="+node+"\x00"), 0o644)
	}
	proc("100", "node-k80")
	prog := map[uint32]wire.JobProgress{8: {Step: 10, StepsPerSec: 5}}
	k80 := &Agent{opts: Options{Node: "node-k80", JobNodeFromEnviron: true}, proc: jobs.Proc{Root: root}}
	v100 := &Agent{opts: Options{Node: "node-v100", JobNodeFromEnviron: true}, proc: jobs.Proc{Root: root}}
	if _, ok := k80.onThisNode(prog)[8]; !ok {
		t.Fatal("job 8 not seen on its node")
	}
	if _, ok := v100.onThisNode(prog)[8]; ok {
		t.Fatal("job 8 seen on another node")
	}
	// Requeued: the old process is gone, a new one runs on node-v100.
	os.RemoveAll(filepath.Join(root, "100"))
	proc("200", "node-v100")
	k80.jobScan = time.Now().Add(-time.Minute)
	v100.jobScan = time.Now().Add(-time.Minute)
	if _, ok := k80.onThisNode(prog)[8]; ok {
		t.Error("the old node's agent still reports the requeued job")
	}
	if p, ok := v100.onThisNode(prog)[8]; !ok {
		t.Error("the new node's agent does not report the requeued job")
	} else if p.StepsPerSec != 0 {
		t.Errorf("the new node reports the rate measured on the old one: %v", p.StepsPerSec)
	}
}
