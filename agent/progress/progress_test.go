package progress

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var parseCases = []struct {
	name string
	in   string
	want Reading
	err  string
}{
	{"bare integer", "1200\n", Reading{Step: 1200}, ""},
	{"bare no newline", "7", Reading{Step: 7}, ""},
	{"all keys", "step=10 ckpt=8 total=100 time=1700000000.5\n", Reading{Step: 10, Ckpt: 8, HasCk: true, Total: 100, Time: time.Unix(1700000000, 5e8)}, ""},
	{"unknown keys ignored", "loss=0.3 step=5 epoch=1", Reading{Step: 5}, ""},
	{"second line ignored", "step=5\nstep=garbage", Reading{Step: 5}, ""},
	{"spaces and tabs", "  step=5\t ckpt=0 \n", Reading{Step: 5, HasCk: true}, ""},
	{"empty", "", Reading{}, "empty"},
	{"only newline", "\n", Reading{}, "empty"},
	{"no step", "ckpt=3", Reading{}, "no step"},
	{"negative", "step=-1", Reading{}, "not a non-negative"},
	{"truncated number", "step=", Reading{}, "not a non-negative"},
	{"overflow", "step=99999999999999999999", Reading{}, "not a non-negative"},
	{"bad time", "step=1 time=yesterday", Reading{}, "Unix seconds"},
	{"nan time", "step=1 time=NaN", Reading{}, "Unix seconds"},
	{"binary", "\x00\xff\xfe", Reading{}, "no step"},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got.Step != tc.want.Step || got.Ckpt != tc.want.Ckpt || got.HasCk != tc.want.HasCk || got.Total != tc.want.Total || !got.Time.Equal(tc.want.Time) {
				t.Fatalf("got %+v, %v want %+v", got, err, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte(strings.Repeat("step=1 ", 2000)))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parsed must print back to a line that parses the same.
		line := fmt.Sprintf("step=%d total=%d", r.Step, r.Total)
		if r.HasCk {
			line += fmt.Sprintf(" ckpt=%d", r.Ckpt)
		}
		r2, err := Parse([]byte(line))
		if err != nil || r2.Step != r.Step || r2.Total != r.Total || r2.Ckpt != r.Ckpt {
			t.Fatalf("round trip of %+v: %+v, %v", r, r2, err)
		}
	})
}

