package rounds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/limits"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
	"github.com/rs/zerolog"
)

// TestPlannerPairs: with one free V100 and two pending jobs, the
// space-sharing policy runs both on it when the pair gets more done
// together than one after the other by the margin, and one alone when it
// does not; the passes after it (fill, coverHead, the order) keep the
// pair's type; jobs already sharing hold a GPU per pair, out of the
// policy.
func TestPlannerPairs(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "v100"}
	rates := []float64{0.25, 1}
	src := []string{"measured", "measured"}
	pending := func(id uint32) JobView {
		return JobView{ID: id, GPUs: 1, Rates: rates, RateSource: src, StepsLeft: 600, Submit: time.Unix(int64(id), 0),
			Fits: []bool{true, true}, Model: "m", MayShare: true}
	}
	pair := func(each float64) []SharePair {
		return []SharePair{{A: 2, B: 3, Rates: [][2]float64{{0, 0}, {each, each}}}}
	}
	for _, c := range []struct {
		name       string
		capacity   []int
		running    []JobView
		pairs      []SharePair
		wantPaired bool
		wantWaits  uint32 // a job the plan leaves waiting (0 none)
	}{
		{"pair pays (1.4x): both share the v100", []int{0, 1}, nil, pair(0.7), true, 0},
		{"pair below the margin (1.0x): one runs", []int{0, 1}, nil, pair(0.5), false, 3},
		{"no pairs offered: one runs", []int{0, 1}, nil, nil, false, 3},
		{"two GPUs free: each its own", []int{0, 2}, nil, pair(0.7), false, 0},
		{"a running pair holds one of two GPUs: the pair pays on the other", []int{0, 2},
			[]JobView{{ID: 10, Running: true, Sharing: true, Partner: 11, Type: "v100", GPUs: 1},
				{ID: 11, Running: true, Sharing: true, Partner: 10, Type: "v100", GPUs: 1}}, pair(0.7), true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pol, err := policy.New("las", policy.Options{SpaceSharing: true})
			if err != nil {
				t.Fatal(err)
			}
			p := NewPlanner(PlanConfig{Round: time.Minute, MinLease: 10 * time.Minute, PriorityBase: 1000000, NiceSpan: 10000, SlurmOrder: true}, pol)
			p.SetPairs(c.pairs)
			jobs := append(append([]JobView(nil), c.running...), pending(2), pending(3))
			plan, err := p.Decide(types, c.capacity, jobs, func(pr *policy.Problem) (policy.Allocation, error) {
				return pol.Allocate(context.Background(), pr)
			})
			if err != nil {
				t.Fatal(err)
			}
			got := map[uint32]Action{}
			for _, a := range plan.Actions {
				got[a.JobID] = a
			}
			a2, a3 := got[2], got[3]
			paired := a2.Partner == 3 && a3.Partner == 2
			if paired != c.wantPaired {
				t.Fatalf("paired %v, want %v: %q / %q", paired, c.wantPaired, a2.Why, a3.Why)
			}
			if paired && (a2.Type != "v100" || a3.Type != "v100" || a2.ShareRate != 0.7 || !a2.Placed) {
				t.Errorf("pair on %s/%s at %v, placed %v; want both on v100 at 0.7: %q", a2.Type, a3.Type, a2.ShareRate, a2.Placed, a2.Why)
			}
			if !paired && (a2.Partner != 0 || a3.Partner != 0) {
				t.Errorf("one-sided pair: %d/%d", a2.Partner, a3.Partner)
			}
			if w := c.wantWaits; w != 0 && got[w].Type == "v100" && got[2].Type == "v100" && got[w].Priority > got[2].Priority {
				t.Errorf("job %d was to wait behind job 2: %+v", w, got[w])
			}
			for _, r := range c.running {
				if a := got[r.ID]; a.Partner != r.Partner || a.Type != "v100" || a.Migrate {
					t.Errorf("running sharer %d: %+v", r.ID, a)
				}
			}
		})
	}
}

// TestMayShare: --rota-share decides; without it, the site's default.
func TestMayShare(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		share, site string
		want        bool
	}{
		{"yes", ShareDefaultNo, true},
		{"no", ShareDefaultYes, false},
		{"", ShareDefaultNo, false},
		{"", ShareDefaultYes, true},
	} {
		if got := mayShare(wire.Hints{Share: c.share}, c.site); got != c.want {
			t.Errorf("--rota-share=%q, share_default %s: %v, want %v", c.share, c.site, got, c.want)
		}
	}
}

// pairTab is a throughput table of two models: "a" keeps 0.7 of its
// speed sharing a v100 with either, "big" cannot share.
type pairTab struct{}

func (pairTab) Model(n string) (string, bool) { return n, n == "a" || n == "big" }
func (pairTab) Shared(a, b, t string) (float64, float64, float64, float64, bool) {
	if t != "v100" || a == "big" || b == "big" {
		return 0, 0, 0, 0, false
	}
	return 7, 7, 10, 10, true
}

