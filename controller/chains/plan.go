// Package chains runs a job longer than its partition's MaxTime as a chain
// of segments (docs/chains.md): each segment is checkpointed before its
// time limit and a copy of the job, submitted ahead of time with a
// dependency on it, resumes from the checkpoint as soon as it ends. The
// chain is one logical job in the controller's state, status and explain.
//
// This file is the planning: pure functions of times, estimates and what
// Slurm says, table-tested. manager.go applies them to Slurm.
package chains

import (
	"fmt"
	"math"
	"time"
)

// Modes of submitting a successor.
const (
	// ModeAhead submits the successor before its predecessor ends, timed
	// by the predicted queue wait, with --dependency=afterok on it: it
	// starts as the predecessor ends, on the GPUs it frees.
	ModeAhead = "ahead"
	// ModeAfterEnd submits the successor once the predecessor has ended,
	// as a user resubmitting by hand (or a job resubmitting itself) does:
	// kept as the baseline the gap between segments is measured against.
	ModeAfterEnd = "after_end"
)

// Config are the chain manager's knobs (controller.conf chain_*).
type Config struct {
	// Off disables chains altogether.
	Off bool
	// Auto chains a job that declared a checkpoint signal and whose
	// estimated remaining work exceeds its time limit, without
	// --rota-chain (which forces a chain; --rota-chain=off forbids one).
	Auto bool
	// Mode is ModeAhead or ModeAfterEnd.
	Mode string
	// CheckpointLead is how long before a segment's limit it is asked to
	// checkpoint; it must exceed Tick plus the agent's checkpoint grace,
	// or Slurm kills the segment at its limit first.
	CheckpointLead time.Duration
	// Margin is added to the predicted wait when timing a successor.
	Margin time.Duration
	// Tick is how often the manager looks at the queue.
	Tick time.Duration
	// MaxSegments bounds a chain (a job that never finishes must not run
	// for ever).
	MaxSegments int
	// Priority is the admin priority a successor gets, so the GPUs its
	// predecessor frees go to it rather than to another pending job.
	Priority uint32
	// DevPartitions are short development partitions the site allows a
	// chain's last segment to use when one is idle and that finishes the
	// work sooner.
	DevPartitions []string
	// Grace is how long the agent waits for the checkpoint before SIGTERM.
	Grace time.Duration
}

// DefaultConfig is the production default: minutes-scale leads.
func DefaultConfig() Config {
	return Config{Auto: true, Mode: ModeAhead, CheckpointLead: 5 * time.Minute, Margin: time.Minute,
		Tick: 10 * time.Second, MaxSegments: 50, Priority: 1_200_000, Grace: time.Minute}
}

// Check refuses settings under which segments would be killed at their
// limit before they checkpoint.
func (c Config) Check() error {
	if c.Mode != ModeAhead && c.Mode != ModeAfterEnd {
		return fmt.Errorf("chain_mode %q: want %s or %s", c.Mode, ModeAhead, ModeAfterEnd)
	}
	if c.Tick <= 0 {
		return fmt.Errorf("chain_tick must be positive")
	}
	if c.CheckpointLead <= c.Tick+c.Grace {
		return fmt.Errorf("chain_checkpoint_lead (%s) must exceed chain_tick (%s) plus checkpoint_grace (%s): a segment signalled later is killed at its limit before it saves", c.CheckpointLead, c.Tick, c.Grace)
	}
	if c.MaxSegments < 2 {
		return fmt.Errorf("chain_max_segments must be at least 2")
	}
	return nil
}

// Times are the moments that matter at the end of a running segment.
type Times struct {
	End          time.Time // start + limit: Slurm kills the segment here
	CheckpointAt time.Time // End - CheckpointLead
	// SubmitAt is when the successor is submitted in ModeAhead: early
	// enough that its predicted queue wait (plus the margin, and at least
	// two ticks) is over when the predecessor ends; zero in ModeAfterEnd.
	SubmitAt time.Time
}

// SegmentTimes times a segment that started at start with limitMin.
// wait is the predicted queue wait of the successor (known false: no
// prediction, the margin alone).
func (c Config) SegmentTimes(start time.Time, limitMin uint32, wait time.Duration, known bool) Times {
	end := start.Add(time.Duration(limitMin) * time.Minute)
	t := Times{End: end, CheckpointAt: end.Add(-c.CheckpointLead)}
	if c.Mode == ModeAhead {
		ahead := c.Margin
		if known && wait > 0 {
			ahead += wait
		}
		ahead = max(ahead, 2*c.Tick)
		t.SubmitAt = t.CheckpointAt.Add(-ahead)
	}
	return t
}

// NeedsSuccessor says whether the work left (remaining, when known) goes
// past the segment's checkpoint time. Unknown work (a job that asked for a
// chain without --rota-steps) always needs one; it ends by its progress
// or by exiting on its own.
func NeedsSuccessor(now, checkpointAt time.Time, remaining time.Duration, known bool) bool {
	if !known {
		return true
	}
	return remaining > checkpointAt.Sub(now)
}

