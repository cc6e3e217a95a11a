//go:build integration

package integration

import (
	"github.com/rota-hpc/rota/internal/eventually"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runGPUJobs submits n GPU jobs that run (not held) and waits until
// slurmdbd has recorded every one as ended.
func runGPUJobs(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		out, err := run("sbatch", "--parsable", "-o", "/dev/null", "-D", "/tmp", "--gres=gpu:1", "-J", "history", "--wrap", "sleep 1")
		if err != nil {
			t.Fatalf("sbatch: %v: %s", err, out)
		}
		ids = append(ids, strings.TrimSpace(strings.Split(out, ";")[0]))
	}
	eventually.True(t, 90*time.Second, "slurmdbd to record the jobs as ended", func() bool {
		out, err := run("sacct", "-X", "-P", "-n", "-o", "JobIDRaw,End", "-j", strings.Join(ids, ","))
		if err != nil {
			return false
		}
		ended := 0
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if _, end, ok := strings.Cut(l, "|"); ok && end != "Unknown" && end != "None" && end != "" {
				ended++
			}
		}
		return ended == n
	})
	return ids
}

func rotaStatus(t *testing.T) string {
	t.Helper()
	out, err := run(filepath.Join(repo, "bin/rota"), "status", "--nats", natsURL)
	if err != nil {
		t.Fatalf("rota status: %v: %s", err, out)
	}
	return out
}

// controllerLogFrom is the test cluster's controller log after byte
// offset off (controllerLogSize before what is looked for).
func controllerLogFrom(off int64) string { return testCluster.logFrom(off) }

func controllerLogSize() int64 { return testCluster.logSize() }

// logFrom is the cluster's controller log after byte offset off: the
// lines of this run, as the log keeps earlier runs' (all of it when the
// log is shorter than off, as a fresh one is).
func (c devCluster) logFrom(off int64) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "log/rota-controller.log"))
	if int64(len(b)) < off {
		return string(b)
	}
	return string(b[off:])
}

// runLog is the cluster's controller log since this run started it.
func (c devCluster) runLog() string { return c.logFrom(c.logAt) }

// logSize is the length of the cluster's controller log (0 when none).
func (c devCluster) logSize() int64 {
	fi, err := os.Stat(filepath.Join(c.dir, "log/rota-controller.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

var fromSlurmdbd = regexp.MustCompile(`(?m)^queue waits: (\d+) jobs from slurmdbd since \d{4}-\d\d-\d\d \d\d:\d\d \(history_window 7d\)`)

// A restarted controller knows the site's recent queue waits at once:
// it reads them from slurmdbd (sacct), and rota status says so.
func TestHistoryFromSlurmdbd(t *testing.T) {
	runGPUJobs(t, 3)
	restartController(t)
	var out string
	eventually.True(t, 30*time.Second, "rota status to show queue waits read from slurmdbd", func() bool {
		out, _ = run(filepath.Join(repo, "bin/rota"), "status", "--nats", natsURL)
		return fromSlurmdbd.MatchString(out)
	})
	n, _ := strconv.Atoi(fromSlurmdbd.FindStringSubmatch(out)[1])
	if n < 3 {
		t.Fatalf("%d jobs from slurmdbd, want at least the 3 just run:\n%s", n, out)
	}
	// The jobs ran on typed GPUs of partition gpu: a row per type.
	if !regexp.MustCompile(`(?m)^gpu\s+(v100|p100|k80)\s+\d+\s+\S+\s+\S+\s+\S+\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(out) {
		t.Fatalf("no queue-wait row for partition gpu and a GPU type:\n%s", out)
	}
	t.Logf("%s", out[strings.Index(out, "queue waits:"):])
}

// slurmdbd down when the controller starts: the controller still starts,
// warns in words an admin can act on, rota status says why it has no
// history from slurmdbd, and jobs still run.
func TestHistorySlurmdbdDown(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(devDir, "run/slurmdbd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("slurmdbd.pid: %q", b)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// up restarts the daemons that are missing; then a controller
		// that reads its history again for the next tests.
		if out, err := dev("up"); err != nil {
			t.Fatalf("dev-cluster up: %v: %s", err, out)
		}
		restartController(t)
		if err := waitPlaced(); err != nil {
			t.Fatal(err)
		}
	}()
	eventually.True(t, 30*time.Second, "slurmdbd to stop", func() bool { return syscall.Kill(pid, 0) != nil })

	off := controllerLogSize()
	restartController(t)
	eventually.True(t, 60*time.Second, "the controller's warning that slurmdbd cannot be read", func() bool {
		return strings.Contains(controllerLogFrom(off), "cannot read job history from slurmdbd")
	})
	for _, l := range strings.Split(controllerLogFrom(off), "\n") {
		if strings.Contains(l, "cannot read job history from slurmdbd") {
			if !strings.Contains(l, `"level":"warn"`) || !strings.Contains(l, "history_window = 0") || !strings.Contains(l, "sacctmgr show cluster") {
				t.Fatalf("warning does not say what to do: %s", l)
			}
			t.Logf("controller: %s", l)
		}
	}
	out := rotaStatus(t)
	if !regexp.MustCompile(`(?m)^queue waits: 0 seen starting since the controller started; slurmdbd not read at start \(.+\)$`).MatchString(out) {
		t.Fatalf("rota status does not say slurmdbd was not read:\n%s", out)
	}
	// Jobs still run, and are placed by Rota.
	if err := waitPlaced(); err != nil {
		t.Fatal(err)
	}
	jid, err := run("sbatch", "--parsable", "-o", "/dev/null", "-D", "/tmp", "--gres=gpu:1", "--wrap", "sleep 1")
	if err != nil {
		t.Fatalf("sbatch with slurmdbd down: %v: %s", err, jid)
	}
	jid = strings.TrimSpace(strings.Split(jid, ";")[0])
	eventually.True(t, 60*time.Second, "job "+jid+" to run and finish with slurmdbd down", func() bool {
		o, err := run("scontrol", "show", "job", jid)
		return err == nil && strings.Contains(o, "JobState=COMPLETED")
	})
	o, _ := run("scontrol", "show", "job", jid)
	if !strings.Contains(o, "AdminComment=rota:") {
		t.Errorf("job %s ran without a Rota decision:\n%s", jid, o)
	}
}
