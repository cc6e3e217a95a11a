//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

// Issue #22: a job whose --rota-throughput hint is ten times too
// optimistic gets a one-minute limit from Rota but needs about two and a
// half; its user asked ten. Plain Slurm would let it finish; with Rota the
// round loop raises the limit from the job's measured progress (or gives
// its user's back) before it runs out, so it completes, never past the
// user's ten minutes, and explain shows each change.
func TestLimitFollowsProgress(t *testing.T) {
	// Without the dev cluster's 5-minute overhead on every walltime, a
	// job of seconds gets a limit of a minute.
	restartController(t, "ROTA_DEV_WALLTIME_OVERHEAD_MIN=0")
	t.Cleanup(func() {
		restartController(t)
		if err := waitPlaced(); err != nil {
			t.Error(err)
		}
	})
	// The plugin places with the last state it got, which may be the old
	// controller's for a while: probe until a held twin gets the minute.
	eventually.TrueEvery(t, 60*time.Second, time.Second, "the plugin to place with the new controller's rule", func() bool {
		probe := sbatch(t, "-t", "10", "--gres=gpu:v100:1", "--rota-steps=3614", "--rota-throughput=v100:240.9")
		defer run("scancel", strconv.FormatUint(uint64(probe), 10))
		return show(t, probe).TimeLimit == "00:01:00"
	})

	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	// ResNet-18 (batch size 64) on a V100: 24.09 steps/s (Gavel's table),
	// so 3614 steps take 150 s; the hint says 240.9, so Rota reckons
	// 3614 / 240.9 x 1.5 margin = 22.5 s: one minute.
	const steps, userMin = 3614, 10
	sf := trainScript(t, dir, "slow.sh", steps, dir+"/$SLURM_JOB_ID.log")
	out, err := run("sbatch", "--parsable", "-J", "limit-follow", "-o", filepath.Join(dir, "out-%j"), "-t", strconv.Itoa(userMin),
		"--gres=gpu:v100:1", fmt.Sprintf("--rota-steps=%d", steps), "--rota-throughput=v100:240.9", sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { run("scancel", id) })
	n, _ := strconv.ParseUint(id, 10, 32)
	if j := show(t, uint32(n)); j.TimeLimit != "00:01:00" {
		t.Fatalf("Rota gave TimeLimit %s (AdminComment %q), want 00:01:00: the test needs a limit shorter than the job", j.TimeLimit, j.AdminComment)
	}

	// Follow the job to its end, logging its limit as it changes.
	var state, limit, ran string
	maxLimit := uint32(1)
	eventually.TrueEvery(t, 5*time.Minute, time.Second, "job "+id+" to end", func() bool {
		s, l, r := jobTimes(t, id)
		if l != limit {
			t.Logf("limit at %s = %s (%s)", r, l, s)
			if m, err := slurmtime.Parse(l); err == nil {
				maxLimit = max(maxLimit, m)
			}
		}
		state, limit, ran = s, l, r
		return state != "PENDING" && state != "RUNNING" && state != "COMPLETING" && state != "CONFIGURING"
	})
	t.Logf("job %s ended %s after %s under a limit of %s", id, state, ran, limit)
	if state != "COMPLETED" {
		b, _ := os.ReadFile(filepath.Join(dir, "out-"+id))
		t.Fatalf("job %s ended %s, want COMPLETED (its output: %s)", id, state, b)
	}
	if maxLimit <= 1 || maxLimit > userMin {
		t.Errorf("the limit went up to %d min: want raised above Rota's 1 and at most the user's %d", maxLimit, userMin)
	}
	var end uint64
	for _, e := range readSynthLog(t, filepath.Join(dir, id+".log")) {
		if e.Ev == "end" {
			end = e.Step
		}
	}
	if end != steps {
		t.Errorf("the job ended at step %d, want %d", end, steps)
	}

	// explain: every change, old -> new and why.
	out, err = run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, id)
	if err != nil {
		t.Fatalf("rota explain %s: %v %s", id, err, out)
	}
	t.Logf("rota explain %s:\n%s", id, out)
	out, err = run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, "--json", id)
	if err != nil {
		t.Fatalf("rota explain --json %s: %v %s", id, err, out)
	}
	var rep wire.ExplainReply
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Decision == nil {
		t.Fatalf("rota explain --json %s: %v %s", id, err, out)
	}
	ls := rep.Decision.Limits
	if len(ls) == 0 || ls[0].FromMin != 1 || ls[len(ls)-1].ToMin != maxLimit || ls[0].Why == "" {
		t.Errorf("explain's limit changes %+v: want the first from 1 min, the last to %d", ls, maxLimit)
	}
}

var jobTimesRe = regexp.MustCompile(`(JobState|RunTime|TimeLimit)=(\S+)`)

// jobTimes reads a job's state, time limit and run time (m:ss) from
// scontrol, which knows it for MinJobAge after its end.
func jobTimes(t *testing.T, id string) (state, limit, ran string) {
	t.Helper()
	out, err := run("scontrol", "show", "job", id)
	if err != nil {
		t.Fatalf("scontrol show job %s: %v %s", id, err, out)
	}
	for _, m := range jobTimesRe.FindAllStringSubmatch(out, -1) {
		switch m[1] {
		case "JobState":
			state = m[2]
		case "TimeLimit":
			limit = m[2]
		case "RunTime":
			ran = strings.TrimPrefix(strings.TrimPrefix(m[2], "00:"), "0")
		}
	}
	return state, limit, ran
}
