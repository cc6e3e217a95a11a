package rounds

import (
	"fmt"
	"math"
	"time"

	"github.com/rota-hpc/rota/internal/slurmtime"
)

// Limits follow progress (docs/rounds.md). The walltime the plugin gives a
// job is an estimate from its user's hints; a job slower than hinted would
// be killed at a limit its user never asked for. So while a job runs under
// a limit Rota shortened, every round weighs the limit against the job's
// measured progress (FollowLimit, pure) and the loop raises it when it
// would not hold, never above the job's ceiling: the user's --time, else
// the partition's MaxTime.

const (
	// spreadFloor is the least relative uncertainty a measured rate is
	// given: the agents smooth over half a minute, and a training job's
	// rate drifts (evaluation passes, data loading) by about that much.
	spreadFloor = 0.1
	// spreadMax: a rate that moves more than this is no basis for a
	// limit; the job is followed as one with nothing measured.
	spreadMax = 0.25
	// spreadZ: the pessimistic rate lies this many spreads below the
	// measured one (about its 2nd percentile, were it normal).
	spreadZ = 2
	// leadSlack is added to the lead's two rounds: a round's own reading
	// of Slurm and the update take seconds.
	leadSlack = 30 * time.Second
	// leadShare of the limit is the least lead on long limits, so a
	// controller that is down for a while near the end costs no job.
	leadShare = 0.1
	// A rate not measured again for staleRounds rounds (at least
	// staleMin) is old news: the job may have stalled.
	staleRounds = 2
	staleMin    = 2 * time.Minute
	// minRateSamples: a rate needs this many reports to go by, as the
	// estimator's measured rates do (its first may be the job warming up).
	minRateSamples = 2
)

// LimitInput is what the loop knows of a running job whose limit Rota set.
type LimitInput struct {
	Elapsed  time.Duration // run time since this start
	LimitMin uint32        // the limit now
	// CeilingMin is the most the job may get: its user's --time, else the
	// partition's MaxTime (CeilingMaxTime); 0 when neither (unlimited).
	CeilingMin     uint32
	CeilingMaxTime bool
	Step, Total    uint64  // progress; Total 0 when unknown
	Rate           float64 // measured steps/s on the job's GPU type; 0 none
	Spread         float64 // the rate's standard deviation, steps/s
	Samples        uint64  // reports the rate averages
	RateAge        time.Duration
	Round          time.Duration
}

// LimitDecision is FollowLimit's answer.
type LimitDecision struct {
	// NewMin is the limit to set; 0 keeps it, slurmtime.Unlimited lifts it.
	NewMin uint32
	// Measured: NewMin comes from measured progress; otherwise it is the
	// ceiling, given back for want of a measurement.
	Measured bool
	// Short: even the ceiling ends before the pessimistic finish.
	Short bool
	// Finish is the pessimistic finish, from the job's start (Measured).
	Finish time.Duration
	Why    string // words, for explain and the log
}

// LimitLead is how long before a limit runs out the loop must act on it:
// two rounds (the first round inside the lead may come up to a round
// late, and a failed update is retried a round later) plus leadSlack,
// and at least leadShare of the limit.
func LimitLead(limit, round time.Duration) time.Duration {
	return max(2*round+leadSlack, time.Duration(float64(limit)*leadShare))
}

// FollowLimit decides whether a running job's limit must change. With its
// progress measured (a rate on its GPU type from two reports or more, not
// older than two rounds, and its steps done and in all), the limit must
// hold the pessimistic finish (steps left at the rate less spreadZ
// spreads, the spread at least spreadFloor) plus one LimitLead; when it
// does not, it is raised to the shortest whole minute that holds it plus
// two leads, so that the rate's wobble does not raise it again every
// round. With nothing measured, the
// ceiling is given back once less than a lead is left. Never above the
// ceiling, never down, and only a limit below its ceiling moves.
func FollowLimit(in LimitInput) LimitDecision {
	if in.LimitMin == 0 || in.LimitMin == slurmtime.Unlimited || (in.CeilingMin > 0 && in.LimitMin >= in.CeilingMin) {
		return LimitDecision{}
	}
	ceiling := in.CeilingMin
	if ceiling == 0 {
		ceiling = slurmtime.Unlimited
	}
	limit := minutes(in.LimitMin)
	lead := LimitLead(limit, in.Round)
	finish, basis, measured := pessimisticFinish(in)
	if !measured {
		left := limit - in.Elapsed
		if left > lead {
			return LimitDecision{}
		}
		return LimitDecision{NewMin: ceiling, Why: fmt.Sprintf("%s, and %s of its %s limit is left (the lead is %s): %s is given back",
			basis, dur(max(left, 0)), slurmtime.Format(in.LimitMin), dur(lead), in.ceilingWords())}
	}
	if finish+lead <= limit {
		return LimitDecision{}
	}
	// The least L with finish + 2*LimitLead(L) <= L.
	need := max(finish+2*(2*in.Round+leadSlack), time.Duration(float64(finish)/(1-2*leadShare)))
	d := LimitDecision{Measured: true, Finish: finish, NewMin: ceilMinutes(need)}
	to := slurmtime.Format(d.NewMin)
	if ceiling != slurmtime.Unlimited && d.NewMin >= ceiling {
		d.NewMin, d.Short, to = ceiling, finish > minutes(ceiling), in.ceilingWords()
	}
	d.Why = fmt.Sprintf("%s: it would end %s after its start, past its %s limit less the lead of %s; raised to %s",
		basis, dur(finish), slurmtime.Format(in.LimitMin), dur(lead), to)
	if d.Short {
		d.Why += fmt.Sprintf(", which even so ends %s before it would", dur(finish-minutes(ceiling)))
	}
	return d
}

