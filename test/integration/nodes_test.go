//go:build integration

package integration

import (
	"strings"
	"testing"
)

// TestNamedNodesPassAsAsked: a GPU job that names its nodes (-w), excludes
// some (--exclude) or runs in a reservation may use only those nodes' GPU
// types, which the plugin cannot tell: it passes as asked, as plain Slurm
// takes it, never with a type none of its nodes has (`sbatch -w <k80 node>
// --gres=gpu:1` was refused, "Requested node configuration is not
// available", when Rota chose a v100). Every type's node is named in turn,
// so whichever type Rota would choose, some submission would conflict.
func TestNamedNodesPassAsAsked(t *testing.T) {
	if err := waitPlaced(); err != nil {
		t.Fatal(err) // the controller places plain jobs: what follows is Rota's doing
	}
	resv := "rota-test-resv"
	if out, err := run("scontrol", "create", "reservation", "ReservationName="+resv, "Users=root", "Nodes="+node("k80"),
		"StartTime=now", "Duration=30", "Flags=IGNORE_JOBS"); err != nil {
		t.Fatalf("scontrol create reservation: %v %s", err, out)
	}
	defer run("scontrol", "delete", "ReservationName="+resv)
	cases := [][]string{
		{"-w", node("k80")}, {"-w", node("p100")}, {"-w", node("v100")},
		{"--nodelist=" + node("k80")},
		{"--exclude", node("v100") + "," + node("p100")},
		{"--exclude", node("k80")},
		{"--reservation=" + resv},
	}
	for _, c := range cases {
		// Not held: a held job is not checked against its nodes at sbatch.
		args := append(append([]string{"--parsable", "-o", "/dev/null"}, c...), "--gres=gpu:1", "--wrap", "true")
		out, err := run("sbatch", args...)
		if err != nil {
			t.Errorf("sbatch %s --gres=gpu:1 refused: %v: %s", strings.Join(c, " "), err, out)
			continue
		}
		id := strings.TrimSpace(strings.Split(out, ";")[0])
		shown, _ := run("scontrol", "show", "job", id)
		run("scancel", id)
		if !strings.Contains(tresSpelling.Replace(shown), "TresPerNode=gres:gpu:1") || featureRe.MatchString(jobFeatures(shown)) ||
			strings.Contains(shown, "[d=") {
			t.Errorf("sbatch %s --gres=gpu:1: the job was changed:\n%s", strings.Join(c, " "), shown)
		}
		// Left by Rota on purpose, and saying so: not a job the plugin
		// never saw.
		if !strings.Contains(shown, "AdminComment="+namesNodesNote) {
			t.Errorf("sbatch %s --gres=gpu:1: no note that Rota left it as asked:\n%s", strings.Join(c, " "), shown)
		}
	}
	// And a plain job beside them is still placed.
	if err := waitPlaced(); err != nil {
		t.Error(err)
	}
}

// namesNodesNote is the AdminComment the plugin writes on a GPU job that
// names its nodes (cgo/job_submit_rota.c, NAMES_NODES_NOTE).
const namesNodesNote = "rota: gpu as asked, time as asked: the job names its nodes"

func jobFeatures(shown string) string {
	for _, f := range strings.Fields(shown) {
		if v, ok := strings.CutPrefix(f, "Features="); ok && v != "(null)" {
			return v
		}
	}
	return ""
}
