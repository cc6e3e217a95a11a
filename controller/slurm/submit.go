package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Submitter is the part of Slurm that chains of jobs need beyond the round
// loop's Scheduler: read a job in full (also shortly after it ended), copy
// its batch script, submit a job as a user, cancel, signal, and change a
// pending job's dependency. Kept apart from Scheduler so that the round
// loop's fakes need not grow.
type Submitter interface {
	// ShowJob reads a job from slurmctld, also after it ended (for
	// MinJobAge seconds); ok is false when Slurm no longer knows it.
	ShowJob(ctx context.Context, id uint32) (s JobSpec, ok bool, err error)
	// BatchScript is the job's batch script as submitted.
	BatchScript(ctx context.Context, id uint32) ([]byte, error)
	// Submit submits a batch job as s.User and returns its id.
	Submit(ctx context.Context, s Submission) (uint32, error)
	// Cancel cancels a job.
	Cancel(ctx context.Context, id uint32) error
	// Signal sends sig (e.g. "USR1") to the job's batch step.
	Signal(ctx context.Context, id uint32, sig string) error
	// ClearDependency lets a pending job start whatever became of the
	// jobs it depended on.
	ClearDependency(ctx context.Context, id uint32) error
}

// JobSpec is what `scontrol show job -o` says of a job that a copy of it
// needs, and how it ended.
type JobSpec struct {
	ID        uint32
	User      string
	UID, GID  uint32
	State     string // PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT, FAILED...
	Reason    string
	ExitCode  int // the batch script's exit status; -1 unknown
	Signal    int // the signal that ended it, 0 none
	Partition string
	Account   string
	QOS       string
	WorkDir   string
	StdOut    string
	StdErr    string
	NumNodes  int
	NumTasks  int
	// CPUsPerTask 0 when unset.
	CPUsPerTask int
	// MemPerNode / MemPerCPU as Slurm prints them ("16000M"), "" unset.
	MemPerNode, MemPerCPU string
	Requeue               bool
	Features              string
	Dependency            string
	// ExcNodes is the job's ExcNodeList as Slurm prints it ("" none).
	ExcNodes     string
	TimeLimitMin uint32
	Start, End   time.Time
	// Eligible is when the job may start (EligibleTime: its begin time);
	// zero when not shown.
	Eligible                                            time.Time
	TresPerJob, TresPerNode, TresPerSocket, TresPerTask string
}

// Ended is true once Slurm is done with the job.
func (s *JobSpec) Ended() bool {
	switch s.State {
	case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STOPPED", "SIGNALING", "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD":
		return false
	}
	return s.State != ""
}

// Submission is one batch job to submit as a user.
type Submission struct {
	User   string
	Script []byte
	// Args are sbatch options ("--partition=gpu", ...).
	Args []string
	// Env is the job's environment besides what Submit sets (HOME, USER,
	// LOGNAME, SHELL and PATH of the user): sbatch exports it into the job.
	Env []string
}

// showKeyRe finds the keys of `scontrol show job -o`: a capitalised word
// ending in '=' after a blank. Values run to the next key, so a job name or
// a comment with blanks survives (a value holding " Word=" does not, and
// none of the fields read here can).
var showKeyRe = regexp.MustCompile(`(?:^|\s)([A-Z][A-Za-z/:_]*)=`)

// ParseShowJob reads one job of `scontrol show job -o`.
func ParseShowJob(out string, loc *time.Location) (JobSpec, error) {
	out = strings.TrimSpace(out)
	if i := strings.IndexByte(out, '\n'); i >= 0 {
		out = out[:i]
	}
	kv := map[string]string{}
	locs := showKeyRe.FindAllStringSubmatchIndex(out, -1)
	for i, m := range locs {
		end := len(out)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		k := out[m[2]:m[3]]
		if _, dup := kv[k]; !dup {
			kv[k] = strings.TrimSpace(out[m[1]:end])
		}
	}
	id, err := strconv.ParseUint(kv["JobId"], 10, 32)
	if err != nil {
		return JobSpec{}, fmt.Errorf("scontrol show job: no job id in %q", truncate(out, 120))
	}
	s := JobSpec{ID: uint32(id), State: kv["JobState"], Reason: kv["Reason"], Partition: kv["Partition"],
		Account: null(kv["Account"]), QOS: null(kv["QOS"]), WorkDir: null(kv["WorkDir"]), StdOut: null(kv["StdOut"]),
		StdErr: null(kv["StdErr"]), Requeue: kv["Requeue"] == "1", Features: null(kv["Features"]),
		Dependency: null(kv["Dependency"]), ExcNodes: null(kv["ExcNodeList"]), ExitCode: -1,
		TresPerJob: na(kv["TresPerJob"]), TresPerNode: na(kv["TresPerNode"]),
		TresPerSocket: na(kv["TresPerSocket"]), TresPerTask: na(kv["TresPerTask"])}
	s.User, s.UID = nameID(kv["UserId"])
	_, s.GID = nameID(kv["GroupId"])
	if c, sig, ok := strings.Cut(kv["ExitCode"], ":"); ok {
		if n, err := strconv.Atoi(c); err == nil {
			s.ExitCode = n
		}
		s.Signal, _ = strconv.Atoi(sig)
	}
	s.NumNodes, _ = strconv.Atoi(strings.Split(kv["NumNodes"], "-")[0])
	s.NumTasks, _ = strconv.Atoi(kv["NumTasks"])
	s.CPUsPerTask, _ = strconv.Atoi(kv["CPUs/Task"])
	if v := kv["MinMemoryNode"]; v != "" && v != "0" {
		s.MemPerNode = v
	}
	if v := kv["MinMemoryCPU"]; v != "" && v != "0" {
		s.MemPerCPU = v
	}
	if s.TimeLimitMin, err = limit(kv["TimeLimit"]); err != nil {
		return JobSpec{}, fmt.Errorf("job %d time limit: %w", id, err)
	}
	if s.Start, err = parseTime(kv["StartTime"], loc); err != nil {
		return JobSpec{}, fmt.Errorf("job %d start time: %w", id, err)
	}
	if s.End, err = parseTime(kv["EndTime"], loc); err != nil {
		return JobSpec{}, fmt.Errorf("job %d end time: %w", id, err)
	}
	// Only read, never required: a job's begin time (--begin, or a
	// hold the plugin set).
	s.Eligible, _ = parseTime(kv["EligibleTime"], loc)
	return s, nil
}