// TestSharePairsOffered: only pending one-GPU jobs that may share, typed
// by Rota, of a model the table has, are offered as pairs, only on a type
// offered as shards, only where what they say they need fits one GPU
// together; a job's rate in a pair is its own times the fraction of its
// speed the table says it keeps. Nothing without space_sharing, the
// table, or a Slurm that turns a pending GPU into shards.
func TestSharePairsOffered(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "v100"}
	snap := &cluster.Snapshot{Types: map[string]*cluster.TypeCap{
		"k80": {Type: "k80"}, "v100": {Type: "v100", ShardsPerGPU: 2, ByFeature: true}}}
	ok := func(id uint32) JobView {
		return JobView{ID: id, GPUs: 1, Rates: []float64{1, 4}, Model: "a", MayShare: true, Submit: time.Unix(int64(id), 0)}
	}
	with := func(id uint32, f func(*JobView)) JobView { v := ok(id); f(&v); return v }
	views := []JobView{
		ok(1), ok(2),
		with(3, func(v *JobView) { v.Running = true }),
		with(4, func(v *JobView) { v.UserTyped = true }),
		with(5, func(v *JobView) { v.GPUs = 2 }),
		with(6, func(v *JobView) { v.MayShare = false }),
		with(7, func(v *JobView) { v.Model = "" }),
		with(8, func(v *JobView) { v.Model = "big" }),
		with(9, func(v *JobView) { v.Sharing = true }),
		with(10, func(v *JobView) { v.Interactive = true }),
		with(11, func(v *JobView) { v.GPUMemNeed = 12 << 30 }), // 12 GiB + 0: fits a 16 GiB V100
		with(12, func(v *JobView) { v.GPUMemNeed = 12 << 30 }), // with 11: 24 GiB, does not
	}
	for _, c := range []struct {
		name                 string
		sharing, table, gres bool
		want                 []string
	}{
		{"on", true, true, true, []string{"1+2", "1+11", "1+12", "2+11", "2+12"}},
		{"space_sharing off", false, true, true, nil},
		{"no table", true, false, true, nil},
		{"22.05: no shards for a pending job", true, true, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &Loop{cfg: Config{SpaceSharing: c.sharing, GPUMemory: map[string]uint64{"v100": 16 << 30}}, retypeGres: c.gres}
			if c.table {
				l.pairTable = pairTab{}
			}
			var got []string
			for _, p := range l.sharePairs(views, types, snap) {
				got = append(got, fmt.Sprintf("%d+%d", p.A, p.B))
				if p.Rates[0] != [2]float64{} || p.Rates[1] != [2]float64{4 * 0.7, 4 * 0.7} {
					t.Errorf("pair %d+%d rates %v, want none on k80 and 2.8 each on v100", p.A, p.B, p.Rates)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("pairs %v, want %v", got, c.want)
			}
		})
	}
}

// TestShareUpdate: the update that makes a pending --gres=gpu:1 job one of
// a pair asks half a GPU's shards, typed the way its type is chosen; other
// request forms are left whole.
func TestShareUpdate(t *testing.T) {
	t.Parallel()
	snap := &cluster.Snapshot{Types: map[string]*cluster.TypeCap{
		"v100": {Type: "v100", ShardsPerGPU: 4, ByFeature: true},
		"p100": {Type: "p100", ShardsPerGPU: 2},
		"k80":  {Type: "k80"}}}
	for _, c := range []struct {
		name, typ, perJob, perNode, features string
		wantGPU, wantFeatures                string // "" none; wantGPU "-": refused
	}{
		{"by constraint", "v100", "", "gres/gpu:1", "", "gres/shard:2", "v100"},
		{"by constraint, the user's kept", "v100", "", "gres/gpu:1", "ssd", "gres/shard:2", "ssd&v100"},
		{"in the request", "p100", "", "gres/gpu:1", "", "gres/shard:p100:1", ""},
		{"in the request, Rota's constraint given back", "p100", "", "gres/gpu:1", "v100", "gres/shard:p100:1", "(asked)"},
		{"no shards on k80", "k80", "", "gres/gpu:1", "", "-", ""},
		{"--gpus=1", "v100", "gres/gpu:1", "", "", "-", ""},
		{"two GPUs", "v100", "", "gres/gpu:2", "", "-", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &Loop{}
			j := &slurm.Job{ID: 1, State: "PENDING", TresPerJob: c.perJob, TresPerNode: c.perNode, Features: c.features, NumNodes: 1, NumTasks: 1}
			asked := ""
			if c.features == "ssd" {
				asked = "ssd"
			}
			tr := &tracked{decision: &wire.Decision{Asked: wire.PlaceRequest{Features: asked}}}
			var u slurm.JobUpdate
			ok := l.share(&u, j, tr, c.typ, snap)
			if c.wantGPU == "-" {
				if ok {
					t.Fatalf("shared: %+v", u)
				}
				return
			}
			if !ok || u.GPU == nil || u.GPU.PerNode != c.wantGPU || u.GPU.PerJob != "" {
				t.Fatalf("ok %v, GPU %+v; want %s", ok, u.GPU, c.wantGPU)
			}
			switch {
			case c.wantFeatures == "(asked)":
				if u.Features == nil || *u.Features != asked {
					t.Errorf("features %v, want the user's %q back", u.Features, asked)
				}
			case c.wantFeatures == "":
				if u.Features != nil {
					t.Errorf("features set to %q", *u.Features)
				}
			case u.Features == nil || *u.Features != c.wantFeatures:
				t.Errorf("features %v, want %q", u.Features, c.wantFeatures)
			}
		})
	}
}