// pessimisticFinish is when, from its start, the job ends at its
// pessimistic rate, and in words how it was reckoned; ok false, with the
// reason in words, when its progress is not measured well enough.
func pessimisticFinish(in LimitInput) (finish time.Duration, basis string, ok bool) {
	switch stale := max(staleRounds*in.Round, staleMin); {
	case in.Rate <= 0:
		return 0, "no rate measured on its GPU type", false
	case in.Samples < minRateSamples:
		return 0, "a single report of its rate so far", false
	case in.Total == 0:
		return 0, "its total steps are unknown (no --rota-steps, no total in its progress)", false
	case in.Step >= in.Total:
		return 0, fmt.Sprintf("its %d steps are done but it still runs", in.Total), false
	case in.RateAge > stale:
		return 0, fmt.Sprintf("its rate was last measured %s ago", dur(in.RateAge)), false
	}
	cv := max(in.Spread/in.Rate, spreadFloor)
	if cv > spreadMax {
		return 0, fmt.Sprintf("its rate moves too much (%.3g steps/s ± %.0f%%) to size a limit on", in.Rate, cv*100), false
	}
	pess := in.Rate * (1 - spreadZ*cv)
	left := in.Total - in.Step
	rest := time.Duration(float64(left) / pess * float64(time.Second))
	return in.Elapsed + rest, fmt.Sprintf("measured %.3g steps/s ± %.0f%% on its GPU type; %d of %d steps left take %s at a pessimistic %.3g steps/s, %s into its run",
		in.Rate, cv*100, left, in.Total, dur(rest), pess, dur(in.Elapsed)), true
}

// ceilingWords names the ceiling and says what it is.
func (in LimitInput) ceilingWords() string {
	switch {
	case in.CeilingMin == 0:
		return "no limit (UNLIMITED: no --time, no MaxTime)"
	case in.CeilingMaxTime:
		return "the partition's MaxTime " + slurmtime.Format(in.CeilingMin)
	}
	return "its user's limit " + slurmtime.Format(in.CeilingMin)
}

func minutes(m uint32) time.Duration { return time.Duration(m) * time.Minute }

// ceilMinutes is d in whole minutes, rounded up (Slurm's limits), at
// least 1 and below Slurm's UNLIMITED.
func ceilMinutes(d time.Duration) uint32 {
	return uint32(min(max(math.Ceil(d.Minutes()), 1), float64(slurmtime.Unlimited-1)))
}

func dur(d time.Duration) string { return d.Round(time.Second).String() }

// UnderMaxTime is the limit a pending job needs when the admin lowered
// its partition's MaxTime below the limit Rota gave it: Slurm would keep
// it pending for ever (Reason PartitionTimeLimit), where plain Slurm would
// have started a job without --time under the new MaxTime. ok is false
// when nothing needs doing: the job waits for another reason, Rota did
// not set its limit, or its user's own --time is above the new MaxTime
// (plain Slurm would keep that one pending too).
func UnderMaxTime(reason string, limitMin, givenMin, userMin, maxTimeMin uint32) (uint32, bool) {
	if reason != "PartitionTimeLimit" || givenMin == 0 || maxTimeMin == 0 || maxTimeMin == slurmtime.Unlimited {
		return 0, false
	}
	if limitMin != 0 && limitMin <= maxTimeMin {
		return 0, false // under it already: the queue read was older than the update
	}
	if userMin != 0 && userMin > maxTimeMin {
		return 0, false
	}
	return maxTimeMin, true
}
