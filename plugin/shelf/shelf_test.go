package shelf

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/plugin/submit"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/hints"
)

// The shelf is one per process: these tests share it and run in turn,
// each starting from Reset.

const spank = "_SLURM_SPANK_OPTION_rota_"

func keyJob() *submit.Job {
	return &submit.Job{UID: 1000, JobID: submit.NoVal, TresPerNode: "gres/gpu:1", Account: "ml", Partition: "gpu",
		Name: "train", ScriptHash: hints.ScriptHash([]byte("x")), TimeLimit: submit.NoVal, MinNodes: submit.NoVal, NumTasks: submit.NoVal, Features: "",
		MaxNodes: submit.NoVal, TasksPerNode: 0xfffe, SocketsPerNode: 0xfffe, // unset, as Slurm passes them
		SpankEnv: []string{spank + "rota_steps=6000", "SPANK_OTHER=1", spank + "rota_throughput=k80:2"}}
}

// chain is n decisions for jobs of one key, one after the other.
func chain(n int) []submit.Node {
	var ns []submit.Node
	for i := range n {
		g, t := fmt.Sprintf("gres/gpu:v100:%d", i+1), uint32(60+i)
		ns = append(ns, submit.Node{Parent: i - 1, Change: submit.Change{TresPerNode: &g, TimeLimit: &t, AdminComment: fmt.Sprintf("rota: #%d", i), HoldS: uint32(30 + i)}})
	}
	return ns
}

func stock(t *testing.T, key *submit.Job, n int, valid time.Duration) uint64 {
	t.Helper()
	gen, ok := Shelf{}.Stock([]submit.Job{*key}, chain(n), valid)
	if !ok || gen == 0 {
		t.Fatalf("stock refused (gen %d)", gen)
	}
	return gen
}

