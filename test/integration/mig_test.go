//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
)

// TestMIGSlices (issue #38): on real Slurm, a cluster with whole V100s and
// K80s and a node whose two A100s are cut into MIG slices (ROTA_DEV_MIG=on:
// a100_3g.20gb, a100_2g.10gb, a100_1g.5gb, gres.conf as AutoDetect=nvml
// names them). Plain `sbatch --gres=gpu:1` jobs are typed onto a slice
// when it is the best choice and their memory fits it, never onto a slice
// their --rota-gpu-mem does not fit, and a job that says nothing of its
// memory never onto a slice under slice_min_gpu_mem (10 GiB); Slurm runs
// the jobs typed onto slices; a need no type holds leaves the job as
// asked, and `rota explain` says why and where a slice's speed came from.
func TestMIGSlices(t *testing.T) {
	dir := fmt.Sprintf("/var/lib/rota-dev/cluster/mig-test-%s", nodePrefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	extra := filepath.Join(dir, "extra.conf")
	if err := os.WriteFile(extra, []byte("gpu_mem.v100 = 16G\ngpu_mem.k80 = 12G\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, natsURL := ownCluster(t, dir, "mig", "ROTA_DEV_MIG=on", "ROTA_DEV_TYPES=v100 k80",
		"ROTA_DEV_ACCOUNTING=off", "ROTA_DEV_WEB=off", "ROTA_DEV_AGENTS=off", "ROTA_DEV_CONTROLLER_EXTRA="+extra)
	if out, err := c.run("sinfo", "-h", "-N", "-o", "%N %G"); err != nil || !strings.Contains(out, "gpu:a100_3g.20gb:2") ||
		!strings.Contains(out, "gpu:a100_1g.5gb:4") {
		t.Fatalf("the MIG node's slices are not Slurm's GPU types: %v\n%s", err, out)
	}
	submit := func(name string, args ...string) string {
		t.Helper()
		return submitAs(t, c, name, append(args, "--gres=gpu:1", "--wrap", "sleep 3600")...)
	}
	type job struct{ id, gres, state, features string }
	look := func(id string) job {
		t.Helper()
		out, err := c.run("squeue", "-h", "-j", id, "-o", "%b|%T|%f")
		f := strings.Split(strings.TrimSpace(out), "|")
		if err != nil || len(f) != 3 {
			t.Fatalf("squeue -j %s: %v %q", id, err, out)
		}
		return job{id, strings.TrimPrefix(strings.TrimPrefix(f[0], "gres:"), "gres/"), f[1], f[2]}
	}
	// typeOf: a slice in the gres (gpu:a100_3g.20gb:1), a whole GPU in
	// the constraint (its nodes carry their type as a feature; the MIG
	// node its model, so only slices go in the gres).
	typeOf := func(j job) string {
		if f := strings.Split(j.gres, ":"); len(f) == 3 {
			return f[1]
		}
		if m := featureRe.FindStringSubmatch(j.features); m != nil {
			return m[1]
		}
		return ""
	}
	// Six jobs that need 12 GiB: V100s first (4 free x 3.36), then the
	// 3g.20gb slices (2 x 6.72 x 3/7 = 5.76) and the K80s; never a 2g.10gb
	// or 1g.5gb slice.
	var need12 []string
	for i := 0; i < 6; i++ {
		need12 = append(need12, submit(fmt.Sprintf("mig-12g-%d", i), "--rota-gpu-mem=12G"))
	}
	onSlice := 0
	for _, id := range need12 {
		j := look(id)
		switch typeOf(j) {
		case "a100_3g.20gb":
			onSlice++
		case "v100", "k80":
			// 22.05 (the host's) cannot retype a pending job's request,
			// so there Rota types whole GPUs by constraint; 24.11 and
			// later type every job in its request (docs/rounds.md).
			if onHostRelease() && j.gres != "gpu:1" {
				t.Errorf("job %s typed %s in its gres (%s), not by constraint: on 22.05 no round can retype it", id, typeOf(j), j.gres)
			}
		default:
			t.Errorf("job %s (needs 12 GiB) given %q (features %q)", id, j.gres, j.features)
		}
	}
	if onSlice == 0 {
		t.Errorf("no 12 GiB job was given a 3g.20gb slice, the best choice once the V100s were taken")
	}
	// Jobs that say nothing: any type but the 5 GiB slices; one that needs
	// 4 GiB may take those; one that needs 64 GiB fits no type here.
	var unknown []string
	for i := 0; i < 3; i++ {
		unknown = append(unknown, submit(fmt.Sprintf("mig-unknown-%d", i)))
	}
	small := submit("mig-4g", "--rota-gpu-mem=4G")
	huge := submit("mig-64g", "--rota-gpu-mem=64G")
	for _, id := range unknown {
		if j := look(id); typeOf(j) == "a100_1g.5gb" {
			t.Errorf("job %s said nothing of its memory and was given a 5 GiB slice (%s)", id, j.gres)
		}
	}
	if j := look(huge); typeOf(j) != "" {
		t.Errorf("the 64 GiB job was typed %s; no type here has the memory", j.gres)
	}
	explain := func(id string) string {
		t.Helper()
		out, err := c.run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, id)
		if err != nil {
			t.Fatalf("rota explain %s: %v\n%s", id, err, out)
		}
		return out
	}
	if out := explain(huge); !strings.Contains(out, "no GPU type with the memory the job needs") {
		t.Errorf("rota explain of the 64 GiB job does not say why it was left as asked:\n%s", out)
	}
	if out := explain(small); strings.Contains(out, "memory_fits.a100_1g.5gb") {
		t.Errorf("the 4 GiB job was kept off the 5 GiB slices:\n%s", out)
	}
	for _, id := range need12 {
		if j := look(id); typeOf(j) == "a100_3g.20gb" {
			if out := explain(id); !strings.Contains(out, "speed.a100_3g.20gb") || !strings.Contains(out, "2.88 (MIG slice: a100's 6.72 x 3/7 of its compute)") {
				t.Errorf("rota explain of a job on a slice does not show the slice's speed and where it comes from (6.72 x 3/7):\n%s", out)
			}
			// Slurm runs a job typed onto a slice: the MIG gres is real to it.
			eventually.True(t, 60*time.Second, "job "+id+" on a slice runs", func() bool { return look(id).state == "RUNNING" })
			break
		}
	}
	// Rounds go on (seconds-long here): none retypes a job onto a slice its
	// memory does not fit.
	afterRounds(t, c, natsURL, 3, "the submissions")
	for _, id := range need12 {
		if j := look(id); typeOf(j) == "a100_2g.10gb" || typeOf(j) == "a100_1g.5gb" {
			t.Errorf("after rounds, job %s (needs 12 GiB) has %s", id, j.gres)
		}
	}
	for _, id := range unknown {
		if j := look(id); typeOf(j) == "a100_1g.5gb" {
			t.Errorf("after rounds, job %s (need unknown) has %s", id, j.gres)
		}
	}
}

var roundsRe = regexp.MustCompile(`round loop \([^)]*\): (\d+) rounds`)

// afterRounds waits until the controller's loop has made n more rounds
// than when called (a change it reads each round seen), failing the test
// where rota status shows no loop or the rounds stop.
func afterRounds(t *testing.T, c devCluster, natsURL string, n int, what string) {
	t.Helper()
	r0 := roundsDone(t, c, natsURL)
	if r0 < 0 {
		t.Fatal("rota status shows no round loop")
	}
	eventually.True(t, 60*time.Second, fmt.Sprintf("%d rounds after %s", n, what), func() bool { return roundsDone(t, c, natsURL) >= r0+n })
}

// roundsDone is how many rounds `rota status` says the controller's loop
// has made; -1 when it shows none.
func roundsDone(t *testing.T, c devCluster, natsURL string) int {
	t.Helper()
	out, _ := c.run(filepath.Join(repo, "bin/rota"), "status", "--nats", natsURL)
	m := roundsRe.FindStringSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
