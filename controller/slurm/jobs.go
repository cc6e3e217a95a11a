package slurm

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Job is one job in Slurm's queue as the round loop needs it.
type Job struct {
	ID        uint32
	State     string // PENDING, RUNNING, CONFIGURING, COMPLETING...
	Reason    string
	User      string
	Account   string // "" when none
	QOS       string // "" when none (no accounting)
	Name      string
	Partition string
	Submit    time.Time
	Start     time.Time // zero when not started (or only estimated, for pending jobs)
	// TimeLimitMin is the job's limit in minutes; 0 unlimited.
	TimeLimitMin uint32
	// RunSeconds is how long it has run (this start).
	RunSeconds float64
	Nodes      []string // expanded node list; empty while pending
	NumNodes   int
	// The GPU-bearing TRES strings as squeue prints them ("" when unset).
	TresPerJob, TresPerNode, TresPerSocket, TresPerTask string
	Features                                            string // the job's constraint ("" none)
	Priority                                            uint32
	Restarts                                            int
	NumTasks                                            int
	// Nice is the job's nice value (0 unless its user or an admin, or
	// Rota's ordering, set one).
	Nice int32
	// Decision is the Rota decision id in the job's AdminComment ("" when
	// it has none). DecisionRead says the queue read carried the
	// AdminComment at all (squeue's admin_comment field); when it could
	// not, Scheduler.DecisionIDs supplies the ids.
	Decision     string
	DecisionRead bool
	// Noted: its AdminComment carries a note of Rota's ("rota: ..."): a
	// decision, or why the plugin left it as asked (it names its nodes,
	// its user opted out). A GPU job without one passed a plugin that
	// failed open or was not loaded (rounds adopt it). Read with Decision.
	Noted bool
}

// Pending is true while Slurm has not started the job.
func (j *Job) Pending() bool { return j.State == "PENDING" }

// Running is true for a job holding nodes (including its set-up).
func (j *Job) Running() bool { return j.State == "RUNNING" || j.State == "CONFIGURING" }

// GPURequest parses the job's GPU request; ok is false for jobs without
// GPUs or with a request Rota cannot read.
func (j *Job) GPURequest() (gpureq.Request, bool) {
	r, err := j.Request()
	if err != nil || !r.HasGPU() {
		return gpureq.Request{}, false
	}
	return r, true
}

// Request parses the job's four TRES strings, whatever they ask (GPUs,
// shards of a GPU, other gres).
func (j *Job) Request() (gpureq.Request, error) {
	return gpureq.ParseRequest(na(j.TresPerJob), na(j.TresPerNode), na(j.TresPerSocket), na(j.TresPerTask))
}

// GPUs is how many GPUs the job holds or will: its request (every form:
// per job, node, socket or task) at Slurm's node and task counts now; 0
// for a job without GPUs.
func (j *Job) GPUs() int {
	r, ok := j.GPURequest()
	if !ok {
		return 0
	}
	return gpureq.NeedOf(r.Ask(uint32(max(j.NumNodes, 0)), uint32(max(j.NumTasks, 0)))).Total
}

// JobUpdate is what `scontrol update job` may change; nil fields are left.
type JobUpdate struct {
	// Features replaces the job's constraint (pending jobs only). Slurm
	// 22.05 cannot change a pending job's GPU gres from untyped to typed,
	// nor between types (the old gres record is merged with the new one
	// and the job becomes unrunnable), while a constraint can be changed
	// freely; docs/rounds.md says when Rota uses which.
	Features *string
	// GPU replaces the job's GPU request (pending jobs only, Slurm 24.11
	// and later: 22.05 merges the new request with the old one).
	GPU *GPURequest
	// Priority sets an admin priority (> 0; 0 would hold the job).
	Priority *uint32
	// Nice sets the job's nice value. Unlike Priority it leaves the
	// multifactor plugin recalculating the job's priority (fair share,
	// age, QOS), less the nice: Rota orders by it within a bounded span.
	Nice *int32
	// ResetPriority hands an admin priority back to Slurm's priority
	// plugin (`scontrol release`, which clears it and recalculates; verified
	// on 22.05 for pending and running jobs). Never for a held job:
	// it would release the hold.
	ResetPriority bool
	// TimeLimitMin sets the time limit (an admin may raise it too);
	// slurmtime.Unlimited lifts it.
	TimeLimitMin *uint32
	// AdminComment replaces the job's AdminComment: the note of a
	// decision the round loop made for a job the plugin let through.
	AdminComment *string
	// StartNow clears the begin time Slurm puts on a requeued job
	// (now + the credential lifetime, 121 s by default) so a migrated job
	// may start at once.
	StartNow bool
	// ExcNodes replaces the nodes the job may not run on (ExcNodeList,
	// pending jobs only; "" clears it): a service's replicas keep off
	// each other's nodes.
	ExcNodes *string
}