// A job takes from the shelf exactly when every field the decision
// reads equals the key's: its own script does not matter, nor its name
// unless the key is by name.
func TestServeMatchesTheKeyOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(j *submit.Job)
		want bool
	}{
		{"identical", func(*submit.Job) {}, true},
		{"other name", func(j *submit.Job) { j.Name = "other" }, true},
		// Users, accounts and QOS have their own typed-limit headroom.
		{"other user", func(j *submit.Job) { j.UID = 7 }, false},
		{"other qos", func(j *submit.Job) { j.QOS = "big" }, false},
		{"empty string is unset", func(j *submit.Job) { j.TresPerJob = "" }, true},
		{"gres count", func(j *submit.Job) { j.TresPerNode = "gres/gpu:2" }, false},
		{"per job", func(j *submit.Job) { j.TresPerJob = "gres/gpu:1" }, false},
		{"per socket", func(j *submit.Job) { j.TresPerSocket = "gres/gpu:1" }, false},
		{"per task", func(j *submit.Job) { j.TresPerTask = "gres/gpu:1" }, false},
		{"account", func(j *submit.Job) { j.Account = "physics" }, false},
		{"partition", func(j *submit.Job) { j.Partition = "debug" }, false},
		{"constraint", func(j *submit.Job) { j.Features = "v100" }, false},
		{"time limit", func(j *submit.Job) { j.TimeLimit = 60 }, false},
		{"nodes", func(j *submit.Job) { j.MinNodes = 2 }, false},
		{"tasks", func(j *submit.Job) { j.NumTasks = 4 }, false},
		{"max nodes", func(j *submit.Job) { j.MaxNodes = 2 }, false},
		{"tasks per node", func(j *submit.Job) { j.TasksPerNode = 2 }, false},
		{"sockets per node", func(j *submit.Job) { j.SocketsPerNode = 2 }, false},
		{"job id", func(j *submit.Job) { j.JobID = 77 }, false},
		{"an update", func(j *submit.Job) { j.Modify = true }, false},
		{"a rota option", func(j *submit.Job) { j.SpankEnv[0] = spank + "rota_steps=7000" }, false},
		{"options reordered", func(j *submit.Job) { j.SpankEnv[0], j.SpankEnv[2] = j.SpankEnv[2], j.SpankEnv[0] }, false},
		{"one option more", func(j *submit.Job) { j.SpankEnv = append(j.SpankEnv, spank+"rota=off") }, false},
		{"one option less", func(j *submit.Job) { j.SpankEnv = j.SpankEnv[:2] }, false},
		{"no options", func(j *submit.Job) { j.SpankEnv = nil }, false},
		// A key by name (its user's speeds were learned by job name).
		{"by name: same name", func(j *submit.Job) {}, true},
		{"by name: other name", func(j *submit.Job) { j.Name = "other" }, false},
		{"by name: no name", func(j *submit.Job) { j.Name = "" }, false},
		// A key of a name not learned, where others of its user's are.
		{"not names: the key's name", func(j *submit.Job) {}, true},
		{"not names: another name", func(j *submit.Job) { j.Name = "sweep-7" }, true},
		{"not names: a learned name", func(j *submit.Job) { j.Name = "lm" }, false},
		{"not names: the other learned name", func(j *submit.Job) { j.Name = "bert" }, false},
		{"not names: no name", func(j *submit.Job) { j.Name = "" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Shelf{}.Reset()
			defer Shelf{}.Reset()
			key := keyJob()
			key.NameKeyed = strings.HasPrefix(tc.name, "by name")
			if strings.HasPrefix(tc.name, "not names") {
				key.NotNames = []string{"bert", "lm"}
			}
			stock(t, key, 2, time.Hour)
			j := keyJob()
			tc.edit(j)
			ch, got := Shelf{}.Serve(j, []byte("#!/bin/sh\n"))
			if got != tc.want {
				t.Fatalf("served %v, want %v", got, tc.want)
			}
			if same := submit.SameRequest(key, j); same != tc.want {
				t.Fatalf("Go's SameRequest says %v, the shelf served %v", same, got)
			}
			if got && (ch.TresPerNode == nil || *ch.TresPerNode != "gres/gpu:v100:1" || ch.TimeLimit == nil || *ch.TimeLimit != 60 ||
				ch.AdminComment != "rota: #0" || ch.HoldS != 30 || ch.TresPerJob != nil || ch.Features != nil) {
				t.Fatalf("served %+v, want the first change", ch)
			}
		})
	}
}

// Decisions go out in order, each once, and Take hands over who took
// them; the shelf then refuses a new stock (and Clear) until every record
// is taken, since Local has not counted those placements yet.
func TestShelfOrderRecordsAndRefusal(t *testing.T) {
	Shelf{}.Reset()
	defer Shelf{}.Reset()
	gen := stock(t, keyJob(), 3, time.Hour)
	for i := range 3 {
		j := keyJob()
		j.Name = fmt.Sprintf("job-%d", i)
		ch, ok := Shelf{}.Serve(j, []byte(fmt.Sprintf("#!/bin/sh\necho %d\n", i)))
		if !ok || ch.AdminComment != fmt.Sprintf("rota: #%d", i) {
			t.Fatalf("job %d: served %v %+v", i, ok, ch)
		}
		if i == 0 {
			if _, ok := (Shelf{}).Stock([]submit.Job{*keyJob()}, chain(2), time.Hour); ok {
				t.Fatal("stocked over a decision not yet taken")
			}
			if (Shelf{}).Clear() {
				t.Fatal("cleared over a decision not yet taken")
			}
		}
	}
	if _, ok := (Shelf{}).Serve(keyJob(), []byte("x")); ok {
		t.Fatal("served past the stock")
	}
	used := Shelf{}.Take(nil)
	if len(used) != 3 {
		t.Fatalf("took %d records, want 3", len(used))
	}
	for i, u := range used {
		wantHash := hints.ScriptHash([]byte(fmt.Sprintf("#!/bin/sh\necho %d\n", i)))
		if u.Gen != gen || u.Index != i || u.Name != fmt.Sprintf("job-%d", i) || u.UID != 1000 || u.ScriptHash != wantHash ||
			time.Since(u.At) > time.Minute || time.Since(u.At) < 0 {
			t.Fatalf("record %d: %+v", i, u)
		}
	}
	if again := (Shelf{}).Take(nil); len(again) != 0 {
		t.Fatalf("records taken twice: %+v", again)
	}
	gen2, ok := Shelf{}.Stock([]submit.Job{*keyJob()}, chain(1), time.Hour)
	if !ok || gen2 == gen {
		t.Fatalf("restock after Take: %d %v (old gen %d)", gen2, ok, gen)
	}
	if (Shelf{}).Renew(gen, time.Hour) {
		t.Fatal("renewed a stock that was replaced")
	}
	if !(Shelf{}).Clear() {
		t.Fatal("clear refused with nothing untaken")
	}
	if _, ok := (Shelf{}).Serve(keyJob(), []byte("x")); ok {
		t.Fatal("served from a cleared shelf")
	}
}

