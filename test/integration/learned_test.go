//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
)

// A job its user gives no rate hint is placed at submission by what the
// controller measured of that user's earlier job of the same name: the
// node agent measures a training job, the round loop hands its rates to
// the placement state, the job_submit plugin decides the next job of that
// name on slurmctld's thread with them, and `rota explain` says so. A job
// of another name is placed by the admin's speed table as before.
func TestLearnedSpeedsAtSubmission(t *testing.T) {
	if err := waitPlaced(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	name := uniqueName("learned")
	logf := filepath.Join(dir, "train.log")
	// ResNet-18 (batch size 64): 18 steps/s and more on a V100, 3 on a
	// K80 (Gavel's table), where the dev speed table says 3.36 and 1.
	sf := trainScript(t, dir, "train.sh", 200000, logf)
	out, err := run("sbatch", "--parsable", "-J", name, "-o", filepath.Join(dir, "out"), "--gres=gpu:1", sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	first := strings.TrimSpace(out)
	t.Cleanup(func() {
		// Gone before its temporary directory is removed.
		run("scancel", first)
		eventually.True(t, 30*time.Second, "job "+first+" gone", func() bool {
			out, _ := run("squeue", "-h", "-j", first, "-o", "%T")
			return strings.TrimSpace(out) == ""
		})
	})
	firstID, _ := strconv.ParseUint(first, 10, 32)
	// Measured in a round's plan; the round after it has surely handed
	// the rates to the placement state and the plugins heard of it.
	measuredAt := uint64(0)
	eventually.True(t, 120*time.Second, "job "+first+" measured in a round", func() bool {
		st := status(t)
		if st.Rounds == nil {
			return false
		}
		if measuredAt > 0 {
			return st.Rounds.Rounds > measuredAt
		}
		for _, j := range st.Rounds.Jobs {
			if uint64(j.JobID) != firstID {
				continue
			}
			for _, src := range j.RateSource {
				if src == "measured" {
					measuredAt = st.Rounds.Rounds
				}
			}
		}
		return false
	})
	speeds := regexp.MustCompile(`job_speed\.(\w+) ([0-9.e+]+)`)
	fastest := func(flat string) float64 {
		best := 0.0
		for _, m := range speeds.FindAllStringSubmatch(flat, -1) {
			if v, err := strconv.ParseFloat(m[2], 64); err == nil && v > best {
				best = v
			}
		}
		return best
	}
	// The same name, no hint: held, so it never runs.
	same := explain(t, sbatch(t, "-J", name, "--gres=gpu:1"))
	wantContains(t, same, `measured for this user's latest job named "`+name+`"`)
	// Steps/s measured on a GPU, not the table's relative 3.36 at most.
	if f := fastest(same); f < 5 {
		t.Errorf("the job of the same name was placed by speeds up to %v, not the measured ones: %s", f, same)
	}
	other := explain(t, sbatch(t, "-J", uniqueName("unlearned"), "--gres=gpu:1"))
	if strings.Contains(other, "measured for this user's latest job") || fastest(other) != 0 {
		t.Errorf("a job of a name never measured was placed by learned speeds: %s", other)
	}
}
