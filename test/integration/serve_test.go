//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/wire"
)

// serviceScript writes a stand-in inference server: it logs its start
// (with its node), takes startup seconds to "load its model", then creates
// $ROTA_READY_FILE and logs that it is ready; on SIGTERM it logs its stop
// and exits. Times are the host's clock, to the millisecond.
func serviceScript(t *testing.T, dir string, startup int) string {
	t.Helper()
	p := filepath.Join(dir, "serve.sh")
	s := fmt.Sprintf(`#!/bin/bash
log=%s/logs/$SLURM_JOB_ID.log
now() { date +%%s.%%3N; }
echo "start $(now) $SLURMD_NODENAME" >>"$log"
trap 'echo "stop $(now)" >>"$log"; rm -f "$ROTA_READY_FILE"; exit 0' TERM
sleep %d
touch "$ROTA_READY_FILE"
echo "ready $(now)" >>"$log"
while :; do sleep 0.2; done
`, dir, startup)
	if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// serveEvents is one job's log: when it started, where, when ready and
// when it stopped (0: not yet).
type serveEvents struct {
	job                uint32
	node               string
	start, ready, stop float64
}

func readServeLogs(t *testing.T, dir string) map[uint32]serveEvents {
	t.Helper()
	out := map[uint32]serveEvents{}
	files, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, f := range files {
		id, _ := strconv.ParseUint(strings.TrimSuffix(filepath.Base(f), ".log"), 10, 32)
		b, _ := os.ReadFile(f)
		e := serveEvents{job: uint32(id)}
		for _, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if len(fs) < 2 {
				continue
			}
			v, _ := strconv.ParseFloat(fs[1], 64)
			switch fs[0] {
			case "start":
				e.start = v
				if len(fs) > 2 {
					e.node = fs[2]
				}
			case "ready":
				e.ready = v
			case "stop":
				e.stop = v
			}
		}
		out[e.job] = e
	}
	return out
}

func serviceOf(t *testing.T, name string) *wire.ServiceStatus {
	t.Helper()
	for _, s := range status(t).Services {
		if s.Name == name {
			return &s
		}
	}
	return nil
}

func serveDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	os.MkdirAll(filepath.Join(dir, "logs"), 0o777)
	return dir
}