// A stock serves only while valid (the sender renews it at every poll),
// never a script too long to copy, and never more jobs than it can keep
// records of.
func TestShelfLimits(t *testing.T) {
	Shelf{}.Reset()
	defer Shelf{}.Reset()
	gen := stock(t, keyJob(), 2, time.Millisecond)
	time.Sleep(5 * time.Millisecond) // past the 1 ms validity: the expiry is what is tested
	if _, ok := (Shelf{}).Serve(keyJob(), []byte("x")); ok {
		t.Fatal("served from an expired stock")
	}
	if !(Shelf{}).Renew(gen, time.Hour) {
		t.Fatal("renew refused")
	}
	if _, ok := (Shelf{}).Serve(keyJob(), nil); ok {
		t.Fatal("served an allocation without a batch script (salloc, srun): an interactive job")
	}
	if _, ok := (Shelf{}).Serve(keyJob(), []byte("x")); !ok {
		t.Fatal("renewed stock did not serve")
	}
	if _, ok := (Shelf{}).Serve(keyJob(), make([]byte, 64*1024+1)); ok {
		t.Fatal("served a job whose script is too long to copy")
	}
	if n := (Shelf{}).Reset(); n != 1 {
		t.Fatalf("reset dropped %d records, want 1", n)
	}

	stock(t, keyJob(), 600, time.Hour)
	served := 0
	for range 600 {
		if _, ok := (Shelf{}).Serve(keyJob(), []byte("x")); ok {
			served++
		}
	}
	if served != 512 { // ROTA_SHELF_USED_MAX
		t.Fatalf("served %d jobs without their records taken, want 512", served)
	}
	if got := len(Shelf{}.Take(nil)); got != 512 {
		t.Fatalf("took %d records, want 512", got)
	}
	if _, ok := (Shelf{}).Serve(keyJob(), []byte("x")); !ok {
		t.Fatal("did not serve again once the records were taken")
	}
}

func stateMsg(gen uint64, reserved map[string]int) []byte {
	s := wire.PlaceState{V: wire.Version, Controller: "c", Gen: gen, Policy: "las", Reserved: reserved,
		Rule: wire.PlaceRule{Speed: map[string]float64{"v100": 3, "p100": 2}, WalltimeMargin: 1.5},
		Cluster: &wire.ClusterView{DefaultPartition: "gpu", Types: map[string]wire.TypeView{
			"v100": {Nodes: 1, Total: 4, MaxPerNode: 4, Partitions: []string{"gpu"}},
			"p100": {Nodes: 1, Total: 4, MaxPerNode: 4, Partitions: []string{"gpu"}},
			"k80":  {Nodes: 2, Total: 8, MaxPerNode: 4, Partitions: []string{"gpu"}}}}}
	b, _ := json.Marshal(&s)
	return b
}

