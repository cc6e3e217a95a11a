//go:build integration

package integration

import (
	"github.com/rota-hpc/rota/internal/eventually"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var grantedRe = regexp.MustCompile(`Granted job allocation (\d+)`)

// Interactive sessions (docs/kinds.md), on real Slurm: salloc and srun
// allocations, --rota-kind=interactive and a job name the admin named
// are interactive; a session goes where it starts now and training loses
// least (the interactive reserve first, then the slowest type); batch
// jobs leave the reserve alone; under a backlog of training jobs a
// waiting session is left untyped, put first in Rota's order, and takes
// the first GPU that frees ahead of the training jobs queued before it.
func TestInteractiveSessions(t *testing.T) {
	restartController(t, "ROTA_DEV_INTERACTIVE_RESERVE=v100=1", "ROTA_DEV_INTERACTIVE_NAMES=jupyter-*")
	var ids []string
	t.Cleanup(func() {
		run("scancel", ids...)
		restartController(t)
	})
	waitTypeWritten(t)
	explain := func(id string) string {
		t.Helper()
		// The plugin sends its decision to the controller after it has
		// answered slurmctld: salloc may return before it is recorded.
		var out string
		var err error
		defer func() {
			if err != nil && strings.Contains(out, "no decision recorded") {
				t.Logf("the last rota explain %s: %v %s", id, err, out)
			}
		}()
		eventually.True(t, 10*time.Second, "rota explain "+id+" to find the decision", func() bool {
			out, err = run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, id)
			return err == nil || !strings.Contains(out, "no decision recorded")
		})
		if err != nil {
			t.Fatalf("rota explain %s: %v %s", id, err, out)
		}
		return out
	}
	kindLine := regexp.MustCompile(`(?m)^kind +interactive$`)

	// A batch job sees v100's reserved GPU as not its own. Placements
	// count as taken until the next round's view: probe until one comes.
	var out string
	free3 := regexp.MustCompile(`free\.v100 +3\n`)
	probed := false
	defer func() {
		if !probed {
			t.Logf("the last batch job's rota explain:\n%s", out)
		}
	}()
	eventually.True(t, 20*time.Second, "a batch job to see 3 v100s free to it (4, 1 reserved)", func() bool {
		batch := strconv.FormatUint(uint64(sbatch(t, "--gres=gpu:1")), 10)
		out = explain(batch)
		run("scancel", batch)
		return free3.MatchString(out)
	})
	probed = true
	if kindLine.MatchString(out) {
		t.Errorf("a batch job shown as interactive:\n%s", out)
	}

	// Two sessions on an idle cluster: the reserved v100 (training loses
	// nothing), then the k80 (the GPU training values least).
	salloc := func(name string) string {
		t.Helper()
		out, err := run("salloc", "--no-shell", "-J", name, "--gres=gpu:1", "-t", "10")
		m := grantedRe.FindStringSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("salloc: %v %s", err, out)
		}
		ids = append(ids, m[1])
		return m[1]
	}
	var onReserve string // the session on the reserved v100
	for _, c := range []struct{ name, want, says string }{
		{"ia-a", "v100", "training loses 0 GPUs"},
		{"ia-b", "k80", "training loses 1 GPUs of speed 1"},
	} {
		id := salloc(c.name)
		if onReserve == "" {
			onReserve = id
		}
		n, _ := strconv.ParseUint(id, 10, 32)
		j := show(t, uint32(n))
		out := explain(id)
		if givenType(j) != c.want || !kindLine.MatchString(out) || !strings.Contains(out, "no batch script (salloc or srun)") || !strings.Contains(out, c.says) {
			t.Errorf("session %s: given %q, want %q; explain should say interactive, no batch script, %q:\n%s", id, givenType(j), c.want, c.says, out)
		}
		if j.TimeLimit != "00:10:00" {
			t.Errorf("session %s: time limit %s, want its user's 00:10:00", id, j.TimeLimit)
		}
	}
	// srun without an allocation, --rota-kind, and the admin's name rule.
	out, err := run("srun", "-J", "ia-srun", "--gres=gpu:1", "bash", "-c", "echo $SLURM_JOB_ID")
	if err != nil {
		t.Fatalf("srun: %v %s", err, out)
	}
	srun := strings.TrimSpace(out)
	ids = append(ids, srun)
	for _, c := range []struct{ id, says string }{
		{srun, "no batch script (salloc or srun)"},
		{strconv.FormatUint(uint64(sbatch(t, "--gres=gpu:1", "--rota-kind=interactive")), 10), "--rota-kind=interactive"},
		{strconv.FormatUint(uint64(sbatch(t, "--gres=gpu:1", "-J", "jupyter-alice")), 10), "job name jupyter-alice matches jupyter-*"},
	} {
		if out := explain(c.id); !kindLine.MatchString(out) || !strings.Contains(out, c.says) {
			t.Errorf("job %s: explain should say interactive (%s):\n%s", c.id, c.says, out)
		}
	}

	// A backlog: training fills the other 10 GPUs (3 v100, 4 p100, 3
	// k80), three more wait, then a session asks for a GPU.
	logOff := controllerLogSize()
	for i := 0; i < 13; i++ {
		out, err := run("sbatch", "--parsable", "-o", "/dev/null", "-J", "ia-train", "--gres=gpu:1", "--wrap", "sleep 300")
		if err != nil {
			t.Fatalf("sbatch: %v %s", err, out)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	train := ids[len(ids)-13:]
	states := func() map[string]string {
		out, _ := run("squeue", "-h", "-n", "ia-train,ia-c", "-o", "%i %T %y %N")
		m := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(l); len(f) >= 3 {
				m[f[0]] = strings.Join(f[1:], " ")
			}
		}
		return m
	}
	eventually.True(t, 60*time.Second, "10 training jobs running", func() bool {
		n := 0
		for _, s := range states() {
			if strings.HasPrefix(s, "RUNNING") {
				n++
			}
		}
		return n == 10
	})
	sess := exec.Command("salloc", "--no-shell", "-J", "ia-c", "--gres=gpu:1", "-t", "10")
	sess.Env = env
	if err := sess.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Process.Kill(); sess.Wait() })
	var c string
	eventually.True(t, 20*time.Second, "the session in the queue", func() bool {
		out, _ := run("squeue", "-h", "-n", "ia-c", "-o", "%i")
		c = strings.TrimSpace(out)
		return c != ""
	})
	ids = append(ids, c)
	cn, _ := strconv.ParseUint(c, 10, 32)
	// No type has a GPU free: left untyped at submission, or (when the
	// plugin's view was a round old) given back untyped by the next round.
	placed := givenType(show(t, uint32(cn)))
	eventually.True(t, 20*time.Second, "the waiting session untyped", func() bool { return givenType(show(t, uint32(cn))) == "" })
	// Rota puts it first: a lower nice than every training job waiting.
	nice := func(s string) int {
		f := strings.Fields(s)
		n, _ := strconv.Atoi(f[1])
		return n
	}
	eventually.True(t, 30*time.Second, "the session first in Rota's order", func() bool {
		st := states()
		var waiting int
		for _, id := range train {
			if s, ok := st[id]; ok && strings.HasPrefix(s, "PENDING") {
				waiting++
				if nice(st[c]) >= nice(s) {
					return false
				}
			}
		}
		return waiting == 3
	})
	// A GPU frees up (a training job ends, on a type other than the one
	// the session was placed on): the session takes it, the training jobs
	// queued before it wait on.
	on := "k80"
	if placed == "k80" {
		on = "p100"
	}
	var victim string
	for id, s := range states() {
		if strings.HasPrefix(s, "RUNNING") && strings.HasSuffix(s, node(on)) {
			victim = id
			break
		}
	}
	if victim == "" {
		t.Fatalf("no training job on %s: %v", node(on), states())
	}
	if out, err := run("scancel", victim); err != nil {
		t.Fatalf("scancel %s: %v %s", victim, err, out)
	}
	var st map[string]string
	took := false
	defer func() {
		if !took {
			logWhy(t, c, logOff)
			t.Logf("the jobs' states at the last look: %v", st)
		}
	}()
	eventually.True(t, 40*time.Second, "the session "+c+" to take the freed "+on+" GPU", func() bool {
		st = states()
		return strings.HasPrefix(st[c], "RUNNING")
	})
	took = true
	running := 0
	for _, id := range train {
		if strings.HasPrefix(st[id], "RUNNING") {
			running++
		}
	}
	if running != 9 {
		t.Errorf("%d training jobs run beside the session, want the 9 that ran before (a waiting one took a GPU): %v", running, st)
	}
	if j := show(t, uint32(cn)); givenType(j) != "" {
		t.Errorf("the session was retyped to %q while it waited", givenType(j))
	}
	if out := explain(c); !strings.Contains(out, "Rota never retypes, moves or requeues it") {
		t.Errorf("rota explain %s lacks the round's word on the session:\n%s", c, out)
	}

	// The session on the reserved v100 ends: training holds 3 v100s, its
	// cap, so no training job waits typed v100 and the GPU stays free.
	eventually.True(t, 20*time.Second, "no waiting training job typed v100", func() bool {
		for _, id := range train {
			n, _ := strconv.ParseUint(id, 10, 32)
			if strings.HasPrefix(states()[id], "PENDING") && givenType(show(t, uint32(n))) == "v100" {
				return false
			}
		}
		return true
	})
	if out, err := run("scancel", onReserve); err != nil {
		t.Fatalf("scancel %s: %v %s", onReserve, err, out)
	}
	// Watched over the three rounds after it ended (each could retype a
	// training job onto the freed v100).
	r0 := roundsDone(t, testCluster, natsURL)
	eventually.TrueEvery(t, 60*time.Second, 500*time.Millisecond, "three rounds after the session ended", func() bool {
		onV100, st := 0, states()
		for _, id := range train {
			if strings.HasPrefix(st[id], "RUNNING") && strings.HasSuffix(st[id], node("v100")) {
				onV100++
			}
		}
		if onV100 > 3 {
			t.Fatalf("training holds %d v100s with 1 of 4 reserved: %v", onV100, st)
		}
		return r0 >= 0 && roundsDone(t, testCluster, natsURL) >= r0+3
	})
}

