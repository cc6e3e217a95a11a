package rounds

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"errors"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// fakeMeas is what the agents measured, by job.
type fakeMeas map[uint32]observe.Job

func (m fakeMeas) Job(id uint32) (observe.Job, bool) { j, ok := m[id]; return j, ok }

// AddLimit makes fakeDecisions a LimitRecorder.
func (d *fakeDecisions) AddLimit(_ context.Context, id string, jobID uint32, c wire.LimitChange) (*wire.Decision, error) {
	old, ok := d.m[id]
	if !ok {
		return nil, fmt.Errorf("no decision %s", id)
	}
	cp := *old
	cp.JobID, cp.Limits = jobID, append(slices.Clip(old.Limits), c)
	d.m[id] = &cp
	return &cp, nil
}

// followLoop is a loop of 1-minute rounds with the agents' measurements.
func followLoop(t *testing.T, f *fakeSched, decs *fakeDecisions, meas Measurements, est Estimator) *Loop {
	l := newLoop(t, f, decs, est, nil)
	l.meas = meas
	return l
}

// runningIssueJob adds job 1 as the issue's job running on the V100, 3
// minutes into the 7 Rota gave it (d says what its user asked).
func runningIssueJob(f *fakeSched, decs *fakeDecisions, d *wire.Decision) {
	d.Asked.GPU.Type, d.Given.TimeLimitMin = "v100", 7
	f.add(1, "RUNNING", "node-v100", "", d, decs)
	f.jobs[1].TimeLimitMin, f.jobs[1].RunSeconds = 7, 180
}

// onV100 is a job's progress: step of 3000 at rate steps/s on the V100.
func onV100(step uint64, rate float64) observe.Job {
	return observe.Job{Step: step, Total: 3000, Rates: []observe.TypeRate{{GPUType: "v100", StepsPerSec: rate, Samples: 30, Updated: time.Now()}}}
}

// finishedEst is tableEst remembering the limits finished jobs are judged
// against.
type finishedEst struct {
	tableEst
	finished map[uint32]float64 // job -> limit in minutes
}

func (e *finishedEst) Finished(_ context.Context, _ string, id uint32, limitMin, _ float64) {
	e.finished[id] = limitMin
}

