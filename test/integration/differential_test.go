//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/freeport"
)

// Issue #22: no job is worse off under Rota than under plain Slurm.
// TestDifferential runs one set of jobs on dev clusters of several shapes,
// each shape twice: as plain Slurm (no job_submit plugin, no controller)
// and with Rota (plugin and controller). Every job plain Slurm completes
// must complete with Rota too: not be refused at sbatch, left pending, or
// killed at a limit Rota set.

// diffJob is one job of the set. Its user asks diffLimit, which lets plain
// Slurm finish it on any GPU type.
type diffJob struct {
	name string
	args []string // the GPU request and Rota's options
	// The work: steps of bin/rota-synthtrain (ResNet-18, batch size 64:
	// V100 24.09 steps/s, P100 22.30, K80 7.05), which reports its
	// progress, else a sleep of that many seconds, which reports none.
	steps, sleep int
	tasks        int // an array's tasks
}

const diffLimit = "10"

var diffJobs = []diffJob{
	// Training first, the longest first: the set ends sooner.
	// Hints ten times too fast: Rota gives a minute, the job needs 150 s
	// on a V100 (TestLimitFollowsProgress); untyped, 58 s to 199 s by type.
	{name: "synth-fast", args: []string{"--gres=gpu:v100:1", "--rota-steps=3614", "--rota-throughput=v100:240.9"}, steps: 3614},
	{name: "synth-ckpt-fast", args: []string{"--gres=gpu:v100:1", "--requeue", "--rota-checkpoint-signal=USR1", "--rota-steps=3614", "--rota-throughput=v100:240.9"}, steps: 3614},
	{name: "synth-fast-untyped", args: []string{"--gres=gpu:1", "--rota-steps=1400", "--rota-throughput=v100:240.9,p100:223,k80:70.5"}, steps: 1400},
	// Right hints, and a job that can move to a faster type.
	{name: "synth-ckpt", args: []string{"--gres=gpu:1", "--requeue", "--rota-checkpoint-signal=USR1", "--rota-steps=1400", "--rota-throughput=v100:24.09,p100:22.3,k80:7.05"}, steps: 1400},
	{name: "synth-right", args: []string{"--gres=gpu:1", "--rota-steps=600", "--rota-throughput=v100:24.09,p100:22.3,k80:7.05"}, steps: 600},
	// Ten times too slow; none at all.
	{name: "synth-slow", args: []string{"--gres=gpu:1", "--rota-steps=600", "--rota-throughput=v100:2.409,p100:2.23,k80:0.705"}, steps: 600},
	{name: "synth-no-hint", args: []string{"--gres=gpu:1"}, steps: 600},
	// A limit from a too-fast hint with no progress to measure: Rota must
	// give the user's back before it runs out.
	{name: "sleep-fast-hint", args: []string{"--gres=gpu:1", "--rota-steps=900", "--rota-throughput=v100:100,p100:100,k80:100"}, sleep: 90},
	// Every request form, untyped and typed, on one node and on two.
	{name: "gres", args: []string{"--gres=gpu:1"}, sleep: 15},
	{name: "gres-typed", args: []string{"--gres=gpu:v100:1"}, sleep: 15},
	{name: "gpus", args: []string{"--gpus=2"}, sleep: 15},
	{name: "gpus-typed", args: []string{"--gpus=k80:1"}, sleep: 15},
	{name: "gpus-per-node", args: []string{"--gpus-per-node=2"}, sleep: 15},
	{name: "gpus-per-task", args: []string{"--gpus-per-task=1", "-n", "2"}, sleep: 15},
	{name: "gpus-per-socket", args: []string{"--gpus-per-socket=1", "--sockets-per-node=1"}, sleep: 15},
	// 22.05's sbatch has no --tres-per-task: refused there, Rota or not;
	// 26.05's wants -n with it.
	{name: "tres-per-task", args: []string{"--tres-per-task=gres/gpu=1", "-n", "2"}, sleep: 15},
	{name: "gpus-N2-per-node", args: []string{"-N2", "--gpus-per-node=2"}, sleep: 15},
	{name: "gpus8-N2", args: []string{"-N2", "--gpus=8"}, sleep: 15},
	{name: "array", args: []string{"--array=0-2", "--gres=gpu:1"}, sleep: 15, tasks: 3},
	// Jobs that name their nodes may run only on those nodes' types
	// ({k80}: the cluster's first k80 node; none on a shape without one,
	// where plain Slurm refuses the job too).
	{name: "nodelist-k80", args: []string{"-w", "{k80}", "--gres=gpu:1"}, sleep: 15},
	{name: "nodelist-v100", args: []string{"--nodelist={v100}", "--gpus=1"}, sleep: 15},
	{name: "exclude-v100", args: []string{"--exclude={v100}", "--gres=gpu:1"}, sleep: 15},
}