func write(t *testing.T, dir string, job uint32, content string) {
	t.Helper()
	p := Path(dir, job)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// clock gives a test's times, s seconds from a minute ago, and a progress
// line written at such a time.
func clock() (at func(s float64) time.Time, line func(step int, s float64) string) {
	base := time.Now().Add(-time.Minute)
	at = func(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }
	line = func(step int, s float64) string {
		t := at(s)
		return fmt.Sprintf("step=%d time=%d.%09d\n", step, t.Unix(), t.Nanosecond())
	}
	return at, line
}

func TestTrackerRate(t *testing.T) {
	dir := t.TempDir()
	tr := &Tracker{Dir: dir, Tau: 30 * time.Second}
	now, line := clock()
	steps := []struct {
		step   int
		at     float64
		want   float64
		garble bool
	}{
		{0, 0, 0, false},
		{100, 10, 10, false}, // first rate is taken as is
		{300, 20, 10 + (1-math.Exp(-10.0/30))*(20-10), false},
		{0, 0, -1, true},    // garbage keeps the previous reading and rate
		{50, 30, -1, false}, // restart from a checkpoint: new baseline, same rate
	}
	var last float64
	for i, s := range steps {
		if s.garble {
			write(t, dir, 42, "step=12")
			os.WriteFile(Path(dir, 42), []byte("\x00garb"), 0o644)
		} else {
			write(t, dir, 42, line(s.step, s.at))
		}
		got, err := tr.Scan(now(s.at + 1))
		if err != nil {
			t.Fatal(err)
		}
		p, ok := got[42]
		if !ok {
			t.Fatalf("step %d: job missing from %v", i, got)
		}
		want := s.want
		if want < 0 {
			want = last
		}
		if math.Abs(p.StepsPerSec-want) > 1e-9 {
			t.Errorf("step %d: rate = %v, want %v", i, p.StepsPerSec, want)
		}
		if s.garble && p.Problem == "" {
			t.Errorf("garbled file reported no problem")
		}
		if !s.garble && p.Problem != "" {
			t.Errorf("step %d: problem %q", i, p.Problem)
		}
		last = p.StepsPerSec
	}
}

// A job moved here (Reset) whose file still holds its last run's reading
// when the tracker first reads it: that reading is no baseline (a rate from
// it would span the move), the new run's first is.
func TestTrackerStaleBaseline(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		lastRun   float64 // seconds before the first scan that the file was written
		firstStep int     // the step it says
		want      float64 // the rate after the new run's second write
		firstHas  bool    // whether its first write gives a rate already
	}{
		// Written 30 s before, at the checkpoint: the requeue gap lies
		// between it and the next write; 10 steps/s, not 10/31.
		{"the last run's reading, 30 s old", 30, 1000, 10, false},
		// Written a second before: this run's, a baseline.
		{"this run's reading, a second old", 1, 990, 10, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tr := &Tracker{Dir: dir, Tau: 30 * time.Second}
			at, line := clock()
			// Followed on another node first (its rate there), then moved
			// here: the file as the last run (or this one) left it.
			write(t, dir, 7, line(500, 5))
			tr.Scan(at(5.5))
			write(t, dir, 7, line(600, 15))
			tr.Scan(at(15.5))
			tr.Reset(7)
			write(t, dir, 7, line(c.firstStep, 40-c.lastRun))
			if _, err := tr.Scan(at(40)); err != nil {
				t.Fatal(err)
			}
			write(t, dir, 7, line(1010, 41)) // resumed from 1000, 10 steps/s
			got, _ := tr.Scan(at(41.5))
			if has := got[7].StepsPerSec > 0; has != c.firstHas {
				t.Errorf("after the run's first write: rate %v, want one: %v", got[7].StepsPerSec, c.firstHas)
			}
			if got[7].Step != 1010 {
				t.Errorf("step %d, want 1010", got[7].Step)
			}
			write(t, dir, 7, line(1110, 51))
			got, _ = tr.Scan(at(51.5))
			if r := got[7].StepsPerSec; math.Abs(r-c.want) > 1e-9 {
				t.Errorf("rate %v, want %v", r, c.want)
			}
		})
	}
}

