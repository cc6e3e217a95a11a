package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const lonestar6 = "../../../../shared/data/traces/lonestar6-a100-sacct.tsv"

func TestQueuewaitUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "rota queuewait [command]"},
		{[]string{"fit"}, 2, `unknown command "fit"`},
		{[]string{"train", "--out", "m.json"}, 2, "--trace is required"},
		{[]string{"train", "--trace", "t.tsv"}, 2, "--out is required"},
		{[]string{"eval", "--trace", "t.tsv", "--holdout-days", "0"}, 2, "--holdout-days must be > 0"},
		{[]string{"eval", "--trace", "t.tsv", "--gpus-per-node", "-1"}, 2, "must be >= 0"},
		{[]string{"eval", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"eval", "--trace", filepath.Join(t.TempDir(), "none.tsv")}, 1, "no such file"},
	}
	for _, tc := range tests {
		_, stderr, code := rota(t, append([]string{"queuewait"}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// TestQueuewaitTrainEval: a model trained with --holdout-days 30 and
// loaded by eval scores exactly what eval's own training scores.
func TestQueuewaitTrainEval(t *testing.T) {
	if _, err := os.Stat(lonestar6); os.IsNotExist(err) {
		t.Skipf("real trace %s not present (it lives in ../shared/data beside the repository)", lonestar6)
	}
	model := filepath.Join(t.TempDir(), "model.json")
	out, stderr, code := rota(t, "queuewait", "train", "--trace", lonestar6, "--out", model, "--holdout-days", "30", "--trees", "30")
	if code != 0 || !strings.Contains(out, "wrote "+model) {
		t.Fatalf("train: exit %d, said %q %s", code, out, stderr)
	}
	eval := func(args ...string) map[string]any {
		t.Helper()
		out, stderr, code := rota(t, append([]string{"queuewait", "eval", "--trace", lonestar6, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d: %s", args, code, stderr)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v in %s", err, out)
		}
		for _, k := range []string{"mae_hours", "baseline_mae_hours", "within_2x", "baseline_within_2x", "jobs_train", "jobs_test"} {
			if _, ok := v[k].(float64); !ok {
				t.Fatalf("no %s in %s", k, out)
			}
		}
		return v
	}
	given := eval("--model", model)
	trained := eval("--trees", "30")
	for _, k := range []string{"mae_hours", "within_2x", "jobs_train", "jobs_test", "baseline_mae_hours"} {
		if given[k] != trained[k] {
			t.Errorf("%s: saved model %v, trained in eval %v", k, given[k], trained[k])
		}
	}
	if given["note"] != nil {
		t.Errorf("note %v: the model was trained before the cutoff", given["note"])
	}
}
