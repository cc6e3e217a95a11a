//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	// held: submitted held (-H) and released once the whole set is in.
	held bool
	// want is what Rota must have done at sbatch (the Rota run): typed
	// the job, only decided it (a type where one holds it, else as
	// asked), kept the user's type, or left it as asked because it names
	// its nodes; limit: it also wrote a time limit from the job's hints.
	want  diffWant
	limit bool
}

// diffWant is what Rota must have written into a job at sbatch.
type diffWant int

const (
	// diffTyped: a decision that names a GPU type, written into the job
	// (its constraint, or its GPU request on 23.11+ where Rota retypes).
	diffTyped diffWant = iota
	// diffTypedWhereTwo: typed on a shape with two nodes of each type;
	// decided on the others (no type has the two nodes it needs).
	diffTypedWhereTwo
	// diffDecided: a decision, whichever type (the user's constraint or
	// a request no single type can hold leaves it as asked).
	diffDecided
	// diffKept: the user named a type and it stays.
	diffKept
	// diffAsked: names its nodes; passes as asked, with the plugin's note.
	diffAsked
	// diffShared: asks for shards of a GPU; passes as asked, with the
	// plugin's note (Rota chooses among whole GPUs and MIG slices).
	diffShared
)

const diffLimit = "10"

var diffJobs = []diffJob{
	// Training first, the longest first: the set ends sooner.
	// Hints ten times too fast: Rota gives a minute, the job needs 150 s
	// on a V100 (TestLimitFollowsProgress); untyped, 58 s to 199 s by type.
	{name: "synth-fast", args: []string{"--gres=gpu:v100:1", "--rota-steps=3614", "--rota-throughput=v100:240.9"}, steps: 3614, want: diffKept, limit: true},
	{name: "synth-ckpt-fast", args: []string{"--gres=gpu:v100:1", "--requeue", "--rota-checkpoint-signal=USR1", "--rota-steps=3614", "--rota-throughput=v100:240.9"}, steps: 3614, want: diffKept, limit: true},
	{name: "synth-fast-untyped", args: []string{"--gres=gpu:1", "--rota-steps=1400", "--rota-throughput=v100:240.9,p100:223,k80:70.5"}, steps: 1400, limit: true},
	// Right hints, and a job that can move to a faster type.
	{name: "synth-ckpt", args: []string{"--gres=gpu:1", "--requeue", "--rota-checkpoint-signal=USR1", "--rota-steps=1400", "--rota-throughput=v100:24.09,p100:22.3,k80:7.05"}, steps: 1400, limit: true},
	{name: "synth-right", args: []string{"--gres=gpu:1", "--rota-steps=600", "--rota-throughput=v100:24.09,p100:22.3,k80:7.05"}, steps: 600, limit: true},
	// Ten times too slow; none at all.
	{name: "synth-slow", args: []string{"--gres=gpu:1", "--rota-steps=600", "--rota-throughput=v100:2.409,p100:2.23,k80:0.705"}, steps: 600, limit: true},
	{name: "synth-no-hint", args: []string{"--gres=gpu:1"}, steps: 600},
	// A limit from a too-fast hint with no progress to measure: Rota must
	// give the user's back before it runs out.
	{name: "sleep-fast-hint", args: []string{"--gres=gpu:1", "--rota-steps=900", "--rota-throughput=v100:100,p100:100,k80:100"}, sleep: 90, limit: true},
	// Every request form, untyped and typed, on one node and on two.
	{name: "gres", args: []string{"--gres=gpu:1"}, sleep: 15},
	{name: "gres-typed", args: []string{"--gres=gpu:v100:1"}, sleep: 15, want: diffKept},
	{name: "gpus", args: []string{"--gpus=2"}, sleep: 15},
	{name: "gpus-typed", args: []string{"--gpus=k80:1"}, sleep: 15, want: diffKept},
	{name: "gpus-per-node", args: []string{"--gpus-per-node=2"}, sleep: 15},
	{name: "gpus-per-task", args: []string{"--gpus-per-task=1", "-n", "2"}, sleep: 15},
	{name: "gpus-per-socket", args: []string{"--gpus-per-socket=1", "--sockets-per-node=1"}, sleep: 15},
	// 22.05's sbatch has no --tres-per-task: refused there, Rota or not;
	// 26.05's wants -n with it.
	{name: "tres-per-task", args: []string{"--tres-per-task=gres/gpu=1", "-n", "2"}, sleep: 15},
	{name: "gpus-N2-per-node", args: []string{"-N2", "--gpus-per-node=2"}, sleep: 15, want: diffTypedWhereTwo},
	{name: "gpus8-N2", args: []string{"-N2", "--gpus=8"}, sleep: 15, want: diffTypedWhereTwo},
	{name: "array", args: []string{"--array=0-2", "--gres=gpu:1"}, sleep: 15, tasks: 3},
	// What restricts the nodes a job may use (issue #37): Rota places it
	// only among the types those nodes have, or leaves it as asked.
	// Jobs that name their nodes ({k80}: the cluster's first k80 node;
	// none on a shape without one, where plain Slurm refuses the job too).
	{name: "nodelist-k80", args: []string{"-w", "{k80}", "--gres=gpu:1"}, sleep: 15, want: diffAsked},
	{name: "nodelist-v100", args: []string{"--nodelist={v100}", "--gpus=1"}, sleep: 15, want: diffAsked},
	{name: "exclude-v100", args: []string{"--exclude={v100}", "--gres=gpu:1"}, sleep: 15, want: diffAsked},
	// A reservation on the cluster's first node ({resv}, made before the
	// set is submitted).
	{name: "reservation", args: []string{"--reservation={resv}", "--gres=gpu:1"}, sleep: 15, want: diffAsked},
	// Node features: the dev cluster's nodes carry their type as one. A
	// type named there is the user's choice; one of several, Rota's.
	{name: "constraint-k80", args: []string{"--constraint=k80", "--gres=gpu:1"}, sleep: 15, want: diffDecided},
	{name: "constraint-or", args: []string{"--constraint=k80|p100", "--gpus=1"}, sleep: 15, want: diffDecided},
	// Partitions ({slow}: K80s; {fast}: V100s and P100s, per shape).
	{name: "partition-slow", args: []string{"-p", "slow", "--gres=gpu:1"}, sleep: 15, want: diffDecided},
	{name: "partitions", args: []string{"-p", "slow,fast", "--gpus-per-node=1"}, sleep: 15},
	// A whole node; a dependency on another job of the set; a hold
	// released after the set is in.
	{name: "exclusive", args: []string{"--exclusive", "--gres=gpu:1"}, sleep: 15},
	{name: "dependency", args: []string{"--dependency=afterok:{job:gres}", "--gres=gpu:1"}, sleep: 15},
	{name: "held", args: []string{"--gres=gpu:1"}, sleep: 15, held: true},
	// Shards of a GPU (issue #38; every shape offers its P100s, or on the
	// V100-only one its V100s, as two shards each, but the one with MIG
	// slices on 22.05: diffShape.envOn): Slurm shares them out.
	{name: "shard", args: []string{"--gres=shard:1"}, sleep: 15, want: diffShared},
	{name: "shards-2", args: []string{"--gres=shard:2"}, sleep: 15, want: diffShared},
	// MIG slices (issue #38; the two-per-type shape has a node of A100s
	// cut into slices, ROTA_DEV_MIG): a slice the user names, kept (it
	// trains at its share of an A100, rota-synthtrain --derive-type); a
	// job that needs 12 GiB of GPU memory, typed where that fits (never a
	// 5 or 10 GiB slice); one that needs 4 GiB, which may get any slice.
	{name: "mig-slice", args: []string{"--gres=gpu:a100_3g.20gb:1"}, steps: 600, want: diffKept},
	{name: "gpu-mem-12g", args: []string{"--gres=gpu:1", "--rota-gpu-mem=12G"}, steps: 600},
	{name: "gpu-mem-4g", args: []string{"--gres=gpu:1", "--rota-gpu-mem=4G"}, sleep: 15},
}