// nodeArgs puts the cluster's node names in for {k80}, {p100}, {v100}: the
// first node of that type, or a name no node has.
func nodeArgs(c devCluster, args []string) []string {
	out, _ := c.run("sinfo", "-h", "-N", "-o", "%N")
	names := strings.Fields(out)
	sort.Strings(names)
	res := make([]string, len(args))
	for i, a := range args {
		for _, typ := range []string{"k80", "p100", "v100"} {
			if !strings.Contains(a, "{"+typ+"}") {
				continue
			}
			name := "no-" + typ + "-node"
			for _, n := range names {
				if strings.HasSuffix(n, "-"+typ) || strings.Contains(n, "-"+typ+"-") {
					name = n
					break
				}
			}
			a = strings.ReplaceAll(a, "{"+typ+"}", name)
		}
		res[i] = a
	}
	return res
}

// diffShape is a cluster shape: scripts/dev-cluster settings and its node
// count (for ports).
type diffShape struct {
	name  string
	env   []string
	nodes int
}

var diffShapes = []diffShape{
	{"one-per-type", nil, 3},
	{"two-per-type", []string{"ROTA_DEV_NODES_PER_TYPE=2"}, 6},
	{"v100-only", []string{"ROTA_DEV_TYPES=v100"}, 1},
}

const (
	// diffDeadline bounds one cluster's run of the set (plain Slurm on the
	// V100-only shape needs about four minutes).
	diffDeadline = 7 * time.Minute
	// diffStuck: pending jobs on a cluster where nothing has run (or
	// squeue has not answered) for this long will not start (a round is
	// 3 s, backfill every 2 s here).
	diffStuck = 45 * time.Second
)

func TestDifferential(t *testing.T) {
	n := 0
	for _, s := range diffShapes {
		n += 2 * (s.nodes + 4)
	}
	// One run of ports for every cluster, so no two of them draw the same.
	port, err := freeport.Consecutive(n)
	if err != nil {
		t.Fatal(err)
	}
	runs := make([][2]*diffRun, len(diffShapes))
	var wg sync.WaitGroup
	var starting sync.Mutex // one cluster starts at a time: two cores
	for i, s := range diffShapes {
		for m, mode := range []string{"plain", "rota"} {
			// Jobs of seconds: backfill must not lag 30 s behind (see
			// docs/rounds.md, the e2e workload), with or without Rota.
			extra := append([]string{"ROTA_DEV_SCHED_PARAMS=bf_interval=2"}, s.env...)
			if mode == "plain" {
				extra = append(extra, "ROTA_DEV_SUBMIT_PLUGIN=off")
			} else {
				// No 5-minute overhead, so hints make minute limits: the
				// harshest case for Rota.
				extra = append(extra, "ROTA_DEV_WALLTIME_OVERHEAD_MIN=0")
			}
			// Node names of their own (cgroups are named by node), a
			// directory of its own (short: slurmd's sockets go under it,
			// and a socket's path has at most 108 bytes), ports of its
			// own: slurmctld, the slurmds, NATS, /metrics and slurmdbd.
			tag := fmt.Sprintf("d%d%c", i+1, mode[0])
			c := newDevCluster(devDir+"-"+tag, nodePrefix+tag, port, port+s.nodes+1, extra...)
			port += s.nodes + 4
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(s.name+"-"+mode, func(t *testing.T) {
					starting.Lock()
					err := c.start(mode == "rota")
					starting.Unlock()
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(c.stop)
					runs[i][m] = runJobSet(t, c, s.name+"/"+mode)
				})
			}()
		}
	}
	wg.Wait()

	var worse []string
	var jobs, plainDone, rotaDone int
	for i, s := range diffShapes {
		plain, rota := runs[i][0], runs[i][1]
		if plain == nil || rota == nil {
			t.Errorf("differential: shape=%s did not run", s.name)
			continue
		}
		var pc, rc int
		var bad []string
		for _, j := range diffJobs {
			p, r := plain.verdict(j), rota.verdict(j)
			if p != completedState && !plainCannot.MatchString(p) {
				t.Errorf("%s: plain Slurm did not complete %s (%s): the comparison needs a job it can run or refuses", s.name, j.name, p)
			}
			if p == completedState {
				pc++
			}
			if r == completedState {
				rc++
			}
			if p == completedState && r != completedState {
				bad = append(bad, j.name+": "+r)
				worse = append(worse, s.name+"/"+j.name)
			}
		}
		jobs, plainDone, rotaDone = jobs+len(diffJobs), plainDone+pc, rotaDone+rc
		line := fmt.Sprintf("differential: shape=%s jobs=%d plain_completed=%d rota_completed=%d worse=%d", s.name, len(diffJobs), pc, rc, len(bad))
		if len(bad) > 0 {
			line += " (" + strings.Join(bad, "; ") + ")"
		}
		t.Log(line)
	}
	total := fmt.Sprintf("differential: shapes=%d jobs=%d plain_completed=%d rota_completed=%d worse=%d", len(diffShapes), jobs, plainDone, rotaDone, len(worse))
	if len(worse) > 0 {
		t.Errorf("%s: %s", total, strings.Join(worse, ", "))
	} else {
		t.Log(total)
	}
}

