package rounds

// Space sharing on real Slurm (docs/fractions.md, "Space sharing on
// Slurm"): two pending one-GPU jobs that the table says get more done
// together than one after the other are offered to the policy as a pair
// (Gavel's space-sharing formulation, policy/packed.go); a pair the
// mechanism places this round becomes two shard jobs (gres/shard, half a
// GPU's shards each) constrained to the pair's type, so that Slurm runs
// them on one GPU. Slurm changes a pending job's GPU request into shards
// from 23.02 on (24.11 and 26.05 verified; 22.05 keeps the whole GPU), so
// the loop pairs jobs only where Deps.RetypeGres says it can.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// PairTable is what the loop knows of jobs sharing a GPU: Gavel's
// measured throughputs of job types alone and in pairs
// (policy/workload.Table).
type PairTable interface {
	// Model is the table's name for a job type the user wrote
	// (--rota-model); ok false when the table has none.
	Model(name string) (string, bool)
	// Shared returns, on a GPU type, the steps/s of job types a and b
	// while one of each shares one GPU, and each one's alone; ok false
	// where the table has no such pair or they cannot share.
	Shared(a, b, gpuType string) (ra, rb, soloA, soloB float64, ok bool)
}

// SharePair is two pending jobs the policy may run on one GPU: Rates[k]
// are A's and B's steps/s while they share a GPU of type k ([0, 0] where
// they cannot).
type SharePair struct {
	A, B  uint32
	Rates [][2]float64
}

// maxShareCandidates bounds the pending jobs offered to the policy as
// pairs (the first in submission order): n jobs make n(n-1)/2 pairs, and
// the space-sharing LP is dense.
const maxShareCandidates = 24

// maxShareJobs: above this many jobs in a round the loop offers no pairs,
// so the dense space-sharing LP never meets a site-scale queue (the plain
// policies' solve is what runs there).
const maxShareJobs = 200

// Share defaults (share_default): whether a job that did not say
// --rota-share may share a GPU.
const (
	ShareDefaultNo  = "no"
	ShareDefaultYes = "yes"
)

// mayShare says whether a job's hints and the site's default let Rota put
// it on a GPU with another job.
func mayShare(h wire.Hints, siteDefault string) bool {
	switch h.Share {
	case wire.ShareYes:
		return true
	case wire.ShareNo:
		return false
	}
	return siteDefault == ShareDefaultYes
}

// rotaShared says whether a job's request r is shards where its user
// asked for GPUs: Rota made it a sharer (a job submitted for shards is its
// user's, left as asked).
func rotaShared(r gpureq.Request, asked wire.GPUAsk) bool {
	askedGPUs := asked.PerJob+asked.PerNode+asked.PerSocket+asked.PerTask > 0
	return askedGPUs && r.HasShard() && !r.HasGPU()
}

// oneGPUByGres says whether a request is one GPU asked with --gres alone
// (gres/gpu:1 per node, no other TRES): the form whose GPU Rota turns
// into shards whole and gives back (share, unshare).
func oneGPUByGres(r gpureq.Request) bool {
	n, _, has := r.PerNode.GPUs()
	return has && n == 1 && len(r.PerNode.Entries) == 1 && len(r.PerJob.Entries)+len(r.PerSocket.Entries)+len(r.PerTask.Entries) == 0
}

// sharing says whether the loop pairs jobs: space_sharing is on, it has
// the table, and Slurm can turn a pending job's GPU into shards.
func (l *Loop) sharing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg.SpaceSharing && l.pairTable != nil && l.retypeGres
}

