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
	var starts int
	var ckpt uint64
	var ended bool
	for _, e := range evs {
		switch e.Ev {
		case "start":
			if e.ResumedFrom != ckpt {
				t.Errorf("segment %d resumed from step %d, the last checkpoint was at %d", starts+1, e.ResumedFrom, ckpt)
			}
			starts++
		case "checkpoint":
			ckpt = e.Step
		case "lost":
			if e.Steps > 0 {
				t.Errorf("lost %d steps", e.Steps)
			}
		case "stop":
			t.Errorf("a segment was stopped unsaved (killed at its limit?): %+v", e)
		case "end":
			ended = e.Step == steps
		}
	}
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

// maxTimeOneMinute sets the gpu partition's MaxTime to one minute for
// this test (its own restored after it) and waits until Rota places by
// it: the controller's view, and the plugin, which places from the state
// the controller publishes a moment later. A job the plugin placed with
// the old MaxTime would not be made a chain, and would pend for good
// (PartitionTimeLimit).
func maxTimeOneMinute(t *testing.T) {
	t.Helper()
	part, _ := run("scontrol", "show", "partition", "gpu", "-o")
	m := regexp.MustCompile(`MaxTime=(\S+)`).FindStringSubmatch(part)
	if m == nil {
		t.Fatalf("partition gpu: %s", part)
	}
	if out, err := run("scontrol", "update", "PartitionName=gpu", "MaxTime=1"); err != nil {
		t.Fatalf("scontrol update partition: %v %s", err, out)
	}
	t.Cleanup(func() { restoreMaxTime(t, m[1]) })
	waitMaxTime(t, 1)
	eventually.TrueEvery(t, 60*time.Second, 500*time.Millisecond, "the plugin to cap walltimes at MaxTime=1", func() bool {
		id := sbatch(t, "--gres=gpu:1", "--rota-steps=3600", "--rota-throughput=v100:24.09")
		j := show(t, id)
		run("scancel", strconv.FormatUint(uint64(id), 10))
		return j.TimeLimit == "00:01:00"
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