// GPURequest is a job's four GPU-bearing TRES strings ("" unset).
type GPURequest struct {
	PerJob, PerNode, PerSocket, PerTask string
}

// IsZero says whether u changes nothing (no update to send).
func (u JobUpdate) IsZero() bool {
	return u.Features == nil && u.GPU == nil && u.Priority == nil && u.Nice == nil && !u.ResetPriority &&
		u.TimeLimitMin == nil && !u.StartNow && u.ExcNodes == nil && u.AdminComment == nil
}

// Retypes says whether u changes the job's GPU type.
func (u JobUpdate) Retypes() bool { return u.Features != nil || u.GPU != nil }

func (u JobUpdate) args() []string {
	var a []string
	if u.Features != nil {
		a = append(a, "Features="+*u.Features)
	}
	if g := u.GPU; g != nil {
		// Only the fields the job has: an empty one would clear it.
		for _, f := range []struct{ name, v string }{{"TresPerJob", g.PerJob}, {"TresPerNode", g.PerNode},
			{"TresPerSocket", g.PerSocket}, {"TresPerTask", g.PerTask}} {
			if f.v != "" {
				a = append(a, f.name+"="+f.v)
			}
		}
	}
	if u.Priority != nil {
		a = append(a, "Priority="+strconv.FormatUint(uint64(*u.Priority), 10))
	}
	if u.Nice != nil {
		a = append(a, "Nice="+strconv.FormatInt(int64(*u.Nice), 10))
	}
	switch {
	case u.TimeLimitMin == nil:
	case *u.TimeLimitMin == slurmtime.Unlimited:
		a = append(a, "TimeLimit=UNLIMITED")
	default:
		a = append(a, "TimeLimit="+strconv.FormatUint(uint64(*u.TimeLimitMin), 10))
	}
	if u.ExcNodes != nil {
		// Before StartTime: a job released by StartTime=now may be started
		// by the scheduler that update triggers, so its excluded nodes
		// must already be set.
		a = append(a, "ExcNodeList="+*u.ExcNodes)
	}
	if u.StartNow {
		a = append(a, "StartTime=now")
	}
	if u.AdminComment != nil {
		a = append(a, "AdminComment="+*u.AdminComment)
	}
	return a
}

// sep separates squeue's fields: a control character no job name,
// account or gres string carries, so names with spaces survive.
const sep = "\x1f"

// squeueFields is the -O list Jobs asks for; ParseSqueue reads it back.
var squeueFields = []string{"JobID", "State", "Reason", "UserName", "Account", "Name", "Partition",
	"SubmitTime", "StartTime", "TimeLimit", "TimeUsed", "NodeList", "NumNodes", "tres-per-job",
	"tres-per-node", "tres-per-socket", "tres-per-task", "Feature", "PriorityLong", "RestartCnt", "NumTasks", "Nice", "QOS"}

// commentFields are the names squeue -O may know a job's AdminComment
// by, tried in order (22.05 knows "admin_comment"). For a name it does
// not know squeue prints an error but still exits 0, with the field
// empty, so the error text is what tells.
var commentFields = []string{"admin_comment", "AdminComment"}

// SqueueFormat is the -O argument: every field unpadded (":0") and
// followed by the separator, then the AdminComment under the name
// comment when comment is not "". The comment comes last so that a
// separator inside it (an admin may write anything there) only lengthens
// the comment.
func SqueueFormat(comment string) string {
	parts := make([]string, 0, len(squeueFields)+1)
	for _, f := range squeueFields {
		parts = append(parts, f+":0"+sep)
	}
	if comment != "" {
		parts = append(parts, comment+":0"+sep)
	}
	return strings.Join(parts, ",")
}

