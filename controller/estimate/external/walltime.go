package external

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/rota-hpc/rota/controller/estimate"
	pb "github.com/rota-hpc/rota/controller/estimate/external/estimatorpb"
)

// Walltime asks an external walltime estimator, and the built-in when
// it does not know or fails.
type Walltime struct {
	p       *proc
	builtin estimate.Walltime
}

// NewWalltime starts cfg's executable as the walltime estimator in
// front of builtin (see NewThroughput).
func NewWalltime(cfg Config, builtin estimate.Walltime) (*Walltime, error) {
	p, err := newProc(KindWalltime, cfg)
	if err != nil {
		return nil, err
	}
	return &Walltime{p: p, builtin: builtin}, nil
}

// Walltime implements estimate.Walltime: the plugin's time, rounded
// and capped like the built-in's (estimate.CapWalltime).
func (w *Walltime) Walltime(ctx context.Context, q estimate.WalltimeQuery) (estimate.WalltimeEstimate, error) {
	if est, ok := w.ask(ctx, q); ok {
		return est, nil
	}
	return w.builtin.Walltime(ctx, q)
}

func (w *Walltime) ask(ctx context.Context, q estimate.WalltimeQuery) (estimate.WalltimeEstimate, bool) {
	stub, _ := w.p.acquire()
	c, ok := stub.(pb.WalltimeClient)
	if !ok {
		return estimate.WalltimeEstimate{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, w.p.cfg.Timeout)
	defer cancel()
	r, err := c.Estimate(ctx, walltimeRequest(q))
	if err != nil {
		w.p.done(stub, w.p.classify(ctx, err), err)
		return estimate.WalltimeEstimate{}, false
	}
	est, known, err := checkWalltime(q, r, filepath.Base(w.p.args[0]))
	if err != nil {
		w.p.done(stub, FailNonsense, err)
		return estimate.WalltimeEstimate{}, false
	}
	w.p.done(stub, "", nil)
	return est, known
}

// checkWalltime turns a reply into a capped estimate; known is false
// for "unknown". Nonsense: not a number, negative, 0 with a source, or
// beyond MaxWalltimeMin.
func checkWalltime(q estimate.WalltimeQuery, r *pb.WalltimeReply, name string) (estimate.WalltimeEstimate, bool, error) {
	src, err := checkSource(r.GetSource())
	if err != nil {
		return estimate.WalltimeEstimate{}, false, err
	}
	if src == estimate.SourceUnknown {
		return estimate.WalltimeEstimate{}, false, nil
	}
	m := r.GetMinutes()
	if !(m > 0 && m <= MaxWalltimeMin) {
		return estimate.WalltimeEstimate{}, false, fmt.Errorf("%v minutes is not a number in (0, %d]", m, MaxWalltimeMin)
	}
	est := estimate.WalltimeEstimate{UncappedMin: m, Source: SourcePrefix + src, Basis: basis(name, r.GetBasis())}
	return estimate.CapWalltime(est, q.WalltimeInput), true, nil
}

// Stats returns the plugin's counters.
func (w *Walltime) Stats() Stats { return w.p.Stats() }

// Close stops the plugin.
func (w *Walltime) Close() { w.p.Close() }
