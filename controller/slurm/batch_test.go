package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeScontrol puts on PATH an scontrol that appends its standard input
// (or its arguments) to log and reports, as the real one does, an error
// for each job id listed in fail.
func fakeScontrol(t *testing.T, fail string) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "log")
	script := `#!/bin/sh
if [ $# -gt 0 ]; then echo "ARGS $*" >>` + log + `; exit 0; fi
tee -a ` + log + ` | awk -v fail="` + fail + `" '
  BEGIN { n = split(fail, f, " "); rc = 0 }
  { id = $2; sub(/^JobId=/, "", id)
    for (i = 1; i <= n; i++) {
      if (f[i] == id) { print "Job has already finished for job " id > "/dev/stderr"; rc = 1 }
      if (f[i] == "abort") { print "Request aborted" > "/dev/stderr"; rc = 1 }
    } }
  END { exit rc }'
`
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return log
}

func TestUpdateMany(t *testing.T) {
	nice := func(n int32) *int32 { return &n }
	feat := func(s string) *string { return &s }
	var changes []Change
	for i := 1; i <= 300; i++ { // two processes: 256 + 44
		changes = append(changes, Change{JobID: uint32(i), Update: JobUpdate{Nice: nice(int32(i))}})
	}
	changes = append(changes,
		Change{JobID: 301, Update: JobUpdate{ResetPriority: true}},
		Change{JobID: 302, Update: JobUpdate{Features: feat("v100 p100")}}, // a blank: its own process
		Change{JobID: 303}) // nothing to send

	t.Run("errors by job", func(t *testing.T) {
		log := fakeScontrol(t, "7 301")
		errs := (&CLI{}).UpdateMany(context.Background(), changes)
		for i, err := range errs {
			id := changes[i].JobID
			if want := id == 7 || id == 301; (err != nil) != want {
				t.Errorf("job %d: err %v, want an error %v", id, err, want)
			}
		}
		b, _ := os.ReadFile(log)
		got := string(b)
		for _, want := range []string{"update JobId=1 Nice=1\n", "update JobId=300 Nice=300\n", "release 301\n",
			"ARGS update JobId=302 Features=v100 p100\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("scontrol was not sent %q; got:\n%s", want, got)
			}
		}
		if strings.Contains(got, "303") {
			t.Errorf("an empty change was sent: %s", got)
		}
		if n := strings.Count(got, "\n"); n != 302 {
			t.Errorf("%d commands sent, want 302", n)
		}
	})
	t.Run("an error naming no job fails its batch", func(t *testing.T) {
		fakeScontrol(t, "abort")
		errs := (&CLI{}).UpdateMany(context.Background(), changes[:3])
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "Request aborted") {
				t.Errorf("change %d: err %v, want the batch's error", i, err)
			}
		}
	})
}