// squeue runs squeue -h with args and the queue format, and parses its
// output. It reads AdminComment in the same call when this squeue has a
// field for it: the round loop then needs no second, heavier read
// (`scontrol show job -o`, every job in slurmctld's memory with all its
// details) to find which jobs Rota placed. Each such read holds
// slurmctld's job lock, and submissions wait for it.
func (c *CLI) squeue(ctx context.Context, args ...string) ([]Job, error) {
	for {
		k := int(c.commentField.Load())
		field := ""
		if k < len(commentFields) {
			field = commentFields[k]
		}
		out, stderr, err := c.runOut(ctx, "squeue", append(append([]string{"-h"}, args...), "-O", SqueueFormat(field))...)
		if err != nil {
			return nil, err
		}
		if field != "" && strings.Contains(stderr, "Invalid job format specification") {
			c.commentField.CompareAndSwap(int32(k), int32(k+1))
			continue
		}
		return ParseSqueue(string(out), time.Local, field != "")
	}
}

// Job implements Scheduler: one job's queue entry (ok false when it
// is not pending or running).
func (c *CLI) Job(ctx context.Context, id uint32) (Job, bool, error) {
	jobs, err := c.squeue(ctx, "-j", strconv.FormatUint(uint64(id), 10), "-t", "PENDING,RUNNING,CONFIGURING")
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return Job{}, false, nil
		}
		return Job{}, false, err
	}
	if len(jobs) == 0 {
		return Job{}, false, nil
	}
	return jobs[0], true, nil
}

