package main

import (
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
)

func TestSacctWindow(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.Local)
	cases := []struct {
		since, start, end string
		sinceSet          bool
		wantStart         time.Time
		wantEnd           time.Time
		err               bool
	}{
		{since: "7d", wantStart: now.Add(-7 * 24 * time.Hour)},
		{since: "36h", sinceSet: true, wantStart: now.Add(-36 * time.Hour)},
		{since: "0", sinceSet: true, err: true},
		{since: "7d", start: "2026-11-01", end: "2026-11-02T08:00", wantStart: time.Date(2026, 11, 1, 0, 0, 0, 0, time.Local),
			wantEnd: time.Date(2026, 11, 2, 8, 0, 0, 0, time.Local)},
		{since: "7d", start: "2026-11-01T10:00:00", wantStart: time.Date(2026, 11, 1, 10, 0, 0, 0, time.Local)},
		{since: "7d", start: "2026-11-01", sinceSet: true, err: true},
		{since: "7d", end: "2026-11-01", err: true},
		{since: "7d", start: "2026-11-02", end: "2026-11-01", err: true},
		{since: "7d", start: "yesterday", err: true},
	}
	for _, c := range cases {
		s, e, err := sacctWindow(c.since, c.start, c.end, c.sinceSet, now)
		if (err != nil) != c.err || !s.Equal(c.wantStart) || !e.Equal(c.wantEnd) {
			t.Errorf("%+v: got %v %v %v", c, s, e, err)
		}
	}
}

func TestAcctTrace(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.Local)
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	acct := []slurm.AcctJob{
		{ID: 3, State: "RUNNING", Partition: "gpu", Submit: m(5), Start: m(6), TimeLimitMin: 30, NumNodes: 1, GPUs: 1},
		{ID: 1, State: "COMPLETED", Partition: "gpu", Submit: m(0), Eligible: m(2), Start: m(4), End: m(8), TimeLimitMin: 60, NumNodes: 2, GPUs: 8},
		{ID: 2, State: "CANCELLED", Partition: "gpu", Submit: m(1), End: m(3), TimeLimitMin: 60},
		{ID: 4, State: "TIMEOUT", Partition: "debug", Submit: m(1), Start: m(1), End: m(9), NumNodes: 0},
	}
	jobs, st := acctTrace(acct, "", time.Time{}, m(20))
	if st.Jobs != 3 || len(jobs) != 3 {
		t.Fatalf("%d jobs, want the 3 started", len(jobs))
	}
	// In queue order: 4 (m1), 1 (eligible m2), 3 (m5).
	if jobs[0].ID != "4" || jobs[1].ID != "1" || jobs[2].ID != "3" {
		t.Fatalf("order %s %s %s", jobs[0].ID, jobs[1].ID, jobs[2].ID)
	}
	if jobs[1].Wait() != 2*time.Minute || jobs[1].Nodes != 2 || jobs[1].GPUs != 8 {
		t.Errorf("job 1: %+v", jobs[1])
	}
	if !jobs[2].End.Equal(m(20)) {
		t.Errorf("running job ends at %v, want now", jobs[2].End)
	}
	if jobs[0].TimeLimit != 60*time.Minute || jobs[0].Nodes != 1 {
		t.Errorf("unlimited job: limit %v (want the median 60m), nodes %d", jobs[0].TimeLimit, jobs[0].Nodes)
	}
	if only, _ := acctTrace(acct, "debug", time.Time{}, m(20)); len(only) != 1 || only[0].ID != "4" {
		t.Errorf("partition debug: %+v", only)
	}
}
