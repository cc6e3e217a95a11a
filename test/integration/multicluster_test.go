//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/freeport"
)

// mcPair is two dev clusters joined by a leaf node link, as
// scripts/clusters makes them (docs/multicluster.md): a (v100, p100; 8
// GPUs) takes the link, b (2 k80 and 2 v100 nodes; 16 GPUs) dials it.
type mcPair struct{ a, b devCluster }

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
	mk := func(name, types string, perType, slurmPort, natsPort int, linkLine string) devCluster {
		extra := filepath.Join(home, name+".conf")
		conf := fmt.Sprintf("cluster_name = %s\nmc_link = a-b:100MB/s:20ms\nmc_link_secret_file = %s\n%s\n"+
			"mc_tick = 1s\nmc_view_max_age = 10s\nmc_margin = 10s\nmc_min_pending = 2s\nmc_route_timeout = 15s\n", name, secret, linkLine)
		if err := os.WriteFile(extra, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		return newDevCluster(filepath.Join(home, name), nodePrefix+name, slurmPort, natsPort,
			"ROTA_DEV_TYPES="+types, fmt.Sprintf("ROTA_DEV_NODES_PER_TYPE=%d", perType), "ROTA_DEV_ACCOUNTING=off", "ROTA_DEV_WEB=off",
			"ROTA_DEV_CLUSTER="+nodePrefix+name, "ROTA_DEV_CONTROLLER_EXTRA="+extra, fmt.Sprintf("ROTA_NATS_URL=nats://127.0.0.1:%d", natsPort))
	}
	p := mcPair{
		a: mk("a", "v100 p100", 1, ports, ports+4, fmt.Sprintf("mc_leaf_listen = 127.0.0.1:%d", leaf)),
		b: mk("b", "k80 v100", 2, ports+10, ports+16, fmt.Sprintf("mc_leaf_remote = nats-leaf://127.0.0.1:%d", leaf)),
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
	waitFor(t, 30*time.Second, "each cluster sees the other", func() bool {
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
	all := append([]string{"--reuid=rota-a", "--regid=rota-a", "--init-groups", "--", "sbatch", "--parsable", "--chdir=/tmp",
		"--output=/dev/null", "-J", name}, args...)
	out, err := p.a.run("setpriv", all...)
	if err != nil {
		t.Fatalf("sbatch on a: %v: %s", err, out)
	}
	return strings.TrimSpace(out)
}

// TestMultiCluster: a job whose allowed types only b has goes there, and a
// burst larger than a spills to b; each job runs exactly once, as its
// user, and explain on both sides says where it went and why.
func TestMultiCluster(t *testing.T) {
	p := startMCPair(t)
	ran := map[string]map[string]bool{} // name -> copies seen running or done
	watch := func(prefix string, n int, d time.Duration) map[string]map[string]string {
		var last map[string]map[string]string
		waitFor(t, d, fmt.Sprintf("%d %s jobs done", n, prefix), func() bool {
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
}