// diffArgs puts the cluster's names in: {k80}, {p100}, {v100} the first
// node of that type (or a name no node has), {resv} the set's reservation,
// {job:NAME} the Slurm id of the set's job NAME (submitted before it).
func diffArgs(c devCluster, args []string, ids map[string]string) []string {
	names := clusterNodes(c)
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
		a = strings.ReplaceAll(a, "{resv}", diffResv)
		for name, id := range ids {
			a = strings.ReplaceAll(a, "{job:"+name+"}", id)
		}
		res[i] = a
	}
	return res
}

// clusterNodes: c's node names, sorted.
func clusterNodes(c devCluster) []string {
	out, _ := c.run("sinfo", "-h", "-N", "-o", "%N")
	names := strings.Fields(out)
	sort.Strings(names)
	return slices.Compact(names)
}

// diffResv is the reservation the set's job "reservation" runs in: the
// cluster's first node of whole GPUs (a K80 where there is one) for its
// first two minutes, the same on both sides of the comparison.
const diffResv = "diff-resv"

// diffShape is a cluster shape: scripts/dev-cluster settings, its node
// count (for ports), and whether it has two nodes of each type.
type diffShape struct {
	name  string
	env   []string
	nodes int
	two   bool
}

var diffShapes = []diffShape{
	{"one-per-type", []string{"ROTA_DEV_PARTITIONS=slow:k80:60 fast:v100+p100:60", "ROTA_DEV_SHARDS=p100:2"}, 3, false},
	// With a node of A100s cut into MIG slices (its own type per slice
	// size, in no partition but gpu). Not on one-per-type: there plain
	// Slurm starts an untyped two-GPU job at once on two slices of
	// different sizes, while Rota, which gives a job one type, waits for
	// two GPUs of one (24.11, 26.05: 1m49s to 2m11s against 1 to 17 s, three
	// jobs of 35; docs/fractions.md).
	{"two-per-type", []string{"ROTA_DEV_NODES_PER_TYPE=2", "ROTA_DEV_PARTITIONS=slow:k80:60 fast:v100+p100:60", "ROTA_DEV_SHARDS=p100:2", "ROTA_DEV_MIG=on"}, 7, true},
	// Two V100 nodes: Rota on a cluster of one type; "slow" and "fast"
	// are both V100s there. Not "two of each type" for the set's
	// two-node jobs: the reservation holds the first node as they are
	// submitted, and once the controller has read it (a refresh, 10 s
	// here: so on some runs, not others) no type has two nodes to give.
	{"v100-only", []string{"ROTA_DEV_TYPES=v100", "ROTA_DEV_NODES_PER_TYPE=2", "ROTA_DEV_PARTITIONS=slow:v100:60 fast:v100:60", "ROTA_DEV_SHARDS=v100:2"}, 2, false},
}