// Three replicas of one service submitted in a burst run on three
// distinct nodes (the dev cluster has three): the plugin holds them, the
// controller releases them one at a time with their siblings' nodes
// excluded. Rota pins no GPU type on them, the round loop leaves them
// alone, and rota explain names the service and where each replica runs.
func TestServeSpreadsReplicas(t *testing.T) {
	dir := serveDir(t)
	sf := serviceScript(t, dir, 1)
	t.Cleanup(func() { cancelWait("--name=serve-spread"); cancelWait("--name=serve-plain") })
	// The control: the same burst without Rota shares a node, so spread
	// replicas are Rota's doing, not Slurm's default.
	for i := 0; i < 3; i++ {
		if out, err := run("sbatch", "-J", "serve-plain", "-o", "/dev/null", "--gres=gpu:1", "--time=10", "--rota=off", sf); err != nil {
			t.Fatalf("sbatch: %v %s", err, out)
		}
	}
	var plain []string
	eventually.TrueEvery(t, 60*time.Second, 500*time.Millisecond, "three plain jobs running", func() bool {
		out, _ := run("squeue", "-h", "--name=serve-plain", "-t", "R", "-o", "%N")
		plain = strings.Fields(out)
		return len(plain) == 3
	})
	cancelWait("--name=serve-plain")
	if len(distinct(plain)) == 3 {
		t.Fatalf("without Rota the three jobs ran on three nodes (%v): this cluster spreads by itself, the test proves nothing", plain)
	}
	t.Logf("without Rota: %v", plain)
	var ids []string
	for i := 0; i < 3; i++ {
		out, err := run("sbatch", "--parsable", "-J", "serve-spread", "-o", "/dev/null", "--gres=gpu:1", "--time=10",
			"--rota-kind=serve", "--rota-service=spread", sf)
		if err != nil {
			t.Fatalf("sbatch: %v %s", err, out)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	var st *wire.ServiceStatus
	eventually.TrueEvery(t, 90*time.Second, time.Second, "three replicas ready", func() bool {
		st = serviceOf(t, "spread")
		if st == nil {
			return false
		}
		ready := 0
		for _, r := range st.Replicas {
			if len(r.Jobs) > 0 && r.Jobs[len(r.Jobs)-1].Ready != "" {
				ready++
			}
		}
		return ready == 3
	})
	nodes := map[string]string{}
	for _, r := range st.Replicas {
		j := r.Jobs[len(r.Jobs)-1]
		if prev, dup := nodes[j.Nodes]; dup {
			t.Errorf("jobs %s and %d share node %s", prev, j.JobID, j.Nodes)
		}
		nodes[j.Nodes] = strconv.FormatUint(uint64(j.JobID), 10)
	}
	for _, id := range ids {
		out, _ := run("scontrol", "show", "job", id)
		if !strings.Contains(out, "AdminComment=rota:") || strings.Contains(out, "Features=v100") ||
			strings.Contains(out, "Features=p100") || strings.Contains(out, "Features=k80") {
			t.Errorf("job %s: want Rota's annotation and no type pinned:\n%s", id, out)
		}
		ex, err := run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, id)
		if err != nil || !strings.Contains(ex, "service spread: 3 replicas running, kept apart by nodes") || !strings.Contains(ex, "serve job") {
			t.Errorf("rota explain %s: %v\n%s", id, err, ex)
		}
	}
	t.Logf("replicas on %v", nodes)
}

// A service outlives the partition's MaxTime (1 minute here): each job of
// its replica is followed by a successor submitted ahead, which starts on
// another node while it serves; the old job is told to stop (SIGTERM)
// only once the successor's ready file is seen. Over two rollovers the
// service's own logs show no moment without a ready job, and a bounded
// overlap.
func TestServeRollsOverPastMaxTime(t *testing.T) {
	maxTimeOneMinute(t)
	dir := serveDir(t)
	sf := serviceScript(t, dir, 3)
	t.Cleanup(func() { cancelWait("--name=serve-roll") })
	out, err := run("sbatch", "--parsable", "-J", "serve-roll", "-o", filepath.Join(dir, "out-%j"), "--gres=gpu:1", "--time=1",
		"--rota-kind=serve", "--rota-service=roll", sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	first := strings.TrimSpace(out)
	var st *wire.ServiceStatus
	eventually.TrueEvery(t, 4*time.Minute, time.Second, "two rollovers", func() bool {
		st = serviceOf(t, "roll")
		if st == nil || len(st.Replicas) != 1 {
			return false
		}
		n := 0
		for _, j := range st.Replicas[0].Jobs {
			if strings.HasPrefix(j.Why, "stopped by Rota") && j.Ended != "" {
				n++
			}
		}
		return n >= 2
	})
	cancelWait("--name=serve-roll")
	r := st.Replicas[0]
	if r.ID != mustID(t, first) {
		t.Fatalf("replica %d, want the first job %s", r.ID, first)
	}
	ev := readServeLogs(t, dir)
	var gap, maxOverlap float64
	for i := 1; i < len(r.Jobs) && i <= 2; i++ {
		p, s := ev[r.Jobs[i-1].JobID], ev[r.Jobs[i].JobID]
		if p.stop == 0 || s.ready == 0 {
			t.Fatalf("rollover %d: predecessor %+v successor %+v", i, p, s)
		}
		if p.node == s.node {
			t.Errorf("rollover %d: successor %d started on its predecessor's node %s", i, s.job, s.node)
		}
		if s.start >= p.stop {
			t.Errorf("rollover %d: successor started %.3f after its predecessor stopped %.3f", i, s.start, p.stop)
		}
		gap += max(0, s.ready-p.stop)
		maxOverlap = max(maxOverlap, p.stop-s.ready)
		if r.Jobs[i-1].State != "CANCELLED" {
			t.Errorf("job %d ended %s, want stopped by Rota (CANCELLED) before its limit", r.Jobs[i-1].JobID, r.Jobs[i-1].State)
		}
	}
	// The successor is seen ready within a tick (1 s) of an agent report
	// (1 s), then stopped through scancel.
	if gap != 0 || maxOverlap > 10 {
		t.Errorf("gap %.3fs, longest overlap %.3fs; want 0 and at most 10 s", gap, maxOverlap)
	}
	ex, err := run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, strconv.FormatUint(uint64(r.Jobs[len(r.Jobs)-1].JobID), 10))
	if err != nil || !strings.Contains(ex, "service roll") || !strings.Contains(ex, "stopped by Rota") {
		t.Errorf("rota explain: %v\n%s", err, ex)
	}
	t.Logf("gap %.3fs, longest overlap %.3fs over %d jobs", gap, maxOverlap, len(r.Jobs))
}

func mustID(t *testing.T, s string) uint32 {
	t.Helper()
	id, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(id)
}

func distinct(l []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range l {
		m[s] = true
	}
	return m
}
