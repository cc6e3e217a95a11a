// Package live holds the estimators as the running controller holds
// them: Estimator, the round loop's rounds.Estimator over the learning
// estimators (package estimate) with external ones in front, persisted by
// the loop; Waits, the queue-wait predictor over the live queue and
// slurmdbd's history; Sources, the answers to one `rota estimate`
// request; and their Prometheus metrics. Package app constructs and wires
// them; nothing here knows NATS.
package live

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/controller/estimate"
)

// Estimator joins the throughput, walltime and memory estimators behind
// the round loop's Estimator interface.
type Estimator struct {
	tp    *estimate.Throughputs
	mem   *estimate.Memory
	wall  *estimate.Walltimes
	speed map[string]float64
	ext   plugins // external estimators in front of tp and wall (plugins.go)

	// byName maps "user/name" to the latest job of that user and job name
	// that was measured: a job never measured (and without hints) takes
	// its rates, since the same user's job of the same name is most
	// likely the same training, resubmitted with an edited script.
	mu     sync.Mutex
	byName map[string]string

	// counts are the estimates given, by estimator and source
	// (rota_controller_estimates_total): how often they fell back from
	// measurement.
	counts *prometheus.CounterVec
}

// userName is the user/name part of an identity key.
func userName(key string) string {
	id, ok := estimate.ParseKey(key)
	if !ok {
		return ""
	}
	return estimate.Identity{User: id.User, Name: id.Name}.Key()
}

// NewEstimator is an Estimator knowing nothing yet: speed is the admin's
// relative speed per GPU type, margin and overheadMin size walltimes as
// the placement does.
func NewEstimator(speed map[string]float64, margin float64, overheadMin uint32) *Estimator {
	return &Estimator{tp: estimate.NewThroughputs(estimate.ThroughputConfig{Speed: speed}),
		mem:  estimate.NewMemory(estimate.MemoryConfig{}),
		wall: estimate.NewWalltimes(estimate.WalltimeConfig{Margin: margin, OverheadMin: overheadMin}), speed: speed,
		byName: map[string]string{}, counts: newEstimateCounter()}
}

// Walltime implements rounds.Estimator.
func (e *Estimator) Walltime(ctx context.Context, key string, stepsLeft, rate float64, userLimit, maxTime uint32) (uint32, string) {
	w := e.walltime(ctx, estimate.WalltimeInput{Key: key, RemainingSteps: stepsLeft, StepsPerSec: rate,
		UserLimitMin: userLimit, MaxTimeMin: maxTime})
	e.counts.WithLabelValues(estWalltime, sourceLabel(w.Source)).Inc()
	return w.Minutes, w.Basis
}

// Finished drops what the estimator refuses (a zero run time).
func (e *Estimator) Finished(_ context.Context, key string, jobID uint32, limitMin, actualSec float64) {
	_ = e.wall.Finished(key, jobID, limitMin, actualSec)
}

// Rates implements rounds.Estimator: the estimators' rates; a job never
// measured or hinted takes those of its user's latest measured job of the
// same name, else the admin's relative speeds.
func (e *Estimator) Rates(ctx context.Context, key string, types []string) ([]float64, []string) {
	est := e.throughputs(ctx, key, types)
	rates, src := make([]float64, len(types)), make([]string, len(types))
	known := false
	for k := range est {
		rates[k], src[k] = est[k].StepsPerSec, est[k].Source
		known = known || rates[k] > 0
	}
	if !known {
		e.mu.Lock()
		peer := e.byName[userName(key)]
		e.mu.Unlock()
		if peer != "" && peer != key {
			for k, pe := range e.throughputs(ctx, peer, types) {
				if pe.StepsPerSec > 0 {
					rates[k], src[k], known = pe.StepsPerSec, SourceSameName, true
				}
			}
		}
	}
	if !known {
		// Nothing measured or hinted: the admin's relative speeds stand
		// in. Their unit is not steps/s, but the policies compare a job's
		// rates only with each other (LAS normalises per job), so the
		// job is still placed by how much faster each type is; no
		// walltime is derived from them (estimate.SourceRelative).
		for k, t := range types {
			rates[k], src[k] = 1, estimate.SourceRelative
			if s, ok := e.speed[t]; ok && s > 0 {
				rates[k] = s
			}
		}
	}
	for _, s := range src {
		e.counts.WithLabelValues(estThroughput, sourceLabel(s)).Inc()
	}
	return rates, src
}

// Observe and Hint drop what the estimator refuses (a zero or absurd
// rate, an unknown key): the agents' intake has already counted it.
func (e *Estimator) Observe(_ context.Context, key, gpuType string, sps float64, at time.Time) {
	if e.tp.Observe(key, gpuType, sps, at) == nil {
		if un := userName(key); un != "" {
			e.mu.Lock()
			e.byName[un] = key
			e.mu.Unlock()
		}
	}
}

// SourceSameName marks rates taken from the latest measured job of the
// same user and job name.
const SourceSameName = "same-name"

func (e *Estimator) Hint(_ context.Context, key string, perType map[string]float64) {
	_ = e.tp.Hint(key, perType)
}

func (e *Estimator) MemoryFits(_ context.Context, key string, memBytes uint64) bool {
	return e.mem.Fits(key, memBytes)
}

func (e *Estimator) ObserveMemory(_ context.Context, key string, peak uint64) {
	e.mem.Observe(key, peak)
}

// HintRatio is the median of measured over hinted rates.
func (e *Estimator) HintRatio() (float64, bool) {
	errs := e.tp.HintErrors()
	if len(errs) == 0 {
		return 0, false
	}
	r := make([]float64, len(errs))
	for i, h := range errs {
		r[i] = h.Ratio
	}
	sort.Float64s(r)
	return r[len(r)/2], true
}

// savedEstimates is the estimator's persisted form.
type savedEstimates struct {
	Throughputs json.RawMessage   `json:"throughputs"`
	Memory      json.RawMessage   `json:"memory"`
	Walltimes   json.RawMessage   `json:"walltimes"`
	ByName      map[string]string `json:"by_name,omitempty"`
}

// Export implements rounds.Exporter.
func (e *Estimator) Export() ([]byte, error) {
	tp, err := e.tp.Export()
	if err != nil {
		return nil, err
	}
	mem, err := e.mem.Export()
	if err != nil {
		return nil, err
	}
	wall, err := e.wall.Export()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	byName := make(map[string]string, len(e.byName))
	for k, v := range e.byName {
		byName[k] = v
	}
	e.mu.Unlock()
	return json.Marshal(savedEstimates{Throughputs: tp, Memory: mem, Walltimes: wall, ByName: byName})
}

// Import implements rounds.Exporter.
func (e *Estimator) Import(b []byte) error {
	var s savedEstimates
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if err := e.tp.Import(s.Throughputs); err != nil {
		return err
	}
	if err := e.mem.Import(s.Memory); err != nil {
		return err
	}
	if s.ByName != nil {
		e.mu.Lock()
		e.byName = s.ByName
		e.mu.Unlock()
	}
	return e.wall.Import(s.Walltimes)
}
