package submit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
	"github.com/rota-hpc/rota/wire/hints"
)

// Slurm's "no value" markers for 32-bit fields.
const (
	NoVal    = 0xfffffffe
	Infinite = 0xffffffff
)

// Job is the part of a Slurm job request Rota reads.
type Job struct {
	Modify bool   // job_modify (an update) rather than job_submit
	JobID  uint32 // job_modify only
	UID    uint32 // who submits or updates
	// The four GPU-bearing TRES strings, "" when unset.
	TresPerJob, TresPerNode, TresPerSocket, TresPerTask string
	Account, QOS, Partition, Name                       string
	TimeLimit                                           uint32 // minutes; NoVal unset, Infinite
	MinNodes, NumTasks, MaxNodes                        uint32 // NoVal, Infinite or 0 unset
	// --ntasks-per-node and --sockets-per-node: NoVal16, 0xffff or 0 unset.
	TasksPerNode, SocketsPerNode uint16
	// SpankEnv holds the SPANK plugin's options as
	// "_SLURM_SPANK_OPTION_rota_<option>=<value>".
	SpankEnv []string
	// Features is the job's constraint ("" none).
	Features string
	// ScriptHash is ScriptHash of the batch script ("" none).
	ScriptHash string
	// NameKeyed and NotNames, for a shelf key only (never a submission):
	// where the state places the user's jobs by speeds learned per job
	// name (wire.PlaceState.Learned), a key of a learned name matches
	// that name only (NameKeyed), any other key none of the learned
	// names (NotNames, at most MaxShelfNotNames).
	NameKeyed bool
	NotNames  []string
}

// Change is what to write back; nil fields stay as they are.
type Change struct {
	TresPerJob, TresPerNode, TresPerSocket, TresPerTask *string
	TimeLimit                                           *uint32
	// AdminComment is appended to the job's admin comment ("" for none).
	AdminComment string
	// Features replaces the job's constraint.
	Features *string
	// HoldS sets the job's begin time this many seconds from now (a later
	// one of the user's stands); 0 leaves it.
	HoldS uint32
}

// Notes the plugin writes into a GPU job it leaves as asked on purpose
// (AdminComment, at submission only), so the round loop, which adopts GPU
// jobs that passed a plugin that failed open or was not loaded, leaves
// these alone, and an admin can tell the two apart.
const (
	OptedOutNote = "rota: gpu as asked, time as asked: opted out (--rota=off, or an account in opt_out_accounts)"
	DisabledNote = "rota: gpu as asked, time as asked: the job_submit plugin is disabled (enabled = false, or its config is unusable)"
	// SharedNote: shards of a GPU are Slurm's to share out; Rota types
	// whole GPUs and MIG slices (docs/fractions.md).
	SharedNote = "rota: gpu as asked, time as asked: it asks for shards of a GPU (gres/shard), which Slurm shares between jobs; Rota chooses among whole GPUs and MIG slices only"
)

// leftNote is the Change that only notes why a submission is left as
// asked; nothing for an update (slurmctld refuses a user's update that
// sets admin_comment).
func leftNote(job *Job, note string) Change {
	if job.Modify {
		return Change{}
	}
	return Change{AdminComment: note}
}

// Outcome says what happened to a job, for logs and counters.
type Outcome string

const (
	NoGPU     Outcome = "no-gpu"    // not a GPU job: untouched
	Disabled  Outcome = "disabled"  // plugin disabled by config
	Trusted   Outcome = "trusted"   // an update by a trusted uid
	OptedOut  Outcome = "opted-out" // --rota=off or an opted-out account
	Shared    Outcome = "shared"    // asks for shards of a GPU: noted, untouched
	Rewritten Outcome = "rewritten" // type and/or time changed
	Kept      Outcome = "kept"      // the controller said keep
	FailOpen  Outcome = "fail-open" // something went wrong: untouched
)

