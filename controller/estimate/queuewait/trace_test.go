package queuewait

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const goodLine = "785115\tmyjob\t00361\t2023-03-31T23:59:38\t2023-03-31T23:53:32\t2023-03-31T23:59:59\t1401\t60\t0:0\t2"

func TestParseTraceLine(t *testing.T) {
	ts := func(s string) time.Time {
		v, err := time.Parse(traceTimeLayout, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	replace := func(col int, v string) string {
		f := strings.Split(goodLine, "\t")
		f[col] = v
		return strings.Join(f, "\t")
	}
	tests := []struct {
		name    string
		line    string
		wantErr string
	}{
		{"good", goodLine, ""},
		{"crlf", goodLine + "\r\n", ""},
		{"padded fields", replace(9, " 2 "), ""},
		{"extra field", strings.Replace(goodLine, "00361\t", "00361\t810653\t", 1), "11 tab-separated fields"},
		{"too few", "1\t2\t3", "3 tab-separated fields"},
		{"empty", "", "1 tab-separated fields"},
		{"empty id", replace(0, ""), "empty JobID"},
		{"bad start", replace(3, "Unknown"), "Start \"Unknown\""},
		{"bad submit", replace(4, "2023-03-31 23:53:32"), "Submit"},
		{"bad end", replace(5, "None"), "End"},
		{"start before submit", replace(3, "2023-03-31T23:00:00"), "before Submit"},
		{"end before start", replace(5, "2023-03-31T23:59:00"), "before Start"},
		{"bad priority", replace(6, "high"), "Priority"},
		{"zero limit", replace(7, "0"), "TimelimitRaw"},
		{"unlimited limit", replace(7, "4294967295"), "TimelimitRaw"},
		{"text limit", replace(7, "1:00:00"), "TimelimitRaw"},
		{"zero nodes", replace(9, "0"), "NNodes"},
		{"negative nodes", replace(9, "-3"), "NNodes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseTraceLine(tc.line, TraceOptions{Partition: "gpu-a100", GPUsPerNode: 3})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := TraceJob{ID: "785115", Name: "myjob", User: "00361", Partition: "gpu-a100",
				Submit: ts("2023-03-31T23:53:32"), Start: ts("2023-03-31T23:59:38"), End: ts("2023-03-31T23:59:59"),
				Priority: 1401, TimeLimit: time.Hour, ExitCode: "0:0", Nodes: 2, GPUs: 6}
			if j != want {
				t.Fatalf("got %+v\nwant %+v", j, want)
			}
			if j.Wait() != 6*time.Minute+6*time.Second {
				t.Fatalf("wait %v", j.Wait())
			}
		})
	}
}

func TestReadTrace(t *testing.T) {
	in := strings.Join([]string{
		"3",
		"       JobID    JobName    UID               Start              Submit                 End   Priority TimelimitR ExitCode   NNodes",
		"------------ ---------- ------ ------------------- ------------------- ------------------- ---------- ---------- -------- --------",
		goodLine,
		strings.Replace(goodLine, "00361\t", "00361\t810653\t", 1),
		"",
		strings.Replace(goodLine, "785115", "785116", 1),
		"JobID is not a header here",
	}, "\n")
	jobs, st, err := ReadTrace(strings.NewReader(in), TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 || jobs[0].ID != "785115" || jobs[1].ID != "785116" || jobs[0].Line != 4 || jobs[1].Line != 7 {
		t.Fatalf("jobs %+v", jobs)
	}
	want := TraceStats{Lines: 8, Preamble: 3, Jobs: 2, Bad: 2, BadExamples: []BadLine{
		{5, "11 tab-separated fields, want 10"}, {8, "1 tab-separated fields, want 10"}}}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("stats %+v, want %+v", st, want)
	}

	// Only the first maxBadExamples bad lines are kept, all are counted.
	many := goodLine + strings.Repeat("\nbroken", 25)
	_, st, err = ReadTrace(strings.NewReader(many), TraceOptions{})
	if err != nil || st.Bad != 25 || len(st.BadExamples) != maxBadExamples {
		t.Fatalf("err %v, stats %+v", err, st)
	}

	for _, in := range []string{"", "1\nJobID\n---\n", "garbage\nmore garbage"} {
		if _, _, err := ReadTrace(strings.NewReader(in), TraceOptions{}); err == nil || !strings.Contains(err.Error(), "no usable job lines") {
			t.Errorf("%q: err = %v", in, err)
		}
	}
}

// formatTraceLine writes a job back as a trace line.
func formatTraceLine(j TraceJob) string {
	return strings.Join([]string{j.ID, j.Name, j.User, j.Start.Format(traceTimeLayout), j.Submit.Format(traceTimeLayout),
		j.End.Format(traceTimeLayout), fmt.Sprint(j.Priority), fmt.Sprint(int64(j.TimeLimit / time.Minute)), j.ExitCode,
		fmt.Sprint(j.Nodes)}, "\t")
}

func FuzzParseTraceLine(f *testing.F) {
	for _, s := range []string{
		goodLine,
		"478729\tdimer.10\t00000\t2022-11-01T15:34:14\t2022-10-05T11:52:48\t2022-11-03T15:34:15\t1234\t2880\t0:0\t2",
		"746545\txaa\t00326\t810653\t2023-03-09T12:48:05\t2023-03-09T12:46:57\t2023-03-09T12:48:05\t1169\t720\t0:0\t4",
		"24779",
		"------------ ----------",
		"1\t\t\t\t\t\t\t\t\t",
		"1\tx\tu\t2023-02-30T00:00:00\t2023-01-01T00:00:00\t2023-01-01T00:00:00\t1\t1\t0:0\t1",
		"1\tx\tu\t9999-12-31T23:59:59\t0001-01-01T00:00:00\t9999-12-31T23:59:59\t-9\t527040\t0:0\t1048576",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		j, err := ParseTraceLine(line, TraceOptions{GPUsPerNode: 3})
		if err != nil {
			return
		}
		if j.ID == "" || j.Nodes <= 0 || j.GPUs != 3*j.Nodes || j.TimeLimit <= 0 || j.Start.Before(j.Submit) || j.End.Before(j.Start) {
			t.Fatalf("accepted an invalid job %+v from %q", j, line)
		}
		// What was accepted survives a write and a re-read unchanged.
		again, err := ParseTraceLine(formatTraceLine(j), TraceOptions{GPUsPerNode: 3})
		if err != nil {
			t.Fatalf("re-reading %q: %v", formatTraceLine(j), err)
		}
		if again != j {
			t.Fatalf("round trip: %+v != %+v", again, j)
		}
	})
}
