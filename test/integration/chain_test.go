//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

// A job needing 2.5 x MaxTime of training completes as a chain of
// segments with its progress intact: every segment resumes from the step
// the one before checkpointed, nothing is lost, the last step is the total,
// and the chain is one job in status and explain.
func TestChainPastMaxTime(t *testing.T) {
	maxTimeOneMinute(t)

	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	logs := filepath.Join(dir, "logs")
	os.MkdirAll(logs, 0o777)
	// ResNet-18 (batch size 64) on a V100: 24.09 steps/s (Gavel's table);
	// 3600 steps are 150 s, 2.5 x the one-minute MaxTime.
	const steps = 3600
	sf := trainScript(t, dir, "train.sh", steps, logs+"/$SLURM_JOB_ID.log")
	out, err := run("sbatch", "--parsable", "-J", "chain-e2e", "-o", filepath.Join(dir, "out-%j"), "--gres=gpu:v100:1",
		"--rota-checkpoint-signal=USR1", fmt.Sprintf("--rota-steps=%d", steps), "--rota-throughput=v100:24.09", sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	first := strings.TrimSpace(out)
	id, _ := strconv.ParseUint(first, 10, 32)
	t.Cleanup(func() {
		// Every segment gone before the temporary directory is removed.
		cancelWait("--name=train.sh")
	})
	var chain wire.ChainStatus
	eventually.TrueEvery(t, 8*time.Minute, time.Second, "chain "+first+" to finish", func() bool {
		for _, c := range status(t).Chains {
			if c.ID == uint32(id) {
				chain = c
				return c.State != "running"
			}
		}
		return false
	})
	b, _ := json.MarshalIndent(chain, "", "  ")
	t.Logf("chain: %s", b)
	if chain.State != "done" || len(chain.Segments) < 3 {
		t.Fatalf("chain ended %s with %d segments, want done with at least 3", chain.State, len(chain.Segments))
	}

	// The training logs: one start per segment, each resuming where the
	// one before checkpointed; no lost steps; the end at the total.
	var evs []synthEvent
	files, _ := filepath.Glob(filepath.Join(logs, "*.log"))
	for _, f := range files {
		evs = append(evs, readSynthLog(t, f)...)
	}
	sort.SliceStable(evs, func(a, b int) bool { return evs[a].T < evs[b].T })
	starts, ended, ckpt := checkRuns(t, evs, steps)
	if starts != len(chain.Segments) || !ended || ckpt != steps {
		t.Errorf("%d starts for %d segments, end reached %v, last checkpoint %d; events %+v", starts, len(chain.Segments), ended, ckpt, evs)
	}
	for _, s := range chain.Segments[1:] {
		if s.GapSeconds == nil {
			t.Errorf("segment %d: no gap recorded", s.N)
		} else {
			t.Logf("segment %d (job %d) started %.0f s after segment %d ended", s.N, s.JobID, *s.GapSeconds, s.N-1)
		}
	}

	// Any segment explains as the chain.
	last := chain.Segments[len(chain.Segments)-1].JobID
	out, err = run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, "--json", strconv.FormatUint(uint64(last), 10))
	if err != nil {
		t.Fatalf("rota explain %d: %v %s", last, err, out)
	}
	var rep wire.ExplainReply
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Chain == nil || rep.Chain.ID != uint32(id) {
		t.Errorf("rota explain %d: %v %s", last, err, out)
	}
}

