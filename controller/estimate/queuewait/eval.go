package queuewait

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// EvalOptions set up an evaluation on the end of a trace.
type EvalOptions struct {
	// The test set is the jobs submitted in the last HoldoutDays of the
	// trace (by submit time).
	HoldoutDays float64
	// WarmupDays at the start of the trace are not trained on: jobs
	// submitted before the trace began are missing from it, so the
	// queue those first jobs saw is incomplete.
	WarmupDays float64
	Train      TrainOptions
	// Model, when set, is evaluated as is instead of training one on
	// everything before the test set.
	Model *Model
	// Compare also trains and scores the alternatives (see Report.Compared).
	Compare bool
}

// DefaultEvalOptions hold out the last 30 days and skip the first 7.
func DefaultEvalOptions() EvalOptions {
	return EvalOptions{HoldoutDays: 30, WarmupDays: 7, Train: DefaultTrainOptions()}
}

// Score is one predictor's errors on the test set.
type Score struct {
	Name          string  `json:"name"`
	MAEHours      float64 `json:"mae_hours"`
	MedianAEHours float64 `json:"median_ae_hours"`
	Within2x      float64 `json:"within_2x"`
	// BiasHours is mean(predicted - actual): under- or over-prediction.
	BiasHours float64 `json:"bias_hours"`
}

// Report is `rota queuewait eval --json`.
type Report struct {
	MAEHours              float64 `json:"mae_hours"`
	BaselineMAEHours      float64 `json:"baseline_mae_hours"`
	Within2x              float64 `json:"within_2x"`
	BaselineWithin2x      float64 `json:"baseline_within_2x"`
	MedianAEHours         float64 `json:"median_ae_hours"`
	BaselineMedianAEHours float64 `json:"baseline_median_ae_hours"`
	JobsTrain             int     `json:"jobs_train"`
	JobsTest              int     `json:"jobs_test"`
	// The test jobs' actual waits, for scale.
	TestMeanWaitHours   float64     `json:"test_mean_wait_hours"`
	TestMedianWaitHours float64     `json:"test_median_wait_hours"`
	Cutoff              time.Time   `json:"cutoff"`
	Model               string      `json:"model"`
	TrainSeconds        float64     `json:"train_seconds,omitempty"`
	Baseline            string      `json:"baseline"`
	Within2xRule        string      `json:"within_2x_rule"`
	Compared            []Score     `json:"compared,omitempty"`
	Trace               *TraceStats `json:"trace,omitempty"`
	Note                string      `json:"note,omitempty"`
}

const (
	baselineRule = "mean wait of the last 50 jobs of the same partition that started at or before the job's submit time"
	within2xRule = "both waits clamped up to 1 minute, then max/min <= 2 (so both under a minute counts as within)"
)

// Within2x tells whether a prediction is within a factor of 2 of the
// actual wait. Waits under a minute are taken as one minute: a job that
// starts at once and a prediction of 20 s are both "no wait", and no
// ratio of near-zero times means anything.
func Within2x(pred, actual time.Duration) bool {
	p := math.Max(pred.Seconds(), 60)
	a := math.Max(actual.Seconds(), 60)
	return math.Max(p, a) <= 2*math.Min(p, a)
}

// scorer accumulates one predictor's errors.
type scorer struct {
	name   string
	abs    []float64
	bias   float64
	within int
}

func (s *scorer) add(pred, actual time.Duration) {
	d := pred.Hours() - actual.Hours()
	s.abs = append(s.abs, math.Abs(d))
	s.bias += d
	if Within2x(pred, actual) {
		s.within++
	}
}

func (s *scorer) score() Score {
	n := float64(len(s.abs))
	if n == 0 {
		return Score{Name: s.name}
	}
	var sum float64
	for _, v := range s.abs {
		sum += v
	}
	return Score{Name: s.name, MAEHours: sum / n, MedianAEHours: median(slices.Clone(s.abs)),
		Within2x: float64(s.within) / n, BiasHours: s.bias / n}
}