// ParseSqueue reads the output of `squeue -h -O SqueueFormat(c)`, with
// withComment when c was not "". Times are in the local zone Slurm
// prints them in.
func ParseSqueue(out string, loc *time.Location, withComment bool) ([]Job, error) {
	var jobs []Job
	for i, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(strings.TrimSuffix(line, sep), sep)
		if len(f) < len(squeueFields) || (!withComment && len(f) > len(squeueFields)) {
			return nil, fmt.Errorf("squeue line %d: want %d fields, got %d: %q", i+1, len(squeueFields), len(f), line)
		}
		comment := ""
		if withComment {
			comment = strings.Join(f[len(squeueFields):], sep)
			f = f[:len(squeueFields)]
		}
		for k := range f {
			f[k] = strings.TrimSpace(f[k])
		}
		j, err := parseJob(f, loc)
		if err != nil {
			return nil, fmt.Errorf("squeue line %d: %w", i+1, err)
		}
		if withComment {
			j.Decision, j.DecisionRead, j.Noted = DecisionInComment(comment), true, IsRotaNote(comment)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

func parseJob(f []string, loc *time.Location) (Job, error) {
	id, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil {
		// Array tasks print as 12_3; Rota does not manage array jobs.
		return Job{}, fmt.Errorf("job id %q: %w", f[0], err)
	}
	j := Job{ID: uint32(id), State: f[1], Reason: f[2], User: f[3], Account: null(f[4]), Name: f[5],
		Partition: f[6], TresPerJob: na(f[13]), TresPerNode: na(f[14]), TresPerSocket: na(f[15]),
		TresPerTask: na(f[16]), Features: null(f[17]), QOS: null(f[22])}
	if j.Submit, err = parseTime(f[7], loc); err != nil {
		return Job{}, fmt.Errorf("job %d submit time: %w", id, err)
	}
	if j.Running() {
		if j.Start, err = parseTime(f[8], loc); err != nil {
			return Job{}, fmt.Errorf("job %d start time: %w", id, err)
		}
	}
	if j.TimeLimitMin, err = limit(f[9]); err != nil {
		return Job{}, fmt.Errorf("job %d time limit: %w", id, err)
	}
	if j.RunSeconds, err = elapsedSeconds(f[10]); err != nil {
		return Job{}, fmt.Errorf("job %d time used: %w", id, err)
	}
	if j.Nodes, err = ExpandHostlist(f[11]); err != nil {
		return Job{}, fmt.Errorf("job %d node list: %w", id, err)
	}
	j.NumNodes, _ = strconv.Atoi(f[12])
	if p, err := strconv.ParseUint(f[18], 10, 32); err == nil {
		j.Priority = uint32(p)
	}
	j.Restarts, _ = strconv.Atoi(f[19])
	j.NumTasks, _ = strconv.Atoi(f[20])
	if n, err := strconv.ParseInt(f[21], 10, 32); err == nil {
		j.Nice = int32(n)
	}
	return j, nil
}

func null(s string) string {
	if s == "(null)" {
		return ""
	}
	return s
}

func na(s string) string {
	if s == "N/A" || s == "(null)" {
		return ""
	}
	return s
}

func parseTime(s string, loc *time.Location) (time.Time, error) {
	switch s {
	case "", "N/A", "Unknown", "None":
		return time.Time{}, nil
	}
	return time.ParseInLocation("2006-01-02T15:04:05", s, loc)
}

// ExpandHostlist expands a Slurm host list such as
// "node-[1-3,7],gpu-a[01-02]" into node names. Only the one-bracket forms
// Slurm prints are accepted; "" and "(null)" are empty.
func ExpandHostlist(s string) ([]string, error) {
	if s == "" || s == "(null)" || s == "N/A" {
		return nil, nil
	}
	var out []string
	for len(s) > 0 {
		// One item runs to the next comma outside brackets.
		depth, end := 0, len(s)
		for i, r := range s {
			if r == '[' {
				depth++
			} else if r == ']' {
				depth--
			} else if r == ',' && depth == 0 {
				end = i
				break
			}
		}
		item := s[:end]
		s = strings.TrimPrefix(s[end:], ",")
		names, err := expandItem(item)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
		if len(out) > 1<<16 {
			return nil, fmt.Errorf("host list expands past %d names", 1<<16)
		}
	}
	return out, nil
}

func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if item == "" || strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("bad host name %q", item)
		}
		return []string{item}, nil
	}
	closeAt := strings.IndexByte(item, ']')
	if closeAt < open || strings.Count(item, "[") != 1 || strings.Count(item, "]") != 1 {
		return nil, fmt.Errorf("bad host range %q", item)
	}
	prefix, body, suffix := item[:open], item[open+1:closeAt], item[closeAt+1:]
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a || b-a > 1<<16 {
			if !isRange && lo != "" && !strings.ContainsAny(lo, "[]") {
				out = append(out, prefix+lo+suffix) // non-numeric member, e.g. node-[k80,p100]
				continue
			}
			return nil, fmt.Errorf("bad host range %q in %q", r, item)
		}
		for n := a; n <= b; n++ {
			out = append(out, prefix+fmt.Sprintf("%0*d", len(lo), n)+suffix)
		}
	}
	return out, nil
}

// DecisionIDs implements Scheduler: one `scontrol show job -o` for all
// jobs, the decision id taken from each AdminComment's "[d=...]".
func (c *CLI) DecisionIDs(ctx context.Context) (map[uint32]string, error) {
	out, err := c.run(ctx, "scontrol", "show", "job", "-o")
	if err != nil {
		if strings.Contains(err.Error(), "No jobs in the system") {
			return map[uint32]string{}, nil
		}
		return nil, err
	}
	return ParseDecisionIDs(string(out)), nil
}

var (
	jobIDRe    = regexp.MustCompile(`(?:^|\s)JobId=(\d+)\s`)
	decisionRe = regexp.MustCompile(`AdminComment=rota: .*?\[d=([A-Za-z0-9_-]+)\]`)
)

// RestrictsNodes says whether a job asks for particular nodes (ReqNodeList),
// keeps off some (ExcNodeList) or runs in a reservation: only those nodes'
// GPU types can run it, which a type Rota chose might not be (the plugin
// leaves such jobs as asked). One `scontrol show job`: the rounds ask it
// only of the rare job they would adopt.
func (c *CLI) RestrictsNodes(ctx context.Context, jobID uint32) (bool, error) {
	out, err := c.run(ctx, "scontrol", "show", "job", strconv.FormatUint(uint64(jobID), 10))
	if err != nil {
		return false, err
	}
	return ParseRestrictsNodes(string(out)), nil
}

