//go:build integration

package integration

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fair-share run, short (scripts/fairshare is the long one; figures
// in docs/rounds.md, "Order and fair share"): 1-GPU sleep jobs of fsJobS
// from rota-a (lab-a, 3 shares) and rota-b (lab-b, 1), submitted at once,
// more than the 12 GPUs run in the run; lab-a's fraction of the GPU time
// in [fsFromS, fsToS] after the first submission.
const (
	fsJobS, fsFromS, fsToS = 60, 150, 390
	fsHalfLife             = "0-0:05:00"
	// lab-a's share is 0.75. Short windows fall short of it even on plain
	// Slurm (0.63 in scripts/fairshare's: fair share flips the order only
	// at each minute's recalculation); order = priority gives about 0.5,
	// outside the band (docs/rounds.md).
	fsWant, fsTolerance = 0.75, 0.15
)

var sprioNiceRe = regexp.MustCompile(`(?m)^\s*(\d+)\s+\S+\s+rota-[ab]\s+(\d+)\s+(\d+)\s+(\d+)\s+(-?\d+)\s*$`)

// With Rota's default order (nice), fair share keeps acting on the GPU
// jobs Rota orders: sprio shows their fair-share factor and Rota's nice,
// and each account's GPU time follows its share.
func TestFairShareKept(t *testing.T) {
	slurmPort, natsPort, err := freePorts()
	if err != nil {
		t.Fatal(err)
	}
	c := newDevCluster(devDir+"-fs", nodePrefix+"fs", slurmPort, natsPort,
		"ROTA_DEV_PRIORITY_HALFLIFE="+fsHalfLife, "ROTA_DEV_SCHED_PARAMS=bf_interval=1", "ROTA_DEV_ROUND=5s")
	if err := c.start(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	per := (12*fsToS+fsJobS-1)/fsJobS + 12
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, u := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf("for i in $(seq %d); do sbatch -Q -D /tmp -o /dev/null -J fs-%s --gres=gpu:1 --wrap 'sleep %d' || exit 1; done", per, u, fsJobS)
			if out, err := c.run("runuser", "-u", "rota-"+u, "--", "bash", "-c", script); err != nil {
				t.Errorf("rota-%s submitting: %v: %s", u, err, out)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d jobs submitted in %s", 2*per, time.Since(t0).Round(time.Second))

	// After a recalculation (PriorityCalcPeriod=1), a pending job Rota
	// ordered shows its fair-share factor and a nice of Rota's.
	time.Sleep(time.Until(t0.Add(90 * time.Second)))
	out, err := c.run("sprio", "-h", "-o", "%.10i %.9r %.8u %.10Y %.10F %.10A %.10N")
	if err != nil {
		t.Fatalf("sprio: %v: %s", err, out)
	}
	fair, niced := 0, 0
	for _, m := range sprioNiceRe.FindAllStringSubmatch(out, -1) {
		if f, _ := strconv.Atoi(m[3]); f > 0 {
			fair++
		}
		if m[5] != "0" {
			niced++
		}
	}
	if fair == 0 || niced == 0 {
		t.Fatalf("sprio: %d jobs with a fair-share factor, %d with a nice; want both:\n%s", fair, niced, out)
	}
	t.Logf("sprio after 90 s: %d pending jobs with a fair-share factor, %d with Rota's nice", fair, niced)
	checkPriorityHandBack(t, c, sprioNiceRe.FindStringSubmatch(out)[1])

	time.Sleep(time.Until(t0.Add(fsToS * time.Second)))
	from, to := t0.Unix()+fsFromS, t0.Unix()+fsToS
	out, err = c.run("env", "SLURM_TIME_FORMAT=%s", "sacct", "-a", "-X", "-n", "-P",
		"-S", t0.Add(-time.Minute).Format("2006-01-02T15:04:05"), "-o", "JobID,Account,Start,End,AllocTRES")
	if err != nil {
		t.Fatalf("sacct: %v: %s", err, out)
	}
	share, a, b := gpuShare(out, from, to)
	t.Logf("fairshare: window %d-%d s: lab-a %.0f GPU-s, lab-b %.0f GPU-s: rota_a=%.3f (want %.2f ± %.2f)", fsFromS, fsToS, a, b, share, fsWant, fsTolerance)
	if a+b < 0.8*12*float64(fsToS-fsFromS) {
		t.Errorf("only %.0f GPU-s used of %d: the cluster idled, so shares say nothing", a+b, 12*(fsToS-fsFromS))
	}
	if math.Abs(share-fsWant) > fsTolerance {
		b, _ := c.run("sshare", "-a", "-l")
		t.Errorf("lab-a's share of GPU time %.3f, want %.2f ± %.2f\n%s", share, fsWant, fsTolerance, b)
	}
}

// checkPriorityHandBack: an admin priority switches multifactor off for
// the job (every factor 0), and `scontrol release` (what the loop hands a
// migrated job's priority back with) switches it on again.
func checkPriorityHandBack(t *testing.T, c devCluster, id string) {
	t.Helper()
	factors := func() (prio, fair string) {
		out, err := c.run("sprio", "-h", "-j", id, "-o", "%.10i %.9r %.8u %.10Y %.10F %.10A %.10N")
		m := sprioNiceRe.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("sprio -j %s: %v: %q", id, err, out)
		}
		return m[2], m[3]
	}
	if out, err := c.run("scontrol", "update", "JobId="+id, "Priority=5000000"); err != nil {
		t.Fatalf("scontrol update: %v: %s", err, out)
	}
	if p, f := factors(); p != "5000000" || f != "0" {
		t.Errorf("job %s with Priority=5000000: sprio priority %s fair share %s, want 5000000 and 0", id, p, f)
	}
	if out, err := c.run("scontrol", "release", id); err != nil {
		t.Fatalf("scontrol release: %v: %s", err, out)
	}
	if p, f := factors(); p == "5000000" || f == "0" {
		t.Errorf("job %s released: sprio priority %s fair share %s, want multifactor's again", id, p, f)
	}
}

// gpuShare is lab-a's fraction of the two accounts' GPU-seconds in
// [from, to], from sacct -P lines JobID|Account|Start|End|AllocTRES with
// epoch times; a job still running ends at to.
func gpuShare(sacct string, from, to int64) (share, a, b float64) {
	use := map[string]float64{}
	gpuRe := regexp.MustCompile(`gres/gpu=(\d+)`)
	for _, line := range strings.Split(sacct, "\n") {
		f := strings.Split(line, "|")
		if len(f) < 5 {
			continue
		}
		s, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		e, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			e = to
		}
		m := gpuRe.FindStringSubmatch(f[4])
		if m == nil {
			continue
		}
		g, _ := strconv.Atoi(m[1])
		s, e = max(s, from), min(e, to)
		if e > s {
			use[f[1]] += float64(e-s) * float64(g)
		}
	}
	a, b = use["lab-a"], use["lab-b"]
	if a+b > 0 {
		share = a / (a + b)
	}
	return share, a, b
}