// A chain segment running on a K80 when the V100s free up is moved there
// by the round (checkpointed, requeued, the same job started again on a
// V100) instead of running to its limit on the K80, and the chain manager
// times that segment's boundary from its new run: the chain goes on, and
// every segment resumes where the one before checkpointed.
func TestChainSegmentMovesToFreeType(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	// Filled first: the blockers' 10-minute limits would not pass MaxTime=2.
	blockers := fillFastNodes(t)
	maxTimeMinutes(t, 2)
	logf := filepath.Join(dir, "train.log")
	// 3000 steps of ResNet-18 (batch size 64): 7 min on a K80 (7.05
	// steps/s), a chain of 2-minute segments there; 2 min on a V100.
	const steps = 3000
	sf := trainScript(t, dir, "train.sh", steps, logf)
	off := controllerLogSize()
	name := uniqueName("chain-move")
	out, err := run("sbatch", "--parsable", "-J", name, "-o", filepath.Join(dir, "out-%j"), "--requeue", "--gres=gpu:1",
		"--rota-checkpoint-signal=USR1", fmt.Sprintf("--rota-steps=%d", steps), sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	first := strings.TrimSpace(out)
	id, _ := strconv.ParseUint(first, 10, 32)
	// Every segment (they keep the job's name) gone before the next test.
	t.Cleanup(func() { cancelWait("--name=" + name) })
	chainOf := func() (wire.ChainStatus, bool) {
		for _, c := range status(t).Chains {
			if c.ID == uint32(id) {
				return c, true
			}
		}
		return wire.ChainStatus{}, false
	}
	// Past the minimum lease with a measured rate, well before the
	// segment's boundary (its successor is submitted about 20 s before
	// its limit): free the V100s.
	var seg uint32
	eventually.TrueEvery(t, 3*time.Minute, time.Second, "a segment of chain "+first+" 20 s into its run on the K80", func() bool {
		c, ok := chainOf()
		if !ok {
			return false
		}
		s := c.Segments[len(c.Segments)-1]
		o, _ := run("squeue", "-h", "-j", strconv.FormatUint(uint64(s.JobID), 10), "-o", "%T %N")
		started, err := time.Parse(time.RFC3339, s.Started)
		if strings.TrimSpace(o) != "RUNNING "+node("k80") || err != nil {
			return false
		}
		seg = s.JobID
		ran := time.Since(started)
		return ran >= 20*time.Second && ran < time.Minute
	})
	run("scancel", blockers[0])
	segID := strconv.FormatUint(uint64(seg), 10)
	eventually.True(t, 90*time.Second, "segment "+segID+" moved to a V100 (the same job started again there)", func() bool {
		o, _ := run("squeue", "-h", "-j", segID, "-o", "%T %N")
		return strings.TrimSpace(o) == "RUNNING "+node("v100")
	})
	for _, want := range []string{`"job":` + segID + `,"from":"k80","to":"v100"`, `"job":` + segID + `,"started":`} {
		// The chain manager logs the new run at its next tick.
		eventually.True(t, 10*time.Second, "the controller's log to have "+want, func() bool {
			return strings.Contains(controllerLogFrom(off), want)
		})
	}
	var chain wire.ChainStatus
	eventually.TrueEvery(t, 5*time.Minute, time.Second, "chain "+first+" to finish", func() bool {
		c, ok := chainOf()
		chain = c
		return ok && c.State != "running"
	})
	b, _ := json.MarshalIndent(chain, "", "  ")
	t.Logf("chain: %s", b)
	if chain.State != "done" {
		t.Errorf("chain ended %s, want done", chain.State)
	}
	if _, ended, _ := checkRuns(t, readSynthLog(t, logf), steps); !ended {
		t.Errorf("the training did not end at step %d", steps)
	}
}

// checkRuns checks a training's runs (its synthtrain events in time
// order): each resumes from the step the one before checkpointed, none
// loses steps or is stopped unsaved. It returns how many runs started,
// whether the last ended at steps, and the last checkpoint's step.
func checkRuns(t *testing.T, evs []synthEvent, steps uint64) (starts int, ended bool, ckpt uint64) {
	t.Helper()
	for _, e := range evs {
		switch e.Ev {
		case "start":
			starts++
			t.Logf("run %d started on a %s from step %d", starts, e.GPU, e.ResumedFrom)
			if e.ResumedFrom != ckpt {
				t.Errorf("run %d (on a %s) resumed from step %d, the last checkpoint was at %d", starts, e.GPU, e.ResumedFrom, ckpt)
			}
		case "checkpoint":
			ckpt = e.Step
		case "lost":
			if e.Steps > 0 {
				t.Errorf("lost %d steps", e.Steps)
			}
		case "stop":
			t.Errorf("a run was stopped unsaved (killed at its limit?): %+v", e)
		case "end":
			ended = e.Step == steps
		}
	}
	return starts, ended, ckpt
}

// maxTimeOneMinute sets the gpu partition's MaxTime to one minute for
// this test (maxTimeMinutes).
func maxTimeOneMinute(t *testing.T) { maxTimeMinutes(t, 1) }

// maxTimeMinutes sets the gpu partition's MaxTime to min minutes for this
// test (its own restored after it) and waits until Rota places by it: the
// controller's view, and the plugin, which places from the state the
// controller publishes a moment later. A job the plugin placed with the
// old MaxTime would not be made a chain, and would pend for good
// (PartitionTimeLimit).
func maxTimeMinutes(t *testing.T, min uint32) {
	t.Helper()
	part, _ := run("scontrol", "show", "partition", "gpu", "-o")
	m := regexp.MustCompile(`MaxTime=(\S+)`).FindStringSubmatch(part)
	if m == nil {
		t.Fatalf("partition gpu: %s", part)
	}
	if out, err := run("scontrol", "update", "PartitionName=gpu", fmt.Sprintf("MaxTime=%d", min)); err != nil {
		t.Fatalf("scontrol update partition: %v %s", err, out)
	}
	t.Cleanup(func() { restoreMaxTime(t, m[1]) })
	waitMaxTime(t, min)
	// Work for twice MaxTime on a V100: the plugin gives it MaxTime.
	steps := fmt.Sprintf("--rota-steps=%d", 2*24*60*min)
	eventually.TrueEvery(t, 60*time.Second, 500*time.Millisecond, fmt.Sprintf("the plugin to cap walltimes at MaxTime=%d", min), func() bool {
		id := sbatch(t, "--gres=gpu:1", steps, "--rota-throughput=v100:24.09")
		j := show(t, id)
		run("scancel", strconv.FormatUint(uint64(id), 10))
		return j.TimeLimit == fmt.Sprintf("00:%02d:00", min)
	})
}

// waitMaxTime waits until the controller sees the gpu partition's
// MaxTime as min minutes (it re-reads partitions every refresh, 10 s).
func waitMaxTime(t *testing.T, min uint32) {
	t.Helper()
	eventually.True(t, 60*time.Second, fmt.Sprintf("the controller to see MaxTime=%d", min), func() bool {
		for _, p := range status(t).Partitions {
			if p.Name == "gpu" {
				return p.MaxTimeMin == min
			}
		}
		return false
	})
}

// restoreMaxTime gives the gpu partition back its MaxTime (as `scontrol
// show partition` printed it) and waits until the controller sees it, so
// that the next test's jobs are placed by it, not by a test's.
func restoreMaxTime(t *testing.T, orig string) {
	t.Helper()
	if out, err := run("scontrol", "update", "PartitionName=gpu", "MaxTime="+orig); err != nil {
		t.Errorf("restoring MaxTime=%s: %v %s", orig, err, out)
		return
	}
	min, err := slurmtime.Parse(orig)
	if err != nil {
		t.Errorf("MaxTime %q: %v", orig, err)
		return
	}
	if min == slurmtime.Unlimited {
		min = 0 // as the controller reports an unlimited MaxTime
	}
	waitMaxTime(t, min)
}
