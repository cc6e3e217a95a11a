//go:build integration

package integration

import (
	"github.com/rota-hpc/rota/internal/eventually"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The site's typed GPU limits hold for jobs Rota places exactly as for
// jobs whose users named the type, and Rota places a job where its limit
// lets it run (issue #16): a QOS MaxTRESPerUser=gres/gpu:v100=1, then an
// account GrpTRES=gres/gpu:v100=1.
func TestTypedLimits(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		set, unset [][]string // sacctmgr -i arguments
	}{
		{"QOS MaxTRESPerUser", "rota-a",
			[][]string{{"add", "qos", "rotav100", "MaxTRESPerUser=gres/gpu:v100=1"},
				{"modify", "user", "rota-a", "set", "qos=normal,rotav100", "defaultqos=rotav100"}},
			[][]string{{"modify", "user", "rota-a", "set", "qos=normal", "defaultqos=normal"},
				{"delete", "qos", "rotav100"}}},
		{"account GrpTRES", "rota-b",
			[][]string{{"modify", "account", "lab-b", "set", "GrpTRES=gres/gpu:v100=1"}},
			[][]string{{"modify", "account", "lab-b", "set", "GrpTRES=gres/gpu:v100=-1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run("scancel", "--user="+tc.user)
			// What an interrupted earlier run left in the kept database.
			for _, a := range tc.unset {
				run("sacctmgr", append([]string{"-i"}, a...)...)
			}
			for _, a := range tc.set {
				if out, err := run("sacctmgr", append([]string{"-i"}, a...)...); err != nil {
					t.Fatalf("sacctmgr %v: %v %s", a, err, out)
				}
			}
			t.Cleanup(func() {
				run("scancel", "--user="+tc.user)
				for _, a := range tc.unset {
					if out, err := run("sacctmgr", append([]string{"-i"}, a...)...); err != nil {
						t.Errorf("sacctmgr %v: %v %s", a, err, out)
					}
				}
			})
			// slurmdbd pushes the change to slurmctld; the controller
			// reads limits (from slurmdbd) every round and then
			// publishes the user's headroom to the plugin.
			afterRounds(t, testCluster, natsURL, 2, "the limit")
			as := func(args ...string) string {
				t.Helper()
				all := append([]string{"-u", tc.user, "--", "sbatch", "--parsable", "-D", "/tmp", "-o", "/dev/null"}, args...)
				out, err := run("runuser", append(all, "--wrap", "sleep 300")...)
				if err != nil {
					t.Fatalf("sbatch as %s %v: %v %s", tc.user, args, err, out)
				}
				return strings.TrimSpace(out)
			}

			// Typed by the user: the second v100 job waits for the limit.
			a1, a2 := as("--gres=gpu:v100:1"), as("--gres=gpu:v100:1")
			waitState(t, a1, "RUNNING", nil)
			waitState(t, a2, "PENDING", limitReason)
			run("scancel", a1, a2)
			waitGone(t, a1, a2)
			// Two rounds: the controller sees the v100 free again.
			afterRounds(t, testCluster, natsURL, 2, "the cancel")

			// Placed by Rota: a plain job gets a v100 (the fastest; jobs
			// of earlier tests may still hold some GPUs, so up to four
			// tries), the next one another type its limit allows, and
			// both run.
			var b1 string
			for i := 0; i < 4 && b1 == ""; i++ {
				b := as("--gres=gpu:1")
				waitState(t, b, "RUNNING", nil)
				if placedType(t, b) == "v100" {
					b1 = b
				}
			}
			if b1 == "" {
				t.Fatal("no plain job of four placed on v100")
			}
			b2 := as("--gres=gpu:1")
			waitState(t, b2, "RUNNING", nil)
			if ty := placedType(t, b2); ty == "v100" {
				t.Fatalf("job %s: placed on v100 beyond the limit", b2)
			}
			if ex, _ := run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, b2); !strings.Contains(ex, "v100 left out: ") {
				t.Errorf("rota explain %s does not say the limit decided:\n%s", b2, ex)
			}
			// Rota's v100 job counts: a job naming v100 now waits.
			b3 := as("--gres=gpu:v100:1")
			waitState(t, b3, "PENDING", limitReason)
		})
	}
}

// limitReason: Slurm holds a job back for a limit on GPUs (QOSMaxGRESPerUser,
// AssocGrpGRES, ...).
var limitReason = regexp.MustCompile(`(QOS|Assoc)\w*(GRES|TRES)`)

// waitState waits until job id is in state, with a Reason matching
// reason when given.
func waitState(t *testing.T, id, state string, reason *regexp.Regexp) {
	t.Helper()
	var last string
	done := false
	defer func() {
		if !done {
			t.Logf("job %s last seen as %q", id, last)
		}
	}()
	what := "job " + id + " to be " + state
	if reason != nil {
		what += " with a reason matching " + reason.String()
	}
	eventually.True(t, 40*time.Second, what, func() bool {
		out, _ := run("squeue", "-h", "-j", id, "-o", "%T %r")
		last = strings.TrimSpace(out)
		f := strings.Fields(last)
		return len(f) == 2 && f[0] == state && (reason == nil || reason.MatchString(f[1]))
	})
	done = true
}

func waitGone(t *testing.T, ids ...string) {
	t.Helper()
	eventually.True(t, 30*time.Second, "jobs "+strings.Join(ids, ",")+" to leave the queue", func() bool {
		out, _ := run("squeue", "-h", "-j", strings.Join(ids, ","), "-o", "%i")
		return strings.TrimSpace(out) == ""
	})
}

// placedType is the GPU type job id runs on (its node's).
func placedType(t *testing.T, id string) string {
	t.Helper()
	n, _ := strconv.ParseUint(id, 10, 32)
	j := show(t, uint32(n))
	return typeOf(t, j.TresPerNode)
}