// envOn is the shape's dev-cluster settings on the release under test.
// Slurm 22.05.8 gives a job that asks for a MIG slice type no GPU at all
// (empty CUDA_VISIBLE_DEVICES, GRES "gpu:a100_3g.20gb:0(IDX:)", and more
// such jobs than there are slices run at once) when the cluster also
// offers gres/shard; 24.11 and 26.05 do not (docs/fractions.md). No site
// runs both on 22.05, so there the shape with MIG slices offers no shards.
func (s diffShape) envOn() []string {
	if !onHostRelease() || !slices.Contains(s.env, "ROTA_DEV_MIG=on") {
		return s.env
	}
	var out []string
	for _, e := range s.env {
		if !strings.HasPrefix(e, "ROTA_DEV_SHARDS=") {
			out = append(out, e)
		}
	}
	return out
}

// plainRefusal is a job plain Slurm is known not to run on a shape (""
// every shape) of a release ("" every release; "22.05" is the host's), and
// how it says so. Any other job plain Slurm does not complete fails the
// test: a comparison with a broken plain cluster proves nothing.
type plainRefusal struct {
	job, shape, release string
	verdict             *regexp.Regexp
}

var plainRefusals = []plainRefusal{
	{"tres-per-task", "", "22.05", regexp.MustCompile(`^refused "unrecognized option '--tres-per-task`)},
	// No K80 or P100 there.
	{"gpus-typed", "v100-only", "", regexp.MustCompile(`^refused "Requested node configuration is not available"$`)},
	// No shards on 22.05's shape with MIG slices (diffShape.envOn).
	{"shard", "two-per-type", "22.05", regexp.MustCompile(`^refused "Invalid generic resource \(gres\) specification"$`)},
	{"shards-2", "two-per-type", "22.05", regexp.MustCompile(`^refused "Invalid generic resource \(gres\) specification"$`)},
	// MIG slices only on the two-per-type shape.
	{"mig-slice", "one-per-type", "", regexp.MustCompile(`^refused "Requested node configuration is not available"$`)},
	{"mig-slice", "v100-only", "", regexp.MustCompile(`^refused "Requested node configuration is not available"$`)},
	{"nodelist-k80", "v100-only", "", regexp.MustCompile(`^refused "Invalid node name specified"$`)},
	{"constraint-k80", "v100-only", "", regexp.MustCompile(`^refused "Invalid feature specification"$`)},
	{"constraint-or", "v100-only", "", regexp.MustCompile(`^refused "Invalid feature specification"$`)},
}

