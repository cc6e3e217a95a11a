package slurm

import (
	"context"
	"errors"
	"time"

	"github.com/rota-hpc/rota/controller/limits"
)

// ErrUnserved is what Unserved answers every call with.
var ErrUnserved = errors.New("this stand-in for Slurm does not serve that call")

// Unserved is a Backend that serves nothing: every call fails with
// ErrUnserved. A stand-in for Slurm (the load generator's simulated
// fleet, a test's cluster) embeds it and serves what it has, so it is a
// whole Backend and a call it does not serve fails in words instead of
// turning a feature off. One that serves Jobs serves JobsAt too (with
// JobsNow): the queue's readers call JobsAt, which Unserved's would
// answer.
type Unserved struct{}

var _ Backend = Unserved{}

func (Unserved) Nodes(context.Context) ([]Node, error)                   { return nil, ErrUnserved }
func (Unserved) Partitions(context.Context) ([]Partition, error)         { return nil, ErrUnserved }
func (Unserved) JobAdminComment(context.Context, uint32) (string, error) { return "", ErrUnserved }
func (Unserved) Jobs(context.Context) ([]Job, error)                     { return nil, ErrUnserved }
func (Unserved) Job(context.Context, uint32) (Job, bool, error)          { return Job{}, false, ErrUnserved }
func (Unserved) JobGPUs(context.Context, uint32) (string, []int, error)  { return "", nil, ErrUnserved }
func (Unserved) DecisionIDs(context.Context) (map[uint32]string, error)  { return nil, ErrUnserved }
func (Unserved) Update(context.Context, uint32, JobUpdate) error         { return ErrUnserved }
func (Unserved) Requeue(context.Context, uint32) error                   { return ErrUnserved }
func (Unserved) ShowJob(context.Context, uint32) (JobSpec, bool, error) {
	return JobSpec{}, false, ErrUnserved
}
func (Unserved) BatchScript(context.Context, uint32) ([]byte, error) { return nil, ErrUnserved }
func (Unserved) Submit(context.Context, Submission) (uint32, error)  { return 0, ErrUnserved }
func (Unserved) Cancel(context.Context, uint32) error                { return ErrUnserved }
func (Unserved) Signal(context.Context, uint32, string) error        { return ErrUnserved }
func (Unserved) ClearDependency(context.Context, uint32) error       { return ErrUnserved }
func (Unserved) NodeDetails(context.Context) ([]NodeDetail, error)   { return nil, ErrUnserved }
func (Unserved) Shares(context.Context) (map[string]float64, error)  { return nil, ErrUnserved }
func (Unserved) JobsAt(context.Context) ([]Job, time.Time, error) {
	return nil, time.Time{}, ErrUnserved
}
func (Unserved) Limits(context.Context) (*limits.Set, error)  { return nil, ErrUnserved }
func (Unserved) Release(context.Context) (int, int, error)    { return 0, 0, ErrUnserved }
func (Unserved) StateSaveDir(context.Context) (string, error) { return "", ErrUnserved }
func (Unserved) Hold(context.Context, uint32) error           { return ErrUnserved }
func (Unserved) Unhold(context.Context, uint32) error         { return ErrUnserved }
func (Unserved) FindByComment(context.Context, string) (uint32, bool, error) {
	return 0, false, ErrUnserved
}

func (Unserved) Accounting(context.Context, time.Time, time.Time) ([]AcctJob, SacctStats, error) {
	return nil, SacctStats{}, ErrUnserved
}

func (Unserved) UpdatePaced(_ context.Context, changes []Change, _ func() bool) []error {
	errs := make([]error, len(changes))
	for i := range errs {
		errs[i] = ErrUnserved
	}
	return errs
}
