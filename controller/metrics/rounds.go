package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/rounds"
)

var (
	mRounds      = desc("rounds_total", "Rounds of the round loop run (while leading).")
	mRoundErrors = desc("round_errors_total", "Rounds that failed (Slurm unreadable, policy error); the next round retries.")
	mRetyped     = desc("retyped_total", "Pending jobs whose GPU type the round loop changed.")
	mReprio      = desc("reprioritised_total", "Pending jobs whose order (nice or priority) the round loop changed.")
	mMigrations  = desc("migrations_total", "Running jobs checkpointed and requeued onto another GPU type.")
	mMigFail     = desc("migration_failures_total", "Migrations abandoned (checkpoint failed or refused, requeue failed); the job kept running.")
	mLimits      = desc("limits_raised_total", "Running jobs' time limits Rota had shortened and raised to follow their progress (or gave back for want of a measurement).")
	mSlurmErrors = desc("slurm_update_errors_total", "scontrol updates that failed (job ended meanwhile, Slurm busy).")
	mLastRound   = desc("round_last_seconds", "The last round's wall time: reading Slurm, solving, applying.")
	mPhase       = desc("round_last_phase_seconds", "The last round's time by phase: read (Slurm's nodes, partitions, queue), solve (the policy), apply (updates, migrations).", "phase")
	mLastEnd     = desc("round_last_end_timestamp_seconds", "When the last round ended (Unix time); it began round_last_seconds before.")
	mLastUpdates = desc("round_last_updates", "Pending jobs the last round updated in Slurm (one RPC each).")
	mUpdates     = desc("round_updates_total", "Pending jobs' updates sent to Slurm by rounds.")
	mUnannotated = desc("gpu_jobs_without_decision", "GPU jobs in the queue with no Rota annotation: submitted while the plugin failed open (controller unreachable, deadline) or opted out.")
	mAdopted     = desc("adopted_total", "Pending GPU jobs that passed the job_submit plugin unchanged (it failed open, or was not loaded) and the rounds made Rota's (adopt_unplaced).")
)

// Rounds reads the round loop's counters.
type Rounds struct {
	// Loop is the round loop while leading, nil otherwise.
	Loop func() *rounds.Loop
}

func (Rounds) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, mRounds, mRoundErrors, mRetyped, mReprio, mMigrations, mMigFail, mLimits, mSlurmErrors, mUnannotated, mAdopted, mLastRound, mLastEnd, mPhase, mLastUpdates, mUpdates)
}

func (r Rounds) Collect(ch chan<- prometheus.Metric) {
	l := r.Loop()
	if l == nil {
		return
	}
	s := l.Stats()
	counter(ch, mRounds, float64(s.Rounds))
	counter(ch, mRoundErrors, float64(s.RoundErrors))
	counter(ch, mRetyped, float64(s.Retyped))
	counter(ch, mReprio, float64(s.Reprioritised))
	counter(ch, mMigrations, float64(s.Migrations))
	counter(ch, mMigFail, float64(s.MigrationFailures))
	counter(ch, mLimits, float64(s.LimitsRaised))
	counter(ch, mSlurmErrors, float64(s.SlurmErrors))
	gauge(ch, mUnannotated, float64(s.Unannotated))
	counter(ch, mAdopted, float64(s.Adopted))
	gauge(ch, mLastRound, s.LastRound.Seconds())
	if !s.LastEnd.IsZero() {
		gauge(ch, mLastEnd, float64(s.LastEnd.UnixNano())/1e9)
	}
	gauge(ch, mPhase, s.LastRead.Seconds(), "read")
	gauge(ch, mPhase, s.LastSolve.Seconds(), "solve")
	gauge(ch, mPhase, s.LastApply.Seconds(), "apply")
	gauge(ch, mLastUpdates, float64(s.LastUpdates))
	counter(ch, mUpdates, float64(s.Updates))
}
