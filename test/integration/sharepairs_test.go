//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/eventually"
)

// pairModel is a job type of Gavel's table that gets twice the work done
// when two of it share a V100 (the table's pair row), far above the
// default margin of 1.1.
const pairModel = "ResNet-18 (batch size 64)"

// TestSharePairs: space sharing on real Slurm (space_sharing = true, the
// V100s offered as two shards each). Two of four V100s are busy with jobs
// their user typed; three one-GPU jobs that say what they train wait for
// their begin time: two that may share (--rota-share=yes), one that says
// --rota-share=no. On 24.11 and later a round makes the two a pair: each
// asks half a GPU's shards, typed v100 by constraint, and they run
// together on one GPU while the third has a GPU of its own; all complete,
// and rota explain says why each went where it did. On 22.05, where Slurm
// keeps a pending job's whole GPU when asked for shards, the controller
// says at start that it pairs nothing, and no job gets shards.
//
// Then (24.11 and later) a pair that hurts: two such jobs that can be
// checkpointed, whose trainers run at 0.1 of their speed on shards
// (rota-synthtrain --sharing-factor: together 0.2 of one GPU's work, where
// the table says 2.0; slow enough that a move, with Slurm's two-minute
// requeue delay, ends them sooner). Once the agents have measured them, a
// round splits them: each is checkpointed and requeued with its whole GPU
// back, runs on a GPU of its own, and completes.
func TestSharePairs(t *testing.T) {
	began := time.Now()
	dir := fmt.Sprintf("/var/lib/rota-dev/cluster/pair-test-%s", nodePrefix)
	c, natsURL := ownCluster(t, dir, "pr", "ROTA_DEV_TYPES=v100", "ROTA_DEV_SHARDS=v100:2", "ROTA_DEV_SPACE_SHARING=true", "ROTA_DEV_WEB=off")
	logs := filepath.Join(dir, "pair-logs")
	os.RemoveAll(logs)
	os.MkdirAll(logs, 0o777)
	os.Chmod(logs, 0o777)
	state := func(id string) string {
		out, _ := c.run("squeue", "-h", "-j", id, "-o", "%T")
		return strings.TrimSpace(out)
	}
	show := func(id string) string {
		out, _ := c.run("scontrol", "show", "job", id)
		return out
	}
	var blockers []string
	for i := 0; i < 2; i++ {
		blockers = append(blockers, submitAs(t, c, fmt.Sprintf("blocker-%d", i), "--gres=gpu:v100:1", "--wrap", "sleep 3600"))
	}
	eventually.True(t, 60*time.Second, "two V100s busy", func() bool {
		return state(blockers[0]) == "RUNNING" && state(blockers[1]) == "RUNNING"
	})
	job := func(name, share string) string {
		return submitAs(t, c, name, "--gres=gpu:1", "--rota-share="+share, "--rota-model="+pairModel, "--begin=now+25",
			"--wrap", fmt.Sprintf("echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURM_JOB_GPUS=$SLURM_JOB_GPUS >%s/%s.env; sleep 20", logs, name))
	}
	a, b, no := job("share-a", "yes"), job("share-b", "yes"), job("share-no", "no")
	ids := []string{a, b, no}
	done := func(id string) bool {
		return strings.HasPrefix(c.sacctOf(id, began, "State"), "COMPLETED")
	}
	if onHostRelease() {
		eventually.True(t, 3*time.Minute, "the three jobs to complete", func() bool { return done(a) && done(b) && done(no) })
		for _, id := range ids {
			if out := show(id); strings.Contains(out, "shard") {
				t.Errorf("job %s was given shards on 22.05:\n%s", id, out)
			}
		}
		if !strings.Contains(c.runLog(), "space_sharing is on but this Slurm keeps a pending job's whole GPU") {
			t.Errorf("the controller does not say it pairs nothing on this release")
		}
		return
	}
	// The round pairs the two while they wait for their begin time.
	eventually.True(t, 60*time.Second, "the two jobs that may share to be made shard jobs", func() bool {
		return strings.Contains(show(a), "TresPerNode=gres/shard") && strings.Contains(show(b), "TresPerNode=gres/shard")
	})
	for _, id := range []string{a, b} {
		// Typed the cluster's way: in the request where accounting's
		// typed limits count it (24.11 and later), else by constraint.
		if out := show(id); !strings.Contains(out, "TresPerNode=gres/shard:v100:1") &&
			!(strings.Contains(out, "TresPerNode=gres/shard:1") && strings.Contains(out, "Features=v100")) {
			t.Errorf("sharer %s is not half a V100's shards:\n%s", id, out)
		}
	}
	eventually.True(t, 90*time.Second, "the pair to run together", func() bool {
		return state(a) == "RUNNING" && state(b) == "RUNNING"
	})
	if out := show(no); strings.Contains(out, "shard") || !strings.Contains(out, "gpu") {
		t.Errorf("the job that said --rota-share=no does not keep its whole GPU:\n%s", out)
	}
	eventually.True(t, 60*time.Second, "the job that said no to run on a GPU of its own", func() bool { return state(no) == "RUNNING" || done(no) })
	envOf := func(name string) string {
		var s string
		eventually.True(t, 30*time.Second, name+" to write its environment", func() bool {
			bs, err := os.ReadFile(filepath.Join(logs, name+".env"))
			s = strings.TrimSpace(string(bs))
			return err == nil && s != ""
		})
		return s
	}
	ea, eb, en := envOf("share-a"), envOf("share-b"), envOf("share-no")
	t.Logf("share-a: %s; share-b: %s; share-no: %s", ea, eb, en)
	dev := func(env string) string {
		f := strings.Fields(env)
		return strings.TrimPrefix(f[0], "CUDA_VISIBLE_DEVICES=")
	}
	// Slurm gives each of a pair its GPU (CUDA_VISIBLE_DEVICES counts
	// from 0 within the job); which GPU it is, scontrol -d says, read as
	// the controller reads it (slurm.ParseJobGPUs: which jobs share a GPU).
	gpuOf := func(id string) string {
		out, _ := c.run("scontrol", "show", "job", "-d", "-o", id)
		node, gpus, err := slurm.ParseJobGPUs(out)
		if err != nil || len(gpus) != 1 {
			t.Errorf("job %s's GPU from scontrol -d: %q %v %v\n%s", id, node, gpus, err, out)
			return ""
		}
		return fmt.Sprintf("%s/%d", node, gpus[0])
	}
	if ga, gb := gpuOf(a), gpuOf(b); ga == "" || ga != gb {
		t.Errorf("the pair's shards are not on one GPU: %q and %q", ga, gb)
	} else {
		t.Logf("the pair's GPU: %s", ga)
	}
	if da, db := dev(ea), dev(eb); da == "" || da != db {
		t.Errorf("the pair does not share one GPU: %q and %q", ea, eb)
	}
	ex := func(id string) string {
		out, err := c.run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, id)
		if err != nil {
			t.Errorf("rota explain %s: %v\n%s", id, err, out)
		}
		return strings.Join(strings.Fields(out), " ")
	}
	if out := ex(a); !strings.Contains(out, "shared with job "+b) && !strings.Contains(out, "with job "+b) {
		t.Errorf("rota explain %s does not say it shares with %s: %s", a, b, out)
	}
	eventually.True(t, 2*time.Minute, "the three jobs to complete", func() bool { return done(a) && done(b) && done(no) })
	for _, id := range []string{a, b} {
		out := c.sacctOf(id, began, "AllocTRES")
		t.Logf("sacct AllocTRES of sharer %s: %s", id, out)
		if !strings.Contains(out, "gres/shard=1") {
			t.Errorf("accounting does not record sharer %s's shard: %q", id, out)
		}
	}

	// A pair that hurts.
	synth := filepath.Join(repo, "bin/rota-synthtrain")
	table := filepath.Join(repo, "../shared/data/gavel/simulation_throughputs.json")
	ckpt := filepath.Join(logs, "ckpt")
	os.MkdirAll(ckpt, 0o777)
	os.Chmod(ckpt, 0o777)
	const rate = 24.093231895382736 // ResNet-18 (batch size 64) alone on a V100, steps/s (the table's)
	hurts := func(name string) string {
		script := filepath.Join(logs, name+".sh")
		body := fmt.Sprintf("#!/bin/bash\nexec %s --model '%s' --steps %d --time-scale 1 --sharing-factor 0.1 --throughputs %s --ckpt-dir %s --log %s\n",
			synth, pairModel, 720, table, ckpt, filepath.Join(logs, name+".log"))
		if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return submitAs(t, c, name, "--gres=gpu:1", "--rota-share=yes", "--rota-model="+pairModel, "--rota-checkpoint-signal=USR1",
			fmt.Sprintf("--rota-throughput=v100:%.2f", rate), "--requeue", "--begin=now+20", script)
	}
	h1, h2 := hurts("hurt-a"), hurts("hurt-b")
	eventually.True(t, 90*time.Second, "the second pair to run together on shards", func() bool {
		return state(h1) == "RUNNING" && state(h2) == "RUNNING" &&
			strings.Contains(show(h1), "TresPerNode=gres/shard") && strings.Contains(show(h2), "TresPerNode=gres/shard")
	})
	eventually.True(t, 3*time.Minute, "the pair that hurts to be split: each requeued with a whole GPU", func() bool {
		return strings.Contains(show(h1), "TresPerNode=gres/gpu") && strings.Contains(show(h2), "TresPerNode=gres/gpu") &&
			!strings.Contains(show(h1), "Restarts=0") && !strings.Contains(show(h2), "Restarts=0")
	})
	logb := c.runLog()
	if !strings.Contains(logb, "below share_margin 1.10: moved to a GPU of its own") {
		t.Errorf("the controller's log does not say why it split the pair")
	}
	for _, l := range strings.Split(logb, "\n") {
		if strings.Contains(l, "below share_margin") {
			t.Logf("controller: %s", l)
			break
		}
	}
	eventually.True(t, 6*time.Minute, "the split jobs to complete (after Slurm's requeue delay: they restart on the node they ran on)", func() bool { return done(h1) && done(h2) })
	for _, id := range []string{h1, h2} {
		out := c.sacctOf(id, began, "AllocTRES")
		if !strings.Contains(out, "gres/gpu") || strings.Contains(out, "gres/shard") {
			t.Errorf("split job %s did not finish on a whole GPU: %q", id, out)
		}
	}
}