// sharePairs lists the pairs of pending jobs the policy may place on one
// GPU this round: both may share (mayShare), one GPU on one node, typed
// by Rota, of a model the table knows; on each type offered as shards
// (two or more per GPU), where both fit and the
// table measured the pair, each one's rate while sharing is its own rate
// there times the fraction of its speed the table says it keeps.
func (l *Loop) sharePairs(views []JobView, types []string, snap *cluster.Snapshot) []SharePair {
	if !l.sharing() || len(views) > maxShareJobs {
		return nil
	}
	shareTypes := make([]bool, len(types))
	anyType := false
	for k, t := range types {
		tc := snap.Types[t]
		shareTypes[k] = tc != nil && tc.ShardsPerGPU >= 2
		anyType = anyType || shareTypes[k]
	}
	if !anyType {
		return nil
	}
	var cand []int
	for i := range views {
		v := &views[i]
		if v.Model == "" || !v.MayShare || v.Running || v.Sharing || v.UserTyped || v.Interactive || v.Unfit != "" ||
			v.GPUs != 1 || v.Target != "" {
			continue
		}
		cand = append(cand, i)
	}
	slices.SortStableFunc(cand, func(a, b int) int { return views[a].Submit.Compare(views[b].Submit) })
	if len(cand) > maxShareCandidates {
		cand = cand[:maxShareCandidates]
	}
	var out []SharePair
	for x, i := range cand {
		for _, j := range cand[x+1:] {
			a, b := &views[i], &views[j]
			sp := SharePair{A: a.ID, B: b.ID, Rates: make([][2]float64, len(types))}
			any := false
			for k, t := range types {
				if !shareTypes[k] || k >= len(a.Rates) || k >= len(b.Rates) || a.Rates[k] <= 0 || b.Rates[k] <= 0 ||
					(a.Fits != nil && !a.Fits[k]) || (b.Fits != nil && !b.Fits[k]) {
					continue
				}
				if mem := l.cfg.GPUMemory[t]; mem > 0 && a.GPUMemNeed+b.GPUMemNeed > mem {
					continue // what they say they need does not fit one GPU together
				}
				fa, fb, ok := l.pairKeeps(a.Model, b.Model, t)
				if !ok {
					continue
				}
				sp.Rates[k] = [2]float64{a.Rates[k] * fa, b.Rates[k] * fb}
				any = true
			}
			if any {
				out = append(out, sp)
			}
		}
	}
	return out
}

// pairKey is a job model sharing a GPU type with another.
type pairKey struct{ model, other, gpuType string }

// pairKeeps is the fraction of its speed alone each of models a and b
// keeps while they share a GPU of type t: as measured on this cluster
// (judgePairs), else as the table says.
func (l *Loop) pairKeeps(a, b, t string) (fa, fb float64, ok bool) {
	l.mu.Lock()
	ma, okA := l.pairSeen[pairKey{a, b, t}]
	mb, okB := l.pairSeen[pairKey{b, a, t}]
	l.mu.Unlock()
	if okA && okB {
		return ma, mb, true
	}
	ra, rb, sa, sb, ok := l.pairTable.Shared(a, b, t)
	if !ok {
		return 0, 0, false
	}
	return ra / sa, rb / sb, true
}

// shareMargin is the admin's margin (share_margin), or the policy's
// default.
func (l *Loop) shareMargin() float64 {
	if l.cfg.ShareMargin > 0 {
		return l.cfg.ShareMargin
	}
	return policy.DefaultShareMargin
}

