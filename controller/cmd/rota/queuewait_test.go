package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const lonestar6 = "../../../../shared/data/traces/lonestar6-a100-sacct.tsv"

func TestQueuewaitUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "usage: rota queuewait train"},
		{[]string{"fit"}, `unknown subcommand "fit"`},
		{[]string{"train", "--out", "m.json"}, "--trace is required"},
		{[]string{"train", "--trace", "t.tsv"}, "--out is required"},
		{[]string{"train", "-h"}, "-holdout-days"},
		{[]string{"eval", "--trace", "t.tsv", "--holdout-days", "0"}, "--holdout-days must be > 0"},
		{[]string{"eval", "--trace", "t.tsv", "--gpus-per-node", "-1"}, "must be >= 0"},
		{[]string{"eval", "--bogus"}, "flag provided but not defined"},
	}
	for _, tc := range tests {
		err := runQueuewait(context.Background(), tc.args, &bytes.Buffer{})
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
	err := runQueuewait(context.Background(), []string{"eval", "--trace", filepath.Join(t.TempDir(), "none.tsv")}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing trace: %v", err)
	}
}

// TestQueuewaitTrainEval: a model trained with --holdout-days 30 and
// loaded by eval scores exactly what eval's own training scores.
func TestQueuewaitTrainEval(t *testing.T) {
	if _, err := os.Stat(lonestar6); os.IsNotExist(err) {
		t.Skipf("real trace %s not present (it lives in ../shared/data beside the repository)", lonestar6)
	}
	model := filepath.Join(t.TempDir(), "model.json")
	var out bytes.Buffer
	if err := runQueuewait(context.Background(), []string{"train", "--trace", lonestar6, "--out", model, "--holdout-days", "30", "--trees", "30"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "wrote "+model) {
		t.Fatalf("train said %q", out.String())
	}
	eval := func(args ...string) map[string]any {
		t.Helper()
		var b bytes.Buffer
		if err := runQueuewait(context.Background(), append([]string{"eval", "--trace", lonestar6, "--json"}, args...), &b); err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b.Bytes(), &v); err != nil {
			t.Fatalf("%v in %s", err, b.String())
		}
		for _, k := range []string{"mae_hours", "baseline_mae_hours", "within_2x", "baseline_within_2x", "jobs_train", "jobs_test"} {
			if _, ok := v[k].(float64); !ok {
				t.Fatalf("no %s in %s", k, b.String())
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
