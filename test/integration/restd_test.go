//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
)

// restdCluster is a dev cluster of its own with slurmrestd
// (ROTA_DEV_RESTD=on) and the controller on slurm_backend = restd.
func restdCluster(t *testing.T) (devCluster, *slurm.Restd, *slurm.CLI) {
	t.Helper()
	base, err := freeport.Consecutive(12)
	if err != nil {
		t.Fatal(err)
	}
	dir := devDir + "-restd"
	// Ports: slurmctld and three slurmd at base..base+3, NATS base+4,
	// /metrics base+5, slurmdbd base+6, slurmrestd base+7.
	c := newDevCluster(dir, nodePrefix+"r", base, base+4, "ROTA_DEV_RESTD=on",
		fmt.Sprintf("ROTA_DEV_RESTD_PORT=%d", base+7), "ROTA_DEV_WEB=off", "ROTA_DEV_ACCOUNTING=off")
	c.logAt = c.logSize()
	if err := c.start(true); err != nil {
		c.stop() // what up started before it failed
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	cliEnv := []string{"SLURM_CONF=" + filepath.Join(dir, "slurm.conf")}
	if release != "" {
		cliEnv = append(cliEnv, "PATH="+os.Getenv("PATH"))
	}
	cli := &slurm.CLI{Env: cliEnv}
	r := &slurm.Restd{CLI: &slurm.CLI{Env: cliEnv}, URL: fmt.Sprintf("http://127.0.0.1:%d", base+7), User: "root",
		Token: &slurm.KeyTokens{KeyFile: filepath.Join(dir, "jwt", "jwt.key")}, Log: zerolog.New(zerolog.NewTestWriter(t))}
	return c, r, cli
}

// TestRestdBackend: on a real slurmrestd (the release under test), the
// API version is negotiated; the round loop's reads (Jobs, Nodes,
// Partitions, Job) give what the command-line backend gives on the same
// queue; an update of every kind the round loop sends is applied; and the
// controller runs its rounds through slurmrestd.
func TestRestdBackend(t *testing.T) {
	c, r, cli := restdCluster(t)
	ctx := context.Background()
	v, err := r.APIVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("negotiated slurmrestd API %s", v)
	if release == "" && v != "v0.0.38" {
		t.Errorf("22.05 serves v0.0.38 as its newest; negotiated %s", v)
	}
	forced := &slurm.Restd{CLI: r.CLI, URL: r.URL, User: "root", Token: r.Token, Version: "v0.0.1"}
	if _, err := forced.Jobs(ctx); err == nil || !strings.Contains(err.Error(), "supports") {
		t.Errorf("an unsupported forced version: %v", err)
	}
	// A wrong key is refused by slurmctld, with a clear error.
	bad := filepath.Join(t.TempDir(), "bad.key")
	os.WriteFile(bad, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	wrong := &slurm.Restd{CLI: r.CLI, URL: r.URL, User: "root", Token: &slurm.KeyTokens{KeyFile: bad}, Version: v}
	if _, err := wrong.Jobs(ctx); err == nil {
		t.Error("a token signed with another key was accepted")
	} else {
		t.Logf("wrong key: %v", err)
	}

	// A queue: pending (held back by --begin) in every GPU request form,
	// and a running job.
	sub := func(args ...string) uint32 {
		out, err := c.run("sbatch", append([]string{"--parsable", "-o", "/dev/null"}, args...)...)
		if err != nil {
			t.Fatalf("sbatch %v: %v %s", args, err, out)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 32)
		if err != nil {
			t.Fatal(out)
		}
		return uint32(id)
	}
	pend := sub("--begin=now+1hour", "--gres=gpu:1", "-t", "30", "--wrap", "sleep 600")
	gpuPend := pend
	sub("--begin=now+1hour", "--gpus=2", "-J", "a name with spaces", "--wrap", "sleep 600")
	sub("--begin=now+1hour", "--gpus-per-task=1", "-n2", "--wrap", "sleep 600")
	running := sub("--gres=gpu:1", "-t", "10", "--wrap", "sleep 600")
	eventually.True(t, 30*time.Second, "a running job", func() bool {
		j, ok, err := cli.Job(ctx, running)
		return err == nil && ok && j.Running()
	})

	// The controller places and orders the new jobs in its first rounds
	// (constraints, nices), and may do so between the two reads: read both
	// until they agree.
	var rj []slurm.Job
	var diffs []string
	placed := 0
	eventually.Within(15*time.Second, func() bool {
		var cj []slurm.Job
		rj, err = r.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cj, err = cli.Jobs(ctx); err != nil {
			t.Fatal(err)
		}
		diffs, placed = compareJobs(rj, cj)
		return len(diffs) == 0 && len(rj) >= 4
	})
	for _, d := range diffs {
		t.Error(d)
	}
	if placed < 4 {
		t.Errorf("want the plugin's decision ids on the 4 GPU jobs through slurmrestd, got %d", placed)
	}
	// A queue read right after another asks slurmctld for changes only
	// (v0.0.38), and an unchanged queue comes back the same without
	// slurmctld packing it. The controller's rounds and slurmctld's
	// scheduler change the jobs just submitted for a while, and the second
	// read asks for changes since a second before the first: tries a
	// second apart.
	{
		for try := 0; try < 20 && r.Unchanged() == 0; try++ {
			time.Sleep(time.Second)
			a, err1 := r.Jobs(ctx)
			b, err2 := r.Jobs(ctx)
			if err1 != nil || err2 != nil || len(a) != len(b) {
				t.Fatalf("two reads: %d %v, %d %v", len(a), err1, len(b), err2)
			}
		}
		if r.Unchanged() == 0 {
			t.Error("slurmctld never answered an unchanged queue with no change")
		}
	}
	// slurmrestd_queue_read = squeue: the queue from squeue, the rest
	// through slurmrestd.
	hybrid := &slurm.Restd{CLI: r.CLI, URL: r.URL, User: "root", Token: r.Token, QueueBySqueue: true}
	if hj, err := hybrid.Jobs(ctx); err != nil || len(hj) != len(rj) {
		t.Errorf("queue by squeue: %d jobs, %v", len(hj), err)
	}
	rn, err := r.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cn, err := cli.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rn, cn) {
		t.Errorf("nodes:\n restd %+v\n sinfo %+v", rn, cn)
	}
	rp, err := r.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := cli.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rp, cp) {
		t.Errorf("partitions:\n restd %+v\n scontrol %+v", rp, cp)
	}
	if _, ok, err := r.Job(ctx, 999999); ok || err != nil {
		t.Errorf("an unknown job: ok %v, %v", ok, err)
	}
	if com, err := r.JobAdminComment(ctx, gpuPend); err != nil || !strings.HasPrefix(com, "rota: ") {
		t.Errorf("AdminComment of %d: %q %v", gpuPend, com, err)
	}

	// Every field the round loop sends, on a pending job the running
	// controller leaves alone (no GPU), so its rounds do not change it too.
	pend = sub("--begin=now+1hour", "-t", "30", "--wrap", "sleep 600")
	feat, nice, lim, prio, exc := "p100", int32(-77), uint32(25), uint32(900000), nodePrefix+"r-k80"
	if err := r.Update(ctx, pend, slurm.JobUpdate{Features: &feat, Nice: &nice, TimeLimitMin: &lim}); err != nil {
		t.Fatal(err)
	}
	j, _, _ := r.Job(ctx, pend)
	if j.Features != "p100" || j.Nice != -77 || j.TimeLimitMin != 25 {
		t.Errorf("after the update: %+v", j)
	}
	if err := r.Update(ctx, pend, slurm.JobUpdate{Priority: &prio, ExcNodes: &exc}); err != nil {
		t.Fatal(err)
	}
	j, _, _ = r.Job(ctx, pend)
	show, _ := c.run("scontrol", "show", "job", strconv.Itoa(int(pend)))
	if j.Priority != prio || !strings.Contains(show, "ExcNodeList="+exc) {
		t.Errorf("priority %d, want %d; ExcNodeList in %s", j.Priority, prio, show)
	}
	if err := r.Update(ctx, pend, slurm.JobUpdate{ResetPriority: true, StartNow: true}); err != nil {
		t.Fatal(err)
	}
	j, _, _ = r.Job(ctx, pend)
	if j.Priority == prio {
		t.Errorf("the priority was not handed back: %d", j.Priority)
	}
	show, _ = c.run("scontrol", "show", "job", strconv.Itoa(int(pend)))
	if strings.Contains(show, "Reason=BeginTime") {
		t.Errorf("StartTime=now did not clear the begin time:\n%s", show)
	}
	if err := r.Update(ctx, 999999, slurm.JobUpdate{Nice: &nice}); err == nil {
		t.Error("an update of an unknown job succeeded")
	} else {
		t.Logf("unknown job's update: %v", err)
	}
	if err := r.Requeue(ctx, running); err != nil {
		t.Errorf("requeue: %v", err)
	}

	// The GPU type written into the request (tres_per_node), as rounds
	// retype on 24.11 and later, on a job the controller leaves alone
	// (--rota=off). 22.05 merges a new GPU request with the old one, so
	// Rota types by constraint there and never writes this.
	if typeByGres() {
		gpuOff := sub("--begin=now+1hour", "--rota=off", "--gres=gpu:1", "-t", "30", "--wrap", "sleep 600")
		for _, typ := range []string{"v100", "k80"} {
			if err := r.Update(ctx, gpuOff, slurm.JobUpdate{GPU: &slurm.GPURequest{PerNode: "gres/gpu:" + typ + ":1"}}); err != nil {
				t.Fatalf("GPU type %s through slurmrestd %s: %v", typ, v, err)
			}
			show, _ := c.run("scontrol", "show", "job", strconv.Itoa(int(gpuOff)))
			if got := tresEquals.ReplaceAllString(tresSpelling.Replace(show), "gres:$1:$2"); !strings.Contains(got, "TresPerNode=gres:gpu:"+typ+":1") {
				t.Errorf("after writing gres/gpu:%s:1 through slurmrestd %s:\n%s", typ, v, show)
			}
		}
	}

	// The controller runs its rounds through slurmrestd: it negotiated,
	// and its rounds counter moves (3-s rounds) with no error logged.
	b := c.runLog()
	if !strings.Contains(b, "using the newest Slurm REST API version") {
		t.Fatalf("the controller did not negotiate with slurmrestd:\n%s", b)
	}
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort(c))
	first := roundsTotal(t, metrics)
	eventually.True(t, 30*time.Second, "three more rounds", func() bool { return roundsTotal(t, metrics) >= first+3 })
	b = c.runLog()
	for _, l := range strings.Split(b, "\n") {
		if strings.Contains(l, `"level":"error"`) {
			t.Errorf("controller error: %s", l)
		}
	}
}

