package queuewait

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"time"
)

// Model format, written into every saved model and checked by Load.
const (
	ModelFormat  = "rota-queuewait"
	ModelVersion = 1
	// The trees predict log(1 + wait in minutes): waits span seconds to
	// days, and on a log scale an error of 2x costs the same at any wait.
	targetName = "log1p_minutes"
)

// Model predicts queue waits. It is plain data: the controller loads it
// from the JSON file `rota queuewait train` writes.
type Model struct {
	Format   string   `json:"format"`
	Version  int      `json:"version"`
	Target   string   `json:"target"`
	Loss     string   `json:"loss"`
	Features []string `json:"features"`
	// Capacity is the partition's node count the model assumes when the
	// state does not say (QueueState.TotalNodes): the most nodes ever
	// busy at once in the training trace.
	Capacity    int `json:"capacity_nodes"`
	GPUsPerNode int `json:"gpus_per_node,omitempty"`
	// DefaultLimitMin stands in for a job's time limit when unknown: the
	// median limit in training.
	DefaultLimitMin float64   `json:"default_limit_min"`
	Base            float64   `json:"base"`
	Trees           []tree    `json:"trees"`
	Trained         TrainInfo `json:"trained"`
}

// TrainInfo records what a model was trained on.
type TrainInfo struct {
	Jobs int `json:"jobs"`
	// Submit times of the first and last training job.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Options used, so a model can be retrained alike.
	Trees        int     `json:"trees"`
	Depth        int     `json:"depth"`
	LearningRate float64 `json:"learning_rate"`
	MinLeaf      int     `json:"min_leaf"`
	Subsample    float64 `json:"subsample"`
	Seed         int64   `json:"seed"`
}

// TrainOptions are the training knobs and the training window.
type TrainOptions struct {
	Loss         string // "lad" (default) or "l2"
	Trees        int
	Depth        int
	LearningRate float64
	MinLeaf      int
	Subsample    float64
	Seed         int64
	// Jobs submitted in [From, To) are training rows (zero: unbounded).
	From, To time.Time
	// LabelsBy drops rows whose job had not started by then: at that
	// moment their wait was not known yet (zero: no limit).
	LabelsBy time.Time
	// Capacity in nodes; 0 learns it from the trace before To.
	Capacity    int
	GPUsPerNode int
}

// DefaultTrainOptions are the settings the figures in docs/queuewait.md
// were taken with: a few seconds on one core for the Lonestar6 trace.
func DefaultTrainOptions() TrainOptions {
	return TrainOptions{Loss: "lad", Trees: 300, Depth: 5, LearningRate: 0.05, MinLeaf: 20, Subsample: 0.8, Seed: 1}
}

func (o TrainOptions) check() error {
	switch {
	case o.Loss != "lad" && o.Loss != "l2":
		return fmt.Errorf("loss %q: want lad or l2", o.Loss)
	case o.Trees < 0 || o.Depth < 1 || o.Depth > 16:
		return fmt.Errorf("trees must be >= 0 and depth in 1..16")
	case !(o.LearningRate > 0 && o.LearningRate <= 1):
		return fmt.Errorf("learning rate must be in (0, 1]")
	case o.MinLeaf < 1:
		return fmt.Errorf("min leaf must be >= 1")
	case !(o.Subsample > 0 && o.Subsample <= 1):
		return fmt.Errorf("subsample must be in (0, 1]")
	case o.Capacity < 0 || o.GPUsPerNode < 0:
		return fmt.Errorf("capacity and GPUs per node must be >= 0")
	}
	return nil
}

func (o TrainOptions) inWindow(t time.Time) bool {
	return (o.From.IsZero() || !t.Before(o.From)) && (o.To.IsZero() || t.Before(o.To))
}