// knownPlainRefusal: plain Slurm's verdict v on job of shape is one the
// table above expects.
func knownPlainRefusal(job, shape, v string) bool {
	rel := release
	if onHostRelease() {
		rel = "22.05"
	}
	for _, k := range plainRefusals {
		if k.job == job && (k.shape == "" || k.shape == shape) && (k.release == "" || k.release == rel) && k.verdict.MatchString(v) {
			return true
		}
	}
	return false
}

const (
	// diffDeadline bounds one cluster's run of the set (about two and a
	// half minutes on each shape here).
	diffDeadline = 7 * time.Minute
	// diffStuck: pending jobs on a cluster where nothing has run (or
	// squeue has not answered) for this long will not start (a round is
	// 3 s, backfill every 2 s here).
	diffStuck = 45 * time.Second
)

func TestDifferential(t *testing.T) {
	heavy(t)
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
			extra := append([]string{"ROTA_DEV_SCHED_PARAMS=bf_interval=2"}, s.envOn()...)
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
	var jobs, plainDone, rotaDone, decided int
	for i, s := range diffShapes {
		plain, rota := runs[i][0], runs[i][1]
		if plain == nil || rota == nil {
			t.Errorf("differential: shape=%s did not run", s.name)
			continue
		}
		var pc, rc, dc int
		var bad []string
		for _, j := range diffJobs {
			p, r := plain.verdict(j), rota.verdict(j)
			if p != completedState && !knownPlainRefusal(j.name, s.name, p) {
				t.Errorf("%s: plain Slurm did not complete %s (%s), and that is no known refusal of this release: the comparison needs a plain cluster that runs what it should", s.name, j.name, p)
			}
			if p == completedState {
				pc++
			} else if r != completedState {
				continue // refused on both sides: nothing of Rota's to judge
			}
			if r == completedState {
				rc++
			}
			if p == completedState && r != completedState {
				bad = append(bad, j.name+": "+r)
				worse = append(worse, s.name+"/"+j.name)
				continue
			}
			// Rota acted on it: a job it was let through untouched
			// (failed open, plugin not loaded) would pass the rest.
			if err := rotaActed(j, s, rota.shown[j.name]); err != nil {
				t.Errorf("%s: %s: Rota did not act on it as it must: %v\n%s", s.name, j.name, err, rota.shown[j.name])
			} else {
				dc++
			}
			if strings.Contains(plain.shown[j.name], "AdminComment=rota") {
				t.Errorf("%s: %s: the plain cluster's job carries Rota's note: not plain Slurm\n%s", s.name, j.name, plain.shown[j.name])
			}
			if p != completedState {
				continue
			}
			pt, rt := plain.times(j), rota.times(j)
			t.Logf("%s: %s: plain wait %s run %s, rota wait %s run %s", s.name, j.name, pt.wait, pt.run, rt.wait, rt.run)
			if why := slower(j, pt, rt); why != "" {
				bad = append(bad, j.name+": "+why)
				worse = append(worse, s.name+"/"+j.name)
			}
		}
		jobs, plainDone, rotaDone, decided = jobs+len(diffJobs), plainDone+pc, rotaDone+rc, decided+dc
		line := fmt.Sprintf("differential: shape=%s jobs=%d plain_completed=%d rota_completed=%d rota_acted=%d worse=%d", s.name, len(diffJobs), pc, rc, dc, len(bad))
		if len(bad) > 0 {
			line += " (" + strings.Join(bad, "; ") + ")"
		}
		t.Log(line)
	}
	total := fmt.Sprintf("differential: shapes=%d jobs=%d plain_completed=%d rota_completed=%d rota_acted=%d worse=%d", len(diffShapes), jobs, plainDone, rotaDone, decided, len(worse))
	if len(worse) > 0 {
		t.Errorf("%s: %s", total, strings.Join(worse, ", "))
	} else {
		t.Log(total)
	}
}

