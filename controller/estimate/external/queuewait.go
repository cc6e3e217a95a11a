package external

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
	pb "github.com/rota-hpc/rota/controller/estimate/external/estimatorpb"
)

// QueueWait asks an external queue-wait estimator, and the built-in
// (the queue-wait model) when it does not know or fails.
type QueueWait struct {
	p       *proc
	builtin estimate.QueueWait
}

// NewQueueWait starts cfg's executable as the queue-wait estimator in
// front of builtin (see NewThroughput).
func NewQueueWait(cfg Config, builtin estimate.QueueWait) (*QueueWait, error) {
	p, err := newProc(KindQueueWait, cfg)
	if err != nil {
		return nil, err
	}
	return &QueueWait{p: p, builtin: builtin}, nil
}

// QueueWait implements estimate.QueueWait.
func (w *QueueWait) QueueWait(ctx context.Context, q estimate.QueueWaitQuery) (estimate.QueueWaitAnswer, error) {
	if a, ok := w.ask(ctx, q); ok {
		return a, nil
	}
	return w.builtin.QueueWait(ctx, q)
}

func (w *QueueWait) ask(ctx context.Context, q estimate.QueueWaitQuery) (estimate.QueueWaitAnswer, bool) {
	stub, _ := w.p.acquire()
	c, ok := stub.(pb.QueueWaitClient)
	if !ok {
		return estimate.QueueWaitAnswer{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, w.p.cfg.Timeout)
	defer cancel()
	r, err := c.Estimate(ctx, queueWaitRequest(q))
	if err != nil {
		w.p.done(stub, w.p.classify(ctx, err), err)
		return estimate.QueueWaitAnswer{}, false
	}
	a, known, err := checkQueueWait(r, filepath.Base(w.p.args[0]))
	if err != nil {
		w.p.done(stub, FailNonsense, err)
		return estimate.QueueWaitAnswer{}, false
	}
	w.p.done(stub, "", nil)
	return a, known
}

// checkQueueWait: a wait is a number of seconds in [0, MaxWaitSec].
func checkQueueWait(r *pb.QueueWaitReply, name string) (estimate.QueueWaitAnswer, bool, error) {
	src, err := checkSource(r.GetSource())
	if err != nil {
		return estimate.QueueWaitAnswer{}, false, err
	}
	if src == estimate.SourceUnknown {
		return estimate.QueueWaitAnswer{}, false, nil
	}
	s := r.GetWaitSec()
	if !(s >= 0 && s <= MaxWaitSec) {
		return estimate.QueueWaitAnswer{}, false, fmt.Errorf("wait of %v s is not a number in [0, %d]", s, MaxWaitSec)
	}
	return estimate.QueueWaitAnswer{Wait: time.Duration(s * float64(time.Second)), Source: SourcePrefix + src,
		Basis: basis(name, r.GetBasis())}, true, nil
}

// Stats returns the plugin's counters.
func (w *QueueWait) Stats() Stats { return w.p.Stats() }

// Close stops the plugin.
func (w *QueueWait) Close() { w.p.Close() }
