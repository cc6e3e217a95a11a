package slurm

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rota-hpc/rota/wire/gpureq"
)

// AcctJob is one job as slurmdbd recorded it (`sacct -X`: the job's
// allocation, not its steps).
type AcctJob struct {
	ID        uint32
	State     string // COMPLETED, FAILED, TIMEOUT, CANCELLED, RUNNING, PENDING...
	User      string
	Account   string
	Partition string
	Name      string
	Submit    time.Time
	// Eligible is when the job could first start (after --begin, holds
	// and dependencies); zero when unknown.
	Eligible time.Time
	Start    time.Time // zero: never started
	End      time.Time // zero: not ended
	// TimeLimitMin is the limit in minutes; 0 unlimited or unknown.
	TimeLimitMin uint32
	NumNodes     int
	Nodes        []string // expanded; empty when none were allocated
	// GPUs is the job's allocated GPU count and GPUTypes the typed part
	// by type, from AllocTRES (gres/gpu=N, gres/gpu:<type>=N).
	GPUs     int
	GPUTypes map[string]int
}

// GPUType is the job's GPU type when it got exactly one; "" otherwise.
func (j *AcctJob) GPUType() string {
	if len(j.GPUTypes) != 1 {
		return ""
	}
	for t := range j.GPUTypes {
		return t
	}
	return ""
}

// Started says whether the job got its allocation.
func (j *AcctJob) Started() bool { return !j.Start.IsZero() }

// QueuedFrom is when the job's queue wait began: Eligible when sacct
// knows it (a job held by --begin or a dependency was not waiting for
// resources before), else Submit.
func (j *AcctJob) QueuedFrom() time.Time {
	if j.Eligible.After(j.Submit) {
		return j.Eligible
	}
	return j.Submit
}

// sacctFields is the -o list Accounting asks for. JobName comes last:
// it is the one field a user writes freely, so a '|' in it only
// lengthens the name.
var sacctFields = []string{"JobIDRaw", "State", "User", "Account", "Partition", "Submit", "Eligible",
	"Start", "End", "TimelimitRaw", "NNodes", "AllocTRES", "NodeList", "JobName"}

// SacctArgs is the sacct command line for the jobs of [since, until):
// every user's (-a), allocations only (-X), '|'-separated without a
// header (-P -n), raw numbers (--noconvert). A zero until is "now".
func SacctArgs(since, until time.Time) []string {
	end := "now"
	if !until.IsZero() {
		end = until.Format(sacctTimeLayout)
	}
	return []string{"-a", "-X", "-P", "-n", "--noconvert", "-o", strings.Join(sacctFields, ","),
		"-S", since.Format(sacctTimeLayout), "-E", end}
}

// sacct reads and prints times in the cluster's local time, no zone.
const sacctTimeLayout = "2006-01-02T15:04:05"

// SacctStats counts what ParseSacct read and skipped.
type SacctStats struct {
	Lines int `json:"lines"`
	Jobs  int `json:"jobs"`
	Bad   int `json:"bad_lines"`
	// BadExamples are the first few skipped lines and why.
	BadExamples []string `json:"bad_examples,omitempty"`
}

const maxSacctBadExamples = 10

// ParseSacct reads the output of `sacct SacctArgs(...)`. A line it
// cannot read is counted and skipped, not fatal: one odd record (a
// heterogeneous job's "12+1", a corrupt time) must not cost the rest of
// the history. Times are read in loc.
func ParseSacct(out string, loc *time.Location) ([]AcctJob, SacctStats) {
	var st SacctStats
	var jobs []AcctJob
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		st.Lines++
		j, err := ParseSacctLine(line, loc)
		if err != nil {
			st.Bad++
			if len(st.BadExamples) < maxSacctBadExamples {
				st.BadExamples = append(st.BadExamples, fmt.Sprintf("line %d: %v", i+1, err))
			}
			continue
		}
		jobs = append(jobs, j)
	}
	st.Jobs = len(jobs)
	return jobs, st
}