// judgePairs weighs each running pair whose two jobs the agents measured
// and whose speed alone is known: each one's measured rate over its rate
// alone is what it keeps sharing, learnt for its model beside the other's
// (pairKeeps, so the next pairs go by the cluster, not the table); two
// that keep less than the margin together get less done than one after
// the other, and each that can be checkpointed is split off (Split): the
// round requeues it onto a GPU of its own, and it never shares again.
// A pair is the two sharers on one GPU where the loop knows their GPUs
// (OnGPU; each then gets the other as Partner, so explain names the job
// it shares with), else the two Rota made a pair: Slurm puts a starting
// sharer on the first GPU with a free shard, so once a sharer's partner
// ends, the next sharer Slurm starts joins it, whichever pair it was of.
func (l *Loop) judgePairs(views []JobView) {
	at := make(map[uint32]int, len(views))
	onGPU := map[string][]int{}
	for i := range views {
		if v := &views[i]; v.Sharing {
			at[v.ID] = i
			if v.Running && v.OnGPU != "" {
				onGPU[v.OnGPU] = append(onGPU[v.OnGPU], i)
			}
		}
	}
	for _, on := range onGPU {
		if len(on) == 2 {
			a, b := &views[on[0]], &views[on[1]]
			a.Partner, b.Partner = b.ID, a.ID
		}
	}
	for i := range views {
		// Alone on its GPU (its partner gone, none joined): its rate is its own.
		v := &views[i]
		if !v.Sharing || !v.Running {
			continue
		}
		k, ok := at[v.Partner]
		mateRuns := ok && views[k].Running
		if v.OnGPU == "" {
			v.ShareJudged = !mateRuns
		} else {
			v.ShareJudged = len(onGPU[v.OnGPU]) == 1 && (!mateRuns || views[k].OnGPU != "")
		}
	}
	margin := l.shareMargin()
	for i := range views {
		a := &views[i]
		k, ok := at[a.Partner]
		if !a.Sharing || !a.Running || !ok || a.ID > a.Partner {
			continue
		}
		b := &views[k]
		if a.OnGPU != b.OnGPU || (a.OnGPU != "" && len(onGPU[a.OnGPU]) != 2) {
			continue // Slurm put them on different GPUs, or a third joined
		}
		if !b.Running || b.Partner != a.ID || a.Type != b.Type {
			continue
		}
		l.rateBeside(a, b)
		l.rateBeside(b, a)
		if a.ShareMeasured <= 0 || b.ShareMeasured <= 0 {
			continue
		}
		a.ShareJudged, b.ShareJudged = true, true
		if a.SoloRate <= 0 || b.SoloRate <= 0 {
			continue
		}
		fa, fb := a.ShareMeasured/a.SoloRate, b.ShareMeasured/b.SoloRate
		if a.Model != "" && b.Model != "" {
			l.mu.Lock()
			l.pairSeen[pairKey{a.Model, b.Model, a.Type}] = fa
			l.pairSeen[pairKey{b.Model, a.Model, a.Type}] = fb
			l.mu.Unlock()
		}
		if fa+fb >= margin {
			continue
		}
		for _, v := range []*JobView{a, b} {
			other := a.ID + b.ID - v.ID
			why := fmt.Sprintf("sharing a %s with job %d, the two were measured to get %.2fx the work of one after the other (%.2f and %.2f of their speed alone), below share_margin %.2f",
				v.Type, other, fa+fb, fa, fb, margin)
			sharing, moved, known := splitTimes(v)
			switch {
			case !v.Migratable:
				v.SplitWhy = why + ", but it cannot be checkpointed (no --rota-checkpoint-signal): left running"
			case known && moved >= sharing:
				v.SplitWhy = why + fmt.Sprintf(", but it ends sooner where it is (%.0f s left sharing) than moved (%.0f s: checkpoint and restart, Slurm's requeue delay, then alone): left running",
					sharing, moved)
			default:
				v.Split, v.SplitWhy = true, why+": moved to a GPU of its own"
			}
		}
	}
}

// pairWindow is how long a sharer's steps beside one GPU-mate are timed
// before its rate there is judged.
const pairWindow = 10 * time.Second

// mateMark is a sharer's step (at, the report's time) when the loop first
// saw it, in its run started at run, beside job with (whose run started at
// withRun).
type mateMark struct {
	with         uint32
	run, withRun time.Time
	step         uint64
	at           time.Time
}

