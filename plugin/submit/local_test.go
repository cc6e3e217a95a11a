package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
)

func placeState(absorbed uint64, origin string) []byte {
	s := wire.PlaceState{V: wire.Version, Controller: "c", Gen: 1, Policy: "las",
		Rule: wire.PlaceRule{Speed: map[string]float64{"v100": 3}, WalltimeMargin: 1.5},
		Cluster: &wire.ClusterView{DefaultPartition: "gpu", Types: map[string]wire.TypeView{
			"v100": {Nodes: 1, Total: 4, MaxPerNode: 4, Partitions: []string{"gpu"}, Shapes: oneNode(4, "v100")},
			"k80":  {Nodes: 1, Total: 4, MaxPerNode: 4, Partitions: []string{"gpu"}, Shapes: oneNode(4, "k80")}}},
		Absorbed: map[string]uint64{origin: absorbed}}
	if absorbed > 0 {
		s.Reserved = map[string]int{"v100": int(absorbed)} // the controller counted them
	}
	b, _ := json.Marshal(&s)
	return b
}

// oneNode is a type's shape on one node of gpus GPUs in partition gpu.
func oneNode(gpus int, feats ...string) map[string][]wire.NodeGroup {
	return map[string][]wire.NodeGroup{"gpu": {{GPUs: gpus, Nodes: 1, Features: feats}}}
}

func gpuJob() *Job {
	return &Job{UID: 1000, TresPerNode: "gres/gpu:1", TimeLimit: NoVal, ScriptHash: "5c71", MinNodes: NoVal, NumTasks: NoVal}
}

