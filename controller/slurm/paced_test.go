package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeStreamScontrol puts on PATH an scontrol that reads commands as the
// real one does: echoing each as readline does (echo true) or not, and
// printing `show hostnames X` as X. It logs every command to log, reports
// "Job has already finished for job N" for N in fail and an error naming
// no job for "oddN"; the first time it gets job hang (or die), it stops
// answering (or exits).
func fakeStreamScontrol(t *testing.T, echo bool, fail, hang, die string) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "log")
	e := ""
	if echo {
		e = `echo "scontrol: $line"`
	}
	script := `#!/bin/sh
if [ $# -gt 0 ]; then echo "ARGS $*" >>` + log + `; exit 0; fi
while IFS= read -r line; do
  ` + e + `
  echo "$line" >>` + log + `
  case "$line" in
  "show hostnames "*) echo "${line#show hostnames }" ;;
  *)
    id=$(echo "$line" | sed -n 's/.*JobId=\([0-9]*\).*/\1/p; s/^release \([0-9]*\)$/\1/p')
    for f in ` + fail + `; do
      [ "$f" = "$id" ] && echo "Job has already finished for job $id" >&2
      [ "$f" = "odd$id" ] && echo "scontrol: error: Invalid generic resource specification" >&2
    done
    if [ "$id" = "` + hang + `" ] && [ ! -e ` + dir + `/hung ]; then touch ` + dir + `/hung; sleep 5; fi
    if [ "$id" = "` + die + `" ] && [ ! -e ` + dir + `/died ]; then touch ` + dir + `/died; exit 1; fi
    ;;
  esac
done
`
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return log
}

func TestUpdatePaced(t *testing.T) {
	nice := func(n int32) *int32 { return &n }
	feat := func(s string) *string { return &s }
	changes := func(n int) []Change {
		var ch []Change
		for i := 1; i <= n; i++ {
			ch = append(ch, Change{JobID: uint32(i), Update: JobUpdate{Nice: nice(int32(i))}})
		}
		return ch
	}
	sent := func(t *testing.T, log string) []string {
		b, _ := os.ReadFile(log)
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.HasPrefix(l, "show hostnames ") {
				out = append(out, l)
			}
		}
		return out
	}
	for _, echo := range []bool{true, false} {
		name := "readline echoes"
		if !echo {
			name = "no echo"
		}
		t.Run(name, func(t *testing.T) {
			log := fakeStreamScontrol(t, echo, "3 odd5 7", "", "")
			ch := append(changes(8),
				Change{JobID: 9, Update: JobUpdate{ResetPriority: true}},
				Change{JobID: 10, Update: JobUpdate{Features: feat("v100 p100")}}, // a blank: its own process
				Change{JobID: 11}) // nothing to send
			gaps := 0
			errs := (&CLI{}).UpdatePaced(context.Background(), ch, func() bool { gaps++; return true })
			for i, err := range errs {
				switch id := ch[i].JobID; id {
				case 3, 7:
					if err == nil || err.Error() != "Job has already finished" {
						t.Errorf("job %d: err %v, want its own error", id, err)
					}
				case 5:
					if err == nil || !strings.Contains(err.Error(), "Invalid generic resource") || !strings.Contains(err.Error(), "job 5") {
						t.Errorf("job 5: err %v, want what scontrol said, for job 5", err)
					}
				default:
					if err != nil {
						t.Errorf("job %d: %v", id, err)
					}
				}
			}
			want := []string{}
			for i := 1; i <= 8; i++ {
				want = append(want, "update JobId="+strconv.Itoa(i)+" Nice="+strconv.Itoa(i))
			}
			want = append(want, "release 9", "ARGS update JobId=10 Features=v100 p100")
			if got := sent(t, log); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("scontrol got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if gaps != 10 { // after each of jobs 1-10, not after 11 (the last; nothing sent)
				t.Errorf("gap called %d times, want 10", gaps)
			}
		})
	}
	t.Run("a hung process costs its update; a new one takes the rest", func(t *testing.T) {
		log := fakeStreamScontrol(t, true, "", "3", "")
		start := time.Now()
		errs := (&CLI{Timeout: 300 * time.Millisecond}).UpdatePaced(context.Background(), changes(5), func() bool { return true })
		for i, err := range errs {
			if (err != nil) != (i == 2) {
				t.Errorf("job %d: err %v", i+1, err)
			}
		}
		if errs[2] != nil && !strings.Contains(errs[2].Error(), "did not finish the update of job 3") {
			t.Errorf("job 3: %v", errs[2])
		}
		if got := sent(t, log); len(got) != 5 || got[4] != "update JobId=5 Nice=5" {
			t.Errorf("sent %q", got)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("took %s: the hung process was waited for", d)
		}
	})
	t.Run("a process that exits costs its update", func(t *testing.T) {
		fakeStreamScontrol(t, true, "", "", "2")
		errs := (&CLI{}).UpdatePaced(context.Background(), changes(4), func() bool { return true })
		for i, err := range errs {
			if (err != nil) != (i == 1) {
				t.Errorf("job %d: err %v", i+1, err)
			}
		}
	})
	t.Run("gap stops the rest", func(t *testing.T) {
		log := fakeStreamScontrol(t, true, "", "", "")
		n := 0
		errs := (&CLI{}).UpdatePaced(context.Background(), changes(5), func() bool { n++; return n < 2 })
		for i, err := range errs {
			if want := i >= 2; (err != nil) != want || want && !errors.Is(err, errNotSent) {
				t.Errorf("job %d: err %v", i+1, err)
			}
		}
		if got := sent(t, log); len(got) != 2 {
			t.Errorf("sent %q, want jobs 1 and 2", got)
		}
	})
}

func TestUpdateOneByOne(t *testing.T) {
	t.Parallel()
	ch := []Change{{JobID: 1}, {JobID: 2}, {JobID: 3}, {JobID: 4}}
	failed := errors.New("gone")
	update := func(_ context.Context, id uint32, _ JobUpdate) error {
		if id == 2 {
			return failed
		}
		return nil
	}
	n := 0
	errs := UpdateOneByOne(context.Background(), update, ch, func() bool { n++; return n < 3 })
	want := []error{nil, failed, nil, errNotSent}
	for i := range errs {
		if !errors.Is(errs[i], want[i]) || (want[i] == nil) != (errs[i] == nil) {
			t.Errorf("job %d: err %v, want %v", i+1, errs[i], want[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errs = UpdateOneByOne(ctx, update, ch, func() bool { cancel(); return false })
	if errs[0] != nil || !errors.Is(errs[1], context.Canceled) || !errors.Is(errs[3], context.Canceled) {
		t.Errorf("after the context ended: %v, want the rest context.Canceled", errs)
	}
}
