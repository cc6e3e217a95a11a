// Package queuewait predicts how long a job will wait in a Slurm queue,
// from the queue's state when it is submitted (pending and running jobs,
// their sizes and limits, the job's own request) and from recent history
// (the waits of the jobs that started lately).
//
// It has four parts: a reader for sacct traces (ReadTrace), a replay that
// rebuilds the queue state at each job's submit time from such a trace
// (Replay), a gradient-boosted tree model trained on those states (Train,
// Model.Predict, Save, Load), and an evaluation on a held-out last stretch
// of the trace against the baseline "average wait of recent jobs"
// (Evaluate). The controller fills QueueState and Request from squeue and
// sacct and calls Predict; nothing in the prediction path depends on a
// trace.
package queuewait

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// TraceJob is one line of an sacct trace.
type TraceJob struct {
	ID        string
	Name      string
	User      string
	Partition string
	Submit    time.Time
	Start     time.Time
	End       time.Time
	Priority  int64
	TimeLimit time.Duration
	ExitCode  string
	Nodes     int
	GPUs      int
	// Line is the 1-based line number in the trace, for messages.
	Line int
}

// Wait is the job's queue wait, Start - Submit.
func (j TraceJob) Wait() time.Duration { return j.Start.Sub(j.Submit) }

// TraceOptions says what the trace itself does not: sacct's export has
// no partition or GPU columns, so a whole-node GPU partition's name and
// GPUs per node come from the caller.
type TraceOptions struct {
	Partition   string // given to every job ("" leaves it empty)
	GPUsPerNode int    // GPUs = Nodes * GPUsPerNode (0: GPUs stay 0)
}

// BadLine is a line the reader skipped, and why.
type BadLine struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

// TraceStats counts what ReadTrace read and skipped.
type TraceStats struct {
	Lines    int `json:"lines"`
	Preamble int `json:"preamble_lines"` // count, header, dashes
	Jobs     int `json:"jobs"`
	Bad      int `json:"bad_lines"`
	// BadExamples holds the first few bad lines, enough to see what is
	// wrong without flooding a report.
	BadExamples []BadLine `json:"bad_examples,omitempty"`
}

const maxBadExamples = 10

// traceColumns is the column order of the Lonestar6 sacct export:
// JobID, JobName, UID, Start, Submit, End, Priority, TimelimitRaw,
// ExitCode, NNodes.
const traceColumns = 10

// sacct prints ISO times without a zone, in the cluster's local time.
// They are read as UTC so that the wall clock (hour of day, weekday) is
// kept exactly as printed.
const traceTimeLayout = "2006-01-02T15:04:05"

// ParseTraceLine reads one data line of the sacct TSV.
func ParseTraceLine(line string, opt TraceOptions) (TraceJob, error) {
	line = strings.TrimRight(line, "\r\n")
	f := strings.Split(line, "\t")
	if len(f) != traceColumns {
		return TraceJob{}, fmt.Errorf("%d tab-separated fields, want %d", len(f), traceColumns)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	j := TraceJob{ID: f[0], Name: f[1], User: f[2], ExitCode: f[8], Partition: opt.Partition}
	if j.ID == "" {
		return TraceJob{}, fmt.Errorf("empty JobID")
	}
	var err error
	if j.Start, err = parseTraceTime("Start", f[3]); err != nil {
		return TraceJob{}, err
	}
	if j.Submit, err = parseTraceTime("Submit", f[4]); err != nil {
		return TraceJob{}, err
	}
	if j.End, err = parseTraceTime("End", f[5]); err != nil {
		return TraceJob{}, err
	}
	if j.Start.Before(j.Submit) {
		return TraceJob{}, fmt.Errorf("Start %s before Submit %s", f[3], f[4])
	}
	if j.End.Before(j.Start) {
		return TraceJob{}, fmt.Errorf("End %s before Start %s", f[5], f[3])
	}
	if j.Priority, err = strconv.ParseInt(f[6], 10, 64); err != nil {
		return TraceJob{}, fmt.Errorf("Priority %q: not an integer", f[6])
	}
	lim, err := strconv.ParseInt(f[7], 10, 64)
	// A year is far beyond any partition's MaxTime; larger values are
	// corruption (or UNLIMITED's sentinel), and would overflow Duration.
	if err != nil || lim <= 0 || lim > 366*24*60 {
		return TraceJob{}, fmt.Errorf("TimelimitRaw %q: want minutes in 1..527040", f[7])
	}
	j.TimeLimit = time.Duration(lim) * time.Minute
	n, err := strconv.Atoi(f[9])
	if err != nil || n <= 0 || n > 1<<20 {
		return TraceJob{}, fmt.Errorf("NNodes %q: want a positive integer", f[9])
	}
	j.Nodes = n
	if opt.GPUsPerNode > 0 {
		j.GPUs = n * opt.GPUsPerNode
	}
	return j, nil
}

func parseTraceTime(col, s string) (time.Time, error) {
	t, err := time.ParseInLocation(traceTimeLayout, s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: not a time like 2023-03-31T23:59:38", col, s)
	}
	return t, nil
}

// isPreamble tells the lines sacct's export puts before the data: a
// line count, the column header and the dashes under it.
func isPreamble(line string) bool {
	s := strings.TrimSpace(line)
	if s == "" {
		return true
	}
	if _, err := strconv.Atoi(s); err == nil {
		return true
	}
	if strings.HasPrefix(s, "JobID") {
		return true
	}
	return strings.Trim(s, "- \t") == ""
}

// ReadTrace reads an sacct trace. Lines it cannot use are counted in the
// stats and skipped, not fatal: one corrupt line should not cost a
// half-year trace. It fails only on an I/O error or when no line at all
// is usable.
func ReadTrace(r io.Reader, opt TraceOptions) ([]TraceJob, TraceStats, error) {
	var st TraceStats
	var jobs []TraceJob
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	inData := false
	for sc.Scan() {
		st.Lines++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !inData && isPreamble(line) {
			st.Preamble++
			continue
		}
		inData = true
		j, err := ParseTraceLine(line, opt)
		if err != nil {
			st.Bad++
			if len(st.BadExamples) < maxBadExamples {
				st.BadExamples = append(st.BadExamples, BadLine{Line: st.Lines, Reason: err.Error()})
			}
			continue
		}
		j.Line = st.Lines
		jobs = append(jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, st, fmt.Errorf("queuewait: reading trace at line %d: %w", st.Lines+1, err)
	}
	st.Jobs = len(jobs)
	if len(jobs) == 0 {
		return nil, st, fmt.Errorf("queuewait: no usable job lines in the trace (%d lines, %d bad)", st.Lines, st.Bad)
	}
	return jobs, st, nil
}

// ReadTraceFile reads an sacct trace from a file.
func ReadTraceFile(path string, opt TraceOptions) ([]TraceJob, TraceStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, TraceStats{}, err
	}
	defer f.Close()
	jobs, st, err := ReadTrace(f, opt)
	if err != nil {
		return nil, st, fmt.Errorf("%s: %w", path, err)
	}
	return jobs, st, nil
}