var (
	decisionNote = regexp.MustCompile(`rota: gpu (\S+)->(\S+), time (\S+)->(\S+) \(\S+\) \[d=\w+\]`)
	timeLimitRe  = regexp.MustCompile(`(?m)\bTimeLimit=(\S+)`)
	tresFieldsRe = regexp.MustCompile(`(?m)\bTresPer(?:Job|Node|Task|Socket)=(\S+)`)
)

// leftAsAsked: the wants of jobs the plugin leaves as asked, with the
// note it writes and why.
var leftAsAsked = map[diffWant]struct{ note, why string }{
	diffAsked:  {namesNodesNote, "names its nodes"},
	diffShared: {sharedNote, "asks for shards"},
}

// rotaActed checks what `scontrol show job` said of j right after its
// sbatch on the Rota cluster of shape s against what j wants.
func rotaActed(j diffJob, s diffShape, shown string) error {
	comment := ""
	for _, line := range strings.Split(shown, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "AdminComment="); ok {
			comment = v
			break
		}
	}
	// Left as asked on purpose: the plugin's note, no decision, no type.
	if left, ok := leftAsAsked[j.want]; ok {
		if !strings.HasPrefix(comment, left.note) || strings.Contains(comment, "[d=") {
			return fmt.Errorf("%s, so it must pass as asked with the plugin's note; AdminComment=%q", left.why, comment)
		}
		if featureRe.MatchString(jobFeatures(shown)) {
			return fmt.Errorf("%s, yet given a type constraint %q", left.why, jobFeatures(shown))
		}
		return nil
	}
	m := decisionNote.FindStringSubmatch(comment)
	if m == nil {
		return fmt.Errorf("no decision recorded (AdminComment=%q): the plugin let it through untouched", comment)
	}
	asked, given, timeGiven := m[1], m[2], m[4]
	want := j.want
	if want == diffTypedWhereTwo {
		want = diffDecided
		if s.two {
			want = diffTyped
		}
	}
	// Where the type is written: the constraint, or the GPU request.
	written := featureRe.FindStringSubmatch(jobFeatures(shown))
	inTres := false
	for _, f := range tresFieldsRe.FindAllStringSubmatch(tresEquals.ReplaceAllString(tresSpelling.Replace(shown), "gres:$1:$2"), -1) {
		inTres = inTres || strings.Contains(f[1], "gres:gpu:"+given+":")
	}
	switch want {
	case diffTyped:
		if given == "any" {
			return fmt.Errorf("decided %s->%s: no type chosen for a job one type can hold", asked, given)
		}
		if (written == nil || written[1] != given) && !inTres {
			return fmt.Errorf("decided %s->%s, but the job does not carry %s (Features=%q)", asked, given, given, jobFeatures(shown))
		}
	case diffKept:
		if asked != given || given == "any" || !inTres {
			return fmt.Errorf("decided %s->%s: the user's type must stay in its request", asked, given)
		}
	}
	if j.limit {
		lim := timeLimitRe.FindStringSubmatch(shown)
		if timeGiven == "none" || lim == nil || lim[1] != timeGiven {
			return fmt.Errorf("its hints give a time limit: decided time ->%s, the job's TimeLimit=%v", timeGiven, lim)
		}
	}
	return nil
}

