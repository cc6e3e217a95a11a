package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeReaders puts on PATH a squeue, sinfo and scontrol that log each
// call and print nothing (no jobs, no nodes, no partitions).
func fakeReaders(t *testing.T) (calls func() []string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	for _, name := range []string{"squeue", "sinfo", "scontrol"} {
		script := "#!/bin/sh\necho \"" + name + " $1 $2\" >>" + log + "\ncat >/dev/null 2>&1 </dev/null\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return func() []string {
		b, _ := os.ReadFile(log)
		return strings.Fields(strings.ReplaceAll(string(b), "\n", " | "))
	}
}

// Readers within ShareReads of a read share it; a write through the CLI
// makes the next read fresh; ShareReads 0 reads every time.
func TestShareReads(t *testing.T) {
	ctx := context.Background()
	count := func(calls []string, name string) (n int) {
		for _, c := range calls {
			if c == name {
				n++
			}
		}
		return n
	}
	t.Run("shared until a write", func(t *testing.T) {
		calls := fakeReaders(t)
		c := &CLI{ShareReads: time.Hour}
		for range 3 {
			if _, err := c.Jobs(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Nodes(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Partitions(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := calls(); count(got, "squeue") != 1 || count(got, "sinfo") != 1 || count(got, "scontrol") != 1 {
			t.Fatalf("three rounds of reads ran %v, want one of each", got)
		}
		nice := int32(3)
		if err := c.Update(ctx, 7, JobUpdate{Nice: &nice}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Jobs(ctx); err != nil {
			t.Fatal(err)
		}
		if got := calls(); count(got, "squeue") != 2 {
			t.Errorf("a read after an update ran %v, want a second squeue", got)
		}
		_, _, _ = c.Release(ctx) // a reader (the fake prints no version): shares still
		if _, err := c.Jobs(ctx); err != nil {
			t.Fatal(err)
		}
		if got := calls(); count(got, "squeue") != 2 {
			t.Errorf("scontrol --version made the next read fresh: %v", got)
		}
		if _, err := c.Jobs(Fresh(ctx)); err != nil {
			t.Fatal(err)
		}
		if got := calls(); count(got, "squeue") != 3 {
			t.Errorf("a Fresh read was shared: %v", got)
		}
	})
	t.Run("off", func(t *testing.T) {
		calls := fakeReaders(t)
		c := &CLI{}
		for range 3 {
			if _, err := c.Jobs(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := calls(); count(got, "squeue") != 3 {
			t.Errorf("ShareReads 0 ran %v, want three squeue", got)
		}
	})
}

// A round's paced apply is one write: readers during it share one read
// (made after it began), and the first read after it is fresh.
func TestShareReadsAcrossAPacedApply(t *testing.T) {
	ctx := context.Background()
	calls := fakeReaders(t)
	fakeStreamScontrol(t, true, "", "", "")
	c := &CLI{ShareReads: time.Hour}
	squeues := func() (n int) {
		for _, s := range calls() {
			if s == "squeue" {
				n++
			}
		}
		return n
	}
	read := func() {
		t.Helper()
		if _, err := c.Jobs(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read() // before the apply
	c.UpdatePaced(ctx, nil, func() bool { return true })
	read()
	if n := squeues(); n != 1 {
		t.Fatalf("%d squeue runs, want 1: an apply of no changes is no write", n)
	}
	nice := int32(1)
	var during []int
	errs := c.UpdatePaced(ctx, []Change{{JobID: 1, Update: JobUpdate{Nice: &nice}}, {JobID: 2, Update: JobUpdate{Nice: &nice}},
		{JobID: 3, Update: JobUpdate{Nice: &nice}}}, func() bool {
		read()
		during = append(during, squeues())
		return true
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if len(during) != 2 || during[0] != 2 || during[1] != 2 {
		t.Errorf("squeue runs after each read during the apply: %v, want [2 2] (one fresh read, then shared)", during)
	}
	read()
	if n := squeues(); n != 3 {
		t.Errorf("%d squeue runs, want 3: the read after the apply is fresh", n)
	}
}