// TestLocalHandler: the Handler with a Local placer decides from a fed
// state; without one, with a stale one, or when the decision cannot be
// sent, the job passes through unchanged.
func TestLocalHandler(t *testing.T) {
	type step struct {
		feed     []byte        // fed before the job, if set
		age      time.Duration // clock moved on after feeding
		pubErr   error
		want     Outcome
		wantType string
		wantErr  error
	}
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"absent", []step{{want: FailOpen, wantErr: ErrNoState}}},
		{"fresh", []step{{feed: placeState(0, "me"), want: Rewritten, wantType: "gres/gpu:v100:1"}}},
		{"stale", []step{{feed: placeState(0, "me"), age: 31 * time.Second, want: FailOpen, wantErr: ErrStaleState}}},
		{"just fresh enough", []step{{feed: placeState(0, "me"), age: 29 * time.Second, want: Rewritten, wantType: "gres/gpu:v100:1"}}},
		{"malformed state keeps the last good one", []step{
			{feed: placeState(0, "me"), want: Rewritten, wantType: "gres/gpu:v100:1"},
			{feed: []byte(`{"v":1,"rule":{"walltime_margin":0}}`), want: Rewritten, wantType: "gres/gpu:v100:1"}}},
		{"decision cannot be sent: unchanged and GPUs given back", []step{
			{feed: placeState(0, "me"), pubErr: ErrNotConnected, want: FailOpen, wantErr: ErrNotConnected},
			// v100 4 free x 3 = 12, k80 4: still v100, 3 times.
			{want: Rewritten, wantType: "gres/gpu:v100:1"}, {want: Rewritten, wantType: "gres/gpu:v100:1"},
			{want: Rewritten, wantType: "gres/gpu:v100:1"},
			// v100 1 free x 3 = 3 < k80 4.
			{want: Rewritten, wantType: "gres/gpu:k80:1"}}},
		{"own reservations until the state counts them", []step{
			{feed: placeState(0, "me"), want: Rewritten, wantType: "gres/gpu:v100:1"},
			{want: Rewritten, wantType: "gres/gpu:v100:1"}, {want: Rewritten, wantType: "gres/gpu:v100:1"},
			{want: Rewritten, wantType: "gres/gpu:k80:1"},
			// The controller absorbed the first two (2 v100 reserved
			// there); ours still count the third v100 and the k80:
			// v100 1 free x 3 = 3 ties k80 3 free x 1, and a tie keeps
			// the first type in name order.
			{feed: placeState(2, "me"), want: Rewritten, wantType: "gres/gpu:k80:1"}}},
		{"another plugin's absorbed count is not ours", []step{
			{feed: placeState(0, "me"), want: Rewritten, wantType: "gres/gpu:v100:1"},
			// The state reserves 3 v100 for "other"; ours still counts 1:
			// v100 0 free.
			{feed: placeState(3, "other"), want: Rewritten, wantType: "gres/gpu:k80:1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := now
			var sent [][]byte // appended on l's goroutine, read after Flush
			var pubErr error
			l := NewLocal(30*time.Second, func(batch [][]byte) error {
				sent = append(sent, batch...)
				return nil
			})
			defer l.Close()
			l.Ready = func() error { return pubErr }
			l.Origin = "me"
			l.now = func() time.Time { return clock }
			h := &Handler{Config: DefaultConfig(), Placer: l}
			for i, s := range tc.steps {
				if s.feed != nil {
					_ = l.Feed(s.feed)
				}
				clock = clock.Add(s.age)
				pubErr = s.pubErr
				l.Flush()
				n := len(sent)
				ch, o, err := h.Handle(context.Background(), gpuJob())
				l.Flush()
				if o != s.want || !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d: %v %v, want %v %v", i, o, err, s.want, s.wantErr)
				}
				if o != Rewritten {
					if len(sent) != n || ch.AdminComment != "" {
						t.Fatalf("step %d: a job passed through but a decision was sent or annotated", i)
					}
					continue
				}
				if ch.TresPerNode == nil || *ch.TresPerNode != s.wantType {
					t.Fatalf("step %d: gres %v, want %s", i, ch.TresPerNode, s.wantType)
				}
				var d wire.Decision
				if len(sent) != n+1 || wire.Decode(sent[n], &d) != nil {
					t.Fatalf("step %d: decision not sent", i)
				}
				if d.ID != wire.DecisionIDFromComment(ch.AdminComment) || d.Origin != "me" || d.Given.Policy != "las" || d.Given.Reason == "" || len(d.Numbers) == 0 ||
					d.Reserve == nil || d.Reserve.GPUs != 1 || d.StateGen != 1 || d.Asked.GPU.PerNode != 1 {
					t.Fatalf("step %d: decision %+v for annotation %q", i, d, ch.AdminComment)
				}
			}
		})
	}
}

// Decisions placed in a burst are sent together: one Publish for up to
// maxBatch records gathered within sendLinger, in order, each once.
func TestLocalSendsBatches(t *testing.T) {
	var mu sync.Mutex
	var batches [][][]byte
	l := NewLocal(30*time.Second, func(batch [][]byte) error {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, batch)
		return nil
	})
	defer l.Close()
	if err := l.Feed(placeState(0, "x")); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Config: DefaultConfig(), Placer: l}
	const jobs = 3*maxBatch + 5
	var ids []string
	for range jobs {
		ch, o, err := h.Handle(context.Background(), gpuJob())
		if o != Rewritten {
			t.Fatalf("%v %v", o, err)
		}
		ids = append(ids, wire.DecisionIDFromComment(ch.AdminComment))
	}
	l.Flush()
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, b := range batches {
		if len(b) > maxBatch {
			t.Errorf("batch of %d records, want at most %d", len(b), maxBatch)
		}
		for _, m := range b {
			var d wire.Decision
			if err := wire.Decode(m, &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d.ID)
		}
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("sent %d records %v..., want the %d placed, in order", len(got), got[:min(3, len(got))], len(ids))
	}
	// Placed back to back, far faster than sendLinger: a handful of
	// batches, not one per job.
	if len(batches) > jobs/maxBatch+3 {
		t.Errorf("%d batches for %d jobs placed back to back", len(batches), jobs)
	}
}

