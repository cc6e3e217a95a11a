package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--help"}, 0, "--gpus-per-node", ""},
		{[]string{"--gpus-per-node", "0"}, 2, "", "--gpus-per-node must be positive"},
		{[]string{"--no-such-flag"}, 2, "", "unknown flag: --no-such-flag"},
		{[]string{"extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"--log-level", "loud"}, 2, "", "Unknown Level"},
	} {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := execute(context.Background(), c.args, &out, &errb)
			if code != c.code || !strings.Contains(out.String(), c.stdout) || !strings.Contains(errb.String(), c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out.String(), errb.String(), c.code, c.stdout, c.stderr)
			}
		})
	}
}
