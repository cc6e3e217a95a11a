package external

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/rota-hpc/rota/controller/estimate"
	pb "github.com/rota-hpc/rota/controller/estimate/external/estimatorpb"
)

// Bounds past which a plugin's number is nonsense, not an estimate.
const (
	// MaxStepsPerSec: a billion steps a second is no training job.
	MaxStepsPerSec = 1e9
	// MaxWalltimeMin and MaxWait: a year.
	MaxWalltimeMin = 366 * 24 * 60
	MaxWaitSec     = MaxWalltimeMin * 60
	// maxSourceLen and maxBasisLen bound the words kept of an answer.
	maxSourceLen = 64
	maxBasisLen  = 512
)

// SourcePrefix marks a figure an external estimator gave.
const SourcePrefix = "external:"

// Throughput asks an external throughput estimator, and the built-in
// for the types it does not know and whenever it fails.
type Throughput struct {
	p       *proc
	builtin estimate.Throughput
}

// NewThroughput starts cfg's executable as the throughput estimator in
// front of builtin. An error is a command that cannot be run; a plugin
// that does not start is logged and retried while builtin answers.
func NewThroughput(cfg Config, builtin estimate.Throughput) (*Throughput, error) {
	p, err := newProc(KindThroughput, cfg)
	if err != nil {
		return nil, err
	}
	return &Throughput{p: p, builtin: builtin}, nil
}

// Throughput implements estimate.Throughput. It returns within the
// configured timeout plus the built-in's time.
func (t *Throughput) Throughput(ctx context.Context, q estimate.ThroughputQuery) (estimate.ThroughputAnswer, error) {
	a, ok := t.ask(ctx, q)
	if !ok {
		return t.builtin.Throughput(ctx, q)
	}
	var fill []int
	for i, r := range a.Rates {
		if r.Source == estimate.SourceUnknown {
			fill = append(fill, i)
		}
	}
	if len(fill) > 0 {
		// The plugin answers what it knows; the built-in the rest.
		b, err := t.builtin.Throughput(ctx, q)
		if err != nil {
			return a, nil
		}
		for _, i := range fill {
			a.Rates[i] = b.Rates[i]
		}
	}
	return a, nil
}

func (t *Throughput) ask(ctx context.Context, q estimate.ThroughputQuery) (estimate.ThroughputAnswer, bool) {
	stub, _ := t.p.acquire()
	c, ok := stub.(pb.ThroughputClient)
	if !ok {
		return estimate.ThroughputAnswer{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, t.p.cfg.Timeout)
	defer cancel()
	r, err := c.Estimate(ctx, throughputRequest(q))
	if err != nil {
		t.p.done(stub, t.p.classify(ctx, err), err)
		return estimate.ThroughputAnswer{}, false
	}
	a, err := checkThroughput(q, r, filepath.Base(t.p.args[0]))
	if err != nil {
		t.p.done(stub, FailNonsense, err)
		return estimate.ThroughputAnswer{}, false
	}
	t.p.done(stub, "", nil)
	return a, true
}

// checkThroughput turns a reply into an answer in the query's order,
// or says why it is nonsense: a type missing, repeated or not asked, a
// rate that is not a positive number below MaxStepsPerSec.
func checkThroughput(q estimate.ThroughputQuery, r *pb.ThroughputReply, name string) (estimate.ThroughputAnswer, error) {
	at := make(map[string]int, len(q.Types))
	for i, ty := range q.Types {
		at[ty] = i
	}
	a := estimate.ThroughputAnswer{Rates: make([]estimate.Rate, len(q.Types))}
	seen := make([]bool, len(q.Types))
	for _, x := range r.GetRates() {
		i, ok := at[x.GetGpuType()]
		switch {
		case !ok:
			return a, fmt.Errorf("rate for GPU type %q, which was not asked", x.GetGpuType())
		case seen[i]:
			return a, fmt.Errorf("two rates for GPU type %q", x.GetGpuType())
		}
		seen[i] = true
		src, err := checkSource(x.GetSource())
		if err != nil {
			return a, fmt.Errorf("GPU type %q: %w", x.GetGpuType(), err)
		}
		v := x.GetStepsPerSec()
		if src == estimate.SourceUnknown {
			a.Rates[i] = estimate.Rate{GPUType: q.Types[i], Source: src}
			continue
		}
		if !(v > 0 && v <= MaxStepsPerSec) { // also NaN
			return a, fmt.Errorf("GPU type %q: %v steps/s is not a number in (0, %g]", x.GetGpuType(), v, float64(MaxStepsPerSec))
		}
		a.Rates[i] = estimate.Rate{GPUType: q.Types[i], StepsPerSec: v, Source: SourcePrefix + src,
			Basis: basis(name, x.GetBasis())}
	}
	for i, ok := range seen {
		if !ok {
			return a, fmt.Errorf("no rate for GPU type %q", q.Types[i])
		}
	}
	return a, nil
}

// checkSource requires a short printable word.
func checkSource(s string) (string, error) {
	if s == "" || len(s) > maxSourceLen {
		return "", fmt.Errorf("source %q: want 1 to %d characters", s, maxSourceLen)
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return "", fmt.Errorf("source %q: want printable ASCII without spaces", s)
		}
	}
	return s, nil
}

// basis is the plugin's words, bounded, with its name in front.
func basis(name, b string) string {
	if len(b) > maxBasisLen {
		b = b[:maxBasisLen] + "..."
	}
	return name + ": " + b
}

// Stats returns the plugin's counters.
func (t *Throughput) Stats() Stats { return t.p.Stats() }

// Close stops the plugin.
func (t *Throughput) Close() { t.p.Close() }