// A decision record that cannot be sent after its job was placed (the
// connection dropped in between) is reported, and a full queue fails jobs
// open instead of blocking slurmctld.
func TestLocalSendErrorsAndFullQueue(t *testing.T) {
	block := make(chan struct{})
	errs := make(chan error, 1)
	entered := make(chan struct{}, 1)
	l := NewLocal(30*time.Second, func([][]byte) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-block
		return ErrNotConnected
	})
	defer l.Close()
	l.OnSendError = func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	if err := l.Feed(placeState(0, "x")); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Config: DefaultConfig(), Placer: l}
	// The first decision goes out alone (after sendLinger) and the
	// sender blocks on it; queueLen more fill the queue; the next fails
	// open.
	if _, o, err := h.Handle(context.Background(), gpuJob()); o == FailOpen {
		t.Fatalf("first job failed open: %v", err)
	}
	<-entered
	for i := range queueLen {
		if _, o, err := h.Handle(context.Background(), gpuJob()); o == FailOpen {
			t.Fatalf("job %d failed open before the queue was full: %v", i+1, err)
		}
	}
	if _, o, err := h.Handle(context.Background(), gpuJob()); o != FailOpen || !errors.Is(err, ErrQueueFull) {
		t.Fatalf("full queue: %v %v, want fail open with ErrQueueFull", o, err)
	}
	close(block)
	if err := <-errs; !errors.Is(err, ErrNotConnected) {
		t.Fatalf("send error reported as %v", err)
	}
}

// Local counts its own placements that the controller's state does not
// count yet, and forgets each once a state counts it: its decisions over
// several states match placement.Decide from each state with exactly those
// reservations added (the reference kept here by sequence number).
func TestLocalCountsOwnPlacementsAcrossStates(t *testing.T) {
	l := NewLocal(30*time.Second, func([][]byte) error { return nil })
	defer l.Close()
	type placed struct {
		seq uint64
		res wire.Reservation
	}
	var ref []placed
	var n uint64 // placements so far: Local's sequence numbers
	reqs := []wire.PlaceRequest{{GPU: wire.GPUAsk{PerNode: 1}}, {GPU: wire.GPUAsk{PerNode: 2}}}
	seen := map[string]bool{}
	for round, absorbed := range []uint64{0, 0, 3, 5, 5, 11, 12} {
		data := placeState(absorbed, l.Origin)
		if err := l.Feed(data); err != nil {
			t.Fatal(err)
		}
		var s wire.PlaceState
		if err := wire.Decode(data, &s); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			req := reqs[(round+j)%len(reqs)]
			var extra []wire.Reservation
			for _, p := range ref {
				if p.seq > absorbed {
					extra = append(extra, p.res)
				}
			}
			want := placement.Decide(&s, extra, &req)
			reply, err := l.Place(context.Background(), nil, &req)
			if err != nil {
				t.Fatal(err)
			}
			if reply.GPUType != want.GPUType {
				t.Fatalf("round %d job %d: placed on %q, want %q (%d of ours not yet counted)", round, j, reply.GPUType, want.GPUType, len(extra))
			}
			seen[reply.GPUType] = true
			n++
			if want.Reserve != nil {
				ref = append(ref, placed{n, *want.Reserve})
			}
		}
	}
	if len(seen) < 2 {
		t.Fatalf("every job went to %v: the test no longer exercises the counting", seen)
	}
}