// TestJudgePairs: a running pair whose measured rates keep less than the
// margin together is split, each member that can be checkpointed moved to
// a GPU of its own; what they kept is learnt for their models, so the
// next pair of those models goes by it rather than the table.
func TestJudgePairs(t *testing.T) {
	t.Parallel()
	sharer := func(id, partner uint32, measured float64, migratable bool) JobView {
		return JobView{ID: id, Partner: partner, Running: true, Sharing: true, Type: "v100", Model: "a",
			ShareMeasured: measured, SoloRate: 10, Migratable: migratable}
	}
	on := func(v JobView, gpu string) JobView { v.OnGPU = gpu; return v }
	asB := func(v JobView) JobView { v.Model = "b"; return v }
	left := func(v JobView, steps float64) JobView { v.StepsLeft, v.MoveCost = steps, 10*time.Second; return v }
	for _, c := range []struct {
		name       string
		views      []JobView
		split, why []bool // per view
		learnt     bool
	}{
		{"pays (1.4x): left together", []JobView{sharer(1, 2, 7, true), sharer(2, 1, 7, true)}, []bool{false, false}, []bool{false, false}, true},
		{"hurts (0.6x): both split", []JobView{sharer(1, 2, 3, true), sharer(2, 1, 3, true)}, []bool{true, true}, []bool{true, true}, true},
		{"hurts, one cannot be checkpointed: it stays, says why", []JobView{sharer(1, 2, 3, true), sharer(2, 1, 3, false)},
			[]bool{true, false}, []bool{true, true}, true},
		{"one not measured yet: not judged", []JobView{sharer(1, 2, 3, true), sharer(2, 1, 0, true)}, []bool{false, false}, []bool{false, false}, false},
		{"partners disagree: not judged", []JobView{sharer(1, 2, 3, true), sharer(2, 3, 3, true)}, []bool{false, false}, []bool{false, false}, false},
		// Rota paired 1 with 2 and 3 with 4; Slurm put 1 and 3 on GPU 0
		// and 2 and 4 on GPU 1. Judged by who is on one GPU: 1 and 3 hurt
		// each other (0.6x), 2 and 4 pay (1.4x), though 1 with 2 would
		// read as 1.0x and 3 with 4 as 1.0x.
		{"Slurm mixed two pairs: the jobs on one GPU are judged together", []JobView{
			on(sharer(1, 2, 3, true), "n/0"), on(asB(sharer(2, 1, 7, true)), "n/1"),
			on(sharer(3, 4, 3, true), "n/0"), on(asB(sharer(4, 3, 7, true)), "n/1")},
			[]bool{true, false, true, false}, []bool{true, false, true, false}, true},
		// 300 steps left at 3/s: 100 s sharing, against 10 s to move, 121
		// s of Slurm's requeue delay and 30 s alone: it stays, saying why.
		// 3000 left: 1000 s against 431 s: it moves.
		{"hurts, but the move costs more than it saves: left running", []JobView{left(sharer(1, 2, 3, true), 300), left(sharer(2, 1, 3, true), 3000)},
			[]bool{false, true}, []bool{true, true}, true},
		{"on different GPUs: not judged as a pair", []JobView{on(sharer(1, 2, 3, true), "n/0"), on(sharer(2, 1, 3, true), "n/1")},
			[]bool{false, false}, []bool{false, false}, false},
		{"three on one GPU: not judged", []JobView{on(sharer(1, 2, 3, true), "n/0"), on(sharer(2, 1, 3, true), "n/0"),
			on(sharer(3, 0, 3, true), "n/0")}, []bool{false, false, false}, []bool{false, false, false}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &Loop{pairTable: pairTab{}, pairSeen: map[pairKey]float64{}}
			l.judgePairs(c.views)
			for i, v := range c.views {
				if v.Split != c.split[i] || (v.SplitWhy != "") != c.why[i] {
					t.Errorf("job %d: split %v why %q; want split %v, a why %v", v.ID, v.Split, v.SplitWhy, c.split[i], c.why[i])
				}
			}
			if v := c.views[0]; v.StepsLeft > 0 && !v.Split && !strings.Contains(v.SplitWhy, "ends sooner where it is (100 s left sharing) than moved (161 s") {
				t.Errorf("job 1 stays, and its why says %q", v.SplitWhy)
			}
			if v := c.views[0]; v.SplitWhy != "" && v.OnGPU != "" && !strings.Contains(v.SplitWhy, "with job 3") {
				t.Errorf("job 1 shares GPU 0 with job 3, and its why says %q", v.SplitWhy)
			}
			fa, _, ok := l.pairKeeps("a", "a", "v100")
			want := 0.7 // the table's
			if c.learnt {
				want = c.views[0].ShareMeasured / 10
			}
			if !ok || fa != want {
				t.Errorf("pairKeeps = %v %v, want %v", fa, ok, want)
			}
		})
	}
}