// Placer places one GPU request: Local from the controller's pushed state
// (placement = local), Conn by asking the controller (remote). job is the
// submission req was made from, nil for a user's update: Local stocks its
// shelf for submissions like it and the few before it.
type Placer interface {
	Place(ctx context.Context, job *Job, req *wire.PlaceRequest) (*wire.PlaceReply, error)
}

// Handler applies Rota's rules to one job at a time. Open makes the one
// the plugin runs.
type Handler struct {
	Config Config
	// Placer is nil when there is no connection to the controller: every
	// GPU job then passes unchanged.
	Placer Placer
	conn   *Conn // closed by Close; nil without one
}

// Handle decides what to change in job. It never fails: on any error the
// Change is empty, the Outcome FailOpen and err says why.
func (h *Handler) Handle(ctx context.Context, job *Job) (Change, Outcome, error) {
	if !h.Config.Enabled {
		return leftNote(job, DisabledNote), Disabled, nil
	}
	if h.Config.FaultPanicJobName != "" && job.Name == h.Config.FaultPanicJobName {
		panic("fault_panic_job_name: job " + job.Name) // recovered by the caller, as any panic
	}
	if job.Modify && h.trusted(job.UID) {
		return Change{}, Trusted, nil
	}
	req, err := gpureq.ParseRequest(job.TresPerJob, job.TresPerNode, job.TresPerSocket, job.TresPerTask)
	if err != nil {
		if !strings.Contains(job.TresPerJob+job.TresPerNode+job.TresPerSocket+job.TresPerTask, "gpu") {
			return Change{}, NoGPU, nil // not ours to judge
		}
		return Change{}, FailOpen, fmt.Errorf("cannot read the GPU request: %w", err)
	}
	if req.HasShard() {
		return leftNote(job, SharedNote), Shared, nil
	}
	if !req.HasGPU() {
		return Change{}, NoGPU, nil
	}
	opts, err := hints.Parse(job.SpankEnv)
	if err != nil {
		return Change{}, FailOpen, err
	}
	if opts.Off || (job.Account != "" && slices.Contains(h.Config.OptOutAccounts, job.Account)) {
		return leftNote(job, OptedOutNote), OptedOut, nil
	}
	if job.Modify && !req.Untyped() {
		// A user update that names its type is the user's choice.
		return Change{}, Kept, nil
	}

	preq := &wire.PlaceRequest{
		V:          wire.Version,
		Modify:     job.Modify,
		JobID:      unset(job.JobID), // NO_VAL until Slurm assigns it, after job_submit
		UID:        job.UID,
		Account:    job.Account,
		QOS:        job.QOS,
		Partition:  job.Partition,
		Name:       job.Name,
		GPU:        req.Ask(unset(job.MinNodes), unset(job.NumTasks)),
		Hints:      opts.Hints,
		Features:   job.Features,
		ScriptHash: job.ScriptHash,
		NoScript:   !job.Modify && job.ScriptHash == "",
	}
	// The job's shape: the rule gives it only a type that can hold it.
	preq.GPU.MaxNodes, preq.GPU.TasksPerNode, preq.GPU.SocketsPerNode = unset(job.MaxNodes), unset16(job.TasksPerNode), unset16(job.SocketsPerNode)
	if userLimit(job.TimeLimit) {
		preq.TimeLimitMin = job.TimeLimit
	}
	if h.Placer == nil {
		return Change{}, FailOpen, errors.New("no connection to the controller")
	}
	submission := job
	if job.Modify {
		submission = nil
	}
	reply, err := h.Placer.Place(ctx, submission, preq)
	if err != nil {
		return Change{}, FailOpen, err
	}
	return apply(job, &req, preq, reply)
}

// changeFor is the Change that reply makes to job, whose request is req:
// what Handle would return for it (Rewritten or Kept), for a decision made
// in advance.
func changeFor(job *Job, req *wire.PlaceRequest, reply *wire.PlaceReply) (Change, error) {
	gr, err := gpureq.ParseRequest(job.TresPerJob, job.TresPerNode, job.TresPerSocket, job.TresPerTask)
	if err != nil {
		return Change{}, err
	}
	ch, _, err := apply(job, &gr, req, reply)
	return ch, err
}