// diffTimes: how long a set's job waited (its first Slurm job's submission
// to its first start) and ran (first start to last end: a chain's or a
// migration's gaps count as running, they are the job's time).
type diffTimes struct{ wait, run time.Duration }

// Bounds on how much slower a job may be with Rota than under plain Slurm
// (issue #37). Why these:
//   - wait: Rota may hold a job for the type it chose while another type
//     is free, but only where the placement expects it to finish sooner
//     there; the dev cluster's jobs are at most diffSlowestRun long, so a
//     job waits at most about one such job more than under plain Slurm,
//     plus a round and a backfill pass (3 s and 2 s here) on each side.
//   - run: a job's work is the same; Rota may put it on a slower type than
//     plain Slurm did, at most by the cluster's speed ratio for its model
//     (ResNet-18: V100 24.09 steps/s, K80 7.05: 3.42x), and a chain past a
//     limit from a wrong hint, or a migration, costs a requeue (a round,
//     a start, a checkpoint read: diffRequeueCost each).
//
// A sleep runs as long on every type, so only the requeues apply to it.
const (
	diffSlowestRun  = 90 * time.Second
	diffRoundSlack  = 10 * time.Second
	diffSpeedRatio  = 3.42
	diffRequeueCost = 20 * time.Second
	diffMaxRequeues = 3
)

// slower says how job j's times with Rota (r) exceed plain Slurm's (p)
// past the bounds above, or "".
func slower(j diffJob, p, r diffTimes) string {
	var why []string
	if r.wait > p.wait+diffSlowestRun+diffRoundSlack {
		why = append(why, fmt.Sprintf("waited %s against plain's %s (bound: + %s)", r.wait, p.wait, diffSlowestRun+diffRoundSlack))
	}
	ratio := 1.0
	if j.steps > 0 {
		ratio = diffSpeedRatio
	}
	bound := time.Duration(float64(p.run)*ratio) + diffMaxRequeues*diffRequeueCost
	if r.run > bound {
		why = append(why, fmt.Sprintf("ran %s against plain's %s (bound: %s)", r.run, p.run, bound.Round(time.Second)))
	}
	return strings.Join(why, ", ")
}

// completedState is Slurm's, and a job's verdict when it completed.
const completedState = "COMPLETED"

// slurmJob is one Slurm job of a set's job (an array task, a chain
// segment) as squeue last showed it.
type slurmJob struct {
	state, reason, limit string
	submit, start, end   time.Time // zero: not yet (or never)
}