// TestRateBeside: a sharer's rate beside its GPU-mate is timed from the
// first report after both started, over pairWindow at least, and starts
// again when the mate or either run changes; the agents' smoothed rate
// (which mixes an earlier mate's) is never what is judged.
func TestRateBeside(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type report struct {
		mate             uint32
		mateStart, runAt float64 // seconds after t0: the mate's and the job's run start
		step             uint64
		seen             float64
		want             float64
	}
	for _, c := range []struct {
		name    string
		reports []report
	}{
		{"timed from the first report beside the mate", []report{
			{2, 0, 0, 100, 5, 0},     // marked: step 100 at 5 s
			{2, 0, 0, 150, 10, 0},    // 5 s: under the window
			{2, 0, 0, 300, 15, 20},   // 200 steps in 10 s
			{2, 0, 0, 700, 25, 30}}}, // 600 steps in 20 s
		{"a report from before the mate started marks nothing", []report{
			{2, 30, 0, 100, 20, 0}, // the mate started at 30 s
			{2, 30, 0, 300, 32, 0}, // marked here
			{2, 30, 0, 400, 42, 10}}},
		{"a new mate starts the timing again", []report{
			{2, 0, 0, 100, 5, 0},
			{2, 0, 0, 300, 15, 20},
			{3, 16, 0, 310, 17.5, 0}, // job 3 took the shard job 2 left: marked again
			{3, 16, 0, 360, 27.5, 5}}},
		{"another mate started the same second: timed again", []report{
			{2, 0, 0, 100, 5, 0},
			{2, 0, 0, 300, 15, 20},
			{3, 0, 0, 310, 17.5, 0},
			{3, 0, 0, 360, 27.5, 5}}},
		{"the mate's new run starts it again", []report{
			{2, 0, 0, 100, 5, 0},
			{2, 0, 0, 300, 15, 20},
			{2, 40, 0, 800, 45, 0},
			{2, 40, 0, 900, 55, 10}}},
		{"its own new run starts it again", []report{
			{2, 0, 0, 100, 5, 0},
			{2, 0, 60, 50, 65, 0}, // marked: step 50 at 65 s
			{2, 0, 60, 100, 70, 0},
			{2, 0, 60, 250, 75, 20}}}, // marked at 65 s
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &Loop{known: map[uint32]*tracked{1: {}}}
			for i, r := range c.reports {
				v := JobView{ID: 1, ShareMeasured: 99, ShareStep: r.step, ShareStepAt: at(r.seen), Started: at(r.runAt)}
				mate := JobView{ID: r.mate, Started: at(r.mateStart)}
				l.rateBeside(&v, &mate)
				if v.ShareMeasured != r.want {
					t.Errorf("report %d (step %d at %v s): rate %v, want %v", i, r.step, r.seen, v.ShareMeasured, r.want)
				}
			}
		})
	}
	t.Run("no step reports: the rate it has", func(t *testing.T) {
		t.Parallel()
		l := &Loop{known: map[uint32]*tracked{1: {}}}
		v := JobView{ID: 1, ShareMeasured: 7}
		l.rateBeside(&v, &JobView{ID: 2})
		if v.ShareMeasured != 7 {
			t.Errorf("rate %v, want 7", v.ShareMeasured)
		}
	})
}

// TestLeaveForFree: a running sharer moves to a GPU no pending job takes
// where alone it ends sooner, its move counted, by a tenth at least; one of
// a pair a round.
func TestLeaveForFree(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "p100", "v100"}
	measured := []string{"measured", "measured", "measured"}
	// 1000 steps left at 1/s sharing a K80: 1000 s. Alone: 2/s on a K80,
	// 5 on a P100, 10 on a V100; moving costs 10 s.
	sharer := func(id, partner uint32) JobView {
		return JobView{ID: id, Partner: partner, Running: true, Sharing: true, Migratable: true, Type: "k80", GPUs: 1,
			StepsLeft: 1000, ShareMeasured: 1, ShareJudged: true, MoveCost: 10 * time.Second, Rates: []float64{2, 5, 10}, RateSource: measured}
	}
	with := func(v JobView, f func(*JobView)) JobView { f(&v); return v }
	for _, c := range []struct {
		name string
		jobs []JobView
		free []int
		to   []string // per job: the type it moves to, "" stays
	}{
		{"a free v100: the faster moves there", []JobView{sharer(1, 2), with(sharer(2, 1), func(v *JobView) { v.StepsLeft = 500 })},
			[]int{0, 0, 1}, []string{"v100", ""}},
		{"two free GPUs: still one of the pair a round", []JobView{sharer(1, 2), sharer(2, 1)}, []int{0, 1, 1}, []string{"v100", ""}},
		{"two pairs, two free v100s: one of each", []JobView{sharer(1, 2), sharer(2, 1), sharer(3, 4), sharer(4, 3)},
			[]int{0, 0, 2}, []string{"v100", "", "v100", ""}},
		{"nothing free: stays", []JobView{sharer(1, 2)}, []int{0, 0, 0}, []string{""}},
		{"only its own type free: the requeue delay counts (1000 s against 631 s: it moves)", []JobView{sharer(1, 2)},
			[]int{1, 0, 0}, []string{"k80"}},
		{"only its own type free, a short job: 100 s against 181 s, it stays",
			[]JobView{with(sharer(1, 2), func(v *JobView) { v.StepsLeft = 100 })}, []int{1, 0, 0}, []string{""}},
		{"gains under a tenth: stays", []JobView{with(sharer(1, 2), func(v *JobView) { v.ShareMeasured = 9.5 })},
			[]int{0, 0, 1}, []string{""}},
		{"cannot be checkpointed: stays", []JobView{with(sharer(1, 2), func(v *JobView) { v.Migratable = false })},
			[]int{0, 0, 1}, []string{""}},
		{"its rate alone there only relative: not counted", []JobView{with(sharer(1, 2), func(v *JobView) {
			v.RateSource = []string{"measured", "measured", estimate.SourceRelative}
		})}, []int{0, 1, 1}, []string{"p100"}},
		{"the v100 is not one it fits (its user's choice, its memory): the p100", []JobView{with(sharer(1, 2), func(v *JobView) {
			v.Fits = []bool{true, true, false}
		})}, []int{0, 1, 1}, []string{"p100"}},
		{"steps left unknown: stays", []JobView{with(sharer(1, 2), func(v *JobView) { v.StepsLeft = 0 })},
			[]int{0, 0, 1}, []string{""}},
		{"not yet measured beside its mate: stays", []JobView{with(sharer(1, 2), func(v *JobView) { v.ShareMeasured = 0 })},
			[]int{0, 0, 1}, []string{""}},
		{"its pair not yet judged (its mate still timed): stays", []JobView{with(sharer(1, 2), func(v *JobView) { v.ShareJudged = false })},
			[]int{0, 0, 1}, []string{""}},
		{"a job on a GPU of its own is not a sharer", []JobView{with(sharer(1, 0), func(v *JobView) { v.Sharing = false })},
			[]int{0, 0, 1}, []string{""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			plan := Plan{Types: types, Actions: make([]Action, len(c.jobs))}
			for i, j := range c.jobs {
				plan.Actions[i] = Action{JobID: j.ID, Type: j.Type, Running: true}
			}
			leaveForFree(&plan, c.jobs, slices.Clone(c.free))
			for i, a := range plan.Actions {
				got := ""
				if a.Migrate {
					got = a.Type
					if !strings.Contains(a.Why, "is free, where alone it ends in about") {
						t.Errorf("job %d: why %q", a.JobID, a.Why)
					}
				}
				if got != c.to[i] {
					t.Errorf("job %d: moved to %q, want %q (why %q)", a.JobID, got, c.to[i], a.Why)
				}
			}
		})
	}
}