// maxBusyNodes is the most nodes running at once among jobs that
// started before `before` (zero: all).
func maxBusyNodes(jobs []TraceJob, before time.Time) int {
	type ev struct {
		t time.Time
		d int
	}
	var evs []ev
	for _, j := range jobs {
		if !before.IsZero() && !j.Start.Before(before) {
			continue
		}
		evs = append(evs, ev{j.Start, j.Nodes}, ev{j.End, -j.Nodes})
	}
	// Ends before starts at the same instant: a node handed over is not
	// busy twice.
	sort.Slice(evs, func(a, b int) bool {
		if !evs[a].t.Equal(evs[b].t) {
			return evs[a].t.Before(evs[b].t)
		}
		return evs[a].d < evs[b].d
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.d
		best = max(best, cur)
	}
	return best
}

// TrainTrace replays a trace and trains a model on the jobs in the
// options' window.
func TrainTrace(jobs []TraceJob, opt TrainOptions) (*Model, error) {
	if err := opt.check(); err != nil {
		return nil, fmt.Errorf("queuewait: %w", err)
	}
	m := &Model{Format: ModelFormat, Version: ModelVersion, Target: targetName, Loss: opt.Loss,
		Features: slices.Clone(featureNames), Capacity: opt.Capacity, GPUsPerNode: opt.GPUsPerNode}
	if m.Capacity == 0 {
		m.Capacity = maxBusyNodes(jobs, opt.To)
	}
	var limits []float64
	for _, j := range jobs {
		if opt.To.IsZero() || j.Submit.Before(opt.To) {
			limits = append(limits, j.TimeLimit.Minutes())
		}
	}
	if m.Capacity <= 0 || len(limits) == 0 {
		return nil, fmt.Errorf("queuewait: no jobs before %s to train on", opt.To.Format(time.DateTime))
	}
	m.DefaultLimitMin = median(limits)

	env := m.env()
	var X [][]float64
	var y []float64
	var scratch featureScratch
	info := TrainInfo{Trees: opt.Trees, Depth: opt.Depth, LearningRate: opt.LearningRate,
		MinLeaf: opt.MinLeaf, Subsample: opt.Subsample, Seed: opt.Seed}
	Replay(jobs, func(s Snapshot) bool {
		if !opt.To.IsZero() && !s.Job.Submit.Before(opt.To) {
			return false
		}
		if !opt.inWindow(s.Job.Submit) || (!opt.LabelsBy.IsZero() && s.Job.Start.After(opt.LabelsBy)) {
			return true
		}
		x := make([]float64, len(featureNames))
		env.features(s.State, s.Req, &scratch, x)
		X = append(X, x)
		y = append(y, toTarget(s.Job.Wait()))
		if info.Jobs == 0 {
			info.From = s.Job.Submit
		}
		info.To = s.Job.Submit
		info.Jobs++
		return true
	})
	if len(X) < 2*opt.MinLeaf {
		return nil, fmt.Errorf("queuewait: %d training jobs in the window, need at least %d", len(X), 2*opt.MinLeaf)
	}
	base, trees, err := boost(X, y, boostOptions{Loss: opt.Loss, Trees: opt.Trees, Depth: opt.Depth,
		LearningRate: opt.LearningRate, MinLeaf: opt.MinLeaf, Subsample: opt.Subsample, Seed: opt.Seed})
	if err != nil {
		return nil, fmt.Errorf("queuewait: %w", err)
	}
	m.Base, m.Trees, m.Trained = base, trees, info
	return m, nil
}

func toTarget(w time.Duration) float64 { return math.Log1p(max(w.Minutes(), 0)) }

func fromTarget(v float64) time.Duration {
	min := math.Expm1(v)
	if !(min > 0) { // also NaN
		return 0
	}
	// Cap at a year: exp of a wild sum must not overflow Duration.
	return time.Duration(math.Min(min, 366*24*60) * float64(time.Minute))
}

func (m *Model) env() featureEnv {
	return featureEnv{capacity: m.Capacity, gpusPerNode: m.GPUsPerNode,
		defaultLimit: time.Duration(m.DefaultLimitMin * float64(time.Minute))}
}

func (m *Model) predictVector(x []float64) time.Duration {
	v := m.Base
	for i := range m.Trees {
		v += m.Trees[i].predict(x)
	}
	return fromTarget(v)
}

// Predict returns the expected wait of req if submitted into st (the
// median the model estimates). ok is false when the model is missing or
// the input cannot be read (no time, negative sizes or limits).
func (m *Model) Predict(st QueueState, req Request) (wait time.Duration, ok bool) {
	if m == nil || len(m.Features) != len(featureNames) || st.Now.IsZero() ||
		req.Nodes < 0 || req.GPUs < 0 || req.TimeLimit < 0 || st.TotalNodes < 0 {
		return 0, false
	}
	var scratch featureScratch
	x := make([]float64, len(featureNames))
	m.env().features(st, req, &scratch, x)
	return m.predictVector(x), true
}

// Save writes the model as JSON.
func (m *Model) Save(w io.Writer) error {
	enc := json.NewEncoder(w)
	return enc.Encode(m)
}

// SaveFile writes the model to path (through a temporary file, so a
// controller never loads half a model).
func (m *Model) SaveFile(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := m.Save(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// Load reads a model written by Save and checks that this code can use
// it: format, version, feature list, and trees that can be walked.
func Load(r io.Reader) (*Model, error) {
	var m Model
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("queuewait: reading model: %w", err)
	}
	switch {
	case m.Format != ModelFormat:
		return nil, fmt.Errorf("queuewait: not a queue-wait model (format %q, want %q)", m.Format, ModelFormat)
	case m.Version != ModelVersion:
		return nil, fmt.Errorf("queuewait: model version %d, this build reads %d: retrain with `rota queuewait train`", m.Version, ModelVersion)
	case m.Target != targetName:
		return nil, fmt.Errorf("queuewait: model target %q, want %q", m.Target, targetName)
	case !slices.Equal(m.Features, featureNames):
		return nil, fmt.Errorf("queuewait: model features %v differ from this build's %v: retrain with `rota queuewait train`", m.Features, featureNames)
	case m.Capacity <= 0 || m.GPUsPerNode < 0 || !(m.DefaultLimitMin > 0):
		return nil, fmt.Errorf("queuewait: model needs capacity_nodes > 0 and default_limit_min > 0")
	case math.IsNaN(m.Base) || math.IsInf(m.Base, 0):
		return nil, fmt.Errorf("queuewait: model base %v", m.Base)
	}
	for i := range m.Trees {
		if err := m.Trees[i].check(len(featureNames)); err != nil {
			return nil, fmt.Errorf("queuewait: model tree %d: %w", i, err)
		}
	}
	return &m, nil
}

// LoadFile reads a model from a file.
func LoadFile(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f)
}
