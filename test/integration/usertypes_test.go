//go:build integration

package integration

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
)

// A user may limit the types Rota chooses from: --rota-types, or the
// constraint Slurm users already write (--constraint="k80|p100"). Rota
// gives one of those, says so in rota explain, and the round loop keeps
// to them.
func TestUserAllowedTypes(t *testing.T) {
	waitTypeWritten(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string // the types Rota may give; nil: left as asked
		says string   // in rota explain
	}{
		{"--rota-types one type", []string{"--rota-types=k80"}, []string{"k80"}, "k80 (--rota-types)"},
		{"--rota-types two types", []string{"--rota-types=p100,k80"}, []string{"p100", "k80"}, "p100,k80 (--rota-types)"},
		{"constraint of alternatives", []string{"--constraint=k80|p100"}, []string{"k80", "p100"}, "k80|p100 (constraint)"},
		{"both", []string{"--constraint=k80|v100", "--rota-types=p100,v100"}, []string{"v100"}, "p100,v100 (--rota-types) and k80|v100 (constraint)"},
		{"no such type here", []string{"--rota-types=a100"}, nil, "none of the GPU types the user allows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := sbatch(t, append([]string{"--gres=gpu:1"}, tc.args...)...)
			j := show(t, id)
			got := givenType(j)
			switch {
			case tc.want == nil && got != "":
				t.Errorf("job %d given %q, want it left as asked", id, got)
			case tc.want != nil && !slices.Contains(tc.want, got):
				t.Errorf("job %d given %q (Features %q, TresPerNode %q), want one of %v", id, got, j.Features, j.Raw.TresPerNode, tc.want)
			}
			out, err := run(filepath.Join(repo, "bin/rota"), "explain", "--nats", natsURL, strconv.FormatUint(uint64(id), 10))
			if err != nil {
				t.Fatalf("rota explain %d: %v %s", id, err, out)
			}
			if !strings.Contains(out, tc.says) {
				t.Errorf("rota explain %d does not say %q:\n%s", id, tc.says, out)
			}
		})
	}

	// A malformed list is refused at sbatch time, with the reason.
	out, err := run("sbatch", "--parsable", "-H", "-o", "/dev/null", "--gres=gpu:1", "--rota-types=v100|p100", "--wrap", "true")
	if err == nil {
		run("scancel", strings.TrimSpace(out))
		t.Errorf("sbatch --rota-types=v100|p100 accepted: %s", out)
	} else if !strings.Contains(out, "--rota-types: want GPU types such as v100,p100") {
		t.Errorf("sbatch --rota-types=v100|p100: %v %s", err, out)
	}

	// The round loop keeps to them: a job left on v100 (as if an old
	// choice had gone stale) is moved to a type its user allows.
	id := sbatch(t, "--begin=now+1hour", "--gres=gpu:1", "--rota-types=k80,p100")
	sid := strconv.FormatUint(uint64(id), 10)
	run("scontrol", "release", sid) // pending for its begin time only: the loop leaves held jobs alone
	setType(t, sid, "v100")
	var j job
	moved := false
	defer func() {
		if !moved {
			logWhy(t, sid, 0)
			t.Logf("job %s still on %q", sid, givenType(j))
		}
	}()
	eventually.True(t, 30*time.Second, "the round loop to move job "+sid+" to a type its user allows (k80 or p100)", func() bool {
		j = show(t, id)
		return givenType(j) == "k80" || givenType(j) == "p100"
	})
	moved = true
}

// givenType is the one type job j is given, however Rota wrote it: a
// constraint naming one type, else a typed GPU request ("" none).
func givenType(j job) string {
	if m := featureRe.FindStringSubmatch(j.Features); m != nil && !strings.ContainsAny(j.Features, "|") {
		return m[1]
	}
	if m := typed.FindStringSubmatch(j.Raw.TresPerNode); m != nil {
		return m[1]
	}
	return ""
}

// waitTypeWritten waits until Rota writes types the way this release
// does with no typed limits (setType writes a stale one the same way):
// a test of typed limits just before leaves the plugin typing GPU
// requests until a round has read that the limits are gone.
func waitTypeWritten(t *testing.T) {
	t.Helper()
	if err := waitPlaced(); err != nil {
		t.Fatal(err)
	}
	var j job
	written := false
	defer func() {
		if !written {
			t.Logf("Rota still writes types as %q / %q; want them in the GPU request: %v", j.Features, j.Raw.TresPerNode, typeByGres())
		}
	}()
	eventually.True(t, 30*time.Second, "Rota to write types the way this release does", func() bool {
		id := sbatch(t, "--gres=gpu:1")
		j = show(t, id)
		run("scancel", strconv.FormatUint(uint64(id), 10))
		return typed.MatchString(j.Raw.TresPerNode) == typeByGres() && givenType(j) != ""
	})
	written = true
}
