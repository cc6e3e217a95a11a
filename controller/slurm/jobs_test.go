package slurm

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/slurmtime"
)

// Captured from the dev cluster (Slurm 22.05.8) with
// `squeue -h -O SqueueFormat("")`: a running job retyped by constraint, a
// pending job asking --gpus=p100:1 with an admin priority, a pending job
// Slurm cannot run (priority 0).
const squeueCaptured = "11\x1fRUNNING\x1fNone\x1froot\x1f(null)\x1ft1\x1fgpu\x1f2026-11-22T05:24:35\x1f2026-11-22T05:24:52\x1f2-00:00:00\x1f2:08\x1fnode-p100\x1f1\x1fN/A\x1fgres:gpu:1\x1fN/A\x1fN/A\x1fp100\x1f4294901749\x1f0\x1f1\x1f0\x1fnormal\x1f\n" +
	"7\x1fPENDING\x1fPriority\x1froot\x1f(null)\x1fwrap\x1fgpu\x1f2026-11-22T05:23:41\x1f2026-11-24T05:24:52\x1f2-00:00:00\x1f0:00\x1f\x1f1\x1fgres:gpu:p100:1\x1fN/A\x1fN/A\x1fN/A\x1f(null)\x1f5000\x1f0\x1f1\x1f-5000\x1f(null)\x1f\n" +
	"18\x1fPENDING\x1fBadConstraints\x1falice\x1fphys\x1fa name with spaces\x1fgpu\x1f2026-11-22T05:24:47\x1fN/A\x1f1-00:00:00\x1f0:00\x1f\x1f1\x1fN/A\x1fgres:gpu:k80:1\x1fN/A\x1fN/A\x1f(null)\x1f0\x1f2\x1f1\x1f0\x1fgpu-lim\x1f\n"

func TestParseSqueue(t *testing.T) {
	loc := time.UTC
	jobs, err := ParseSqueue(squeueCaptured, loc, false)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { v, _ := time.ParseInLocation("2006-01-02T15:04:05", s, loc); return v }
	want := []Job{
		{ID: 11, State: "RUNNING", Reason: "None", User: "root", QOS: "normal", Name: "t1", Partition: "gpu",
			Submit: at("2026-11-22T05:24:35"), Start: at("2026-11-22T05:24:52"), TimeLimitMin: 2880, RunSeconds: 128,
			Nodes: []string{"node-p100"}, NumNodes: 1, TresPerNode: "gres:gpu:1", Features: "p100", Priority: 4294901749, NumTasks: 1},
		{ID: 7, State: "PENDING", Reason: "Priority", User: "root", Name: "wrap", Partition: "gpu",
			Submit: at("2026-11-22T05:23:41"), TimeLimitMin: 2880, NumNodes: 1, TresPerJob: "gres:gpu:p100:1",
			Priority: 5000, NumTasks: 1, Nice: -5000},
		{ID: 18, State: "PENDING", Reason: "BadConstraints", User: "alice", Account: "phys", QOS: "gpu-lim", Name: "a name with spaces",
			Partition: "gpu", Submit: at("2026-11-22T05:24:47"), TimeLimitMin: 1440, NumNodes: 1,
			TresPerNode: "gres:gpu:k80:1", Restarts: 2, NumTasks: 1},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("got  %+v\nwant %+v", jobs, want)
	}
	if r, ok := jobs[0].GPURequest(); !ok || !r.Untyped() {
		t.Errorf("job 11: GPU request %+v ok=%v, want untyped", r, ok)
	}
	if !jobs[0].Running() || jobs[0].Pending() || !jobs[1].Pending() {
		t.Error("Running/Pending wrong")
	}
	for _, bad := range []string{
		"x\x1fRUNNING\x1f" + strings.Repeat("\x1f", 20),       // id
		"1\x1fRUNNING\x1fNone\x1f",                            // fields
		strings.Replace(squeueCaptured, "2:08", "2:xx", 1),    // elapsed
		strings.Replace(squeueCaptured, "node-p100", "n[", 1), // host list
	} {
		if _, err := ParseSqueue(bad, loc, false); err == nil {
			t.Errorf("ParseSqueue(%q): no error", bad)
		}
	}
}