// apply turns the controller's answer into a Change, re-checking the
// rules the plugin owns whatever the controller said: a valid type name,
// and never a walltime above what the user asked.
func apply(job *Job, req *gpureq.Request, preq *wire.PlaceRequest, reply *wire.PlaceReply) (Change, Outcome, error) {
	var ch Change
	asked := "any"
	if preq.GPU.Type != "" {
		asked = preq.GPU.Type
	} else if len(preq.GPU.Types) > 0 {
		asked = strings.Join(preq.GPU.Types, "+")
	}
	given := asked
	if reply.GPUType != "" && reply.GPUType != preq.GPU.Type {
		if err := gpureq.CheckTypeName(reply.GPUType); err != nil {
			return Change{}, FailOpen, fmt.Errorf("controller answered an invalid GPU type: %w", err)
		}
		before := [4]string{job.TresPerJob, job.TresPerNode, job.TresPerSocket, job.TresPerTask}
		if f, ok := gpureq.WithTypeFeature(job.Features, reply.GPUType); reply.ByFeature && !job.Modify && ok {
			// The type goes into the constraint and the gres stays (or
			// becomes) untyped, so the controller can retype the job
			// while it waits.
			ch.Features = &f
			req.SetType("")
		} else {
			req.SetType(reply.GPUType)
		}
		after := [4]string{req.PerJob.String(), req.PerNode.String(), req.PerSocket.String(), req.PerTask.String()}
		dst := [4]**string{&ch.TresPerJob, &ch.TresPerNode, &ch.TresPerSocket, &ch.TresPerTask}
		for i := range after {
			if after[i] != before[i] {
				s := after[i]
				*dst[i] = &s
			}
		}
		given = reply.GPUType
	}

	timeAsked := "none"
	if userLimit(job.TimeLimit) {
		timeAsked = slurmtime.Format(job.TimeLimit)
	} else if job.TimeLimit == Infinite {
		timeAsked = "UNLIMITED"
	}
	timeGiven := timeAsked
	if t := reply.TimeLimitMin; t > 0 && !job.Modify {
		if userLimit(job.TimeLimit) && t > job.TimeLimit {
			t = job.TimeLimit // never above what the user asked
		}
		if t != job.TimeLimit {
			ch.TimeLimit = &t
			timeGiven = slurmtime.Format(t)
		}
	}

	// job_modify must not touch admin_comment: slurmctld refuses that
	// field from non-admins and would reject the user's whole update.
	if !job.Modify {
		ch.AdminComment = annotation(asked, given, timeAsked, timeGiven, reply)
		// A hold the controller asked for, never past maxHoldS: the job
		// must start even when no controller releases it.
		ch.HoldS = min(reply.HoldS, maxHoldS)
	}
	if ch.HoldS == 0 && ch.TimeLimit == nil && ch.TresPerJob == nil && ch.TresPerNode == nil && ch.TresPerSocket == nil && ch.TresPerTask == nil && ch.Features == nil {
		return ch, Kept, nil
	}
	return ch, Rewritten, nil
}

// annotation is the line `scontrol show job` shows in AdminComment.
func annotation(asked, given, timeAsked, timeGiven string, r *wire.PlaceReply) string {
	return wire.Annotation(asked, given, timeAsked, timeGiven, r.Policy, r.DecisionID)
}

func (h *Handler) trusted(uid uint32) bool {
	for _, u := range h.Config.TrustedUIDs {
		if u == uid {
			return true
		}
	}
	return false
}

// maxHoldS bounds the begin time a reply may set (wire.PlaceReply.HoldS).
const maxHoldS = 600

func userLimit(t uint32) bool { return t != NoVal && t != Infinite && t != 0 }

func unset(v uint32) uint32 {
	if v == NoVal || v == Infinite {
		return 0
	}
	return v
}

// unset16 is unset for Slurm's 16-bit fields (NO_VAL16, INFINITE16).
func unset16(v uint16) uint32 {
	if v >= 0xfffe {
		return 0
	}
	return uint32(v)
}
