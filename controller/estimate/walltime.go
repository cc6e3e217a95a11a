package estimate

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"sync"
)

// Where a WalltimeEstimate comes from.
const (
	// WalltimeSteps: remaining steps over steps/s on the assigned type.
	WalltimeSteps = "steps"
	// WalltimeHistory: past run times of the same job identity.
	WalltimeHistory = "history"
	// WalltimeUnknown: no estimate; the caller keeps the user's limit.
	WalltimeUnknown = "unknown"
)

// What capped a walltime estimate.
const (
	CappedByUser    = "user limit"
	CappedByMaxTime = "MaxTime"
)

// WalltimeConfig tunes Walltimes. Zero values take the defaults.
type WalltimeConfig struct {
	// Margin multiplies an estimated run time (placement.Config's
	// WalltimeMargin); below 1 is taken as 1. Default 1.5.
	Margin float64
	// OverheadMin is added to an estimate from steps: start-up, data
	// loading, checkpoint writing (placement.Config's
	// WalltimeOverheadMin). Past run times include it already. Default 5.
	OverheadMin uint32
	// HistoryQuantile of the same job's past run times is what the
	// margin multiplies when steps are unknown. Default 0.9.
	HistoryQuantile float64
	// MinHistory: runs of the same job needed before history is used.
	// Default 1.
	MinHistory int
	// MaxHistory: runs kept per job (the latest). Default 20.
	MaxHistory int
	// MaxErrors: finished jobs kept for Errors (the latest). Default 1000.
	MaxErrors int
	// MaxKeys bounds the jobs with history; beyond it the least recently
	// finished tenth is forgotten. Default 100,000.
	MaxKeys int
}

func (c WalltimeConfig) withDefaults() WalltimeConfig {
	if !(c.Margin >= 1) {
		c.Margin = 1.5
	}
	if c.OverheadMin == 0 {
		c.OverheadMin = 5
	}
	if !(c.HistoryQuantile > 0 && c.HistoryQuantile <= 1) {
		c.HistoryQuantile = 0.9
	}
	if c.MinHistory <= 0 {
		c.MinHistory = 1
	}
	if c.MaxHistory <= 0 {
		c.MaxHistory = 20
	}
	if c.MaxErrors <= 0 {
		c.MaxErrors = 1000
	}
	if c.MaxKeys <= 0 {
		c.MaxKeys = 100_000
	}
	return c
}

// WalltimeInput is what a walltime estimate starts from.
type WalltimeInput struct {
	Key            string  // the job's Identity.Key, for history
	RemainingSteps float64 // 0 = unknown
	StepsPerSec    float64 // on the assigned GPU type; 0 = unknown
	UserLimitMin   uint32  // the user's --time; 0 = none
	MaxTimeMin     uint32  // the partition's MaxTime; 0 = none
}

// WalltimeEstimate is a time limit to give the job.
type WalltimeEstimate struct {
	// Minutes is the limit, at least 1; 0 when Source is WalltimeUnknown
	// (keep the user's limit).
	Minutes uint32
	// UncappedMin is the estimate before the caps (margin included).
	UncappedMin float64
	Source      string
	Basis       string // words for `rota explain`
	CappedBy    string // "", CappedByUser or CappedByMaxTime
}

// WalltimeError is one finished job's estimate against its run time.
type WalltimeError struct {
	Key          string  `json:"key"`
	JobID        uint32  `json:"job_id"`
	EstimatedMin float64 `json:"estimated_min"`
	ActualMin    float64 `json:"actual_min"`
	// Ratio is EstimatedMin/ActualMin: below 1 the job outran its
	// estimate (with the estimate as its limit, it was killed).
	Ratio float64 `json:"ratio"`
}

// WalltimeErrors summarises the latest finished jobs that had an estimate.
type WalltimeErrors struct {
	Count int
	// MedianRatio of estimated to actual run time.
	MedianRatio float64
	// Under is the fraction of jobs whose estimate was below their run
	// time.
	Under float64
	// Jobs are the latest, oldest first (at most MaxErrors).
	Jobs []WalltimeError
}

type history struct {
	Secs  []float64 `json:"secs"` // latest last
	Touch uint64    `json:"touch"`
}

// Walltimes estimates time limits and keeps how good its estimates were.
// It is safe for concurrent use.
type Walltimes struct {
	cfg WalltimeConfig

	mu     sync.Mutex
	hist   map[string]*history
	clock  uint64
	errs   []WalltimeError // ring of the latest MaxErrors, oldest at head
	head   int
	totalN uint64
}