// Local with the real shelf, driven as the shim drives it (Serve first,
// Go when the shelf does not serve), places every job exactly as Local
// without a shelf places the same jobs in Go, across runs of identical
// jobs, a different job between them, and a new state; and every job's
// decision is recorded once, in order, with that job's own name, user and
// script.
func TestLocalWithShelfDecidesAsGo(t *testing.T) {
	a := keyJob()
	b := keyJob()
	b.TresPerNode = "gres/gpu:2"
	b.SpankEnv = nil
	var seq []*submit.Job
	for range 30 {
		seq = append(seq, a)
	}
	seq = append(seq, b, b, b)
	for range 30 {
		seq = append(seq, a)
	}
	served := decidesAsGo(t, seq, map[int]map[string]int{45: {"v100": 2}}, stateMsg, false)
	// Without this the test would pass with the shelf never used. (How
	// many depends on how promptly the sender polls; the pattern logged
	// shows which: S from the shelf, g in Go.)
	if served < 10 {
		t.Fatalf("only %d of %d jobs served from the shelf", served, len(seq))
	}
}

// variedState has two partitions and types of several sizes, busy in
// part, with when each GPU is free (for list scheduling), so that each
// placement changes what the next request of every shape sees.
func variedState(gen uint64, reserved map[string]int) []byte {
	s := wire.PlaceState{V: wire.Version, Controller: "c", Gen: gen, Policy: "las", Reserved: reserved,
		Rule:  wire.PlaceRule{Speed: map[string]float64{"v100": 3, "p100": 2, "k80": 1}, WalltimeMargin: 1.5, WalltimeOverheadMin: 2},
		Slots: map[string][]float64{"v100": slots(8, 8), "p100": slots(14, 2), "k80": slots(27, 5)},
		Cluster: &wire.ClusterView{DefaultPartition: "gpu", Types: map[string]wire.TypeView{
			"v100": {Nodes: 2, Total: 16, Used: 8, MaxPerNode: 8, Partitions: []string{"gpu"}},
			"p100": {Nodes: 4, Total: 16, Used: 2, MaxPerNode: 4, Partitions: []string{"gpu", "debug"}},
			"k80":  {Nodes: 4, Total: 32, Used: 5, MaxPerNode: 8, Partitions: []string{"gpu", "debug"}}},
			Partitions: map[string]wire.PartitionView{"gpu": {MaxTimeMin: 2880}, "debug": {MaxTimeMin: 120}}}}
	b, _ := json.Marshal(&s)
	return b
}

// slots is free GPUs free now, then busy ones free 10 minutes apart.
func slots(free, busy int) []float64 {
	sl := make([]float64, free, free+busy)
	for i := range busy {
		sl = append(sl, float64(600*(i+1)))
	}
	return sl
}

