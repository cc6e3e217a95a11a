//go:build integration

package integration

import (
	"github.com/rota-hpc/rota/internal/eventually"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issues #22 and #18: on the dev cluster (one node of 4 GPUs per type),
// plain Slurm runs a two-node job across two types. Rota must not make
// it unrunnable: no type constraint that one node per type cannot hold
// (Slurm refused -N2 --gpus-per-node=2 at submission, and left -N2
// --gpus=8 pending for good with Reason=BadConstraints), neither at
// submission nor in the round loop; the job stays as asked, and
// explain says why.
func TestMultiNodeJobsStayRunnable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		tres  func(j job) string // the GPU field the request lands in
		want  string             // as submitted: untyped
		why   string
		asked string // explain's line for it
	}{
		{"-N2 --gpus-per-node=2", []string{"-N2", "--gpus-per-node=2"}, func(j job) string { return j.Raw.TresPerNode }, "gres:gpu:2",
			"no single GPU type has 2 nodes with 2 GPUs each in partition gpu; left as asked",
			"asked gpu any type (per job 0, per node 2, per task 0) on 2 nodes"},
		{"-N2 --gpus=8", []string{"-N2", "--gpus=8"}, func(j job) string { return j.Raw.TresPerJob }, "gres:gpu:8",
			"no single GPU type has 2 nodes with 8 GPUs in all in partition gpu; left as asked",
			"asked gpu any type (per job 8, per node 0, per task 0) on 2 nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Held: sbatch itself fails (and the test with it) if
			// slurmctld refuses the job at submission.
			id := sbatch(t, tc.args...)
			j := show(t, id)
			wantEq(t, "Features", j.Features, "")
			wantEq(t, "GPU request", tc.tres(j), tc.want)
			wantContains(t, j.AdminComment, "rota: gpu any->any")
			ex := explain(t, id)
			wantContains(t, ex, tc.asked)
			wantContains(t, ex, "given gpu kept as asked")
			wantContains(t, ex, "why "+tc.why)
			if r := reason(t, id); r == "BadConstraints" {
				t.Errorf("job %d: Reason=%s", id, r)
			}
		})
	}

	// The round loop skips held jobs: --begin keeps this one pending
	// without a hold, so the loop judges it every round (3 s here).
	out, err := run("sbatch", "--parsable", "-o", "/dev/null", "--begin=now+1hour", "-N2", "--gpus-per-node=2", "--wrap", "sleep 1")
	if err != nil {
		t.Fatalf("sbatch -N2 --gpus-per-node=2 refused: %v %s", err, out)
	}
	sid := strings.TrimSpace(out)
	t.Cleanup(func() { run("scancel", sid) })
	n, _ := strconv.ParseUint(sid, 10, 32)
	id := uint32(n)
	var ex string
	eventually.True(t, 30*time.Second, "a round to judge job "+sid, func() bool {
		ex = explain(t, id)
		return strings.Contains(ex, "last round")
	})
	_, round, _ := strings.Cut(ex, "last round")
	wantContains(t, round, "why no single GPU type has 2 nodes with 2 GPUs each in partition gpu; left as asked")
	j := show(t, id)
	wantEq(t, "Features after a round", j.Features, "")
	wantEq(t, "TresPerNode after a round", j.Raw.TresPerNode, "gres:gpu:2")
	if r := reason(t, id); r != "BeginTime" {
		t.Errorf("job %d after a round: Reason=%s, want BeginTime", id, r)
	}
}

// explain is `rota explain id`, its blanks squeezed; tried again for a
// few seconds while the plugin's record of the decision is on its way.
func explain(t *testing.T, id uint32) string {
	t.Helper()
	sid := strconv.FormatUint(uint64(id), 10)
	var out string
	var err error
	defer func() {
		if err != nil {
			t.Logf("the last rota explain %s: %v\n%s", sid, err, out)
		}
	}()
	eventually.True(t, 10*time.Second, "rota explain "+sid+" to answer", func() bool {
		out, err = run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, sid)
		return err == nil
	})
	return strings.Join(strings.Fields(out), " ")
}

// reason is squeue's Reason for a pending job.
func reason(t *testing.T, id uint32) string {
	t.Helper()
	out, err := run("squeue", "-h", "-j", strconv.FormatUint(uint64(id), 10), "-o", "%r")
	if err != nil {
		t.Fatalf("squeue: %v %s", err, out)
	}
	return strings.TrimSpace(out)
}
