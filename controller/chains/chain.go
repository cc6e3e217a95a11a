package chains

import (
	"time"

	"github.com/rota-hpc/rota/wire"
)

// Chain states.
const (
	StateRunning   = "running"
	StateDone      = "done"
	StateCancelled = "cancelled"
	StateFailed    = "failed"
)

// Chain is one logical job run as segments. Its id is the first
// segment's job id.
type Chain struct {
	ID       uint32     `json:"id"`
	User     string     `json:"user"`
	Name     string     `json:"name"`
	Hints    wire.Hints `json:"hints"`
	Features string     `json:"features,omitempty"` // the user's own constraint
	State    string     `json:"state"`
	Why      string     `json:"why,omitempty"`
	// NoMore: no further segment is submitted (limit reached, or the job
	// did not resume from its checkpoint); the chain ends with its last.
	NoMore   bool      `json:"no_more,omitempty"`
	Planned  int       `json:"planned,omitempty"`
	Created  time.Time `json:"created"`
	Ended    time.Time `json:"ended,omitempty"`
	Segments []Segment `json:"segments"`
	// Steps as last reported by the running segment's progress.
	Step  uint64 `json:"step,omitempty"`
	Total uint64 `json:"total,omitempty"`
	// Rate is the last steps/s known of a running segment.
	Rate float64 `json:"rate,omitempty"`

	script []byte // the batch script, kept in memory only
}

// Segment is one job of a chain.
type Segment struct {
	JobID     uint32    `json:"job_id"`
	N         int       `json:"n"`
	Partition string    `json:"partition"`
	Type      string    `json:"type,omitempty"`
	LimitMin  uint32    `json:"limit_min"`
	State     string    `json:"state"` // Slurm's, as last seen
	Submitted time.Time `json:"submitted,omitempty"`
	Started   time.Time `json:"started,omitempty"`
	EndedAt   time.Time `json:"ended_at,omitempty"`
	Ended     bool      `json:"ended,omitempty"`
	ExitCode  int       `json:"exit_code,omitempty"`
	// Signalled is when Rota asked it to checkpoint (zero: never).
	Signalled  time.Time `json:"signalled,omitempty"`
	Checkpoint string    `json:"checkpoint,omitempty"` // the agent's outcome, or "signal"
	// CancelledByRota: the manager cancelled it (the chain ended).
	CancelledByRota bool   `json:"cancelled_by_rota,omitempty"`
	FirstStep       uint64 `json:"first_step,omitempty"`
	LastStep        uint64 `json:"last_step,omitempty"`
	Why             string `json:"why,omitempty"`
}

// Gap is how long the chain stood still between the previous segment's
// end and this one's start; ok false for the first segment or while
// unknown.
func (c *Chain) Gap(i int) (time.Duration, bool) {
	if i <= 0 || i >= len(c.Segments) {
		return 0, false
	}
	p, s := c.Segments[i-1], c.Segments[i]
	if p.EndedAt.IsZero() || s.Started.IsZero() {
		return 0, false
	}
	return s.Started.Sub(p.EndedAt), true
}

// Status is the chain as `rota status` and `rota explain` show it.
func (c *Chain) Status(mode string) wire.ChainStatus {
	st := wire.ChainStatus{ID: c.ID, State: c.State, Why: c.Why, User: c.User, Name: c.Name, Mode: mode,
		Planned: c.Planned, Step: c.Step, Total: c.Total}
	for i, s := range c.Segments {
		cs := wire.ChainSegment{JobID: s.JobID, N: s.N, Partition: s.Partition, Type: s.Type, State: s.State,
			LimitMin: s.LimitMin, Submitted: rfc(s.Submitted), Started: rfc(s.Started), Ended: rfc(s.EndedAt),
			Checkpoint: s.Checkpoint, FirstStep: s.FirstStep, LastStep: s.LastStep, Why: s.Why}
		if g, ok := c.Gap(i); ok {
			v := g.Seconds()
			cs.GapSeconds = &v
		}
		st.Segments = append(st.Segments, cs)
	}
	return st
}

func rfc(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// alive is the index of the first segment not ended, -1 when none.
func (c *Chain) alive() int {
	for i := range c.Segments {
		if !c.Segments[i].Ended {
			return i
		}
	}
	return -1
}

// remaining is the work left at the segment's rate (the chain's last known
// one when in has none): the total less the furthest step any segment
// reported. A segment that just started reports nothing for its first
// seconds, while the round loop's figure for it is still the whole job's
// (--rota-steps); the chain knows better. It sets in.StepsLeft to match.
func (c *Chain) remaining(in *Info) (time.Duration, bool) {
	rate := in.Rate
	if rate <= 0 {
		rate = c.Rate
	}
	total := max(c.Total, in.Total)
	if total == 0 || rate <= 0 {
		return estimate(*in)
	}
	done := in.Step
	for _, s := range c.Segments {
		done = max(done, s.LastStep)
	}
	in.Rate, in.StepsLeft = rate, 0
	if done >= total {
		return 0, true
	}
	in.StepsLeft = float64(total - done)
	return secs(in.StepsLeft / rate), true
}