// NewWalltimes returns an estimator with no history.
func NewWalltimes(cfg WalltimeConfig) *Walltimes {
	return &Walltimes{cfg: cfg.withDefaults(), hist: map[string]*history{}}
}

// Estimate returns the time limit for a job: remaining steps over
// steps/s, times the margin, plus the overhead; without both numbers, a
// high quantile of the job's past run times times the margin; capped by
// the user's limit and the partition's MaxTime.
func (w *Walltimes) Estimate(in WalltimeInput) WalltimeEstimate {
	var est WalltimeEstimate
	switch {
	case validRate(in.RemainingSteps) && validRate(in.StepsPerSec):
		run := in.RemainingSteps / in.StepsPerSec / 60
		est.UncappedMin = run*w.cfg.Margin + float64(w.cfg.OverheadMin)
		est.Source = WalltimeSteps
		est.Basis = fmt.Sprintf("%.0f steps / %.4g steps/s = %.1f min x %.2g + %d min overhead",
			in.RemainingSteps, in.StepsPerSec, run, w.cfg.Margin, w.cfg.OverheadMin)
	default:
		w.mu.Lock()
		var secs []float64
		if h := w.hist[in.Key]; h != nil && in.Key != "" {
			secs = append(secs, h.Secs...)
		}
		w.mu.Unlock()
		if len(secs) == 0 || len(secs) < w.cfg.MinHistory {
			est.Source = WalltimeUnknown
			est.Basis = "steps or steps/s unknown and no past runs of this job"
			if len(secs) > 0 {
				est.Basis = fmt.Sprintf("steps or steps/s unknown and %d past runs of this job (need %d)", len(secs), w.cfg.MinHistory)
			}
			return est
		}
		q := quantile(secs, w.cfg.HistoryQuantile) / 60
		est.UncappedMin = q * w.cfg.Margin
		est.Source = WalltimeHistory
		est.Basis = fmt.Sprintf("steps unknown: p%.0f of %d past runs = %.1f min x %.2g",
			w.cfg.HistoryQuantile*100, len(secs), q, w.cfg.Margin)
	}
	return CapWalltime(est, in)
}

// CapWalltime turns est.UncappedMin into est.Minutes: rounded up to whole
// minutes (at least 1), capped by in's MaxTime and user limit (CappedBy
// and Basis say which), and kept below Slurm's INFINITE. Every walltime
// estimator's answer, built in or external, goes through it.
func CapWalltime(est WalltimeEstimate, in WalltimeInput) WalltimeEstimate {
	m := math.Ceil(est.UncappedMin)
	if m < 1 {
		m = 1
	}
	if in.MaxTimeMin > 0 && m > float64(in.MaxTimeMin) {
		m, est.CappedBy = float64(in.MaxTimeMin), CappedByMaxTime
	}
	if in.UserLimitMin > 0 && m > float64(in.UserLimitMin) {
		m, est.CappedBy = float64(in.UserLimitMin), CappedByUser
	}
	// Slurm's limit is a uint32 of minutes with its top value meaning
	// INFINITE; an absurd estimate stops one below.
	est.Minutes = uint32(math.Min(m, math.MaxUint32-1))
	if est.CappedBy != "" {
		est.Basis += fmt.Sprintf(", capped by the %s (%d min)", est.CappedBy, est.Minutes)
	}
	return est
}