// TestShareJudged: judgePairs marks which sharers' rates it knows (a pair
// both timed beside each other, or a sharer alone on its GPU), and
// leaveForFree moves only those: half of a pair that hurts, timed before
// its mate, waits for the split rule to move both (seen on 26.05: one of
// a hurting pair left for a free V100, and the other ran on, never split).
func TestShareJudged(t *testing.T) {
	t.Parallel()
	measured := []string{"measured", "measured"}
	sharer := func(id, partner uint32, rate float64) JobView {
		return JobView{ID: id, Partner: partner, Running: true, Sharing: true, Migratable: true, Type: "k80", GPUs: 1,
			ShareMeasured: rate, SoloRate: 2, StepsLeft: 1000, MoveCost: 10 * time.Second, Rates: []float64{2, 10}, RateSource: measured}
	}
	with := func(v JobView, f func(*JobView)) JobView { f(&v); return v }
	// Sharing a K80: 0.5 steps/s each hurts (0.5x), 1.2 each pays (1.2x);
	// alone on the free V100 a job ends in 110 s against 833 s or more.
	for _, c := range []struct {
		name   string
		views  []JobView
		judged []bool
		moved  []string // after judgePairs and leaveForFree with two v100s free: "split", "left" or ""
	}{
		{"a pair that hurts, one timed: neither judged, neither moves", []JobView{sharer(1, 2, 0.5), sharer(2, 1, 0)},
			[]bool{false, false}, []string{"", ""}},
		{"a pair that hurts, both timed: both split", []JobView{sharer(1, 2, 0.5), sharer(2, 1, 0.5)},
			[]bool{true, true}, []string{"split", "split"}},
		{"a pair that pays, both timed: one leaves for the free v100", []JobView{sharer(1, 2, 1.2), sharer(2, 1, 1.2)},
			[]bool{true, true}, []string{"left", ""}},
		{"its solo rate unknown, both timed: judged (a pair kept, one leaves)", []JobView{
			with(sharer(1, 2, 1.2), func(v *JobView) { v.SoloRate = 0 }), sharer(2, 1, 1.2)}, []bool{true, true}, []string{"left", ""}},
		{"its partner ended: alone, judged", []JobView{sharer(1, 2, 1), with(sharer(2, 1, 1), func(v *JobView) { v.Running = false })},
			[]bool{true, false}, []string{"left", ""}},
		{"its partner ended, another joined its GPU (timed): a pair", []JobView{
			with(sharer(1, 2, 1.2), func(v *JobView) { v.OnGPU = "n/0" }), with(sharer(2, 1, 1.2), func(v *JobView) { v.Running = false }),
			with(sharer(3, 4, 0), func(v *JobView) { v.OnGPU = "n/0" })}, []bool{false, false, false}, []string{"", "", ""}},
		{"Slurm put its partner with another: it is alone, they a pair, all judged", []JobView{
			with(sharer(1, 2, 1.2), func(v *JobView) { v.OnGPU = "n/0" }), with(sharer(2, 1, 1.2), func(v *JobView) { v.OnGPU = "n/1" }),
			with(sharer(3, 0, 1.2), func(v *JobView) { v.OnGPU = "n/1" })}, []bool{true, true, true}, []string{"left", "left", ""}},
		{"its GPU known, its partner's not: not judged", []JobView{
			with(sharer(1, 2, 1.2), func(v *JobView) { v.OnGPU = "n/0" }), sharer(2, 1, 1.2)}, []bool{false, false}, []string{"", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := &Loop{pairTable: pairTab{}, pairSeen: map[pairKey]float64{}}
			l.judgePairs(c.views)
			plan := Plan{Types: []string{"k80", "v100"}, Actions: make([]Action, len(c.views))}
			for i, v := range c.views {
				if v.ShareJudged != c.judged[i] {
					t.Errorf("job %d: judged %v, want %v", v.ID, v.ShareJudged, c.judged[i])
				}
				plan.Actions[i] = Action{JobID: v.ID, Type: v.Type, Running: v.Running, Migrate: v.Split}
			}
			leaveForFree(&plan, c.views, []int{0, 2})
			for i, a := range plan.Actions {
				got := ""
				switch {
				case c.views[i].Split:
					got = "split"
				case a.Migrate:
					got = "left"
				}
				if got != c.moved[i] {
					t.Errorf("job %d: %q, want %q (why %q)", a.JobID, got, c.moved[i], a.Why)
				}
			}
		})
	}
}