// ParseRestrictsNodes reads RestrictsNodes' answer from `scontrol show job`.
func ParseRestrictsNodes(out string) bool {
	kv := fields(out)
	return !unlimited(kv["ReqNodeList"]) || !unlimited(kv["ExcNodeList"]) || !unlimited(kv["Reservation"])
}

// IsRotaNote: an AdminComment that starts with a note of Rota's.
func IsRotaNote(comment string) bool { return strings.HasPrefix(comment, "rota: ") }

// DecisionInComment is the decision id in an AdminComment Rota wrote
// (wire.Annotation: "rota: ... [d=ID]"), or "" for anyone else's note.
func DecisionInComment(comment string) string {
	if !IsRotaNote(comment) {
		return ""
	}
	return wire.DecisionIDFromComment(comment)
}

// ParseDecisionIDs reads `scontrol show job -o`, one job per line.
func ParseDecisionIDs(out string) map[uint32]string {
	ids := map[uint32]string{}
	for _, line := range strings.Split(out, "\n") {
		m := jobIDRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		d := decisionRe.FindStringSubmatch(line)
		if d == nil {
			continue
		}
		id, err := strconv.ParseUint(m[1], 10, 32)
		if err != nil {
			continue
		}
		ids[uint32(id)] = d[1]
	}
	return ids
}

// Update implements Scheduler.
func (c *CLI) Update(ctx context.Context, jobID uint32, u JobUpdate) error {
	id := strconv.FormatUint(uint64(jobID), 10)
	if a := u.args(); len(a) > 0 {
		if _, err := c.run(ctx, "scontrol", append([]string{"update", "JobId=" + id}, a...)...); err != nil {
			return err
		}
	}
	if u.ResetPriority {
		_, err := c.run(ctx, "scontrol", "release", id)
		return err
	}
	return nil
}

// Requeue implements Scheduler.
func (c *CLI) Requeue(ctx context.Context, jobID uint32) error {
	_, err := c.run(ctx, "scontrol", "requeue", strconv.FormatUint(uint64(jobID), 10))
	return err
}

// elapsedSeconds reads squeue's TimeUsed: "M:SS", "H:MM:SS" or
// "D-HH:MM:SS" (it differs from time limits, whose bare number is minutes).
func elapsedSeconds(s string) (float64, error) {
	if s == "" || s == "N/A" || s == "INVALID" {
		return 0, nil
	}
	days := 0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad elapsed time %q", s)
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("bad elapsed time %q", s)
	}
	total := 0
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad elapsed time %q", s)
		}
		total = total*60 + n
	}
	return float64(days*86400 + total), nil
}

// GPUType is the GPU type the job runs on or will: for a job that has
// started, its first node's type (what it got, whatever it asked); else
// the type its constraint names (one of types, the cluster's); else the
// one type its GPU request names (a job asking for shards only: the one
// type its shards name); "" when nothing says (any type). The
// one reading of a job's type: rounds, limits, queue-wait history and the
// web view all call it.
func (j *Job) GPUType(nodeType map[string]string, types []string) string {
	r, _ := j.Request()
	return j.GPUTypeOf(r, nodeType, types)
}

// GPUTypeOf is GPUType for a caller that has parsed the job's request
// already (the round loop, once per job a round).
func (j *Job) GPUTypeOf(r gpureq.Request, nodeType map[string]string, types []string) string {
	if !j.Pending() && len(j.Nodes) > 0 {
		if t := nodeType[j.Nodes[0]]; t != "" {
			return t
		}
	}
	if t := gpureq.FeatureType(j.Features, func(f string) bool { return slices.Contains(types, f) }); t != "" {
		return t
	}
	if ts := r.Types(); len(ts) == 1 {
		return ts[0]
	}
	if ts := r.ShardTypes(); len(ts) == 1 && !r.HasGPU() {
		return ts[0] // shards of one type's GPUs ("gres/shard:v100:1")
	}
	return ""
}