// Jobs placed at sbatch's pace (a few ms apart) are sent in batches, and
// each record still leaves within a few sendLinger of its placement: the
// sender polls while decisions keep coming instead of waiting on the
// queue, and goes back to waiting once they stop.
func TestLocalSendsPacedRecordsPromptly(t *testing.T) {
	var mu sync.Mutex
	sent := map[string]time.Time{}
	batches := 0
	l := NewLocal(30*time.Second, func(batch [][]byte) error {
		mu.Lock()
		defer mu.Unlock()
		batches++
		for _, m := range batch {
			var d wire.Decision
			if err := wire.Decode(m, &d); err != nil {
				return err
			}
			sent[d.ID] = time.Now()
		}
		return nil
	})
	defer l.Close()
	if err := l.Feed(placeState(0, "x")); err != nil {
		t.Fatal(err)
	}
	placedAt := map[string]time.Time{}
	for burst := range 2 { // the second after the sender went back to waiting
		for range 30 {
			reply, err := l.Place(context.Background(), nil, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}})
			if err != nil {
				t.Fatal(err)
			}
			placedAt[reply.DecisionID] = time.Now()
			time.Sleep(3 * time.Millisecond) // sbatch's pace: the pacing is what is tested
		}
		if burst == 0 {
			time.Sleep(5 * sendLinger) // a pause for the sender to go back to waiting: unseen from here, so time passes
		}
	}
	eventually.True(t, 5*time.Second, fmt.Sprintf("all %d placed records sent", len(placedAt)), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sent) == len(placedAt)
	})
	mu.Lock()
	defer mu.Unlock()
	var late []time.Duration
	for id, at := range placedAt {
		s, ok := sent[id]
		if !ok {
			t.Fatalf("record %s never sent", id)
		}
		// Generous for a loaded test machine: the design bound is
		// 2 x sendLinger.
		if d := s.Sub(at); d > 10*sendLinger {
			late = append(late, d)
		}
	}
	if len(late) > 0 {
		t.Errorf("%d of %d records left more than %v after their placement: %v", len(late), len(placedAt), 10*sendLinger, late)
	}
	if batches > len(placedAt)/3 {
		t.Errorf("%d batches for %d jobs placed 3 ms apart: not batching", batches, len(placedAt))
	}
}

// Close sends what is queued first: slurmctld unloads the plugin when it
// stops, and the jobs placed just before would otherwise lose their
// records. A send that never returns holds Close for at most
// closeWait.
func TestLocalCloseSendsQueued(t *testing.T) {
	var mu sync.Mutex
	var sent int
	l := NewLocal(30*time.Second, func(batch [][]byte) error {
		mu.Lock()
		defer mu.Unlock()
		sent += len(batch)
		return nil
	})
	if err := l.Feed(placeState(0, "x")); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := l.Place(context.Background(), nil, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	mu.Lock()
	if sent != 5 {
		t.Fatalf("%d of 5 records sent before Close returned", sent)
	}
	mu.Unlock()

	block := make(chan struct{})
	defer close(block)
	stuck := NewLocal(30*time.Second, func([][]byte) error { <-block; return nil })
	if err := stuck.Feed(placeState(0, "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := stuck.Place(context.Background(), nil, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stuck.Close()
	if d := time.Since(start); d < closeWait/2 || d > 10*closeWait {
		t.Fatalf("Close with a stuck send took %v, want about %v", d, closeWait)
	}
}

// A job that cannot be placed for want of a usable state or connection
// tells Away to pass jobs for passThroughFor (the shim then spares them the call
// into Go); a new state says so no longer; a placed job says nothing.
func TestLocalAway(t *testing.T) {
	clock := time.Unix(1000, 0)
	var calls []time.Duration
	var ready error
	l := NewLocal(30*time.Second, func([][]byte) error { return nil })
	defer l.Close()
	l.now = func() time.Time { return clock }
	l.Ready = func() error { return ready }
	l.PassThrough = func(d time.Duration) { calls = append(calls, d) }
	place := func() error {
		_, err := l.Place(context.Background(), nil, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}})
		return err
	}
	for i, step := range []struct {
		do   func() error
		err  error
		want []time.Duration
	}{
		{place, ErrNoState, []time.Duration{passThroughFor}},
		{func() error { return l.Feed(placeState(0, "x")) }, nil, []time.Duration{0}},
		{place, nil, nil},
		{func() error { ready = ErrNotConnected; return place() }, ErrNotConnected, []time.Duration{passThroughFor}},
		{func() error { ready = nil; clock = clock.Add(31 * time.Second); return place() }, ErrStaleState, []time.Duration{passThroughFor}},
		{func() error { return l.Feed(placeState(0, "x")) }, nil, []time.Duration{0}},
		{place, nil, nil},
	} {
		calls = nil
		if err := step.do(); !errors.Is(err, step.err) {
			t.Fatalf("step %d: %v, want %v", i, err, step.err)
		}
		if !slices.Equal(calls, step.want) {
			t.Fatalf("step %d: Away heard %v, want %v", i, calls, step.want)
		}
	}
}

// Each decision made in Go tells the controller how long it took on
// slurmctld's thread (its placement latency), from the plugin's clock.
func TestLocalReportsDecideTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		took time.Duration
	}{
		{"40 us", 40 * time.Microsecond},
		{"a slow one", 3 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent [][]byte
			l := NewLocal(30*time.Second, func(batch [][]byte) error { sent = append(sent, batch...); return nil })
			defer l.Close()
			if err := l.Feed(placeState(0, l.Origin)); err != nil {
				t.Fatal(err)
			}
			// The clock is read as the decision starts and once it is made.
			var mu sync.Mutex
			clock, reads := time.Unix(1000, 0), 0
			l.now = func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				reads++
				if reads == 2 {
					clock = clock.Add(tc.took)
				}
				return clock
			}
			if _, err := l.Place(context.Background(), nil, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}); err != nil {
				t.Fatal(err)
			}
			l.Flush()
			var d wire.Decision
			if len(sent) != 1 || wire.Decode(sent[0], &d) != nil {
				t.Fatalf("sent %q", sent)
			}
			if time.Duration(d.DecideNs) != tc.took {
				t.Errorf("decide_ns %d, want %d", d.DecideNs, tc.took.Nanoseconds())
			}
		})
	}
}