// The shelf holds decisions for several requests at once, in every order
// they may come: jobs of varied shapes (gpu:1, gpu:2, gpu:4, --gpus=8,
// another partition, a user's own type, known work that is list-scheduled,
// a time limit) in a random order with runs and strangers, across new
// states, are placed exactly as Go alone places them, and recorded once
// each, in order.
func TestLocalWithShelfDecidesAsGoVaried(t *testing.T) {
	shape := func(edit func(j *submit.Job)) *submit.Job {
		j := keyJob()
		j.SpankEnv = nil
		edit(j)
		return j
	}
	shapes := []*submit.Job{
		shape(func(j *submit.Job) {}),
		shape(func(j *submit.Job) { j.TresPerNode = "gres/gpu:2" }),
		shape(func(j *submit.Job) { j.TresPerNode = "gres/gpu:4" }),
		shape(func(j *submit.Job) { j.TresPerNode, j.TresPerJob = "", "gres/gpu:8" }),
		shape(func(j *submit.Job) { j.Partition = "debug" }),
		shape(func(j *submit.Job) { j.TresPerNode = "gres/gpu:k80:1" }),
		shape(func(j *submit.Job) {
			j.SpankEnv = []string{spank + "rota_steps=36000", spank + "rota_throughput=v100:10"}
		}),
		shape(func(j *submit.Job) { j.TimeLimit = 90 }),
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 17))
			var seq []*submit.Job
			for len(seq) < 160 {
				// Mostly two to four shapes in turn, as a queue of a few
				// users; now and then a run, or a stranger.
				few := shapes[:2+int(seed)%3]
				switch x := r.IntN(20); {
				case x == 0:
					seq = append(seq, shapes[r.IntN(len(shapes))])
				case x == 1:
					j := few[r.IntN(len(few))]
					for range 1 + r.IntN(5) {
						seq = append(seq, j)
					}
				default:
					seq = append(seq, few[len(seq)%len(few)])
				}
			}
			served := decidesAsGo(t, seq, map[int]map[string]int{70: {"v100": 2}, 120: {"k80": 9}}, variedState, false)
			if served < len(seq)/3 {
				t.Fatalf("only %d of %d jobs served from the shelf", served, len(seq))
			}
		})
	}
}