// rateBeside sets sharer v's ShareMeasured to its steps/s beside mate
// alone: from the first report after both started (its mark, kept while
// the two runs last) to its last, once that spans pairWindow, and 0 until
// then. The agents' rate is smoothed over about 30 s, so for a while
// after a GPU-mate changes it mixes two mates (or the job alone), and a
// pair would be judged and learnt by numbers partly not its own. A view
// without step reports (ShareStepAt zero) keeps the rate it has.
func (l *Loop) rateBeside(v, mate *JobView) {
	if v.ShareStepAt.IsZero() {
		return
	}
	// Slurm's start times have whole seconds, and a report's step was read
	// a moment before it arrived: a second's slack.
	since := v.Started
	if mate.Started.After(since) {
		since = mate.Started
	}
	since = since.Add(time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	tr := l.known[v.ID]
	v.ShareMeasured = 0
	if tr == nil {
		return
	}
	mk := &tr.mate
	if mk.with != mate.ID || !mk.run.Equal(v.Started) || !mk.withRun.Equal(mate.Started) {
		*mk = mateMark{}
		if v.ShareStepAt.After(since) {
			*mk = mateMark{with: mate.ID, run: v.Started, withRun: mate.Started, step: v.ShareStep, at: v.ShareStepAt}
		}
		return
	}
	if span := v.ShareStepAt.Sub(mk.at); span >= pairWindow && v.ShareStep > mk.step {
		v.ShareMeasured = float64(v.ShareStep-mk.step) / span.Seconds()
	}
}

// splitTimes are the seconds sharer v needs to finish where it is, at its
// measured rate, and after a split: its checkpoint and restart, Slurm's
// requeue delay (a split sharer goes back to a GPU of its type, on the
// node it ran on; migrate.go), then its steps left at its speed alone.
// known is false while its steps left or either rate is unknown.
func splitTimes(v *JobView) (sharing, moved float64, known bool) {
	if v.StepsLeft <= 0 || v.ShareMeasured <= 0 || v.SoloRate <= 0 {
		return 0, 0, false
	}
	return v.StepsLeft / v.ShareMeasured, (v.MoveCost + requeueDelay).Seconds() + v.StepsLeft/v.SoloRate, true
}

// readGPUs reads from Slurm which GPU each running sharer holds, once a
// run (a run keeps its GPU), into its view's OnGPU. Not under l.mu: a
// Slurm call waits on slurmctld.
func (l *Loop) readGPUs(ctx context.Context, views []JobView, byID map[uint32]*slurm.Job) {
	if l.gpus == nil {
		return
	}
	for i := range views {
		v := &views[i]
		j := byID[v.ID]
		if !v.Sharing || !v.Running || v.OnGPU != "" || j == nil || len(j.Nodes) != 1 {
			continue
		}
		node, gpus, err := l.gpus.JobGPUs(ctx, j.ID)
		if err != nil || len(gpus) != 1 {
			l.log.Debug().Err(err).Uint32("job", j.ID).Ints("gpus", gpus).Msg("cannot tell which GPU the sharer holds; weighing it with the job Rota paired it with")
			continue
		}
		v.OnGPU = node + "/" + strconv.Itoa(gpus[0])
		l.mu.Lock()
		if tr := l.known[j.ID]; tr != nil {
			tr.onGPU, tr.onGPUStart = v.OnGPU, j.Start
		}
		l.mu.Unlock()
	}
}

// unshare sets in u the update that gives sharer j its GPU back once
// requeued (--gres=gpu:1, what its user asked) on type t.
func (l *Loop) unshare(u *slurm.JobUpdate, j *slurm.Job, tr *tracked, t string, snap *cluster.Snapshot) bool {
	return writeType(u, j, tr, t, snap, func(typ string) string { return "gres/" + joinType("gpu", typ, "1") })
}

// share sets in u the update that makes pending job j one of a pair on a
// GPU of type t: half of each GPU's shards in place of its GPU. false when
// j's request is not one GPU asked with --gres (oneGPUByGres).
func (l *Loop) share(u *slurm.JobUpdate, j *slurm.Job, tr *tracked, t string, snap *cluster.Snapshot) bool {
	tc := snap.Types[t]
	req, ok := j.GPURequest()
	if tc == nil || tc.ShardsPerGPU < 2 || !ok || !oneGPUByGres(req) {
		return false
	}
	// Half a GPU's shards: two jobs fill one GPU, and Slurm puts a job's
	// shards on one GPU, so the pair shares it and no third job joins.
	n := strconv.Itoa(tc.ShardsPerGPU / 2)
	return writeType(u, j, tr, t, snap, func(typ string) string { return "gres/" + joinType("shard", typ, n) })
}

// writeType sets in u job j's type t the way t is written
// (cluster.TypeCap.ByFeature), with the per-node request perNode makes:
// under a constraint of t, perNode(""); else perNode(t), typed in the
// request (24.11 and later), with the user's own constraint given back
// where j's holds Rota's type.
func writeType(u *slurm.JobUpdate, j *slurm.Job, tr *tracked, t string, snap *cluster.Snapshot, perNode func(typ string) string) bool {
	asked := tr.decision.Asked.Features
	if snap.TypeByFeature(t) {
		f, ok := gpureq.WithTypeFeature(asked, t)
		if !ok {
			return false
		}
		u.Features = &f
		u.GPU = &slurm.GPURequest{PerNode: perNode("")}
		return true
	}
	if featureType(j.Features, snap.TypeNames()) != "" {
		u.Features = &asked
	}
	u.GPU = &slurm.GPURequest{PerNode: perNode(t)}
	return true
}

// joinType writes a gres entry: name:count, or name:type:count.
func joinType(name, typ, count string) string {
	if typ == "" {
		return name + ":" + count
	}
	return name + ":" + typ + ":" + count
}

// shareWhy says why a pair shares, in words.
func shareWhy(policyName, t string, partner uint32, rates, solo [2]float64) string {
	gain := 0.0
	if solo[0] > 0 && solo[1] > 0 {
		gain = rates[0]/solo[0] + rates[1]/solo[1]
	}
	return fmt.Sprintf("%s runs it on a %s shared with job %d (gres/shard): together they get %.2fx the work of one after the other (the throughput table's pair)",
		policyName, t, partner, gain)
}