// The loop raises the limit Rota shortened of a running job that its
// measured progress says needs more, gives the user's limit back when
// nothing is measured, and leaves every other limit alone; each change is
// kept with the job's decision.
func TestLoopFollowsLimits(t *testing.T) {
	t.Parallel()
	// The issue's job, 3 minutes into the 7 Rota gave it (its user asked
	// 2 hours), on the V100: 792 of 3000 steps at 4.4 steps/s. With
	// 1-minute rounds the lead is 2.5 min; it ends 13.5 min in at 3.52
	// steps/s: 13.5 + 2 x 2.5 = 18.5.
	issue := func(d *wire.Decision) { d.Asked.TimeLimitMin = 120 }
	slow := onV100(792, 4.4)
	fast := onV100(2900, 43.9)
	for _, c := range []struct {
		name      string
		decision  func(*wire.Decision)
		job       func(*fakeSched)
		meas      *observe.Job
		segment   bool
		moving    bool
		failSlurm bool
		want      uint32 // the limit after the round
		measured  bool
	}{
		{name: "slower than hinted: raised", decision: issue, meas: &slow, want: 19, measured: true},
		{name: "as fast as hinted: kept", decision: issue, meas: &fast, want: 7},
		{name: "the measurement is for another type: nothing measured, time left: kept", decision: issue,
			meas: &observe.Job{Step: 792, Total: 3000, Rates: []observe.TypeRate{{GPUType: "k80", StepsPerSec: 1, Samples: 30, Updated: time.Now()}}}, want: 7},
		{name: "nothing measured, under a lead left: the user's limit back", decision: issue,
			job: func(f *fakeSched) { f.jobs[1].RunSeconds = 5 * 60 }, want: 120},
		{name: "nothing measured, no user limit: MaxTime back", decision: func(*wire.Decision) {},
			job: func(f *fakeSched) { f.jobs[1].RunSeconds = 5 * 60 }, want: 2880},
		{name: "a limit someone else set: left alone", decision: issue, meas: &slow,
			job: func(f *fakeSched) { f.jobs[1].TimeLimitMin = 6 }, want: 6},
		{name: "the user's own limit: left alone", decision: func(d *wire.Decision) { d.Asked.TimeLimitMin = 7 }, meas: &slow, want: 7},
		{name: "a chain segment: the chain manager's", decision: issue, meas: &slow, segment: true, want: 7},
		{name: "being migrated: the migration sets its limit", decision: issue, meas: &slow, moving: true, want: 7},
		{name: "pending: not yet", decision: issue, meas: &slow,
			job: func(f *fakeSched) { j := f.jobs[1]; j.State, j.Nodes, j.RunSeconds = "PENDING", nil, 0 }, want: 7},
		{name: "Slurm refuses: kept, retried next round", decision: issue, meas: &slow, failSlurm: true, want: 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			d := &wire.Decision{Asked: wire.PlaceRequest{Hints: wire.Hints{Steps: 3000, Throughput: map[string]float64{"v100": 43.9}}}}
			c.decision(d)
			runningIssueJob(f, decs, d)
			if c.job != nil {
				c.job(f)
			}
			f.failOn[1] = c.failSlurm
			meas := fakeMeas{}
			if c.meas != nil {
				meas[1] = *c.meas
			}
			l := followLoop(t, f, decs, meas, &tableEst{})
			if c.segment {
				l.SetChains(fakeChains{1: false})
			}
			l.moving[1] = c.moving
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := f.jobs[1].TimeLimitMin; got != c.want {
				t.Fatalf("limit %d after the round, want %d (updates %v)", got, c.want, f.updates)
			}
			rec := decs.m["d1"].Limits
			if raised := c.want != 7 && c.want != 6; raised {
				if len(rec) != 1 || rec[0].FromMin != 7 || rec[0].ToMin != c.want || rec[0].Measured != c.measured ||
					rec[0].Why == "" || rec[0].RanSeconds != f.jobs[1].RunSeconds {
					t.Fatalf("recorded %+v", rec)
				}
				if s := l.Stats(); s.LimitsRaised != 1 {
					t.Errorf("stats %+v", s)
				}
			} else if len(rec) != 0 || l.Stats().LimitsRaised != 0 {
				t.Fatalf("nothing raised but recorded %+v, stats %+v", rec, l.Stats())
			}
			if c.failSlurm && l.Stats().SlurmErrors == 0 {
				t.Error("a refused update not counted")
			}
			// The chain manager leaves a job alone while the loop follows
			// its limit: one Rota set, below the ceiling (120, or MaxTime).
			followed := f.jobs[1].State == "RUNNING" && !c.segment && !c.moving && f.jobs[1].TimeLimitMin != 6 &&
				f.jobs[1].TimeLimitMin < 120 && c.name != "the user's own limit: left alone"
			if in, _ := l.ChainInfo(1); in.LimitFollowed != followed {
				t.Errorf("ChainInfo.LimitFollowed = %v, want %v", in.LimitFollowed, followed)
			}
			// The next round, a minute on at the same pace, changes nothing.
			n := len(f.updates)
			f.jobs[1].RunSeconds += 60
			if m, ok := meas[1]; ok {
				m.Step += uint64(m.Rates[0].StepsPerSec * 60)
				meas[1] = m
			}
			if c.failSlurm {
				return
			}
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(f.updates) != n {
				t.Errorf("the next round updated again: %v", f.updates[n:])
			}
		})
	}
}

// A raised limit is not what the walltime estimate is judged by: the
// estimator still learns Rota's own estimate's error when the job ends.
func TestFollowedLimitKeepsTheEstimateJudged(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	runningIssueJob(f, decs, &wire.Decision{Asked: wire.PlaceRequest{TimeLimitMin: 120, Hints: wire.Hints{Steps: 3000}}})
	meas := fakeMeas{1: onV100(792, 4.4)}
	est := &finishedEst{finished: map[uint32]float64{}}
	l := followLoop(t, f, decs, meas, est)
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.jobs[1].TimeLimitMin == 7 {
		t.Fatal("not raised")
	}
	meas[1] = observe.Job{Step: 3000, Total: 3000}
	f.jobs[1].RunSeconds = 680
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	delete(f.jobs, 1)
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, ok := est.finished[1]; !ok || got != 7 {
		t.Errorf("judged against %v (%v), want Rota's estimate of 7 min", got, ok)
	}
}