// nameID reads "alice(1000)".
func nameID(s string) (string, uint32) {
	name, rest, ok := strings.Cut(s, "(")
	if !ok {
		return s, 0
	}
	n, _ := strconv.ParseUint(strings.TrimSuffix(rest, ")"), 10, 32)
	return name, uint32(n)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ShowJob implements Submitter.
func (c *CLI) ShowJob(ctx context.Context, id uint32) (JobSpec, bool, error) {
	out, err := c.run(ctx, "scontrol", "show", "job", "-o", strconv.FormatUint(uint64(id), 10))
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return JobSpec{}, false, nil
		}
		return JobSpec{}, false, err
	}
	s, err := ParseShowJob(string(out), time.Local)
	return s, err == nil, err
}

// BatchScript implements Submitter: `scontrol write batch_script <id> -`
// prints the script (verified on 22.05.8).
func (c *CLI) BatchScript(ctx context.Context, id uint32) ([]byte, error) {
	out, err := c.run(ctx, "scontrol", "write", "batch_script", strconv.FormatUint(uint64(id), 10), "-")
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(out, []byte("#!")) {
		return nil, fmt.Errorf("job %d: scontrol write batch_script gave no script (%q)", id, truncate(string(out), 80))
	}
	return out, nil
}

// Submit implements Submitter. sbatch runs as the job's user (setpriv with
// the user's groups when the controller runs as root): sbatch's --uid was
// removed in Slurm 22.05, and slurmctld takes the submitting identity from
// munge, so only running as the user gives the job its owner. The script
// goes on standard input; the environment is a fresh login-like one plus
// s.Env (Slurm cannot give a job's submit environment back).
func (c *CLI) Submit(ctx context.Context, s Submission) (uint32, error) {
	u, err := user.Lookup(s.User)
	if err != nil {
		return 0, fmt.Errorf("submitting as %q: %w", s.User, err)
	}
	args := append([]string{"--parsable"}, s.Args...)
	name := "sbatch"
	if u.Uid != "0" && isRoot() {
		args = append([]string{"--reuid=" + u.Uid, "--regid=" + u.Gid, "--init-groups", "--", "sbatch"}, args...)
		name = "setpriv"
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append([]string{"HOME=" + u.HomeDir, "USER=" + u.Username, "LOGNAME=" + u.Username,
		"SHELL=/bin/bash", "PATH=/usr/local/bin:/usr/bin:/bin"}, c.Env...)
	if conf, ok := os.LookupEnv("SLURM_CONF"); ok {
		// The controller's own Slurm configuration (a non-default path on
		// test clusters), before c.Env and s.Env which may override it.
		cmd.Env = append([]string{"SLURM_CONF=" + conf}, cmd.Env...)
	}
	cmd.Env = append(cmd.Env, s.Env...)
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(s.Script)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	c.wrote()
	if err != nil {
		return 0, fmt.Errorf("sbatch as %s: %w: %s", s.User, err, strings.TrimSpace(errb.String()))
	}
	idStr, _, _ := strings.Cut(strings.TrimSpace(out.String()), ";")
	id, err := strconv.ParseUint(idStr, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("sbatch printed %q, not a job id", out.String())
	}
	return uint32(id), nil
}

// Cancel implements Submitter.
func (c *CLI) Cancel(ctx context.Context, id uint32) error {
	_, err := c.run(ctx, "scancel", strconv.FormatUint(uint64(id), 10))
	return err
}

// Signal implements Submitter: the batch step only, where a job run with
// exec has its program.
func (c *CLI) Signal(ctx context.Context, id uint32, sig string) error {
	_, err := c.run(ctx, "scancel", "--batch", "--signal="+sig, strconv.FormatUint(uint64(id), 10))
	return err
}

// ClearDependency implements Submitter.
func (c *CLI) ClearDependency(ctx context.Context, id uint32) error {
	_, err := c.run(ctx, "scontrol", "update", "JobId="+strconv.FormatUint(uint64(id), 10), "Dependency=")
	return err
}

func isRoot() bool { return os.Geteuid() == 0 }
