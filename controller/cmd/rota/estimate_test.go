package main

import (
	"testing"
)

// Flags may come before or after the script; two scripts are refused.
func TestEstimateArgs(t *testing.T) {
	for _, args := range [][]string{{"a.sh", "b.sh"}, {"--steps", "1", "a.sh", "--gpus", "1", "b.sh"}} {
		err := runEstimate(t.Context(), args, nil)
		if _, ok := err.(usageError); !ok {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	// A script among the flags is read (and must exist).
	err := runEstimate(t.Context(), []string{"--steps", "1", "/nonexistent/job.sh", "--gpus", "1"}, nil)
	if err == nil || err.Error() != "open /nonexistent/job.sh: no such file or directory" {
		t.Errorf("script after flags: %v", err)
	}
}