// TestPlannerLeavesForFreeAfterPending: the round's pending jobs take the
// free GPUs first; a sharer moves only to one left free.
func TestPlannerLeavesForFreeAfterPending(t *testing.T) {
	t.Parallel()
	types := []string{"k80", "v100"}
	measured := []string{"measured", "measured"}
	pol, err := policy.New("las", policy.Options{SpaceSharing: true})
	if err != nil {
		t.Fatal(err)
	}
	sharer := func(id, partner uint32) JobView {
		return JobView{ID: id, Partner: partner, Running: true, Sharing: true, Migratable: true, Type: "k80", GPUs: 1,
			StepsLeft: 1000, ShareMeasured: 1, ShareJudged: true, MoveCost: 10 * time.Second, Rates: []float64{2, 10}, RateSource: measured}
	}
	for _, c := range []struct {
		name    string
		pending bool
		moves   int
	}{{"no job waits: a sharer takes the v100", false, 1}, {"a job waits: it takes the v100, the pair stays", true, 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			jobs := []JobView{sharer(1, 2), sharer(2, 1)}
			if c.pending {
				jobs = append(jobs, JobView{ID: 3, GPUs: 1, Submit: time.Now(), Rates: []float64{2, 10}, RateSource: measured, StepsLeft: 100})
			}
			p := NewPlanner(PlanConfig{Round: time.Minute, MinLease: time.Minute, PriorityBase: 1000000}, pol)
			plan, err := p.Decide(types, []int{1, 1}, jobs, func(pr *policy.Problem) (policy.Allocation, error) {
				return pol.Allocate(context.Background(), pr)
			})
			if err != nil {
				t.Fatal(err)
			}
			moves := 0
			for _, a := range plan.Actions[:2] {
				if a.Migrate {
					moves++
				}
			}
			if moves != c.moves {
				t.Errorf("%d sharers moved, want %d: %+v", moves, c.moves, plan.Actions)
			}
			if c.pending && plan.Actions[2].Type != "v100" {
				t.Errorf("the pending job got %q, want the free v100", plan.Actions[2].Type)
			}
		})
	}
}

// TestPlannerMovesSplitSharer: a sharer judgePairs split is migrated (to
// its type, as a whole GPU: migrate.go's unshare), counted in the plan's
// migrations; its partner that cannot move stays, saying why.
func TestPlannerMovesSplitSharer(t *testing.T) {
	t.Parallel()
	pol, err := policy.New("las", policy.Options{SpaceSharing: true})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPlanner(PlanConfig{Round: time.Minute, MinLease: 10 * time.Minute, PriorityBase: 1000000}, pol)
	jobs := []JobView{
		{ID: 1, Partner: 2, Running: true, Sharing: true, Type: "v100", GPUs: 1, Split: true, SplitWhy: "hurts: moved"},
		{ID: 2, Partner: 1, Running: true, Sharing: true, Type: "v100", GPUs: 1, SplitWhy: "hurts: left running"},
	}
	plan, err := p.Decide([]string{"v100"}, []int{2}, jobs, func(pr *policy.Problem) (policy.Allocation, error) {
		return pol.Allocate(context.Background(), pr)
	})
	if err != nil {
		t.Fatal(err)
	}
	if a := plan.Actions[0]; !a.Migrate || a.Type != "v100" || a.Why != "hurts: moved" || plan.Migrations != 1 {
		t.Errorf("split sharer: %+v, %d migrations", a, plan.Migrations)
	}
	if a := plan.Actions[1]; a.Migrate || a.Why != "hurts: left running" {
		t.Errorf("the partner that cannot move: %+v", a)
	}
}