// PlannedSegments is how many segments of limitMin (each losing lead to
// its checkpoint) the work needs in all, counting one that has already run
// for ran; 0 when the limit leaves no time.
func PlannedSegments(remaining time.Duration, limitMin uint32, lead, ran time.Duration) int {
	per := time.Duration(limitMin)*time.Minute - lead
	if per <= 0 {
		return 0
	}
	left := remaining - (per - ran)
	if left <= 0 {
		return 1
	}
	return 1 + int(math.Ceil(float64(left)/float64(per)))
}

// Outcome is what a segment's end means for its chain.
type Outcome int

const (
	// Continue: the segment saved its checkpoint; the successor resumes
	// (Slurm starts it through its afterok dependency).
	Continue Outcome = iota
	// Rescue: the segment ended otherwise than by a clean checkpoint exit
	// (killed at its limit, its node failed, the grace ran out), so
	// afterok will never be satisfied: the successor is released by hand
	// and resumes from the last checkpoint there is.
	Rescue
	// Done: the work is finished.
	Done
	// Cancelled: its user cancelled it.
	Cancelled
	// Failed: the job failed on its own; rerunning it would fail again.
	Failed
)

func (o Outcome) String() string {
	return [...]string{"continue", "rescue", "done", "cancelled", "failed"}[o]
}

// EndFacts are what is known of a segment that left the queue.
type EndFacts struct {
	// Known: Slurm still had the job (scontrol show job); State and
	// ExitCode are its own.
	Known    bool
	State    string
	ExitCode int
	// Signalled: Rota asked it to checkpoint.
	Signalled bool
	// StepsDone: its progress reached the total steps.
	StepsDone bool
}

// Judge decides what a segment's end means, and why in words.
func Judge(f EndFacts) (Outcome, string) {
	if f.StepsDone {
		return Done, "the work is done: progress reached the total steps"
	}
	if !f.Known {
		if f.Signalled {
			return Continue, "the segment ended after its checkpoint (Slurm has forgotten how)"
		}
		return Failed, "the segment left the queue and Slurm no longer knows how it ended; the chain stops rather than guess"
	}
	switch f.State {
	case "CANCELLED":
		return Cancelled, "the segment was cancelled by its user or an admin"
	case "COMPLETED":
		if f.Signalled {
			return Continue, "the segment checkpointed and exited"
		}
		return Done, "the segment ended on its own before its limit: the work is done"
	case "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE":
		return Rescue, fmt.Sprintf("the segment ended %s before a clean checkpoint exit; the successor resumes from the last checkpoint", f.State)
	}
	if f.Signalled {
		return Rescue, fmt.Sprintf("the segment ended %s (exit %d) after it was asked to checkpoint; the successor resumes from the last checkpoint", f.State, f.ExitCode)
	}
	return Failed, fmt.Sprintf("the segment ended %s (exit %d) on its own; the chain stops rather than rerun a failing job", f.State, f.ExitCode)
}

// Resumed says whether a successor that first reported step first carried
// on from a predecessor last seen at step prev: it may start a little
// before prev (the checkpoint precedes the last progress report) but not
// from scratch. Unknown steps (0) pass.
func Resumed(prev, first uint64) bool {
	if prev == 0 || first == 0 {
		return true
	}
	return first*2 >= prev
}

// DevQueue is a development partition as the manager sees it now.
type DevQueue struct {
	Partition  string
	MaxTimeMin uint32
	// Idle: no job pending in it and enough free GPUs for the segment.
	Idle bool
	// Rate is the job's steps/s on the partition's GPU type (0 unknown).
	Rate float64
}

// ChooseDev picks a development partition for a chain's last segment:
// one that is idle, whose MaxTime holds the remaining steps at its rate
// (with margin), and where the work would end sooner than in the main
// partition (after mainWait, at mainRate). "" keeps the main partition.
func ChooseDev(steps, mainRate float64, mainWait time.Duration, margin float64, devs []DevQueue) (string, string) {
	if steps <= 0 || mainRate <= 0 {
		return "", ""
	}
	best, bestEnd := "", mainWait+secs(steps/mainRate)
	why := ""
	for _, d := range devs {
		if !d.Idle || d.Rate <= 0 {
			continue
		}
		run := secs(steps / d.Rate)
		if d.MaxTimeMin > 0 && time.Duration(float64(run)*margin) > time.Duration(d.MaxTimeMin)*time.Minute {
			continue
		}
		if run < bestEnd {
			best, bestEnd = d.Partition, run
			why = fmt.Sprintf("development partition %s is idle and ends the last %.0f steps in %s, against %s in the main partition (wait %s)",
				d.Partition, steps, run.Round(time.Second), (mainWait + secs(steps/mainRate)).Round(time.Second), mainWait.Round(time.Second))
		}
	}
	return best, why
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