func TestTrackerHostileFiles(t *testing.T) {
	dir := t.TempDir()
	tr := &Tracker{Dir: dir}
	// A FIFO must not block the agent.
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(Path(dir, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	// A symlink to another file must not be followed.
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("step=999\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "2"), 0o755)
	if err := os.Symlink(secret, Path(dir, 2)); err != nil {
		t.Fatal(err)
	}
	// A huge file is read only up to the bound.
	write(t, dir, 3, "step=5 "+strings.Repeat("x", 10<<20))
	// Not job directories.
	os.MkdirAll(filepath.Join(dir, "notajob"), 0o755)
	os.WriteFile(filepath.Join(dir, "17"), []byte("step=1"), 0o644)

	done := make(chan map[uint32]bool)
	go func() {
		got, _ := tr.Scan(time.Now())
		m := map[uint32]bool{}
		for j, p := range got {
			m[j] = p.Problem == ""
		}
		done <- m
	}()
	select {
	case m := <-done:
		if m[1] || m[2] {
			t.Errorf("FIFO or symlink read as progress: %v", m)
		}
		if !m[3] {
			t.Errorf("large file not read: %v", m)
		}
		if _, ok := m[17]; ok {
			t.Errorf("a plain file in the progress dir taken as a job")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Scan blocked on a hostile file")
	}
}

func TestTrackerStaleAndGone(t *testing.T) {
	dir := t.TempDir()
	tr := &Tracker{Dir: dir, StaleAfter: time.Minute}
	write(t, dir, 5, "step=1")
	if got, _ := tr.Scan(time.Now()); len(got) != 1 {
		t.Fatalf("got %v", got)
	}
	if got, _ := tr.Scan(time.Now().Add(2 * time.Minute)); len(got) != 0 {
		t.Errorf("stale job still reported: %v", got)
	}
	os.RemoveAll(filepath.Join(dir, "5"))
	if got, _ := tr.Scan(time.Now()); len(got) != 0 {
		t.Errorf("removed job reported: %v", got)
	}
	missing := &Tracker{Dir: filepath.Join(dir, "nope")}
	if got, err := missing.Scan(time.Now()); err != nil || len(got) != 0 {
		t.Errorf("missing dir: %v %v", got, err)
	}
}

// A service reports readiness by its ready file: alone or beside a
// progress file, never stale while it is there, gone once removed, and
// never through a symlink.
func TestTrackerReady(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tr := &Tracker{Dir: dir, StaleAfter: time.Minute}
	ready := func(job int) string { return filepath.Join(dir, fmt.Sprint(job), ReadyName) }
	for _, job := range []int{7, 8, 9} {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprint(job)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, dir, 8, "step=3")
	os.WriteFile(ready(7), nil, 0o644)
	os.WriteFile(ready(8), []byte("ok\n"), 0o644)
	os.Symlink("/etc/hostname", ready(9))
	got, err := tr.Scan(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !got[7].Ready || !got[8].Ready || got[8].Step != 3 {
		t.Fatalf("ready jobs: %+v", got)
	}
	if _, ok := got[9]; ok {
		t.Fatalf("a symlinked ready file counted: %+v", got[9])
	}
	if got, _ := tr.Scan(time.Now().Add(time.Hour)); !got[7].Ready || !got[8].Ready || got[8].Step != 0 {
		t.Fatalf("an hour on, while the files stay: %+v", got)
	}
	os.Remove(ready(7))
	if got, _ := tr.Scan(time.Now()); got[7].Ready || got[8].Step != 3 {
		t.Fatalf("after the ready file went: %+v", got)
	}
}

func TestLatest(t *testing.T) {
	dir := t.TempDir()
	tr := &Tracker{Dir: dir}
	write(t, dir, 9, "step=10 ckpt=7")
	r, err := tr.Latest(9)
	if err != nil || r.Ckpt != 7 || !r.HasCk {
		t.Errorf("Latest = %+v, %v", r, err)
	}
}

// Format must write exactly what Parse reads back (to the millisecond), and
// WriteFile must leave no temporary file behind.
func TestFormatRoundTrip(t *testing.T) {
	at := time.Unix(1732250000, 250_000_000)
	cases := []struct {
		name string
		in   Reading
		line string
	}{
		{"step only", Reading{Step: 7}, "step=7\n"},
		{"zero step with checkpoint zero", Reading{Step: 0, Ckpt: 0, HasCk: true}, "step=0 ckpt=0\n"},
		{"everything", Reading{Step: 1200, Ckpt: 1000, HasCk: true, Total: 50000, Time: at},
			"step=1200 ckpt=1000 total=50000 time=1732250000.250\n"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Format(c.in); got != c.line {
				t.Fatalf("Format = %q, want %q", got, c.line)
			}
			path := filepath.Join(dir, "progress")
			if err := WriteFile(path, c.in); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse(%q): %v", data, err)
			}
			if got.Step != c.in.Step || got.HasCk != c.in.HasCk || got.Ckpt != c.in.Ckpt || got.Total != c.in.Total ||
				got.Time.Sub(c.in.Time).Abs() > time.Millisecond {
				t.Fatalf("round trip: got %+v, want %+v", got, c.in)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Fatalf("directory holds %d entries, want only the progress file", len(ents))
			}
		})
	}
}