// decidesAsGo submits seq to Local with the shelf, as the shim does, and
// to Local without one, feeding both a new state (from msg) before the
// jobs of newState's indices; it fails unless every job was placed alike
// and recorded once, in order. It returns how many the shelf served. Each
// job gets a name of its own (the shelf must not care) unless keepNames.
func decidesAsGo(t *testing.T, seq []*submit.Job, newState map[int]map[string]int, msg func(uint64, map[string]int) []byte, keepNames bool) int {
	t.Helper()
	Shelf{}.Reset()
	defer Shelf{}.Reset()
	var mu sync.Mutex
	var sent []wire.Decision
	l := submit.NewLocal(30*time.Second, func(batch [][]byte) error {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range batch {
			var d wire.Decision
			if err := wire.Decode(b, &d); err != nil {
				return err
			}
			sent = append(sent, d)
		}
		return nil
	})
	defer l.Close()
	l.SetShelf(Shelf{})
	ref := submit.NewLocal(30*time.Second, func([][]byte) error { return nil })
	defer ref.Close()
	h := &submit.Handler{Config: submit.DefaultConfig(), Placer: l}
	hr := &submit.Handler{Config: submit.DefaultConfig(), Placer: ref}
	gen := uint64(1)
	feed := func(reserved map[string]int) {
		for _, x := range []*submit.Local{l, ref} {
			if err := x.Feed(msg(gen, reserved)); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed(nil)
	type placed struct {
		id, name, hash string
		uid            uint32
		gen            uint64
	}
	var out []placed
	served := 0
	pattern := ""
	defer func() { t.Logf("placed: %s", pattern) }()
	for i, tmpl := range seq {
		if res, ok := newState[i]; ok { // nothing decided in the old state is served after it
			gen++
			feed(res)
		}
		j := *tmpl
		if !keepNames {
			j.Name = fmt.Sprintf("job-%d", i)
		}
		script := []byte(fmt.Sprintf("#!/bin/sh\ntrain --seed %d\n", i))
		ch, ok := Shelf{}.Serve(&j, script)
		j.ScriptHash = hints.ScriptHash(script)
		if ok {
			served++
			pattern += "S"
		} else {
			pattern += "g"
			var o submit.Outcome
			var err error
			if ch, o, err = h.Handle(context.Background(), &j); o != submit.Rewritten && o != submit.Kept {
				t.Fatalf("job %d: %v %v", i, o, err)
			}
		}
		want, o, err := hr.Handle(context.Background(), &j)
		if o != submit.Rewritten && o != submit.Kept {
			t.Fatalf("job %d, reference: %v %v", i, o, err)
		}
		if str(ch.TresPerNode) != str(want.TresPerNode) || str(ch.TresPerJob) != str(want.TresPerJob) ||
			str(ch.TresPerSocket) != str(want.TresPerSocket) || str(ch.TresPerTask) != str(want.TresPerTask) ||
			str(ch.Features) != str(want.Features) || num(ch.TimeLimit) != num(want.TimeLimit) ||
			noID(ch.AdminComment) != noID(want.AdminComment) || (ch.AdminComment == "") != (want.AdminComment == "") || ch.HoldS != want.HoldS {
			t.Fatalf("job %d (served from the shelf: %v): %s %s %d %q, Go without a shelf: %s %s %d %q", i, ok,
				str(ch.TresPerNode), str(ch.TresPerJob), num(ch.TimeLimit), ch.AdminComment,
				str(want.TresPerNode), str(want.TresPerJob), num(want.TimeLimit), want.AdminComment)
		}
		if ch.AdminComment != "" {
			out = append(out, placed{wire.DecisionIDFromComment(ch.AdminComment), j.Name, j.ScriptHash, j.UID, gen})
		}
		time.Sleep(3 * time.Millisecond) // sbatch's pace is 5 to 10 ms
	}
	l.Flush()
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != len(out) {
		t.Fatalf("%d decisions recorded for %d jobs", len(sent), len(out))
	}
	for i, d := range sent {
		p := out[i]
		if d.ID != p.id || d.Asked.Name != p.name || d.Asked.UID != p.uid || d.Asked.ScriptHash != p.hash || d.Seq != uint64(i+1) ||
			d.Reserve == nil || d.Given.Reason == "" || d.Origin != l.Origin {
			t.Fatalf("record %d: %+v, want job %+v", i, d, p)
		}
		if d.StateGen != p.gen {
			t.Fatalf("record %d decided in state %d, want %d", i, d.StateGen, p.gen)
		}
	}
	t.Logf("%d of %d jobs served from the shelf", served, len(seq))
	return served
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func num(p *uint32) int64 {
	if p == nil {
		return -1
	}
	return int64(*p)
}

func noID(c string) string {
	if i := strings.LastIndex(c, "[d="); i >= 0 {
		return c[:i]
	}
	return c
}

// countingShelf counts the stocks Local puts on the shelf.
type countingShelf struct {
	Shelf
	mu     sync.Mutex
	stocks int
}

func (c *countingShelf) Stock(keys []submit.Job, nodes []submit.Node, validFor time.Duration) (uint64, bool) {
	c.mu.Lock()
	c.stocks++
	c.mu.Unlock()
	return c.Shelf.Stock(keys, nodes, validFor)
}

// Submissions that keep changing (here every one new) are never
// stocked for: no stock would be taken from before the next job empties
// it, so it would only cost work. Once one repeats one of the last few
// placed in Go (here two shapes in turn), the shelf is stocked for them,
// and the next jobs of either served.
func TestShelfStocksOnlyForARepeat(t *testing.T) {
	Shelf{}.Reset()
	defer Shelf{}.Reset()
	l := submit.NewLocal(30*time.Second, func([][]byte) error { return nil })
	defer l.Close()
	cs := &countingShelf{}
	l.SetShelf(cs)
	if err := l.Feed(stateMsg(1, nil)); err != nil {
		t.Fatal(err)
	}
	h := &submit.Handler{Config: submit.DefaultConfig(), Placer: l}
	a := keyJob()
	b := keyJob()
	b.TresPerNode = "gres/gpu:2"
	submitJob := func(j *submit.Job) bool {
		if _, ok := (Shelf{}).Serve(j, []byte("x")); ok {
			return true
		}
		if _, o, err := h.Handle(context.Background(), j); o != submit.Rewritten {
			t.Fatalf("%v %v", o, err)
		}
		return false
	}
	for i := range 20 {
		j := keyJob()
		j.TimeLimit = uint32(100 + i)
		if submitJob(j) {
			t.Fatalf("job %d served from the shelf", i)
		}
		time.Sleep(3 * time.Millisecond) // time enough to stock: what is tested is that none comes
	}
	cs.mu.Lock()
	if cs.stocks != 0 {
		t.Fatalf("%d stocks for 20 jobs each unlike the ones before, none of which could be served", cs.stocks)
	}
	cs.mu.Unlock()
	// a, b, then a again: a repeat of one of the last few stocks the shelf.
	for _, j := range []*submit.Job{a, b, a} {
		if submitJob(j) {
			t.Fatal("served before any stock")
		}
	}
	for _, j := range []*submit.Job{b, a} {
		eventually.True(t, 5*time.Second, "two shapes in turn served from the shelf ("+j.TresPerNode+")", func() bool { return submitJob(j) })
	}
}

// tree is nodes of the given parents and keys, each change naming its
// index.
func tree(parents, keys []int) []submit.Node {
	ns := make([]submit.Node, len(parents))
	for i := range parents {
		ns[i] = submit.Node{Parent: parents[i], Key: keys[i], Change: submit.Change{AdminComment: fmt.Sprintf("rota: #%d", i)}}
	}
	return ns
}

// A stock over two keys serves each job the child, of its key, of the
// node last taken, and records which; it refuses what is not a tree in
// order.
func TestShelfTree(t *testing.T) {
	Shelf{}.Reset()
	defer Shelf{}.Reset()
	a := keyJob()
	b := keyJob()
	b.TresPerNode = "gres/gpu:2"
	c := keyJob()
	c.Partition = "debug"
	// root -> a:0 (-> a:2, b:3), b:1 (-> a:4)
	gen, ok := Shelf{}.Stock([]submit.Job{*a, *b}, tree([]int{-1, -1, 0, 0, 1}, []int{0, 1, 0, 1, 0}), time.Hour)
	if !ok {
		t.Fatal("refused a tree")
	}
	serve := func(j *submit.Job) string {
		ch, ok := Shelf{}.Serve(j, []byte("x"))
		if !ok {
			return "-"
		}
		return ch.AdminComment
	}
	if got := serve(c); got != "-" {
		t.Fatalf("a job of no key took %s", got)
	}
	for i, want := range []struct {
		j    *submit.Job
		want string
	}{{b, "rota: #1"}, {b, "-"}, {a, "rota: #4"}, {a, "-"}, {b, "-"}} {
		if got := serve(want.j); got != want.want {
			t.Fatalf("job %d took %s, want %s", i, got, want.want)
		}
	}
	used := Shelf{}.Take(nil)
	if len(used) != 2 || used[0].Index != 1 || used[1].Index != 4 || used[0].Gen != gen {
		t.Fatalf("records %+v", used)
	}
	for _, bad := range []struct {
		name          string
		parents, keys []int
		nkeys         int
	}{
		{"a parent after its child", []int{1, -1}, []int{0, 0}, 1},
		{"its own parent", []int{0}, []int{0}, 1},
		{"a parent below the root", []int{-2}, []int{0}, 1},
		{"two children of one key", []int{-1, -1}, []int{1, 1}, 2},
		{"a key out of range", []int{-1}, []int{2}, 2},
	} {
		keys := []submit.Job{*a, *b}[:bad.nkeys]
		if _, ok := (Shelf{}).Stock(keys, tree(bad.parents, bad.keys), time.Hour); ok {
			t.Fatalf("stocked %s", bad.name)
		}
		if got := serve(a); got != "-" {
			t.Fatalf("after a refused stock (%s), a job took %s", bad.name, got)
		}
	}
	if _, ok := (Shelf{}).Stock(nil, tree([]int{-1}, []int{0}), time.Hour); ok {
		t.Fatal("stocked with no keys")
	}
}

// FuzzShelfTree: whatever nodes Go hands the shelf, it stocks exactly
// the trees in order, and serves each job the node a plain model says.
func FuzzShelfTree(f *testing.F) {
	f.Add([]byte{0xff, 0, 0xff, 1, 0, 0, 0, 1, 1, 0}, []byte{1, 0, 1, 1, 0})
	f.Add([]byte{0xff, 0, 0, 0, 1, 0, 2, 0}, []byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 2, 0xff, 2}, []byte{2, 2})
	f.Fuzz(func(t *testing.T, raw []byte, jobs []byte) {
		Shelf{}.Reset()
		defer Shelf{}.Reset()
		const nkeys = 3
		keys := make([]submit.Job, nkeys)
		for i := range keys {
			keys[i] = *keyJob()
			keys[i].TimeLimit = uint32(10 + i)
		}
		var parents, ks []int
		for i := 0; i+1 < len(raw) && len(parents) < 64; i += 2 {
			parents = append(parents, int(int8(raw[i])))
			ks = append(ks, int(raw[i+1]%4)) // 3 is out of range
		}
		// The model: a tree in order, or refused.
		kids := map[[2]int]int{}
		valid := len(parents) > 0
		for i := range parents {
			p, k := parents[i], ks[i]
			if p < -1 || p >= i || k >= nkeys {
				valid = false
				break
			}
			if _, dup := kids[[2]int{p, k}]; dup {
				valid = false
				break
			}
			kids[[2]int{p, k}] = i
		}
		_, ok := Shelf{}.Stock(keys, tree(parents, ks), time.Hour)
		if ok != valid {
			t.Fatalf("stock of %v %v: %v, model %v", parents, ks, ok, valid)
		}
		at := -1
		for n, jb := range jobs {
			k := int(jb % (nkeys + 1)) // nkeys: a job of no key
			j := keyJob()
			j.TimeLimit = uint32(10 + k)
			ch, got := Shelf{}.Serve(j, []byte("x"))
			want, has := kids[[2]int{at, k}]
			if !valid {
				has = false
			}
			if got != has || got && ch.AdminComment != fmt.Sprintf("rota: #%d", want) {
				t.Fatalf("job %d of key %d at node %d: served %v %q, model %v %d", n, k, at, got, ch.AdminComment, has, want)
			}
			if got {
				at = want
			}
		}
	})
}

// Where the controller learned speeds of a user's jobs by name, jobs of
// one request but different names are placed differently, and the shelf
// hands each the decision made for its name: runs of a learned name, of
// names never learned (a sweep names each job for its point) and of
// another user's are placed as Go alone places them, most from the shelf.
func TestShelfKeysByLearnedName(t *testing.T) {
	learned := func(gen uint64, reserved map[string]int) []byte {
		var s wire.PlaceState
		if err := json.Unmarshal(variedState(gen, reserved), &s); err != nil {
			t.Fatal(err)
		}
		// "lm" runs ten times faster on a k80 than on a v100, which the
		// table ranks the other way.
		s.Learned = map[string]map[string]float64{wire.LearnedKey(1000, "lm"): {"k80": 10, "v100": 1, "p100": 1}}
		b, _ := json.Marshal(&s)
		return b
	}
	named := func(uid uint32, name string) *submit.Job {
		j := keyJob()
		j.SpankEnv, j.UID, j.Name = nil, uid, name
		return j
	}
	train, lm, other := named(1000, "train"), named(1000, "lm"), named(2000, "lm")
	var seq []*submit.Job
	for i := range 160 {
		switch {
		case i%16 < 4:
			seq = append(seq, train)
		case i%16 < 8:
			seq = append(seq, lm)
		case i%16 < 12: // a sweep, each job named for its point: not learned
			seq = append(seq, named(1000, fmt.Sprint("sweep-", i)))
		default:
			seq = append(seq, other)
		}
	}
	if served := decidesAsGo(t, seq, map[int]map[string]int{60: {"k80": 9}}, learned, true); served < len(seq)/4 {
		t.Fatalf("only %d of %d jobs served from the shelf", served, len(seq))
	}
}