// A new session goes first in Rota's order at once, not at the next
// round: with 10-minute rounds, its nice comes within seconds of its
// submission (the controller's sessions pass), and a batch job's does not.
func TestInteractiveFirstBeforeTheRound(t *testing.T) {
	restartController(t, "ROTA_DEV_ROUND=10m")
	t.Cleanup(func() { restartController(t) })
	waitTypeWritten(t)
	// The first round ran as the controller started; the next is minutes
	// away. --begin keeps both pending without a hold.
	submit := func(args ...string) string {
		t.Helper()
		out, err := run("sbatch", append([]string{"--parsable", "-o", "/dev/null", "--begin=now+1hour", "--gres=gpu:1"},
			append(args, "--wrap", "sleep 1")...)...)
		if err != nil {
			t.Fatalf("sbatch: %v %s", err, out)
		}
		id := strings.TrimSpace(out)
		t.Cleanup(func() { run("scancel", id) })
		return id
	}
	batch := submit()
	session := submit("--rota-kind=interactive")
	nice := func(id string) string {
		out, _ := run("squeue", "-h", "-j", id, "-o", "%y")
		return strings.TrimSpace(out)
	}
	eventually.True(t, 10*time.Second, "the session's nice from Rota", func() bool { return nice(session) == "-5000" })
	if n := nice(batch); n != "0" {
		t.Errorf("batch job %s got nice %s between rounds, want 0", batch, n)
	}
}
