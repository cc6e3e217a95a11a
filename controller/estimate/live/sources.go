package live

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Sources answers forecast's questions for one `rota estimate` request
// from the controller's estimators and the queue-wait model.
type Sources struct {
	est *Estimator
	// hints are steps/s per type: the user's, over the throughput
	// table's for --model; from says where each came from.
	hints map[string]float64
	from  map[string]string
	name  string
	key   string
	user  string
	waits *Waits
	ctx   context.Context
	kb    *wire.Site
}

// Parts are what Sources answer from.
type Parts struct {
	Estimator *Estimator // nil: no throughput estimator
	Waits     *Waits
	// Table is the throughput table --model reads; TableErr says why
	// there is none.
	Table    *workload.Table
	TableErr string
	Site     *wire.Site // the knowledge base
}

// NewSources prepares the answers to one request; notes are what the user
// should know of them. An unknown --model is an error: the user named
// something the controller does not know. A request without its GPU
// memory takes the need measured on earlier runs of the job.
func NewSources(ctx context.Context, req *wire.EstimateRequest, p Parts) (*Sources, []string, error) {
	s := &Sources{hints: map[string]float64{}, from: map[string]string{}, name: req.Name, user: req.User,
		est: p.Estimator, waits: p.Waits, ctx: ctx, kb: p.Site}
	var notes []string
	if req.Model != "" {
		t := p.Table
		if t == nil {
			return nil, nil, fmt.Errorf("--model %q: %s; give --throughput TYPE:STEPS_PER_S instead", req.Model, p.TableErr)
		}
		name := ""
		for _, n := range t.JobTypes {
			if strings.EqualFold(n, req.Model) {
				name = n
			}
		}
		if name == "" {
			return nil, nil, fmt.Errorf("--model %q is not in the throughput table; it knows: %s", req.Model, strings.Join(t.JobTypes, "; "))
		}
		gpus := gpusAsked(req)
		rates := t.Rates(name, gpus)
		if rates == nil {
			notes = append(notes, fmt.Sprintf("the throughput table has no %s on %d GPUs; its rates are not used", name, gpus))
		}
		for i, r := range rates {
			if r > 0 {
				ty := t.GPUTypes[i]
				s.hints[ty], s.from[ty] = r, fmt.Sprintf("throughput table: %s on %d GPU(s), %.4g steps/s on %s", name, gpus, r, ty)
			}
		}
		if s.name == "" {
			s.name = name
		}
	}
	for ty, v := range req.Throughput {
		if v > 0 {
			s.hints[ty], s.from[ty] = v, fmt.Sprintf("your hint, %.4g steps/s on %s", v, ty)
		}
	}
	if req.User != "" && req.Name != "" {
		s.key = estimate.Identity{User: req.User, Name: req.Name, ScriptHash: req.ScriptHash}.Key()
	}
	if req.GPUMemBytes == 0 && s.key != "" && s.est != nil {
		if need, ok := s.est.mem.Need(s.key); ok && need > 0 {
			req.GPUMemBytes = need
			notes = append(notes, fmt.Sprintf("GPU memory need %.1f GiB per GPU, measured on earlier runs of this job", float64(need)/(1<<30)))
		}
	}
	return s, notes, nil
}

// gpusAsked is the job's GPU count when it does not depend on the type,
// counted as the rest of Rota counts a request (gpureq.NeedOf).
func gpusAsked(r *wire.EstimateRequest) int {
	a := wire.GPUAsk{PerJob: r.GPUsPerJob, PerNode: r.GPUsPerNode, PerTask: r.GPUsPerTask, Nodes: r.Nodes, Tasks: r.Tasks}
	if a.Tasks == 0 {
		a.Tasks = a.Nodes // Slurm's default: one task per node
	}
	return max(gpureq.NeedOf(a).Total, 1)
}

// Rates implements forecast.Sources.
func (s *Sources) Rates(types []string) []forecast.Rate {
	out := make([]forecast.Rate, len(types))
	if s.est == nil {
		for i := range out {
			out[i].Basis = "the controller has no throughput estimator"
		}
		return out
	}
	var est []estimate.Estimate
	what := ""
	switch {
	case len(s.hints) > 0:
		est = s.est.tp.EstimateHinted(s.name, s.hints, types)
	case s.key != "":
		est = s.est.tp.Estimate(s.key, types)
		what = "earlier runs of this job: "
		if !anyKnown(est) {
			s.est.mu.Lock()
			peer := s.est.byName[userName(s.key)]
			s.est.mu.Unlock()
			if peer != "" && peer != s.key {
				est = s.est.tp.Estimate(peer, types)
				what = "the latest measured job of the same user and name: "
			}
		}
	default:
		for i := range out {
			out[i].Basis = "no steps/s known for this job: give --throughput TYPE:STEPS_PER_S (or #SBATCH --rota-throughput) or --model NAME"
		}
		return out
	}
	for i, e := range est {
		ty := types[i]
		switch {
		case e.Source == estimate.SourceUnknown || !(e.StepsPerSec > 0):
			out[i].Basis = "nothing measured or hinted for this job on any type"
			if s.key != "" && len(s.hints) == 0 {
				out[i].Basis = "no earlier run of this job was measured; give --throughput TYPE:STEPS_PER_S or --model NAME"
			}
		case e.Source == estimate.SourceTable && !s.speedsKnown(ty):
			// A type the speed table does not name counts as 1 there:
			// a number nobody measured or configured.
			out[i].Basis = fmt.Sprintf("no steps/s for %s: nothing measured there and no speed.%s in the controller's config to scale from", ty, ty)
		case e.Source == estimate.SourceHint && s.from[ty] != "" && e.StepsPerSec == s.hints[ty]:
			out[i] = forecast.Rate{StepsPerSec: e.StepsPerSec, Basis: s.from[ty]}
		default:
			out[i] = forecast.Rate{StepsPerSec: e.StepsPerSec, Basis: what + e.Source + ": " + e.Basis}
		}
	}
	return out
}

// speedsKnown says whether the speed table names ty and every type the
// hints come from, so that a table-scaled number rests on the config.
func (s *Sources) speedsKnown(ty string) bool {
	if _, ok := s.est.tp.SpeedOf(ty); !ok {
		return false
	}
	for h := range s.hints {
		if _, ok := s.est.tp.SpeedOf(h); !ok {
			return false
		}
	}
	return true
}

func anyKnown(es []estimate.Estimate) bool {
	for _, e := range es {
		if e.StepsPerSec > 0 {
			return true
		}
	}
	return false
}

// Wait implements forecast.Sources.
func (s *Sources) Wait(q forecast.WaitQuery) forecast.Wait {
	return s.waits.Predict(s.ctx, s.kb, q, s.user, time.Now())
}