// plainCannot: plain Slurm refused a job at sbatch, or holds it as one
// that cannot run on this shape.
var plainCannot = regexp.MustCompile(`^(refused .*|(pending|FAILED) (PartitionNodeLimit|BadConstraints|PartitionConfig))$`)

// completedState is Slurm's, and a job's verdict when it completed.
const completedState = "COMPLETED"

// slurmJob is one Slurm job of a set's job (an array task, a chain
// segment) as squeue last showed it.
type slurmJob struct{ state, reason, limit string }

// diffRun is how the set fared on one cluster.
type diffRun struct {
	refused map[string]string              // job -> sbatch's error
	jobs    map[string]map[string]slurmJob // job -> squeue's id -> last seen
	logs    map[string]string              // training job -> its event log
	reached map[string]int                 // training job -> the last step its log records
}

// runJobSet submits the set to c and follows it until every job has
// ended, nothing has run for diffStuck, or diffDeadline; it logs, under
// label, the jobs that did not complete.
func runJobSet(t *testing.T, c devCluster, label string) *diffRun {
	dir := filepath.Join(c.dir, "jobs")
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	r := &diffRun{refused: map[string]string{}, jobs: map[string]map[string]slurmJob{}, logs: map[string]string{}, reached: map[string]int{}}
	for _, j := range diffJobs {
		// The name is the job's key: a chain's segments keep it.
		args := append([]string{"--parsable", "-J", j.name, "-o", filepath.Join(dir, j.name+"-%j.out"), "-t", diffLimit}, nodeArgs(c, j.args)...)
		if j.steps > 0 {
			r.logs[j.name] = filepath.Join(dir, j.name+".log")
			args = append(args, trainScript(t, dir, j.name+".sh", j.steps, r.logs[j.name]))
		} else {
			args = append(args, "--wrap", fmt.Sprintf("sleep %d", j.sleep))
		}
		if out, err := c.run("sbatch", args...); err != nil {
			r.refused[j.name] = sbatchError(out)
		}
		r.jobs[j.name] = map[string]slurmJob{}
	}
	start, busy := time.Now(), time.Now()
	failed := 0
	for time.Since(start) < diffDeadline && time.Since(busy) < diffStuck {
		time.Sleep(2 * time.Second)
		r.readLogs(t)
		// -r: an array's tasks one per line; -t all: ended jobs too, for
		// MinJobAge (60 s), polled well within it.
		out, err := c.run("squeue", "-h", "-a", "-r", "-t", "all", "-o", "%i|%j|%T|%r|%l")
		if err != nil {
			if failed++; failed == 1 { // a cluster that broke (munge) says so once
				t.Logf("%s: squeue: %v %s", label, err, strings.TrimSpace(out))
			}
			continue
		}
		active := false
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Split(line, "|")
			if len(f) != 5 || r.jobs[f[1]] == nil {
				continue
			}
			r.jobs[f[1]][f[0]] = slurmJob{state: f[2], reason: f[3], limit: f[4]}
			if !finalState[f[2]] {
				active = true
			}
			if runningState[f[2]] {
				busy = time.Now()
			}
		}
		// Between a chain's segments nothing may be queued for a moment:
		// a training job is done when its log says so.
		if !active && (r.trained() || time.Since(busy) > 20*time.Second) {
			break
		}
	}
	r.readLogs(t)
	var not []string
	for _, j := range diffJobs {
		if v := r.verdict(j); v != completedState {
			not = append(not, j.name+": "+v)
		}
	}
	// One line: the clusters run at once, their logs interleave.
	line := fmt.Sprintf("%s: %d of %d completed in %s", label, len(diffJobs)-len(not), len(diffJobs), time.Since(start).Round(time.Second))
	if len(not) > 0 {
		line += "; not: " + strings.Join(not, "; ")
	}
	t.Log(line)
	return r
}

