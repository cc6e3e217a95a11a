package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/rota-hpc/rota/controller/estimate/queuewait"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/conf"
)

// readSacct reads the training jobs from this cluster's slurmdbd.
func (f qwFlags) readSacct(ctx context.Context) ([]queuewait.TraceJob, queuewait.TraceStats, error) {
	start, end, err := sacctWindow(*f.since, *f.start, *f.end, f.set("since"), time.Now())
	if err != nil {
		return nil, queuewait.TraceStats{}, usageError{err.Error()}
	}
	acct, st, err := (&slurm.CLI{}).Accounting(ctx, start, end)
	if err != nil {
		return nil, queuewait.TraceStats{}, fmt.Errorf("reading slurmdbd: %w", err)
	}
	part := ""
	if f.set("partition") {
		part = *f.partition
	}
	jobs, ts := acctTrace(acct, part, end, time.Now())
	ts.Lines, ts.Bad = st.Lines, st.Bad
	for _, b := range st.BadExamples {
		if len(ts.BadExamples) < 10 {
			ts.BadExamples = append(ts.BadExamples, queuewait.BadLine{Reason: b})
		}
	}
	if len(jobs) == 0 {
		return nil, ts, fmt.Errorf("slurmdbd has no started jobs from %s to %s%s (%d records)", start.Format(time.DateTime),
			orNow(end), map[bool]string{true: " in partition " + part}[part != ""], st.Jobs)
	}
	return jobs, ts, nil
}

func orNow(t time.Time) string {
	if t.IsZero() {
		return "now"
	}
	return t.Format(time.DateTime)
}

// sacctWindow reads --since, or --start and --end (local times; end
// zero: now).
func sacctWindow(since, start, end string, sinceSet bool, now time.Time) (time.Time, time.Time, error) {
	if start == "" {
		if end != "" {
			return time.Time{}, time.Time{}, fmt.Errorf("--end needs --start")
		}
		d, err := conf.ParseWindow(since)
		if err != nil || d <= 0 {
			return time.Time{}, time.Time{}, fmt.Errorf("--since %q: want days like 7d or hours like 36h", since)
		}
		return now.Add(-d), time.Time{}, nil
	}
	if sinceSet {
		return time.Time{}, time.Time{}, fmt.Errorf("give --since or --start/--end, not both")
	}
	s, err := localTime(start)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("--start: %w", err)
	}
	var e time.Time
	if end != "" {
		if e, err = localTime(end); err != nil {
			return time.Time{}, time.Time{}, fmt.Errorf("--end: %w", err)
		}
		if !e.After(s) {
			return time.Time{}, time.Time{}, fmt.Errorf("--end %s is not after --start %s", end, start)
		}
	}
	return s, e, nil
}

func localTime(s string) (time.Time, error) {
	for _, l := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(l, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a local time like 2026-11-01 or 2026-11-01T08:00:00", s)
}

// acctTrace turns slurmdbd's jobs into a trace: the jobs that started
// (the others have no wait to learn), waiting from when they became
// eligible; a job still running ends at end (now when zero). A job
// without a limit (UNLIMITED) gets the median of the others', as the
// model's features need one. part, when set, keeps that partition only.
func acctTrace(acct []slurm.AcctJob, part string, end, now time.Time) ([]queuewait.TraceJob, queuewait.TraceStats) {
	if end.IsZero() {
		end = now
	}
	var jobs []queuewait.TraceJob
	var limits []uint32
	for i := range acct {
		a := &acct[i]
		if !a.Started() || (part != "" && a.Partition != part) {
			continue
		}
		j := queuewait.TraceJob{ID: strconv.FormatUint(uint64(a.ID), 10), Name: a.Name, User: a.User, Partition: a.Partition,
			Submit: a.QueuedFrom(), Start: a.Start, End: a.End, TimeLimit: time.Duration(a.TimeLimitMin) * time.Minute,
			ExitCode: a.State, Nodes: max(a.NumNodes, 1), GPUs: a.GPUs, Line: i + 1}
		if j.End.IsZero() {
			j.End = end
		}
		if j.End.Before(j.Start) {
			j.End = j.Start
		}
		if a.TimeLimitMin > 0 {
			limits = append(limits, a.TimeLimitMin)
		}
		jobs = append(jobs, j)
	}
	if len(limits) > 0 {
		sort.Slice(limits, func(a, b int) bool { return limits[a] < limits[b] })
		med := time.Duration(limits[len(limits)/2]) * time.Minute
		for k := range jobs {
			if jobs[k].TimeLimit == 0 {
				jobs[k].TimeLimit = med
			}
		}
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit.Before(jobs[b].Submit) })
	return jobs, queuewait.TraceStats{Jobs: len(jobs)}
}
