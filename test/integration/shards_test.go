//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
)

// sharedNote begins the plugin's note on a job that asks for shards.
const sharedNote = "rota: gpu as asked, time as asked: it asks for shards of a GPU (gres/shard)"

// shardUsedRe is the shard part of a node's GresUsed, with its list of
// shards allocated per GPU where the release prints one.
var shardUsedRe = regexp.MustCompile(`shard(?::[^:,]*)?:(\d+)(\([^)]*\))?`)

// TestShards: a node whose GPUs are also offered as shards (gres/shard,
// ROTA_DEV_SHARDS=v100:2) on Slurm of each release. Jobs that ask for a
// shard run side by side, and the plugin notes and leaves them as asked
// (Rota chooses among whole GPUs and MIG slices). A GPU holding shards is
// in use: Slurm gives no job all four V100s meanwhile, and the controller
// counts it used, so it types no job onto a GPU that is not free. One
// sharer crashing leaves the other running. Its accounting (sacct's
// AllocTRES) is logged for docs/fractions.md and must count the shard.
func TestShards(t *testing.T) {
	began := time.Now()
	dir := fmt.Sprintf("/var/lib/rota-dev/cluster/shard-test-%s", nodePrefix)
	// Billing as a site that weighs GPUs and counts a shard as the half
	// of a GPU it is (docs/fractions.md, "Fair share of shards").
	c, natsURL := ownCluster(t, dir, "sh", "ROTA_DEV_TYPES=v100 k80", "ROTA_DEV_SHARDS=v100:2", "ROTA_DEV_WEB=off", "ROTA_DEV_AGENTS=off",
		"ROTA_DEV_BILLING="+shardBilling)
	node := nodePrefix + "sh-v100"
	// Slurm types the shards by the GPU whose device file they share.
	if out, err := c.run("sinfo", "-h", "-n", node, "-o", "%G"); err != nil || !regexp.MustCompile(`shard(:v100)?:8\b`).MatchString(out) {
		t.Fatalf("the v100 node does not offer its GPUs as 8 shards: %v\n%s", err, out)
	}
	logs := filepath.Join(dir, "shard-logs")
	os.MkdirAll(logs, 0o777)
	os.Chmod(logs, 0o777)
	var shards []string
	for i := 0; i < 2; i++ {
		shards = append(shards, submitAs(t, c, fmt.Sprintf("shard-%d", i), "--gres=shard:1", "--wrap",
			fmt.Sprintf("echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURM_SHARDS_ON_NODE=$SLURM_SHARDS_ON_NODE >%s/%d.env; sleep 3600", logs, i)))
	}
	show := func(id string) string {
		t.Helper()
		out, err := c.run("scontrol", "show", "job", id)
		if err != nil {
			t.Fatalf("scontrol show job %s: %v\n%s", id, err, out)
		}
		return out
	}
	for _, id := range shards {
		if out := show(id); !strings.Contains(out, "AdminComment="+sharedNote) {
			t.Errorf("shard job %s does not carry the plugin's note that it was left as asked:\n%s", id, out)
		}
	}
	state := func(id string) string {
		out, _ := c.run("squeue", "-h", "-j", id, "-o", "%T")
		return strings.TrimSpace(out)
	}
	eventually.True(t, 90*time.Second, "both shard jobs run", func() bool {
		return state(shards[0]) == "RUNNING" && state(shards[1]) == "RUNNING"
	})
	for i := range shards {
		b, _ := os.ReadFile(filepath.Join(logs, fmt.Sprintf("%d.env", i)))
		t.Logf("shard job %d: %s", i, strings.TrimSpace(string(b)))
	}
	// How the release shows the shards in use.
	used, err := c.run("sinfo", "-h", "-n", node, "-O", "GresUsed:200")
	if err != nil {
		t.Fatal(err)
	}
	used = strings.TrimSpace(used)
	t.Logf("GresUsed of %s with two shard jobs: %s", node, used)
	// 24.11 and later list the shards allocated per GPU ("shard:2(1/2,
	// 1/2,0/2,0/2)": the count is of shards); 22.05 the GPUs holding
	// shards ("shard:v100:1(IDX:0)": the count is of GPUs).
	m := shardUsedRe.FindStringSubmatch(used)
	if m == nil {
		t.Fatalf("GresUsed shows no shards in use: %q", used)
	}
	held := 0 // GPUs that hold shards
	if strings.Contains(m[2], "/") {
		if m[1] != "2" {
			t.Fatalf("GresUsed does not count the two shards in use: %q", used)
		}
		for _, g := range strings.Split(strings.Trim(m[2], "()"), ",") {
			if a, _, ok := strings.Cut(g, "/"); ok && a != "0" && a != "-" {
				held++
			}
		}
	} else {
		fmt.Sscan(m[1], &held)
	}
	if held < 1 || held > 2 {
		t.Fatalf("GresUsed says %d GPUs hold the two one-shard jobs: %q", held, used)
	}
	// A GPU holding shards is not free: a job asking for all four V100s
	// waits, as Slurm keeps a GPU whole or in shards.
	whole := submitAs(t, c, "shard-whole", "--gres=gpu:v100:4", "--wrap", "sleep 3600")
	eventually.True(t, 60*time.Second, "the four-V100 job pending while shards are in use", func() bool {
		out, _ := c.run("squeue", "-h", "-j", whole, "-o", "%T %r")
		return strings.HasPrefix(strings.TrimSpace(out), "PENDING") && !strings.Contains(out, "None")
	})
	if out, _ := c.run("squeue", "-h", "-j", whole, "-o", "%T %r"); !strings.HasPrefix(strings.TrimSpace(out), "PENDING") {
		t.Errorf("a job took all four V100s while shards were in use: %s", out)
	}
	c.run("scancel", whole)
	// The controller counts the GPUs holding shards as used.
	var last string
	eventually.True(t, 60*time.Second, fmt.Sprintf("rota status to count %d V100s used by shards", held), func() bool {
		out, err := c.run(filepath.Join(repo, "bin/rota"), "status", "--json", "--nats", natsURL)
		if err != nil {
			last = out
			return false
		}
		var rep struct {
			Types []struct {
				Type        string
				Total, Used int
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			last = out
			return false
		}
		for _, ty := range rep.Types {
			if ty.Type == "v100" {
				last = fmt.Sprintf("v100 %d of %d used", ty.Used, ty.Total)
				return ty.Used == held
			}
		}
		last = out
		return false
	})
	t.Logf("rota status: %s", last)
	shardLimits(t, c, natsURL, shards)
	// One sharer crashing leaves the other running, untouched by Rota:
	// kill the first job's processes, then, rounds later, the second
	// still runs where it was, never requeued.
	if out, err := c.run("scancel", "--full", "--signal=KILL", shards[0]); err != nil {
		t.Fatalf("scancel --signal=KILL %s: %v %s", shards[0], err, out)
	}
	eventually.True(t, 60*time.Second, "the killed sharer to end", func() bool {
		s := state(shards[0])
		return s != "RUNNING" && s != "COMPLETING"
	})
	afterRounds(t, c, natsURL, 2, "the crash")
	if out, _ := c.run("squeue", "-h", "-j", shards[1], "-o", "%T %N"); !strings.HasPrefix(strings.TrimSpace(out), "RUNNING "+node) {
		t.Errorf("the other sharer does not run on after the first crashed: %q", out)
	}
	if out := show(shards[1]); !strings.Contains(out, "Restarts=0") {
		t.Errorf("the other sharer was requeued after the first crashed:\n%s", out)
	}
	// What accounting records of a shard job: it must count the shard.
	short := submitAs(t, c, "shard-short", "--gres=shard:1", "--wrap", "true")
	var acct string
	eventually.True(t, 90*time.Second, "sacct to have the short shard job done", func() bool {
		acct = c.sacctOf(short, began, "State,AllocTRES")
		return strings.HasPrefix(acct, "COMPLETED")
	})
	t.Logf("sacct of a finished one-shard job: %s", acct)
	if !strings.Contains(acct, "gres/shard=1") {
		t.Errorf("accounting does not count the job's shard: %q", acct)
	}
	// Fair share counts a job's billing: with GRES/shard half of GRES/gpu,
	// a one-CPU job on one shard bills 1+1, one on a whole GPU 1+2.
	gpuJob := submitAs(t, c, "gpu-short", "--gres=gpu:k80:1", "--wrap", "true")
	eventually.True(t, 90*time.Second, "sacct to have the short GPU job done", func() bool {
		return strings.HasPrefix(c.sacctOf(gpuJob, began, "State"), "COMPLETED")
	})
	wholeAcct := c.sacctOf(gpuJob, began, "AllocTRES")
	t.Logf("sacct of a finished one-GPU job: %s", wholeAcct)
	if !strings.Contains(acct, "billing=2,") || !strings.Contains(wholeAcct, "billing=3,") {
		t.Errorf("billing (TRESBillingWeights %s): one shard %q, one GPU %q; want billing=2 and billing=3", shardBilling, acct, wholeAcct)
	}
	const warned = "fair share counts a job on a shard as"
	if log := c.runLog(); strings.Contains(log, warned) {
		t.Errorf("the controller warns of billing that counts a shard right:\n%s", log)
	}
	// A partition that bills GPUs but not shards: the controller says so at
	// start, and what to set.
	if out, err := c.run("scontrol", "update", "PartitionName=gpu", "TRESBillingWeights=CPU=1.0,GRES/gpu=2.0"); err != nil {
		t.Fatalf("scontrol update partition: %v %s", err, out)
	}
	if out, err := c.dev("controller", "restart"); err != nil {
		t.Fatalf("controller restart: %v\n%s", err, out)
	}
	eventually.True(t, 30*time.Second, "the controller to warn that a shard is not billed as half a GPU", func() bool {
		return strings.Contains(c.runLog(), warned+" 0.00 of a GPU, not the 0.50 it is; GRES/shard=1 would")
	})
}

// shardBilling is TestShards' TRESBillingWeights: a shard of a V100 cut
// in two weighs half a GPU.
const shardBilling = "CPU=1.0,GRES/gpu=2.0,GRES/shard=1.0"

// shardLimits: typed limits count a job on shards as the fraction of a GPU
// its shards are. rota-a, whose two one-shard jobs (shards) run on V100s
// offered as two shards each, is limited to one V100 (its account's
// GrpTRES=gres/gpu:v100=1, which counts jobs already running): its shards
// are that V100, so a plain GPU job of its goes to a K80 though V100s are
// free. What Slurm's own limit counts is logged for docs/fractions.md (its
// usage of gres/gpu:v100 in slurmctld, and whether a job naming a V100
// then runs or waits).
func shardLimits(t *testing.T, c devCluster, natsURL string, shards []string) {
	t.Helper()
	unset := []string{"-i", "modify", "account", "lab-a", "set", "GrpTRES=gres/gpu:v100=-1"}
	c.run("sacctmgr", unset...) // what an interrupted run left in the kept database
	if out, err := c.run("sacctmgr", "-i", "modify", "account", "lab-a", "set", "GrpTRES=gres/gpu:v100=1"); err != nil {
		t.Fatalf("sacctmgr: %v %s", err, out)
	}
	var ids []string
	defer func() {
		if len(ids) > 0 {
			c.run("scancel", ids...)
		}
		if out, err := c.run("sacctmgr", unset...); err != nil {
			t.Errorf("sacctmgr %v: %v %s", unset, err, out)
		}
	}()
	// slurmdbd hands the limit to slurmctld (Slurm's own), and the
	// controller reads limits from slurmdbd each round, then tells the
	// plugin the user's room: two rounds after slurmctld has it.
	grp := regexp.MustCompile(`gres/gpu:v100=1\((\d+)\)`)
	var used string
	eventually.True(t, 30*time.Second, "slurmctld to have lab-a's limit", func() bool {
		out, _ := c.run("scontrol", "show", "assoc_mgr", "flags=assoc", "accounts=lab-a")
		if m := grp.FindStringSubmatch(out); m != nil {
			used = m[1]
			return true
		}
		return false
	})
	afterRounds(t, c, natsURL, 2, "the limit")
	for _, id := range shards {
		if out, _ := c.run("squeue", "-h", "-j", id, "-o", "%T %u %a"); strings.TrimSpace(out) != "RUNNING rota-a lab-a" {
			t.Fatalf("shard job %s is not rota-a's in lab-a and running: %q", id, out)
		}
	}
	plain := submitAs(t, c, "shard-limited", "--gres=gpu:1", "--wrap", "sleep 3600")
	ids = append(ids, plain)
	out, _ := c.run("scontrol", "show", "job", plain)
	switch {
	case strings.Contains(out, "gres/gpu:k80") || strings.Contains(out, "Features=k80"):
	case strings.Contains(out, "gres/gpu:v100") || strings.Contains(out, "Features=v100"):
		t.Errorf("rota-a's plain GPU job was typed v100 while its two shard jobs hold the one V100 its limit allows:\n%s", out)
	default:
		t.Errorf("rota-a's plain GPU job was typed neither k80 nor v100:\n%s", out)
	}
	// Slurm's own limit, for the record.
	named := submitAs(t, c, "shard-named-v100", "--gres=gpu:v100:1", "--wrap", "sleep 3600")
	ids = append(ids, named)
	var st string
	eventually.True(t, 40*time.Second, "the job naming a V100 to run or wait at the limit", func() bool {
		o, _ := c.run("squeue", "-h", "-j", named, "-o", "%T %r")
		st = strings.TrimSpace(o)
		return strings.HasPrefix(st, "RUNNING") || (strings.HasPrefix(st, "PENDING") && limitReason.MatchString(st))
	})
	t.Logf("Slurm's GrpTRES=gres/gpu:v100=1 on lab-a with rota-a's two one-shard jobs on V100s: slurmctld counted %s V100s used, and a job naming a V100 is %s", used, st)
}