var (
	finalState   = map[string]bool{"COMPLETED": true, "CANCELLED": true, "FAILED": true, "TIMEOUT": true, "NODE_FAIL": true, "PREEMPTED": true, "BOOT_FAIL": true, "DEADLINE": true, "OUT_OF_MEMORY": true, "REVOKED": true}
	runningState = map[string]bool{"RUNNING": true, "CONFIGURING": true, "COMPLETING": true, "SIGNALING": true, "STAGE_OUT": true, "RESIZING": true}
)

// trained: every training job's log has reached its end.
func (r *diffRun) trained() bool {
	for _, j := range diffJobs {
		if j.steps > 0 && r.refused[j.name] == "" && r.reached[j.name] < j.steps {
			return false
		}
	}
	return true
}

// readLogs notes the last step each training job's log records.
func (r *diffRun) readLogs(t *testing.T) {
	for name, path := range r.logs {
		for _, e := range readSynthLog(t, path) {
			if e.Ev == "end" || e.Ev == "stop" || e.Ev == "checkpoint" {
				r.reached[name] = max(r.reached[name], int(e.Step))
			}
		}
	}
}

// verdict is how job j fared: completedState, or what became of it.
func (r *diffRun) verdict(j diffJob) string {
	if e, ok := r.refused[j.name]; ok {
		return fmt.Sprintf("refused %q", e)
	}
	ids := make([]string, 0, len(r.jobs[j.name]))
	for id := range r.jobs[j.name] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return "never in the queue"
	}
	// A training job is done when its work is, whatever became of a
	// chain segment the controller no longer needed.
	if j.steps > 0 && r.reached[j.name] >= j.steps {
		return completedState
	}
	completed := 0
	for _, id := range ids {
		s := r.jobs[j.name][id]
		switch {
		case s.state == completedState:
			completed++
		case s.state == "TIMEOUT":
			return "TIMEOUT at its limit " + s.limit + r.at(j)
		case finalState[s.state]:
			return strings.TrimSuffix(s.state+" "+s.reason, " None") + r.at(j)
		case s.state == "PENDING":
			return "pending " + s.reason
		default:
			return s.state + " at the deadline" + r.at(j)
		}
	}
	if j.steps > 0 {
		return completedState + r.at(j)
	}
	if completed < max(j.tasks, 1) {
		return fmt.Sprintf("%d of %d tasks completed", completed, j.tasks)
	}
	return completedState
}

// at says where a training job's work stood.
func (r *diffRun) at(j diffJob) string {
	if j.steps == 0 {
		return ""
	}
	return fmt.Sprintf(", step %d of %d", r.reached[j.name], j.steps)
}

// sbatchError is the gist of sbatch's complaint: its first line of its
// own (the later ones are more general).
func sbatchError(out string) string {
	gist := strings.TrimSpace(out)
	for _, l := range strings.Split(gist, "\n") {
		if strings.HasPrefix(l, "sbatch: ") {
			gist = l
			break
		}
	}
	for _, p := range []string{"sbatch: error: Batch job submission failed: ", "sbatch: error: ", "sbatch: "} {
		if s, ok := strings.CutPrefix(gist, p); ok {
			return s
		}
	}
	return gist
}