// Finished records a finished run of key: its run time joins the key's
// history, and when estimatedMin > 0 (the limit Rota estimated for it;
// 0 = none) the estimate's error is kept.
func (w *Walltimes) Finished(key string, jobID uint32, estimatedMin, actualSec float64) error {
	if key == "" {
		return fmt.Errorf("finished job %d without a key", jobID)
	}
	if !validRate(actualSec) {
		return fmt.Errorf("finished job %d (%s): run time %v s is not a positive number", jobID, key, actualSec)
	}
	if estimatedMin < 0 || math.IsNaN(estimatedMin) || math.IsInf(estimatedMin, 0) {
		return fmt.Errorf("finished job %d (%s): estimate %v min is not a number >= 0", jobID, key, estimatedMin)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clock++
	h := w.hist[key]
	if h == nil {
		if len(w.hist) >= w.cfg.MaxKeys {
			w.forgetOldest()
		}
		h = &history{}
		w.hist[key] = h
	}
	h.Touch = w.clock
	h.Secs = append(h.Secs, actualSec)
	if n := len(h.Secs); n > w.cfg.MaxHistory {
		h.Secs = append(h.Secs[:0], h.Secs[n-w.cfg.MaxHistory:]...)
	}
	if estimatedMin > 0 {
		e := WalltimeError{Key: key, JobID: jobID, EstimatedMin: estimatedMin, ActualMin: actualSec / 60}
		e.Ratio = e.EstimatedMin / e.ActualMin
		w.addError(e)
	}
	return nil
}

func (w *Walltimes) addError(e WalltimeError) {
	w.totalN++
	if len(w.errs) < w.cfg.MaxErrors {
		w.errs = append(w.errs, e)
		return
	}
	w.errs[w.head] = e
	w.head = (w.head + 1) % len(w.errs)
}

func (w *Walltimes) forgetOldest() {
	type kt struct {
		k string
		t uint64
	}
	all := make([]kt, 0, len(w.hist))
	for k, h := range w.hist {
		all = append(all, kt{k, h.Touch})
	}
	sort.Slice(all, func(a, b int) bool { return all[a].t < all[b].t })
	for _, e := range all[:max(len(all)/10, 1)] {
		delete(w.hist, e.k)
	}
}

// Errors summarises the estimates of the latest finished jobs.
func (w *Walltimes) Errors() WalltimeErrors {
	w.mu.Lock()
	jobs := make([]WalltimeError, 0, len(w.errs))
	jobs = append(jobs, w.errs[w.head:]...)
	jobs = append(jobs, w.errs[:w.head]...)
	w.mu.Unlock()
	out := WalltimeErrors{Count: len(jobs), Jobs: jobs}
	if len(jobs) == 0 {
		return out
	}
	ratios := make([]float64, len(jobs))
	var under int
	for i, e := range jobs {
		ratios[i] = e.Ratio
		if e.Ratio < 1 {
			under++
		}
	}
	out.MedianRatio = median(ratios)
	out.Under = float64(under) / float64(len(jobs))
	return out
}

type walltimeState struct {
	V       int                 `json:"v"`
	History map[string]*history `json:"history"`
	Errors  []WalltimeError     `json:"errors"` // oldest first
	Total   uint64              `json:"total"`
}

// Export returns the history and the error list as versioned JSON.
func (w *Walltimes) Export() ([]byte, error) {
	w.mu.Lock()
	st := walltimeState{V: stateVersion, History: make(map[string]*history, len(w.hist)), Total: w.totalN}
	for k, h := range w.hist {
		st.History[k] = &history{Secs: append([]float64(nil), h.Secs...), Touch: h.Touch}
	}
	st.Errors = append(st.Errors, w.errs[w.head:]...)
	st.Errors = append(st.Errors, w.errs[:w.head]...)
	w.mu.Unlock()
	return json.Marshal(st) // encoding/json sorts map keys
}

// Import replaces the state with one Export wrote (trimmed to this
// Walltimes' bounds). On error the state is unchanged.
func (w *Walltimes) Import(data []byte) error {
	var st walltimeState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("walltime state: %w", err)
	}
	if st.V != stateVersion {
		return fmt.Errorf("walltime state: version %d, want %d", st.V, stateVersion)
	}
	hist := make(map[string]*history, len(st.History))
	var clock uint64
	for k, h := range st.History {
		if k == "" || h == nil {
			return fmt.Errorf("walltime state: empty history entry")
		}
		for _, s := range h.Secs {
			if !validRate(s) {
				return fmt.Errorf("walltime state: %s: run time %v", k, s)
			}
		}
		secs := h.Secs
		if n := len(secs); n > w.cfg.MaxHistory {
			secs = secs[n-w.cfg.MaxHistory:]
		}
		hist[k] = &history{Secs: append([]float64(nil), secs...), Touch: h.Touch}
		clock = max(clock, h.Touch)
	}
	for _, e := range st.Errors {
		if !validRate(e.EstimatedMin) || !validRate(e.ActualMin) || !validRate(e.Ratio) {
			return fmt.Errorf("walltime state: job %d: bad error entry", e.JobID)
		}
	}
	errs := st.Errors
	if n := len(errs); n > w.cfg.MaxErrors {
		errs = errs[n-w.cfg.MaxErrors:]
	}
	w.mu.Lock()
	w.hist, w.clock = hist, max(w.clock, clock)
	w.errs, w.head, w.totalN = append([]WalltimeError(nil), errs...), 0, max(st.Total, uint64(len(errs)))
	w.mu.Unlock()
	return nil
}