// Usable, what the plugin's stats file reports as ready: only with a
// fresh state in which a one-GPU job can be typed, and a link the
// decision can be sent on.
func TestLocalUsable(t *testing.T) {
	t.Parallel()
	l := NewLocal(30*time.Second, func([][]byte) error { return nil })
	defer l.Close()
	if l.Usable() {
		t.Fatal("usable with no state")
	}
	if err := l.Feed(placeState(0, "x")); err != nil {
		t.Fatal(err)
	}
	if !l.Usable() {
		t.Fatal("not usable with a fresh state")
	}
	l.Ready = func() error { return ErrNotConnected }
	if l.Usable() {
		t.Fatal("usable with no link to send decisions on")
	}
	l.Ready = nil
	empty, _ := json.Marshal(&wire.PlaceState{V: wire.Version, Controller: "c", Gen: 2, Policy: "las", Rule: wire.PlaceRule{WalltimeMargin: 1.5},
		Cluster: &wire.ClusterView{DefaultPartition: "gpu"}})
	if err := l.Feed(empty); err != nil {
		t.Fatal(err)
	}
	if l.Usable() {
		t.Fatal("usable with a state that sees no GPU (a controller just after slurmctld restarted)")
	}
	// Types known, but no node of them usable (not responding right after
	// slurmctld restarted): a job would be left as asked, not typed.
	down, _ := json.Marshal(&wire.PlaceState{V: wire.Version, Controller: "c", Gen: 3, Policy: "las", Rule: wire.PlaceRule{WalltimeMargin: 1.5},
		Cluster: &wire.ClusterView{DefaultPartition: "gpu", Types: map[string]wire.TypeView{"v100": {Partitions: []string{"gpu"}}}}})
	if err := l.Feed(down); err != nil {
		t.Fatal(err)
	}
	if l.Usable() {
		t.Fatal("usable with a state whose types have no usable node")
	}
}
