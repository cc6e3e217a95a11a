package rounds

import (
	"context"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nuid"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

// Recorder stores a decision the loop makes itself, where the plugin's
// are (the controller's decision store), so `rota explain` and a
// restarted controller find it by the id in the job's note.
type Recorder interface {
	Record(d *wire.Decision)
}

// NodeRestrictions says whether a job names its nodes, excludes some or
// runs in a reservation (slurm.CLI.RestrictsNodes; slurm.Restd has it
// too). A Scheduler without it adopts nothing: such a job must pass as
// asked, and the queue read does not show it.
type NodeRestrictions interface {
	RestrictsNodes(ctx context.Context, jobID uint32) (bool, error)
}

// AdoptedWhy is the reason of an adopted job's decision.
const AdoptedWhy = "the job passed the job_submit plugin unchanged (it failed open: the controller or its NATS was away, " +
	"or the plugin was not loaded); adopted by the round loop, which chooses its type from here on"

// adopt makes pending GPU job j Rota's when it carries no note of Rota's:
// it passed a plugin that failed open (a controller restart, a frozen
// NATS) or that was not loaded. The decision records what the queue shows
// of the job (its hints, in the SPANK options the plugin reads, are not
// there) and gives no type: the round plans it like any untyped job and
// retypes it, writing the decision's note with the first update. nil:
// not a job to adopt.
func (l *Loop) adopt(ctx context.Context, j *slurm.Job) *tracked {
	rec, ok := l.dec.(Recorder)
	nr, ok2 := l.sched.(NodeRestrictions)
	if !ok || !ok2 || !l.cfg.AdoptUnplaced || !j.Pending() || !j.DecisionRead || j.Noted {
		return nil
	}
	req, gpu := j.GPURequest()
	if !gpu {
		return nil
	}
	// A job that names its nodes (queued before the plugin noted such
	// jobs, or under no plugin at all) stays as asked, as the plugin
	// would leave it: a type of Rota's might exist on none of them.
	if restricts, err := nr.RestrictsNodes(ctx, j.ID); err != nil || restricts {
		return nil
	}
	asked := wire.PlaceRequest{V: wire.Version, JobID: j.ID, Account: j.Account, QOS: j.QOS, Partition: j.Partition,
		Name: j.Name, GPU: req.Ask(uint32(max(j.NumNodes, 0)), uint32(max(j.NumTasks, 0))), Features: j.Features,
		TimeLimitMin: j.TimeLimitMin}
	if u, err := user.Lookup(j.User); err == nil {
		if uid, err := strconv.ParseUint(u.Uid, 10, 32); err == nil {
			asked.UID = uint32(uid)
		}
	}
	id := nuid.Next()
	d := &wire.Decision{ID: id, At: time.Now().UTC(), JobID: j.ID, Asked: asked,
		Given: wire.PlaceReply{V: wire.Version, DecisionID: id, Policy: l.pol.Name(), Reason: AdoptedWhy}}
	rec.Record(d)
	timeAsked := "none"
	if j.TimeLimitMin > 0 {
		timeAsked = slurmtime.Format(j.TimeLimitMin)
	}
	asks := "any"
	if t := req.Types(); len(t) > 0 {
		asks = strings.Join(t, ",")
	}
	note := wire.Annotation(asks, asks, timeAsked, timeAsked, l.pol.Name()+", adopted: it passed the plugin unchanged", id)
	l.log.Debug().Uint32("job", j.ID).Str("decision", id).Msg("adopted a pending GPU job that passed the job_submit plugin unchanged")
	key := estimate.Identity{User: j.User, Name: j.Name}.Key()
	return &tracked{decision: d, key: key, baseNice: j.Nice, niceRead: true, note: note}
}
