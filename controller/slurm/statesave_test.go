package slurm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStateSavesHold: the apply holds from Lead before a save is due
// (5 s after the last was written) until it is written, or Late after it
// was due; never where the file cannot be read.
func TestStateSavesHold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := NewStateSaves(dir)
	s.Lead, s.Late = 300*time.Millisecond, time.Second
	written := time.Unix(1_800_000_000, 0)
	if err := NewStateSaves(filepath.Join(dir, "elsewhere")).Check(); err == nil {
		t.Fatal("Check passed with no StateSaveLocation here")
	}
	// A new slurmctld writes its first save once a job comes.
	if err := s.Check(); err != nil {
		t.Fatalf("Check before the first save: %v", err)
	}
	if h := s.Hold(written.Add(5 * time.Second)); h != 0 {
		t.Errorf("no file: hold %v, want 0", h)
	}
	f := filepath.Join(dir, "job_state")
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f, written, written); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after time.Duration // since the last save was written
		want  time.Duration
	}{
		{time.Second, 0},
		{4600 * time.Millisecond, 0},
		{4700 * time.Millisecond, 1300 * time.Millisecond}, // Lead before due: hold to due+Late
		{5 * time.Second, time.Second},
		{5900 * time.Millisecond, 100 * time.Millisecond},
		{6 * time.Second, 0}, // no save came: go on
	} {
		if h := s.Hold(written.Add(c.after)); h != c.want {
			t.Errorf("%v after the last save: hold %v, want %v", c.after, h, c.want)
		}
	}
	// The save is written: the next is due 5 s on, and nothing holds now.
	next := written.Add(5050 * time.Millisecond)
	if err := os.Chtimes(f, next, next); err != nil {
		t.Fatal(err)
	}
	if h := s.Hold(written.Add(5060 * time.Millisecond)); h != 0 {
		t.Errorf("just after a save: hold %v, want 0", h)
	}
}
