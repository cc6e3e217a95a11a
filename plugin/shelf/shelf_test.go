package shelf

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

func changes(n int) []submit.Change {
	var cs []submit.Change
	for i := range n {
		g, t := fmt.Sprintf("gres/gpu:v100:%d", i+1), uint32(60+i)
		cs = append(cs, submit.Change{TresPerNode: &g, TimeLimit: &t, AdminComment: fmt.Sprintf("rota: #%d", i)})
	}
	return cs
}

func stock(t *testing.T, key *submit.Job, n int, valid time.Duration) uint64 {
	t.Helper()
	gen, ok := Shelf{}.Stock(key, changes(n), valid)
	if !ok || gen == 0 {
		t.Fatalf("stock refused (gen %d)", gen)
	}
	return gen
}

// A job takes from the shelf exactly when every field the decision
// reads equals the key's: its own name and script do not matter.
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			Shelf{}.Reset()
			defer Shelf{}.Reset()
			stock(t, keyJob(), 2, time.Hour)
			j := keyJob()
			tc.edit(j)
			ch, got := Shelf{}.Serve(j, []byte("#!/bin/sh\n"))
			if got != tc.want {
				t.Fatalf("served %v, want %v", got, tc.want)
			}
			if same := submit.SameRequest(keyJob(), j); same != tc.want {
				t.Fatalf("Go's SameRequest says %v, the shelf served %v", same, got)
			}
			if got && (ch.TresPerNode == nil || *ch.TresPerNode != "gres/gpu:v100:1" || ch.TimeLimit == nil || *ch.TimeLimit != 60 ||
				ch.AdminComment != "rota: #0" || ch.TresPerJob != nil || ch.Features != nil) {
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
			if _, ok := (Shelf{}).Stock(keyJob(), changes(2), time.Hour); ok {
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
	gen2, ok := Shelf{}.Stock(keyJob(), changes(1), time.Hour)
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
	time.Sleep(5 * time.Millisecond)
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
	feed := func(gen uint64, reserved map[string]int) {
		for _, x := range []*submit.Local{l, ref} {
			if err := x.Feed(stateMsg(gen, reserved)); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed(1, nil)

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
	type placed struct {
		id, name, hash string
		uid            uint32
	}
	var out []placed
	served, gen := 0, uint64(1)
	pattern := ""
	defer func() { t.Logf("placed: %s", pattern) }()
	for i, tmpl := range seq {
		if i == 45 { // a new state: nothing decided in the old one is served after it
			gen++
			feed(gen, map[string]int{"v100": 2})
		}
		j := *tmpl
		j.Name = fmt.Sprintf("job-%d", i)
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
		if str(ch.TresPerNode) != str(want.TresPerNode) || num(ch.TimeLimit) != num(want.TimeLimit) ||
			noID(ch.AdminComment) != noID(want.AdminComment) {
			t.Fatalf("job %d (served from the shelf: %v): %s %d %q, Go without a shelf: %s %d %q", i, ok,
				str(ch.TresPerNode), num(ch.TimeLimit), ch.AdminComment, str(want.TresPerNode), num(want.TimeLimit), want.AdminComment)
		}
		out = append(out, placed{wire.DecisionIDFromComment(ch.AdminComment), j.Name, j.ScriptHash, j.UID})
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
		if wantGen := uint64(1 + i/45); d.StateGen != wantGen {
			t.Fatalf("record %d decided in state %d, want %d", i, d.StateGen, wantGen)
		}
	}
	// Without this the test would pass with the shelf never used. (How
	// many depends on how promptly the sender polls; the pattern logged
	// shows which: S from the shelf, g in Go.)
	if served < 10 {
		t.Fatalf("only %d of %d jobs served from the shelf", served, len(seq))
	}
	t.Logf("%d of %d jobs served from the shelf", served, len(seq))
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

func (c *countingShelf) Stock(key *submit.Job, changes []submit.Change, validFor time.Duration) (uint64, bool) {
	c.mu.Lock()
	c.stocks++
	c.mu.Unlock()
	return c.Shelf.Stock(key, changes, validFor)
}

// Submissions that keep changing (here two shapes in turn) are never
// stocked for: no stock would be taken from before the next job empties
// it, so it would only cost work. Once one repeats the last placed in Go,
// the shelf is stocked and the next like it served.
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
		j := a
		if i%2 == 1 {
			j = b
		}
		if submitJob(j) {
			t.Fatalf("job %d served from the shelf", i)
		}
		time.Sleep(3 * time.Millisecond) // time enough to stock
	}
	cs.mu.Lock()
	if cs.stocks != 0 {
		t.Fatalf("%d stocks for 20 jobs of two shapes in turn, none of which could be served", cs.stocks)
	}
	cs.mu.Unlock()
	// b was last; a second b stocks the shelf.
	if submitJob(b) {
		t.Fatal("served a repeat before any stock")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !submitJob(b) {
		if time.Now().After(deadline) {
			t.Fatal("a repeated submission was never served from the shelf")
		}
		time.Sleep(time.Millisecond)
	}
}