// TestBackOnItsNode: a job requeued onto a type a node it ran on holds
// (a sharer split off its pair, a move between a node's MIG slices) must
// wait out Slurm's requeue delay; one moved to other nodes starts at once.
func TestBackOnItsNode(t *testing.T) {
	t.Parallel()
	nt := map[string]string{"v1": "v100", "k1": "k80", "m1": ""}
	for _, c := range []struct {
		name  string
		nodes []string
		to    string
		want  bool
	}{
		{"k80 to v100", []string{"k1"}, "v100", false},
		{"split: v100 to v100", []string{"v1"}, "v100", true},
		{"a node of several types", []string{"m1"}, "a100_3g.20gb", true},
		{"a node the round did not see", []string{"x9"}, "v100", true},
		{"two nodes, one of the type", []string{"k1", "v1"}, "v100", true},
	} {
		if got := backOnItsNode(c.nodes, nt, c.to); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestTypedUsageCountsShards: running jobs on shards count in typed limits
// as the fraction of a GPU they hold, a user's summed and rounded up; a
// pending job of that user then finds the room that is left.
func TestTypedUsageCountsShards(t *testing.T) {
	t.Parallel()
	set := &limits.Set{QOS: map[string]limits.QOS{"normal": {Name: "normal", PerUser: limits.PerType{"v100": 2}}}}
	nodeType := map[string]string{"n1": "v100"}
	running := func(id uint32, user, tres string) slurm.Job {
		return slurm.Job{ID: id, User: user, Account: "lab", QOS: "normal", State: "RUNNING", Nodes: []string{"n1"}, TresPerNode: tres, NumNodes: 1, NumTasks: 1}
	}
	for _, c := range []struct {
		name   string
		jobs   []slurm.Job
		per    int // shards a v100
		wantAl int // room left to alice on v100
	}{
		{"two half-GPU sharers: one GPU", []slurm.Job{running(1, "alice", "gres/shard:1"), running(2, "alice", "gres/shard:1")}, 2, 1},
		{"one half-GPU sharer: rounded up", []slurm.Job{running(1, "alice", "gres/shard:v100:1")}, 2, 1},
		{"three of a quarter each: one GPU", []slurm.Job{running(1, "alice", "gres/shard:1"), running(2, "alice", "gres/shard:1"),
			running(3, "alice", "gres/shard:1")}, 4, 1},
		{"a whole GPU and a sharer", []slurm.Job{running(1, "alice", "gres/gpu:1"), running(2, "alice", "gres/shard:1")}, 2, 0},
		{"shards per GPU unknown: a GPU a job", []slurm.Job{running(1, "alice", "gres/shard:1"), running(2, "alice", "gres/shard:1")}, 0, 0},
		{"someone else's sharers", []slurm.Job{running(1, "bob", "gres/shard:1"), running(2, "bob", "gres/shard:1")}, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u, _ := typedUsage(set, c.jobs, []string{"v100"}, nodeType, map[string]int{"v100": c.per})
			if left, _, ok := u.Room("alice", "lab", "normal", "v100"); !ok || left != c.wantAl {
				t.Errorf("room left to alice: %d (%v), want %d", left, ok, c.wantAl)
			}
		})
	}
}

// TestUnshareUpdate: a sharer split off its pair gets its --gres=gpu:1
// back on its type, written the way the type is chosen.
func TestUnshareUpdate(t *testing.T) {
	t.Parallel()
	snap := &cluster.Snapshot{Types: map[string]*cluster.TypeCap{
		"v100": {Type: "v100", ShardsPerGPU: 2, ByFeature: true}, "p100": {Type: "p100", ShardsPerGPU: 2}}}
	for _, c := range []struct {
		typ, features, wantGPU string
		wantFeatures           *string
	}{
		{"v100", "v100", "gres/gpu:1", ptr("v100")},
		{"p100", "", "gres/gpu:p100:1", nil},
		{"p100", "v100", "gres/gpu:p100:1", ptr("")}, // Rota's constraint given back
	} {
		j := &slurm.Job{ID: 1, State: "PENDING", TresPerNode: "gres/shard:1", Features: c.features, NumNodes: 1, NumTasks: 1}
		tr := &tracked{decision: &wire.Decision{}}
		var u slurm.JobUpdate
		if !(&Loop{}).unshare(&u, j, tr, c.typ, snap) || u.GPU == nil || u.GPU.PerNode != c.wantGPU {
			t.Errorf("%s: GPU %+v, want %s", c.typ, u.GPU, c.wantGPU)
		}
		if (u.Features == nil) != (c.wantFeatures == nil) || (u.Features != nil && *u.Features != *c.wantFeatures) {
			t.Errorf("%s from %q: features %v, want %v", c.typ, c.features, u.Features, c.wantFeatures)
		}
	}
}

func ptr(s string) *string { return &s }

// gpuIdx answers JobGPUs from a map of job -> GPU index on node-v100,
// counting the calls.
type gpuIdx struct {
	mu    sync.Mutex
	at    map[uint32]int
	calls map[uint32]int
}

func (g *gpuIdx) JobGPUs(_ context.Context, id uint32) (string, []int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[id]++
	i, ok := g.at[id]
	if !ok {
		return "", nil, errors.New("no such job")
	}
	return "node-v100", []int{i}, nil
}

// TestRoundReadsSharersGPUs: a round reads which GPU each running sharer
// holds from Slurm, once a run and outside the loop's lock (a read under
// it hung the round on real Slurm), and rota explain then names the job
// on the same GPU, not the partner Rota paired it with.
func TestRoundReadsSharersGPUs(t *testing.T) {
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	shared := func() *wire.Decision {
		return &wire.Decision{Asked: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Share: wire.ShareYes, Model: "a"}}}
	}
	for id := uint32(1); id <= 4; id++ {
		f.add(id, "RUNNING", "node-v100", "v100", shared(), decs)
		f.jobs[id].TresPerNode = "gres/shard:v100:1"
	}
	g := &gpuIdx{at: map[uint32]int{1: 0, 2: 1, 3: 0, 4: 1}, calls: map[uint32]int{}}
	cfg := DefaultConfig()
	cfg.Round, cfg.MinLease = time.Minute, 10*time.Minute
	l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{}, GPUs: g})
	if err != nil {
		t.Fatal(err)
	}
	// Rota paired 1 with 2 and 3 with 4 (state a restart restores).
	l.mu.Lock()
	for _, p := range [][2]uint32{{1, 2}, {3, 4}} {
		l.known[p[0]] = &tracked{decision: decs.m[fmt.Sprint("d", p[0])], partner: p[1]}
		l.known[p[1]] = &tracked{decision: decs.m[fmt.Sprint("d", p[1])], partner: p[0]}
	}
	l.mu.Unlock()
	for r := 0; r < 2; r++ {
		done := make(chan error, 1)
		go func() { done <- l.Round(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the round did not end: hung reading the sharers' GPUs")
		}
	}
	for id := uint32(1); id <= 4; id++ {
		if g.calls[id] != 1 {
			t.Errorf("job %d's GPU read %d times in two rounds of one run, want once", id, g.calls[id])
		}
	}
	if a, _, ok := l.Explain(1); !ok || a.Partner != 3 || !strings.Contains(a.Why, "with job 3") {
		t.Errorf("job 1 shares GPU 0 with job 3; explain says %d %q (%v)", a.Partner, a.Why, ok)
	}
}

