package main

import (
	"strings"
	"testing"
)

// Flags may come before or after the script; two scripts are refused.
func TestEstimateArgs(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"a.sh", "b.sh"}, {"--steps", "1", "a.sh", "--gpus", "1", "b.sh"}} {
		_, stderr, code := rota(t, append([]string{"estimate"}, args...)...)
		if code != 2 || !strings.Contains(stderr, "accepts at most 1 arg") {
			t.Errorf("%v: exit %d, %q; want a usage error", args, code, stderr)
		}
	}
	// A script among the flags is read (and must exist).
	_, stderr, code := rota(t, "estimate", "--steps", "1", "/nonexistent/job.sh", "--gpus", "1")
	if code != 1 || stderr != "rota estimate: open /nonexistent/job.sh: no such file or directory\n" {
		t.Errorf("script after flags: exit %d, %q", code, stderr)
	}
}