// Evaluate trains on all but the last HoldoutDays of the trace (unless
// a model is given) and scores the model and the baseline on the jobs
// submitted in them.
func Evaluate(jobs []TraceJob, opt EvalOptions) (*Report, error) {
	if len(jobs) == 0 {
		return nil, fmt.Errorf("queuewait: no jobs")
	}
	if !(opt.HoldoutDays > 0) || opt.WarmupDays < 0 {
		return nil, fmt.Errorf("queuewait: holdout days must be > 0 and warmup days >= 0")
	}
	first, last := jobs[0].Submit, jobs[0].Submit
	for _, j := range jobs {
		if j.Submit.Before(first) {
			first = j.Submit
		}
		if j.Submit.After(last) {
			last = j.Submit
		}
	}
	cutoff := last.Add(-time.Duration(opt.HoldoutDays * 24 * float64(time.Hour)))
	warm := first.Add(time.Duration(opt.WarmupDays * 24 * float64(time.Hour)))
	if !warm.Before(cutoff) {
		return nil, fmt.Errorf("queuewait: the trace spans %s, too short for %g warm-up and %g held-out days",
			last.Sub(first).Round(time.Hour), opt.WarmupDays, opt.HoldoutDays)
	}
	rep := &Report{Cutoff: cutoff, Baseline: baselineRule, Within2xRule: within2xRule}

	type entry struct {
		name  string
		model *Model
	}
	var models []entry
	if opt.Model != nil {
		models = append(models, entry{"given:" + opt.Model.Loss, opt.Model})
		rep.Model = "given model (gbrt " + opt.Model.Loss + ")"
		rep.JobsTrain = opt.Model.Trained.Jobs
		if opt.Model.Trained.To.After(cutoff) {
			rep.Note = "the given model was trained on jobs submitted after the cutoff: the test set is not held out from it"
		}
	} else {
		tr := opt.Train
		tr.From, tr.To, tr.LabelsBy = warm, cutoff, cutoff
		losses := []string{tr.Loss}
		if opt.Compare {
			for _, l := range []string{"lad", "l2"} {
				if l != tr.Loss {
					losses = append(losses, l)
				}
			}
		}
		for i, l := range losses {
			tr.Loss = l
			start := time.Now()
			m, err := TrainTrace(jobs, tr)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				rep.TrainSeconds = time.Since(start).Seconds()
				rep.JobsTrain = m.Trained.Jobs
				rep.Model = fmt.Sprintf("gbrt loss=%s trees=%d depth=%d on log(1+wait/min)", l, tr.Trees, tr.Depth)
			}
			models = append(models, entry{"gbrt-" + l, m})
		}
	}

	scores := make([]scorer, len(models))
	for i, e := range models {
		scores[i].name = e.name
	}
	base := scorer{name: "baseline-recent-mean"}
	recMedian := scorer{name: "recent-median"}
	fcfs := scorer{name: "fcfs-at-limits"}
	// Most jobs start at once: predicting no wait at all is the floor any
	// predictor must clear.
	zero := scorer{name: "always-zero"}
	var actual []float64
	var scratch featureScratch
	x := make([]float64, len(featureNames))
	fcfsIdx := slices.Index(featureNames, "fcfs_h")
	medIdx := slices.Index(featureNames, "recent_median_h")
	Replay(jobs, func(s Snapshot) bool {
		if s.Job.Submit.Before(cutoff) {
			return true
		}
		w := s.Job.Wait()
		actual = append(actual, w.Hours())
		for i, e := range models {
			e.model.env().features(s.State, s.Req, &scratch, x)
			scores[i].add(e.model.predictVector(x), w)
			if i == 0 {
				fcfs.add(time.Duration(x[fcfsIdx]*float64(time.Hour)), w)
				recMedian.add(time.Duration(x[medIdx]*float64(time.Hour)), w)
			}
		}
		base.add(baselineWait(s.State, s.Req), w)
		zero.add(0, w)
		return true
	})
	if len(actual) == 0 {
		return nil, fmt.Errorf("queuewait: no jobs after the cutoff %s", cutoff.Format(time.DateTime))
	}
	rep.JobsTest = len(actual)
	var sum float64
	for _, a := range actual {
		sum += a
	}
	rep.TestMeanWaitHours = sum / float64(len(actual))
	sort.Float64s(actual)
	rep.TestMedianWaitHours = median(actual)

	ms, bs := scores[0].score(), base.score()
	rep.MAEHours, rep.MedianAEHours, rep.Within2x = ms.MAEHours, ms.MedianAEHours, ms.Within2x
	rep.BaselineMAEHours, rep.BaselineMedianAEHours, rep.BaselineWithin2x = bs.MAEHours, bs.MedianAEHours, bs.Within2x
	if opt.Compare {
		for i := range scores {
			rep.Compared = append(rep.Compared, scores[i].score())
		}
		rep.Compared = append(rep.Compared, bs, recMedian.score(), fcfs.score(), zero.score())
	}
	return rep, nil
}