// metricsPort is the controller's /metrics port of cluster c.
func metricsPort(c devCluster) int {
	port := 0
	for _, e := range c.env { // the last setting wins, as in the environment
		if v, ok := strings.CutPrefix(e, "ROTA_DEV_METRICS_PORT="); ok {
			port, _ = strconv.Atoi(v)
		}
	}
	return port
}

// roundsTotal reads rota_controller_rounds_total.
func roundsTotal(t *testing.T, url string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "rota_controller_rounds_total "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return -1
}

// compareJobs lists where slurmrestd's and squeue's views of the same
// queue differ (run times within 3 s; reasons and priorities, which
// slurmctld moves on its own, aside), and how many jobs carry a decision.
func compareJobs(rj, cj []slurm.Job) (diffs []string, placed int) {
	if len(rj) != len(cj) {
		return []string{fmt.Sprintf("restd %d jobs, squeue %d", len(rj), len(cj))}, 0
	}
	byID := map[uint32]slurm.Job{}
	for _, j := range cj {
		byID[j.ID] = j
	}
	for _, a := range rj {
		b := byID[a.ID]
		if d := a.RunSeconds - b.RunSeconds; d > 3 || d < -3 {
			diffs = append(diffs, fmt.Sprintf("job %d run time restd %v squeue %v", a.ID, a.RunSeconds, b.RunSeconds))
		}
		a.RunSeconds, b.RunSeconds = 0, 0
		a.Reason, b.Reason = "", ""
		a.Priority, b.Priority = 0, 0
		a.Submit, b.Submit, a.Start, b.Start = a.Submit.UTC(), b.Submit.UTC(), a.Start.UTC(), b.Start.UTC()
		if len(a.Nodes) == 0 && len(b.Nodes) == 0 {
			a.Nodes, b.Nodes = nil, nil
		}
		if !reflect.DeepEqual(a, b) {
			diffs = append(diffs, fmt.Sprintf("job %d:\n restd  %+v\n squeue %+v", a.ID, a, b))
		}
		if a.Decision != "" {
			placed++
		}
	}
	return diffs, placed
}