// diffRun is how the set fared on one cluster.
type diffRun struct {
	refused map[string]string              // job -> sbatch's error
	shown   map[string]string              // job -> scontrol show job right after its sbatch
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
	r := &diffRun{refused: map[string]string{}, shown: map[string]string{}, jobs: map[string]map[string]slurmJob{}, logs: map[string]string{}, reached: map[string]int{}}
	resvNode := ""
	for _, n := range clusterNodes(c) {
		if !strings.HasSuffix(n, "-a100mig") { // a K80 where there is one
			resvNode = n
			break
		}
	}
	if out, err := c.run("scontrol", "create", "reservation", "ReservationName="+diffResv, "Users=root", "Nodes="+resvNode,
		"StartTime=now", "Duration=2", "Flags=IGNORE_JOBS"); err != nil {
		t.Fatalf("%s: scontrol create reservation: %v %s", label, err, out)
	}
	ids := map[string]string{}
	for _, j := range diffJobs {
		// The name is the job's key: a chain's segments keep it.
		args := append([]string{"--parsable", "-J", j.name, "-o", filepath.Join(dir, j.name+"-%j.out"), "-t", diffLimit}, diffArgs(c, j.args, ids)...)
		if j.held {
			args = append(args, "-H")
		}
		if j.steps > 0 {
			r.logs[j.name] = filepath.Join(dir, j.name+".log")
			args = append(args, trainScript(t, dir, j.name+".sh", j.steps, r.logs[j.name]))
		} else {
			args = append(args, "--wrap", fmt.Sprintf("sleep %d", j.sleep))
		}
		r.jobs[j.name] = map[string]slurmJob{}
		out, err := c.run("sbatch", args...)
		if err != nil {
			r.refused[j.name] = sbatchError(out)
			continue
		}
		ids[j.name] = strings.TrimSpace(strings.Split(out, ";")[0])
		// What the plugin wrote, before a round or a start changes it.
		r.shown[j.name], _ = c.run("scontrol", "show", "job", ids[j.name])
	}
	for _, j := range diffJobs {
		if id := ids[j.name]; j.held && id != "" {
			if out, err := c.run("scontrol", "release", id); err != nil {
				t.Errorf("%s: scontrol release %s: %v %s", label, id, err, out)
			}
		}
	}
	start, busy := time.Now(), time.Now()
	failed := 0
	for time.Since(start) < diffDeadline && time.Since(busy) < diffStuck {
		time.Sleep(2 * time.Second)
		r.readLogs(t)
		// -r: an array's tasks one per line; -t all: ended jobs too, for
		// MinJobAge (60 s), polled well within it.
		out, err := c.run("squeue", "-h", "-a", "-r", "-t", "all", "-o", "%i|%j|%T|%r|%l|%V|%S|%e")
		if err != nil {
			if failed++; failed == 1 { // a cluster that broke (munge) says so once
				t.Logf("%s: squeue: %v %s", label, err, strings.TrimSpace(out))
			}
			continue
		}
		active := false
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Split(line, "|")
			if len(f) != 8 || r.jobs[f[1]] == nil {
				continue
			}
			sj := slurmJob{state: f[2], reason: f[3], limit: f[4], submit: slurmTime(f[5])}
			if f[2] != "PENDING" {
				sj.start = slurmTime(f[6])
			}
			if finalState[f[2]] {
				sj.end = slurmTime(f[7])
			}
			r.jobs[f[1]][f[0]] = sj
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

// times: how long j waited and ran (zero where it never started or ended).
func (r *diffRun) times(j diffJob) diffTimes {
	var submit, start, end time.Time
	for _, sj := range r.jobs[j.name] {
		if !sj.submit.IsZero() && (submit.IsZero() || sj.submit.Before(submit)) {
			submit = sj.submit
		}
		if !sj.start.IsZero() && (start.IsZero() || sj.start.Before(start)) {
			start = sj.start
		}
		if sj.end.After(end) {
			end = sj.end
		}
	}
	var jt diffTimes
	if !submit.IsZero() && !start.IsZero() {
		jt.wait = start.Sub(submit)
	}
	if !start.IsZero() && !end.IsZero() {
		jt.run = end.Sub(start)
	}
	return jt
}

// slurmTime reads squeue's times (local, to the second); zero for
// N/A, Unknown or anything else.
func slurmTime(s string) time.Time {
	tm, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}
	}
	return tm
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
