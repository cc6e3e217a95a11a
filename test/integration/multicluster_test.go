//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
	"github.com/rota-hpc/rota/internal/netrelay"
	"github.com/rota-hpc/rota/wire"
)

// mcPair is two dev clusters joined by a leaf node link, as
// scripts/clusters makes them (docs/multicluster.md): a (v100, p100; 8
// GPUs) takes the link, b (2 k80 and 2 v100 nodes; 16 GPUs) dials it
// through link, a relay the test cuts as a WAN link fails.
type mcPair struct {
	a, b devCluster
	link *netrelay.Relay
	home string
	// names are the clusters' Slurm names (SLURM_CLUSTER_NAME in jobs).
	nameA, nameB string
}

func startMCPair(t *testing.T) mcPair {
	t.Helper()
	ports, err := freeport.Consecutive(24)
	if err != nil {
		t.Fatal(err)
	}
	home := fmt.Sprintf("/var/lib/rota-dev/cluster/mc-test-%s", nodePrefix)
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(home, "link.secret")
	if err := os.WriteFile(secret, []byte("integration-test-link-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	leaf := ports + 23
	// The link starts slow (300 kB/s, which the controllers measure) for
	// the slow-link case; the move cases raise it to the 100 MB/s that
	// mc_link says.
	link, err := netrelay.Listen(fmt.Sprintf("127.0.0.1:%d", ports+22), fmt.Sprintf("127.0.0.1:%d", leaf), slowLink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	// Moves as scripts/clusters configures them, seconds-scale for
	// minute-long jobs.
	moves := "mc_moves = true\nmc_min_stay = 10s\nmc_move_cost = 5s\nmc_checkpoint_wait = 60s\nmc_transfer_dir = " + filepath.Join(home, "transfer") + "\n"
	mk := func(name, types string, perType, slurmPort, natsPort int, linkLine string) devCluster {
		extra := filepath.Join(home, name+".conf")
		conf := fmt.Sprintf("cluster_name = %s\nmc_link = a-b:100MB/s:20ms\nmc_link_secret_file = %s\n%s\n"+
			"mc_tick = 1s\nmc_view_max_age = 10s\nmc_margin = 10s\nmc_min_pending = 2s\nmc_route_timeout = 15s\nmc_probe_interval = 10s\n%s", name, secret, linkLine, moves)
		if err := os.WriteFile(extra, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return newDevCluster(filepath.Join(home, name), nodePrefix+name, slurmPort, natsPort,
			"ROTA_DEV_TYPES="+types, fmt.Sprintf("ROTA_DEV_NODES_PER_TYPE=%d", perType), "ROTA_DEV_ACCOUNTING=off", "ROTA_DEV_WEB=off",
			"ROTA_DEV_CLUSTER="+nodePrefix+name, "ROTA_DEV_CONTROLLER_EXTRA="+extra, fmt.Sprintf("ROTA_NATS_URL=nats://127.0.0.1:%d", natsPort))
	}
	p := mcPair{
		a:    mk("a", "v100 p100", 1, ports, ports+4, fmt.Sprintf("mc_leaf_listen = 127.0.0.1:%d", leaf)),
		b:    mk("b", "k80 v100", 2, ports+10, ports+16, "mc_leaf_remote = nats-leaf://"+link.Addr()),
		link: link, home: home, nameA: nodePrefix + "a", nameB: nodePrefix + "b",
	}
	if err := p.a.start(true); err != nil {
		t.Fatal(err)
	}
	if err := p.b.start(true); err != nil {
		p.a.stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { p.b.stop(); p.a.stop() })
	// Until each controller holds the other's view, nothing is routed.
	eventually.True(t, 30*time.Second, "each cluster sees the other", func() bool {
		oa, _ := p.a.run(filepath.Join(repo, "bin/rota"), "status")
		ob, _ := p.b.run(filepath.Join(repo, "bin/rota"), "status")
		return strings.Contains(oa, "clusters (this one: a)") && strings.Contains(oa, "\nb ") &&
			strings.Contains(ob, "clusters (this one: b)") && strings.Contains(ob, "\na ")
	})
	return p
}

// copies is every job named name on both clusters: cluster:id -> state.
func (p mcPair) copies(t *testing.T, prefix string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for c, dc := range map[string]devCluster{"a": p.a, "b": p.b} {
		s, err := dc.run("squeue", "-h", "-t", "all", "-o", "%i|%j|%T")
		if err != nil {
			t.Fatalf("squeue on %s: %v %s", c, err, s)
		}
		for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
			f := strings.Split(line, "|")
			if len(f) != 3 || !strings.HasPrefix(f[1], prefix) {
				continue
			}
			if out[f[1]] == nil {
				out[f[1]] = map[string]string{}
			}
			out[f[1]][c+":"+f[0]] = f[2]
		}
	}
	return out
}

func (p mcPair) submitA(t *testing.T, name string, args ...string) string {
	t.Helper()
	return submitAs(t, p.a, name, args...)
}

// submitAs submits a job as rota-a on cluster c.
func submitAs(t *testing.T, c devCluster, name string, args ...string) string {
	t.Helper()
	all := append([]string{"--reuid=rota-a", "--regid=rota-a", "--init-groups", "--", "sbatch", "--parsable", "--chdir=/tmp",
		"--output=/dev/null", "-J", name}, args...)
	out, err := c.run("setpriv", all...)
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	return strings.TrimSpace(out)
}

// TestMultiCluster: a job whose allowed types only b has goes there, and a
// burst larger than a spills to b; each job runs exactly once, as its
// user, and explain on both sides says where it went and why.
func TestMultiCluster(t *testing.T) {
	heavy(t)
	p := startMCPair(t)
	ran := map[string]map[string]bool{} // name -> copies seen running or done
	watch := func(prefix string, n int, d time.Duration) map[string]map[string]string {
		var last map[string]map[string]string
		eventually.True(t, d, fmt.Sprintf("%d %s jobs done", n, prefix), func() bool {
			last = p.copies(t, prefix)
			done := 0
			for name, cs := range last {
				for c, st := range cs {
					if st == "RUNNING" || st == "COMPLETING" || st == "COMPLETED" {
						if ran[name] == nil {
							ran[name] = map[string]bool{}
						}
						ran[name][c] = true
					}
					if st == "COMPLETED" {
						done++
					}
				}
			}
			return done >= n
		})
		return last
	}

	t.Run("fits only on b", func(t *testing.T) {
		id := p.submitA(t, "mcit-onlyb", "--gres=gpu:1", "--rota-types=k80", "--rota-steps=30", "--rota-throughput=k80:3", "--wrap", "sleep 5")
		cs := watch("mcit-onlyb", 1, 90*time.Second)["mcit-onlyb"]
		var there string
		for c, st := range cs {
			switch {
			case c == "a:"+id && st != "CANCELLED":
				t.Errorf("a's job %s: %s, want CANCELLED (withdrawn)", id, st)
			case strings.HasPrefix(c, "b:"):
				there = strings.TrimPrefix(c, "b:")
			}
		}
		if there == "" || len(cs) != 2 {
			t.Fatalf("copies %v, want a's withdrawn and one on b", cs)
		}
		if u, _ := p.b.run("squeue", "-h", "-t", "all", "-j", there, "-o", "%u"); strings.TrimSpace(u) != "rota-a" {
			t.Errorf("b's copy runs as %q, want rota-a", u)
		}
		ea, _ := p.a.run(filepath.Join(repo, "bin/rota"), "explain", id)
		eb, _ := p.b.run(filepath.Join(repo, "bin/rota"), "explain", there)
		if !strings.Contains(ea, "sent to cluster b as job "+there) || !strings.Contains(ea, "cannot run here") {
			t.Errorf("explain on a:\n%s", ea)
		}
		if !strings.Contains(eb, "came from cluster a (its job "+id+")") {
			t.Errorf("explain on b:\n%s", eb)
		}
	})

	t.Run("burst spills", func(t *testing.T) {
		const n = 16
		for i := 0; i < n; i++ {
			p.submitA(t, fmt.Sprintf("mcit-burst-%d", i), "--gres=gpu:1", "--rota-steps=200", "--rota-throughput=v100:10,p100:9,k80:3", "--wrap", "sleep 20")
		}
		last := watch("mcit-burst-", n, 4*time.Minute)
		onB := 0
		for name, cs := range last {
			for c, st := range cs {
				if st == "COMPLETED" && strings.HasPrefix(c, "b:") {
					onB++
				}
				_ = name
			}
		}
		if onB == 0 {
			t.Errorf("no burst job ran on b: %v", last)
		}
		t.Logf("%d of %d burst jobs ran on b", onB, n)
	})

	for name, cs := range ran {
		if len(cs) != 1 {
			t.Errorf("%s ran %d times: %v", name, len(cs), cs)
		}
	}

	// Moves of running checkpointable jobs (mc_moves): a is filled with
	// p100-only jobs, which b cannot take, while b is idle.
	t.Run("not moved over a link measured slow", func(t *testing.T) {
		// Whatever becomes of this case, the next ones get a and the link
		// as they want them.
		defer func() {
			p.a.run("scancel", "-n", "mcit-fill")
			p.a.run("scancel", "-n", "mcit-move-slow")
			p.link.SetRate(100e6)
		}()
		// The link has run at 300 kB/s from the start: the probes measure
		// it (up to 0.8 MB/s seen: a probe is short), and 200 MB of
		// checkpoint would take 4 to 11 minutes over it. (20 MB, at a
		// probe of 804 kB/s, made the move pay by 6 s once.)
		// Probes run every 10 s; three lanes of tests at once on 2 cores
		// left a minute without a fresh slow measurement once (26.05).
		eventually.True(t, 3*time.Minute, "a slow link measured", func() bool { bw := p.measured(t); return bw > 0 && bw < 1e6 })
		j := p.moveJob(t, "mcit-move-slow", "0.2", 600)
		p.waitRunning(t, j)
		p.fillA(t, 14)
		var e string
		eventually.True(t, 2*time.Minute, "the move refused for the link", func() bool {
			e, _ = p.a.run(filepath.Join(repo, "bin/rota"), "explain", j.id)
			return strings.Contains(e, "refused")
		})
		if !strings.Contains(e, "measured") || !strings.Contains(e, "kB/s") {
			t.Errorf("explain does not give the measured speed:\n%s", e)
		}
		if l := j.log(); strings.Count(l, " start ") != 1 || strings.Contains(l, " checkpoint ") {
			t.Errorf("the job was checkpointed or restarted:\n%s", l)
		}
	})

	t.Run("moves once, not when slow, link cut mid-move", func(t *testing.T) {
		// The link back at mc_link's 100 MB/s for the moves: measured fast
		// again within a few probes (a probe through this host's relay and
		// two NATS servers measures some 10 MB/s of it).
		eventually.True(t, 90*time.Second, "the link measured fast", func() bool { return p.measured(t) > 3e6 })
		// b is full at first (16 jobs Rota leaves alone on its 16 GPUs):
		// a move would gain nothing, and none is made until b frees up.
		for i := 0; i < 16; i++ {
			submitAs(t, p.b, "mcit-bfill", "--gres=gpu:1", "--rota=off", "--wrap", "sleep 600")
		}
		small := p.moveJob(t, "mcit-move-small", "0.02", 600)
		big := p.moveJob(t, "mcit-move-big", "50", 600) // 500 s over 100 MB/s
		p.waitRunning(t, small, big)
		p.fillA(t, 14)
		time.Sleep(15 * time.Second) // five rounds with b full: what is tested is that no move comes
		if strings.Contains(small.log(), " checkpoint ") {
			t.Fatalf("moved while b was full:\n%s", small.log())
		}
		p.b.run("scancel", "-n", "mcit-bfill")
		// Cut the link as the small job checkpoints, for less than the
		// route timeout (15 s): the move is delayed, not lost or doubled.
		eventually.True(t, 3*time.Minute, "the small job's checkpoint", func() bool { return strings.Contains(small.log(), " checkpoint ") })
		p.link.Cut()
		t.Logf("link cut at the checkpoint: %s", strings.TrimSpace(small.log()))
		time.Sleep(8 * time.Second) // the cut lasts, under the route timeout: a duration, not a wait
		if err := p.link.Restore(); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 4*time.Minute, "both move jobs done", func() bool { return small.done() && big.done() })
		if where := small.check(t, 600); strings.Join(where, " ") != p.nameA+" "+p.nameB {
			t.Errorf("small job ran on %v, want moved once from a to b", where)
		}
		if where := big.check(t, 600); strings.Join(where, " ") != p.nameA {
			t.Errorf("big job ran on %v, want on a only", where)
		}
		e, _ := p.a.run(filepath.Join(repo, "bin/rota"), "explain", big.id)
		if !strings.Contains(e, "refused") || !strings.Contains(e, "over the link") {
			t.Errorf("explain of the big job on a:\n%s", e)
		}
		e, _ = p.a.run(filepath.Join(repo, "bin/rota"), "explain", small.id)
		if !strings.Contains(e, "running job moved") || !strings.Contains(e, "(routed)") {
			t.Errorf("explain of the small job on a:\n%s", e)
		}
		p.a.run("scancel", "-n", "mcit-fill")
	})

	t.Run("link cut past the route timeout: the moved job resumes on a", func(t *testing.T) {
		j := p.moveJob(t, "mcit-move-cut", "0.02", 600)
		p.waitRunning(t, j)
		p.fillA(t, 14)
		eventually.True(t, 3*time.Minute, "the job's checkpoint", func() bool { return strings.Contains(j.log(), " checkpoint ") })
		p.link.Cut()
		// The copy cannot be asked for; after mc_route_timeout the route
		// is aborted, which b must confirm before the job resumes here.
		eventually.True(t, time.Minute, "the move aborting", func() bool {
			e, _ := p.a.run(filepath.Join(repo, "bin/rota"), "explain", j.id)
			return strings.Contains(e, "(aborting)")
		})
		time.Sleep(3 * time.Second) // rounds after the abort began: what is tested is that no restart comes
		if strings.Count(j.log(), " start ") != 1 {
			t.Fatalf("the job restarted before the abort was confirmed:\n%s", j.log())
		}
		p.a.run("scancel", "-n", "mcit-fill") // a is free again: no second move
		if err := p.link.Restore(); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 4*time.Minute, "the job done", j.done)
		if where := j.check(t, 600); strings.Join(where, " ") != p.nameA+" "+p.nameA {
			t.Errorf("ran on %v, want resumed on a", where)
		}
		e, _ := p.a.run(filepath.Join(repo, "bin/rota"), "explain", j.id)
		if !strings.Contains(e, "resumed here as job") {
			t.Errorf("explain on a:\n%s", e)
		}
		// (Its runs, above, are the count: the ended original leaves
		// squeue after MinJobAge.)
	})

	t.Run("link down before a route: held on a, sent once it is back", func(t *testing.T) {
		p.link.Cut()
		eventually.True(t, 30*time.Second, "b's view stale on a", func() bool {
			peer := p.peerB(t)
			return peer != nil && peer.AgeSeconds > 10 // mc_view_max_age
		})
		id := p.submitA(t, "mcit-cutroute", "--gres=gpu:1", "--rota-types=k80", "--rota-steps=30", "--rota-throughput=k80:3", "--wrap", "sleep 5")
		time.Sleep(10 * time.Second) // rounds with the link down: what is tested is that nothing is routed
		cs := p.copies(t, "mcit-cutroute")["mcit-cutroute"]
		if len(cs) != 1 || cs["a:"+id] != "PENDING" {
			t.Fatalf("with the link down: copies %v, want a's job pending only", cs)
		}
		if err := p.link.Restore(); err != nil {
			t.Fatal(err)
		}
		cs = watch("mcit-cutroute", 1, 90*time.Second)["mcit-cutroute"]
		if len(cs) != 2 || cs["a:"+id] != "CANCELLED" {
			t.Errorf("copies %v, want a's withdrawn and one completed on b", cs)
		}
	})
	for name, cs := range ran {
		if strings.HasPrefix(name, "mcit-cutroute") && len(cs) != 1 {
			t.Errorf("%s ran %d times: %v", name, len(cs), cs)
		}
	}
}

// slowLink is the link's speed until the move cases: 300 kB/s, so that a
// probe of 512 KiB still answers within mc_ask_timeout.
const slowLink = 300e3

// peerB is b as a's controller holds it (`rota status --json`), nil
// when it does not.
func (p mcPair) peerB(t *testing.T) *wire.MCPeer {
	t.Helper()
	out, err := p.a.run(filepath.Join(repo, "bin/rota"), "status", "--json")
	if err != nil {
		return nil
	}
	var st struct {
		MultiCluster *wire.MCStatus `json:"multicluster"`
	}
	if json.Unmarshal([]byte(out), &st) != nil || st.MultiCluster == nil {
		return nil
	}
	for _, peer := range st.MultiCluster.Peers {
		if peer.View.Cluster == "b" {
			return &peer
		}
	}
	return nil
}

// measured is the link to b as a's controller measures it, bytes/s (0
// not yet, or not in the last 15 s).
func (p mcPair) measured(t *testing.T) float64 {
	t.Helper()
	if peer := p.peerB(t); peer != nil && peer.BandwidthAgeSeconds >= 0 && peer.BandwidthAgeSeconds < 15 {
		return peer.MeasuredBandwidth
	}
	return 0
}

// moveJob is a running checkpointable job submitted on a: a training loop
// of steps at 10/s that, on USR1, saves its step (padded to 20 MB, a
// checkpoint's size) and exits 0, and that resumes from ROTA_MC_RESUME.
// Each run appends "cluster job event step unixtime" to its log.
type moveJob struct {
	id, dir, name string
}

func (p mcPair) moveJob(t *testing.T, name, ckptGB string, steps int) moveJob {
	t.Helper()
	dir := filepath.Join(p.home, "move")
	if err := os.MkdirAll(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o1777)
	j := moveJob{dir: dir, name: name}
	ck, log := j.path("ckpt"), j.path("log")
	os.Remove(ck)
	os.Remove(log)
	script := fmt.Sprintf(`#!/bin/bash
#ROTA --checkpoint-gb=%[1]s --checkpoint-file=%[2]s
step=0
if [[ -n ${ROTA_MC_RESUME:-} ]]; then step=$(head -c 20 "$ROTA_MC_RESUME" | tr -dc 0-9); step=$((10#$step)); fi
echo "$SLURM_CLUSTER_NAME $SLURM_JOB_ID start $step $(date +%%s.%%N)" >>%[3]s
trap 'printf "%%020d" $step >%[2]s; head -c 20000000 /dev/zero >>%[2]s; echo "$SLURM_CLUSTER_NAME $SLURM_JOB_ID checkpoint $step $(date +%%s.%%N)" >>%[3]s; exit 0' USR1
while ((step < %[4]d)); do sleep 0.1 & wait $!; step=$((step + 1)); done
echo "$SLURM_CLUSTER_NAME $SLURM_JOB_ID done $step $(date +%%s.%%N)" >>%[3]s
`, ckptGB, ck, log, steps)
	sp := j.path("sh")
	if err := os.WriteFile(sp, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	j.id = p.submitA(t, name, "--gres=gpu:1", "--rota-types=v100,p100", fmt.Sprintf("--rota-steps=%d", steps),
		"--rota-throughput=v100:10,p100:9,k80:3", "--rota-checkpoint-signal=USR1", sp)
	return j
}

func (j moveJob) path(ext string) string { return filepath.Join(j.dir, j.name+"."+ext) }

func (j moveJob) log() string {
	b, _ := os.ReadFile(j.path("log"))
	return string(b)
}

func (j moveJob) done() bool { return strings.Contains(j.log(), " done ") }

// check reads the job's runs from its log: each run after the first
// starts at the step the run before it checkpointed (> 0), after that run
// ended (never two at once), and the last ends done at steps. It returns
// the cluster of each run.
func (j moveJob) check(t *testing.T, steps int) []string {
	t.Helper()
	type run struct {
		cluster, job string
		from, to     int
		start, end   float64
		ended        string
	}
	var runs []*run
	for _, line := range strings.Split(strings.TrimSpace(j.log()), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 {
			t.Fatalf("%s: bad log line %q", j.name, line)
		}
		step, _ := strconv.Atoi(f[3])
		at, _ := strconv.ParseFloat(f[4], 64)
		switch f[2] {
		case "start":
			runs = append(runs, &run{cluster: f[0], job: f[1], from: step, start: at})
		default:
			var r *run
			for _, x := range runs {
				if x.cluster == f[0] && x.job == f[1] {
					r = x
				}
			}
			if r == nil || r.ended != "" {
				t.Fatalf("%s: %q without its start:\n%s", j.name, line, j.log())
			}
			r.to, r.end, r.ended = step, at, f[2]
		}
	}
	var where []string
	for i, r := range runs {
		where = append(where, r.cluster)
		switch {
		case r.ended == "":
			t.Errorf("%s: run %d (%s job %s) never ended:\n%s", j.name, i, r.cluster, r.job, j.log())
		case i == 0 && r.from != 0:
			t.Errorf("%s: first run starts at step %d", j.name, r.from)
		case i > 0 && (r.from == 0 || r.from != runs[i-1].to):
			t.Errorf("%s: run %d starts at step %d, the one before checkpointed at %d:\n%s", j.name, i, r.from, runs[i-1].to, j.log())
		case i > 0 && r.start < runs[i-1].end:
			t.Errorf("%s: run %d started before the one before it ended (two at once):\n%s", j.name, i, j.log())
		case i < len(runs)-1 && r.ended != "checkpoint", i == len(runs)-1 && (r.ended != "done" || r.to != steps):
			t.Errorf("%s: run %d ended %s at %d:\n%s", j.name, i, r.ended, r.to, j.log())
		}
	}
	return where
}

func (p mcPair) waitRunning(t *testing.T, jobs ...moveJob) {
	t.Helper()
	eventually.True(t, 2*time.Minute, "the move jobs running on a", func() bool {
		for _, j := range jobs {
			if !strings.Contains(j.log(), " start ") {
				return false
			}
		}
		return true
	})
}

// fillA loads a with n jobs only a can run (p100, which b has not), so
// that the running ones finish sooner on b.
func (p mcPair) fillA(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		p.submitA(t, "mcit-fill", "--gres=gpu:p100:1", "--rota=off", "--wrap", "sleep 30")
	}
}