// A job whose last step is measured only after the last round that saw
// it run (it ended soon after: the round in between never came) is judged
// all the same; one that left the queue short of its last step is not
// (it failed, or was cancelled: its run says nothing of the estimate).
func TestFinishedJobJudgedByItsLastMeasuredStep(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		after  observe.Job // measured after the round, before it left
		judged bool
	}{
		{"its last step came after the round: judged", observe.Job{Step: 3000, Total: 3000}, true},
		{"it left short of it: not judged", observe.Job{Step: 2900, Total: 3000}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
			runningIssueJob(f, decs, &wire.Decision{Asked: wire.PlaceRequest{TimeLimitMin: 120, Hints: wire.Hints{Steps: 3000}}})
			meas := fakeMeas{1: onV100(2800, 43.9)}
			est := &finishedEst{finished: map[uint32]float64{}}
			l := followLoop(t, f, decs, meas, est)
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			meas[1] = c.after
			delete(f.jobs, 1)
			if err := l.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, judged := est.finished[1]; judged != c.judged {
				t.Errorf("judged %v, want %v", judged, c.judged)
			}
		})
	}
}

// A job that keeps slowing down is raised again from the limit Rota
// raised it to, by this controller and by one that takes over.
func TestLoopFollowsAgain(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	runningIssueJob(f, decs, &wire.Decision{Asked: wire.PlaceRequest{TimeLimitMin: 600, Hints: wire.Hints{Steps: 3000}}})
	meas := fakeMeas{}
	st := &memState{m: map[string][]byte{}}
	loop := func() *Loop {
		l := followLoop(t, f, decs, meas, &tableEst{})
		if err := l.restoreWith(st); err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := loop()
	var limits []uint32
	for _, r := range []float64{4.4, 2, 1} {
		meas[1] = onV100(792, r)
		if r == 1 {
			l = loop() // another controller takes over
		}
		if err := l.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		limits = append(limits, f.jobs[1].TimeLimitMin)
	}
	if !(limits[0] > 7 && limits[1] > limits[0] && limits[2] > limits[1]) {
		t.Fatalf("limits %v: want raised at each slow-down", limits)
	}
	if n := len(decs.m["d1"].Limits); n != 3 {
		t.Errorf("%d changes recorded, want 3: %+v", n, decs.m["d1"].Limits)
	}
}

// Slurm applies an update's fields one by one: a pending job that starts
// before the round's retype reaches it takes the retype's shorter limit
// and refuses the type. The loop must still follow that limit (raise it
// as the job's progress needs) and keep the chain manager off the job; it
// did not, and a job that needed 14 minutes on the K80 it had started on
// ran under the 7 computed for a V100 and was cut into a chain.
func TestLoopFollowsALimitSlurmTookAlone(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	d := &wire.Decision{Asked: wire.PlaceRequest{TimeLimitMin: 120, Hints: wire.Hints{Steps: 3000}}}
	d.Given.TimeLimitMin = 120
	f.add(1, "RUNNING", "node-v100", "", d, decs)
	f.jobs[1].TimeLimitMin, f.jobs[1].RunSeconds = 120, 180
	l := followLoop(t, f, decs, fakeMeas{1: onV100(792, 4.4)}, &tableEst{})
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.jobs[1].TimeLimitMin; got != 120 {
		t.Fatalf("limit %d before the update, want the user's 120", got)
	}
	// The round's retype: Slurm takes the limit, refuses the type.
	seven, v100 := uint32(7), "v100"
	f.jobs[1].TimeLimitMin = seven
	l.mu.Lock()
	tr := l.known[1]
	l.mu.Unlock()
	l.applied(pendingUpdate{j: f.jobs[1], tr: tr, u: slurm.JobUpdate{TimeLimitMin: &seven, Features: &v100}},
		errors.New("Job is no longer pending execution"), time.Now())
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.jobs[1].TimeLimitMin; got != 19 {
		t.Fatalf("limit %d after the next round, want 19 (raised for its measured progress; updates %v)", got, f.updates)
	}
	if in, _ := l.ChainInfo(1); !in.LimitFollowed {
		t.Error("the chain manager is not kept off a job whose limit the loop follows")
	}
}