func TestElapsedSeconds(t *testing.T) {
	for in, want := range map[string]float64{"0:00": 0, "2:08": 128, "1:02:03": 3723, "1-00:00:01": 86401, "N/A": 0} {
		if got, err := elapsedSeconds(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"5", "a:b", "1:2:3:4", "-1:00", "x-1:00"} {
		if _, err := elapsedSeconds(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestExpandHostlist(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"node-k80", []string{"node-k80"}},
		{"node-[k80,p100]", []string{"node-k80", "node-p100"}},
		{"gpu[01-03,7]", []string{"gpu01", "gpu02", "gpu03", "gpu7"}},
		{"a[1-2]-ib,b", []string{"a1-ib", "a2-ib", "b"}},
	} {
		got, err := ExpandHostlist(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %v %v, want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"n[", "n]", "n[3-1]", "n[1-2][3]", ",", "n[1-999999]"} {
		if _, err := ExpandHostlist(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node-[k80,p100]", "gpu[01-03,7]", "a[1-2]-ib,b", "n[", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandHostlist(s)
		if err == nil && len(names) > 1<<16+1<<16 {
			t.Fatalf("%q expanded to %d names", s, len(names))
		}
	})
}

func FuzzParseSqueue(f *testing.F) {
	f.Add(squeueCaptured)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseSqueue(s, time.UTC, false) // must not panic
		_, _ = ParseSqueue(s, time.UTC, true)
	})
}

// With squeue's admin_comment field last (captured from Slurm 22.05.8,
// `squeue -h -O SqueueFormat("admin_comment")`, then two hand-made
// lines: no comment, and an admin's note carrying the separator).
func TestParseSqueueWithComment(t *testing.T) {
	lines := strings.SplitAfter(squeueCaptured, "\n")
	out := strings.TrimSuffix(lines[0], "\n") + "rota: gpu any->v100, time none->none (las) [d=VXrK0amBKn6tiYRri0WVF3]\x1f\n" +
		strings.TrimSuffix(lines[1], "\n") + "(null)\x1f\n" +
		strings.TrimSuffix(lines[2], "\n") + "moved by hand\x1fsee ticket [d=zz]\x1f\n"
	jobs, err := ParseSqueue(out, time.UTC, true)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := ParseSqueue(squeueCaptured, time.UTC, false)
	for i, want := range []string{"VXrK0amBKn6tiYRri0WVF3", "", ""} {
		if jobs[i].Decision != want || !jobs[i].DecisionRead {
			t.Errorf("job %d: decision %q read %v, want %q read", jobs[i].ID, jobs[i].Decision, jobs[i].DecisionRead, want)
		}
		// A note of Rota's only where the comment starts with one.
		if jobs[i].Noted != (i == 0) {
			t.Errorf("job %d: noted %v", jobs[i].ID, jobs[i].Noted)
		}
		jobs[i].Decision, jobs[i].DecisionRead, jobs[i].Noted = "", false, false
		if !reflect.DeepEqual(jobs[i], plain[i]) {
			t.Errorf("job %d: %+v, want %+v with the comment", jobs[i].ID, jobs[i], plain[i])
		}
	}
	// Without the comment field, an extra field is an error, not a comment.
	if _, err := ParseSqueue(out, time.UTC, false); err == nil {
		t.Error("comment lines read as plain: no error")
	}
	if _, err := ParseSqueue("1\x1fRUNNING\x1fNone\x1f", time.UTC, true); err == nil {
		t.Error("short line with comment: no error")
	}
}

func TestDecisionInComment(t *testing.T) {
	for in, want := range map[string]string{
		"rota: gpu any->v100, time none->06:00:00 (las) [d=Ab12_x-9]":         "Ab12_x-9",
		"rota: gpu any->v100, time none->06:00:00 (las) [d=Ab12] (moved) [x]": "Ab12",
		"rota: gpu any->v100 (las)":                                           "",
		"note rota: x [d=zz]":                                                 "", // not Rota's
		"":                                                                    "",
		"(null)":                                                              "",
	} {
		if got := DecisionInComment(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// fakeSqueue puts an executable squeue first in PATH that answers
// `-O` with the three captured jobs, knowing AdminComment by the name
// known ("" none): like squeue, an unknown -O name prints an error and
// an empty field, and exits 0. Each call appends its -O argument to the
// returned log.
func fakeSqueue(t *testing.T, known string) string {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	data := filepath.Join(dir, "jobs")
	if err := os.WriteFile(data, []byte(squeueCaptured), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
fmt=""
while [ $# -gt 0 ]; do [ "$1" = -O ] && fmt=$2; shift; done
echo "$fmt" >>` + log + `
comment=""
case $fmt in
*admin_comment*|*AdminComment*)
  if [ -n "` + known + `" ] && echo "$fmt" | grep -q "` + known + `:"; then comment="rota: gpu any->p100 (las) [d=D11]"
  else echo "squeue: error: Invalid job format specification: $(echo "$fmt" | grep -o '[A-Za-z_]*omment')" >&2; fi
  while IFS= read -r line; do printf '%s%s\037\n' "$line" "$comment"; comment="(null)"; done <` + data + `
  ;;
*) cat ` + data + ` ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "squeue"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// The CLI reads decision ids in the queue read when squeue has a name
// for AdminComment, finds that name once, and says when it has none.
func TestJobsReadsDecision(t *testing.T) {
	for _, c := range []struct {
		known     string
		wantRead  bool
		wantCalls int // squeue runs for two Jobs calls
	}{
		{"admin_comment", true, 2},
		{"AdminComment", true, 3}, // one refused name, then remembered
		{"", false, 4},            // both names refused once, then none asked
	} {
		t.Run("known="+c.known, func(t *testing.T) {
			log := fakeSqueue(t, c.known)
			cli := &CLI{}
			for range 2 {
				jobs, err := cli.Jobs(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(jobs) != 3 {
					t.Fatalf("%d jobs", len(jobs))
				}
				want := ""
				if c.wantRead {
					want = "D11"
				}
				if jobs[0].DecisionRead != c.wantRead || jobs[0].Decision != want || jobs[1].Decision != "" {
					t.Errorf("job %d: decision %q read %v; want %q read %v", jobs[0].ID, jobs[0].Decision, jobs[0].DecisionRead, want, c.wantRead)
				}
			}
			calls, _ := os.ReadFile(log)
			if n := strings.Count(string(calls), "\n"); n != c.wantCalls {
				t.Errorf("%d squeue runs, want %d:\n%s", n, c.wantCalls, calls)
			}
		})
	}
}

func TestParseDecisionIDs(t *testing.T) {
	out := "JobId=5 JobName=job5 UserId=root(0) AdminComment=rota: gpu any->v100, time none->06:00:00 (las) [d=Ab12_x-9] OverSubscribe=OK\n" +
		"JobId=7 JobName=wrap UserId=root(0) Priority=5000\n" +
		"JobId=8 AdminComment=someone else's note [d=zz]\n"
	got := ParseDecisionIDs(out)
	if !reflect.DeepEqual(got, map[uint32]string{5: "Ab12_x-9"}) {
		t.Fatalf("got %v", got)
	}
}

func TestJobUpdateArgs(t *testing.T) {
	f, p := "v100", uint32(7)
	if got := (JobUpdate{Features: &f, Priority: &p, StartNow: true}).args(); !reflect.DeepEqual(got, []string{"Features=v100", "Priority=7", "StartTime=now"}) {
		t.Fatal(got)
	}
	x := "sv-v100,sv-k80"
	if got := (JobUpdate{StartNow: true, ExcNodes: &x}).args(); !reflect.DeepEqual(got, []string{"ExcNodeList=sv-v100,sv-k80", "StartTime=now"}) {
		t.Fatal(got)
	}
	for limit, want := range map[uint32]string{95: "TimeLimit=95", slurmtime.Unlimited: "TimeLimit=UNLIMITED"} {
		if got := (JobUpdate{TimeLimitMin: &limit}).args(); !reflect.DeepEqual(got, []string{want}) {
			t.Errorf("limit %d: args %v, want %s", limit, got, want)
		}
	}
	for nice, want := range map[int32]string{-5000: "Nice=-5000", 0: "Nice=0", 120: "Nice=120"} {
		if got := (JobUpdate{Nice: &nice}).args(); !reflect.DeepEqual(got, []string{want}) {
			t.Errorf("nice %d: args %v, want %s", nice, got, want)
		}
	}
	// A reset is its own command (scontrol release), not an update field.
	for _, u := range []JobUpdate{{}, {ResetPriority: true}} {
		if got := u.args(); got != nil {
			t.Errorf("%+v: args %v, want none", u, got)
		}
	}
}

// A job that names nodes, excludes some or runs in a reservation restricts
// its nodes; "(null)" and empty fields do not (22.05's scontrol show job).
func TestParseRestrictsNodes(t *testing.T) {
	t.Parallel()
	base := "JobId=7 JobName=wrap\n   ReqNodeList=(null) ExcNodeList=(null)\n   Reservation=(null)\n   Features=(null)\n"
	for _, tc := range []struct {
		out  string
		want bool
	}{
		{base, false},
		{strings.Replace(base, "ReqNodeList=(null)", "ReqNodeList=node-k80", 1), true},
		{strings.Replace(base, "ExcNodeList=(null)", "ExcNodeList=node-[1-2]", 1), true},
		{strings.Replace(base, "Reservation=(null)", "Reservation=maint", 1), true},
		{"", false},
	} {
		if got := ParseRestrictsNodes(tc.out); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.out, got, tc.want)
		}
	}
}

// IsZero is false once any field of the update is set, every field
// counted (a field added later and left out would drop updates).
func TestJobUpdateIsZero(t *testing.T) {
	t.Parallel()
	if !(JobUpdate{}).IsZero() {
		t.Fatal("the empty update is not zero")
	}
	typ := reflect.TypeOf(JobUpdate{})
	for i := 0; i < typ.NumField(); i++ {
		var u JobUpdate
		f := reflect.ValueOf(&u).Elem().Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			t.Fatalf("field %s of kind %s: teach this test (and IsZero) about it", typ.Field(i).Name, f.Kind())
		}
		if u.IsZero() {
			t.Errorf("an update setting only %s is zero", typ.Field(i).Name)
		}
	}
}