// TestRoundSharersLeaveForFree: a round moves a running sharer to an idle
// V100 where alone it ends sooner (its rate beside its mate timed over two
// reports), one of each pair, never a sharer that is a chain segment (the
// chain manager's: its partner goes instead), and only to a type its user
// allows (jobs 3 and 4: k80 or p100).
func TestRoundSharersLeaveForFree(t *testing.T) {
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	shared := func() *wire.Decision {
		return &wire.Decision{Asked: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1},
			Hints: wire.Hints{Share: wire.ShareYes, Model: "a", CheckpointSignal: "USR1"}}}
	}
	for id := uint32(1); id <= 4; id++ {
		d := shared()
		if id >= 3 {
			d.Asked.Hints.Types = []string{"k80", "p100"} // --rota-types=k80,p100
		}
		f.add(id, "RUNNING", "node-k80", "k80", d, decs)
		f.jobs[id].TresPerNode = "gres/shard:k80:1"
	}
	meas := fakeMeas{}
	t0 := time.Now()
	report := func(at time.Time, step uint64) {
		for id := uint32(1); id <= 4; id++ {
			meas[id] = observe.Job{ID: id, Seen: at, Step: step, Total: 1100,
				Rates: []observe.TypeRate{{GPUType: "k80", StepsPerSec: 0.6, Samples: 5}}}
		}
	}
	cfg := DefaultConfig()
	cfg.Round, cfg.MinLease = time.Minute, 10*time.Second
	// Alone: 1 step/s on a K80, 4 on a V100 (tableEst); sharing, 0.6 each
	// (1.2x together: the pair pays, so judgePairs leaves it).
	l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: meas, Estimator: &tableEst{}})
	if err != nil {
		t.Fatal(err)
	}
	l.SetChains(fakeChains{1: false}) // job 1 is a running chain segment
	l.mu.Lock()
	for _, p := range [][2]uint32{{1, 2}, {3, 4}} {
		l.known[p[0]] = &tracked{decision: decs.m[fmt.Sprint("d", p[0])], partner: p[1]}
		l.known[p[1]] = &tracked{decision: decs.m[fmt.Sprint("d", p[1])], partner: p[0]}
	}
	l.mu.Unlock()
	report(t0, 100)
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := l.Explain(2); strings.Contains(a.Why, "is free") {
		t.Fatalf("job 2 moved before its rate beside job 1 was timed: %q", a.Why)
	}
	report(t0.Add(20*time.Second), 112) // 0.6 steps/s beside its mate: 1000 left, about 1667 s; on a V100 about 250 s
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	moved := map[uint32]bool{}
	for id := uint32(1); id <= 4; id++ {
		a, _, ok := l.Explain(id)
		if !ok {
			t.Fatalf("no action for job %d", id)
		}
		if a.Migrate {
			moved[id] = true
			want := "v100"
			if id >= 3 {
				want = "p100" // the fastest its user allows
			}
			if a.Type != want || !strings.Contains(a.Why, "a "+want+" is free, where alone it ends in about") {
				t.Errorf("job %d moved to %s, want %s: %q", id, a.Type, want, a.Why)
			}
		}
	}
	if moved[1] || !moved[2] || moved[3] == moved[4] {
		t.Errorf("moved %v; want job 2 (its partner 1 is a chain segment) and one of 3 and 4", moved)
	}
}
