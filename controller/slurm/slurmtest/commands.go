// Package slurmtest puts stand-ins for Slurm's commands on PATH, for the
// tests of parts that run them through slurm.CLI and count what they run.
package slurmtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Calls is the log of the stand-ins' calls.
type Calls struct{ log string }

// Commands puts on PATH, for t, a script for each name that logs its call
// and prints nothing (no jobs, no nodes, no partitions) and exits 0.
func Commands(t testing.TB, names ...string) *Calls {
	t.Helper()
	dir := t.TempDir()
	c := &Calls{log: filepath.Join(dir, "log")}
	for _, name := range names {
		script := "#!/bin/sh\necho \"" + name + " $1 $2\" >>" + c.log + "\ncat >/dev/null 2>&1 </dev/null\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return c
}

// All is every call so far, one "name arg1 arg2" each.
func (c *Calls) All() []string {
	b, _ := os.ReadFile(c.log)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// Count is how many times name ran.
func (c *Calls) Count(name string) (n int) {
	for _, l := range c.All() {
		if strings.SplitN(l, " ", 2)[0] == name {
			n++
		}
	}
	return n
}