// ParseSacctLine reads one line of ParseSacct's input.
func ParseSacctLine(line string, loc *time.Location) (AcctJob, error) {
	f := strings.Split(line, "|")
	n := len(sacctFields)
	if len(f) < n {
		return AcctJob{}, fmt.Errorf("%d '|'-separated fields, want %d", len(f), n)
	}
	f[n-1] = strings.Join(f[n-1:], "|")
	f = f[:n]
	id, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil {
		return AcctJob{}, fmt.Errorf("JobIDRaw %q: not a job id", f[0])
	}
	j := AcctJob{ID: uint32(id), State: f[1], User: f[2], Account: f[3], Partition: f[4], Name: f[13]}
	if j.State == "" {
		return AcctJob{}, fmt.Errorf("job %d: empty State", id)
	}
	// "CANCELLED by 0": the state is the first word.
	j.State, _, _ = strings.Cut(j.State, " ")
	times := []struct {
		col string
		s   string
		dst *time.Time
	}{{"Submit", f[5], &j.Submit}, {"Eligible", f[6], &j.Eligible}, {"Start", f[7], &j.Start}, {"End", f[8], &j.End}}
	for _, t := range times {
		if *t.dst, err = parseTime(t.s, loc); err != nil {
			return AcctJob{}, fmt.Errorf("job %d: %s %q: not a time like 2024-03-31T23:59:38", id, t.col, t.s)
		}
	}
	if j.Submit.IsZero() {
		return AcctJob{}, fmt.Errorf("job %d: no Submit time", id)
	}
	if !j.Start.IsZero() && j.Start.Before(j.Submit) {
		return AcctJob{}, fmt.Errorf("job %d: Start %s before Submit %s", id, f[7], f[5])
	}
	if !j.End.IsZero() && !j.Start.IsZero() && j.End.Before(j.Start) {
		return AcctJob{}, fmt.Errorf("job %d: End %s before Start %s", id, f[8], f[7])
	}
	switch f[9] {
	case "", "UNLIMITED", "Partition_Limit", "INVALID", "NONE":
	default:
		lim, err := strconv.ParseUint(f[9], 10, 32)
		if err != nil {
			return AcctJob{}, fmt.Errorf("job %d: TimelimitRaw %q: not minutes", id, f[9])
		}
		j.TimeLimitMin = uint32(lim)
	}
	if f[10] != "" {
		if j.NumNodes, err = strconv.Atoi(f[10]); err != nil || j.NumNodes < 0 || j.NumNodes > 1<<20 {
			return AcctJob{}, fmt.Errorf("job %d: NNodes %q: not a node count", id, f[10])
		}
	}
	if j.GPUs, j.GPUTypes, err = parseAllocGPUs(f[11]); err != nil {
		return AcctJob{}, fmt.Errorf("job %d: AllocTRES: %w", id, err)
	}
	if nl := f[12]; nl != "None assigned" && nl != "None" {
		if j.Nodes, err = ExpandHostlist(nl); err != nil {
			return AcctJob{}, fmt.Errorf("job %d: NodeList: %w", id, err)
		}
	}
	return j, nil
}

// parseAllocGPUs reads the GPUs of an AllocTRES list such as
// "billing=2,cpu=2,gres/gpu:v100=2,gres/gpu=2,mem=1000M,node=1". The
// untyped gres/gpu entry is the total; without it the typed ones add
// up. Other TRES are skipped.
func parseAllocGPUs(s string) (int, map[string]int, error) {
	total, typed, sum := -1, map[string]int(nil), 0
	if s == "" {
		return 0, nil, nil
	}
	for _, e := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return 0, nil, fmt.Errorf("entry %q: want name=count", e)
		}
		name, rest, _ := strings.Cut(k, ":")
		if name != "gres/gpu" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return 0, nil, fmt.Errorf("entry %q: count is not a whole number", e)
		}
		if rest == "" {
			total = int(n)
			continue
		}
		if err := gpureq.CheckTypeName(rest); err != nil {
			return 0, nil, fmt.Errorf("entry %q: %w", e, err)
		}
		if typed == nil {
			typed = map[string]int{}
		}
		typed[rest] += int(n)
		sum += int(n)
	}
	if total < 0 {
		total = sum
	}
	return total, typed, nil
}

// AccountingReader reads finished and running jobs from Slurm's
// accounting (slurmdbd).
type AccountingReader interface {
	// Accounting lists the jobs of [since, until) (zero until: now).
	Accounting(ctx context.Context, since, until time.Time) ([]AcctJob, SacctStats, error)
}

// sacctTimeout bounds one sacct: a week of a large cluster's jobs takes
// slurmdbd longer than a queue read.
const sacctTimeout = 2 * time.Minute

// Accounting implements AccountingReader with sacct.
func (c *CLI) Accounting(ctx context.Context, since, until time.Time) ([]AcctJob, SacctStats, error) {
	ctx, cancel := context.WithTimeout(ctx, max(sacctTimeout, c.timeout()))
	defer cancel()
	// A 0 timeout in the inner run would cut sacct at the queue's 10 s.
	cli := &CLI{Env: c.Env, Timeout: max(sacctTimeout, c.timeout())}
	out, stderr, err := cli.runOut(ctx, "sacct", SacctArgs(since, until)...)
	if err != nil {
		return nil, SacctStats{}, err
	}
	// Without slurmdbd some releases print the error and exit 0 with
	// nothing on stdout; an empty history is then no answer.
	if len(strings.TrimSpace(string(out))) == 0 && strings.Contains(stderr, "error") {
		return nil, SacctStats{}, fmt.Errorf("sacct: %s", strings.TrimSpace(stderr))
	}
	jobs, st := ParseSacct(string(out), time.Local)
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit.Before(jobs[b].Submit) })
	return jobs, st, nil
}
