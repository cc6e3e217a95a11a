package multicluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/bus"
	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
	"github.com/rota-hpc/rota/wire"
)

// fakeSlurm is one cluster's queue: jobs pend until the test says.
type fakeSlurm struct {
	mu          sync.Mutex
	jobs        map[uint32]*slurm.Job
	comments    map[uint32]string
	next        uint32
	held        map[uint32]bool
	submitted   []slurm.Submission
	failNext    bool // the next Submit fails after submitting (a crash between sbatch and the record)
	refuse      bool // every Submit fails (sbatch refuses the job)
	forget      bool // a job that ends is gone from Slurm at once (MinJobAge passed)
	startOnHold map[uint32]bool
	signals     []string
	scripts     map[uint32]string
}

func newFake(first uint32) *fakeSlurm {
	return &fakeSlurm{jobs: map[uint32]*slurm.Job{}, comments: map[uint32]string{}, held: map[uint32]bool{}, next: first,
		startOnHold: map[uint32]bool{}}
}

func (f *fakeSlurm) add(gres string) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.next
	f.next++
	f.jobs[id] = &slurm.Job{ID: id, State: "PENDING", Reason: "Resources", User: "root", Name: fmt.Sprintf("job%d", id),
		Partition: "gpu", Submit: time.Now().Add(-time.Minute), TimeLimitMin: 60, TresPerNode: gres, NumNodes: 1, NumTasks: 1}
	return id
}

func (f *fakeSlurm) Jobs(context.Context) ([]slurm.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slurm.Job
	for _, j := range f.jobs {
		out = append(out, *j)
	}
	return out, nil
}

func (f *fakeSlurm) ShowJob(_ context.Context, id uint32) (slurm.JobSpec, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return slurm.JobSpec{}, false, nil
	}
	return slurm.JobSpec{ID: id, User: j.User, State: j.State, Partition: j.Partition, TimeLimitMin: j.TimeLimitMin,
		TresPerNode: j.TresPerNode, NumNodes: 1, NumTasks: 1, StdOut: fmt.Sprintf("/tmp/slurm-%d.out", id)}, true, nil
}

func (f *fakeSlurm) BatchScript(_ context.Context, id uint32) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.jobs[id]; !ok && f.forget {
		return nil, fmt.Errorf("job %d: Invalid job id specified", id)
	}
	if s, ok := f.scripts[id]; ok {
		return []byte(s), nil
	}
	return []byte("#!/bin/sh\n#ROTA --data-gb=2\nsleep 1\n"), nil
}

func (f *fakeSlurm) Submit(_ context.Context, s slurm.Submission) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse {
		return 0, fmt.Errorf("sbatch: error: Batch job submission failed: Invalid account")
	}
	id := f.next
	f.next++
	f.jobs[id] = &slurm.Job{ID: id, State: "PENDING", Reason: "Priority", User: s.User, Submit: time.Now(), TresPerNode: "gres:gpu:1", NumNodes: 1, NumTasks: 1}
	for _, a := range s.Args {
		if c, ok := strings.CutPrefix(a, "--comment="); ok {
			f.comments[id] = c
		}
	}
	f.submitted = append(f.submitted, s)
	if f.failNext {
		f.failNext = false
		return 0, fmt.Errorf("sbatch: lost its answer")
	}
	return id, nil
}

func (f *fakeSlurm) Cancel(_ context.Context, id uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if j, ok := f.jobs[id]; ok {
		j.State = "CANCELLED"
	}
	return nil
}

// Hold, as Slurm 22.05 does, also "holds" a job it has just started;
// startOnHold starts the job in that instant.
func (f *fakeSlurm) Hold(_ context.Context, id uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok || j.State == "COMPLETED" || j.State == "CANCELLED" {
		return fmt.Errorf("job %d has ended", id)
	}
	if f.startOnHold[id] {
		j.State = "RUNNING"
	}
	f.held[id] = true
	return nil
}

func (f *fakeSlurm) Unhold(_ context.Context, id uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, id)
	return nil
}

func (f *fakeSlurm) FindByComment(_ context.Context, c string) (uint32, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, k := range f.comments {
		if k == c {
			return id, true, nil
		}
	}
	return 0, false, nil
}

func (f *fakeSlurm) count(state string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, j := range f.jobs {
		if j.State == state {
			n++
		}
	}
	return n
}

type fakeLocal struct {
	snap *cluster.Snapshot
	hint map[uint32]wire.Hints
	left map[uint32]float64
}

func (l fakeLocal) StepsLeft(id uint32) (float64, bool) {
	v, ok := l.left[id]
	return v, ok
}

// Signal: the job checkpoints and ends, as a job that declared the signal.
func (f *fakeSlurm) Signal(_ context.Context, id uint32, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok || j.State != "RUNNING" {
		return fmt.Errorf("job %d not running", id)
	}
	j.State = "COMPLETED"
	if f.forget {
		delete(f.jobs, id)
	}
	f.signals = append(f.signals, sig)
	return nil
}

func (l fakeLocal) Snapshot() *cluster.Snapshot { return l.snap }
func (l fakeLocal) Decision(id uint32) *wire.Decision {
	h, ok := l.hint[id]
	if !ok {
		return nil
	}
	return &wire.Decision{Asked: wire.PlaceRequest{Hints: h}}
}

func snap(types map[string]int) *cluster.Snapshot {
	s := &cluster.Snapshot{Types: map[string]*cluster.TypeCap{}, Partitions: map[string]slurm.Partition{"gpu": {Name: "gpu"}}, DefaultPartition: "gpu"}
	for t, n := range types {
		s.Types[t] = &cluster.TypeCap{Type: t, Total: n, MaxPerNode: 4}
	}
	return s
}

func startNATS(t *testing.T) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

func conn(t *testing.T, url, name string) (*nats.Conn, *nats.Conn) {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := nats.Connect(url, nats.CustomInboxPrefix(wire.SubjectMCReplyPrefix(name)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close(); mc.Close() })
	return nc, mc
}

func testConfig(name string) Config {
	c := DefaultConfig()
	c.Name, c.Tick, c.Margin, c.MinPending = name, 50*time.Millisecond, 10*time.Second, 0
	c.Links = []xcluster.Link{{A: "a", B: "b", Bandwidth: 1e9, Latency: 0.02}}
	c.Speed = map[string]float64{"v100": 3.36, "p100": 3.17, "k80": 1}
	c.ProbeInterval = 0 // the configured link, unless a test probes
	return c
}

// TestRoutes: a job whose allowed type is only on b, and a burst larger
// than a, are sent to b, each once; a job that gains nothing stays.
func TestRoutes(t *testing.T) {
	url := startNATS(t)
	sa, sb := newFake(100), newFake(500)
	only := sa.add("gres:gpu:1")
	la := fakeLocal{snap: snap(map[string]int{"v100": 4, "p100": 4}), hint: map[uint32]wire.Hints{
		only: {Types: []string{"k80"}, Steps: 600, Throughput: map[string]float64{"k80": 3}}}}
	// A burst: 8 run on a's 8 GPUs, 6 pend.
	for i := 0; i < 14; i++ {
		id := sa.add("gres:gpu:1")
		la.hint[id] = wire.Hints{Steps: 6000, Throughput: map[string]float64{"v100": 10, "p100": 9, "k80": 3}}
		if i < 8 {
			sa.jobs[id].State = "RUNNING"
		}
	}
	// A job whose decision no round has bound yet (or not Rota's): what
	// its user asked is not known, so it is not sent.
	unbound := sa.add("gres:gpu:1")
	lb := fakeLocal{snap: snap(map[string]int{"k80": 8, "v100": 4}), hint: map[uint32]wire.Hints{}}
	nca, mca := conn(t, url, "a")
	ncb, mcb := conn(t, url, "b")
	ma, err := New(testConfig("a"), zerolog.Nop(), sa, la, nca, mca, nil)
	if err != nil {
		t.Fatal(err)
	}
	cb := testConfig("b")
	cb.RouteOff = true
	mb, _ := New(cb, zerolog.Nop(), sb, lb, ncb, mcb, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mb.Run(ctx)
	go ma.Run(ctx)
	eventually.True(t, 5*time.Second, "the k80 job on b", func() bool { r := ma.Explain(only); return r != nil && r.State == OutRouted })
	eventually.True(t, 5*time.Second, "the burst spilled", func() bool { return ma.Status().Peers != nil && sb.count("PENDING") >= 2 })
	time.Sleep(500 * time.Millisecond) // some more ticks: nothing moves twice
	cancel()
	routed := 0
	for _, r := range ma.Status().Routes {
		if r.State == OutRouted {
			routed++
			if sa.jobs[r.FromJob].State != "CANCELLED" {
				t.Errorf("job %d routed but not withdrawn on a: %s", r.FromJob, sa.jobs[r.FromJob].State)
			}
		}
	}
	if got := len(sb.submitted); got != routed {
		t.Errorf("b took %d copies for %d routes", got, routed)
	}
	// Under the shared-cluster estimate a's 7 pending jobs each finish
	// sooner on b's idle 12 GPUs; every job is either sent or still here.
	if routed < 3 || routed+sa.count("PENDING") != 8 {
		t.Errorf("routed %d, pending left on a %d", routed, sa.count("PENDING"))
	}
	if r := ma.Explain(unbound); r != nil || sa.jobs[unbound].State != "PENDING" {
		t.Errorf("the job without a decision was sent: %+v", r)
	}
	if r := mb.Explain(sb.submittedID(0)); r == nil || r.From != "a" || !r.Incoming {
		t.Errorf("b's explain of its copy: %+v", r)
	}
	s := sb.submitted[0]
	for _, want := range []string{"--partition=gpu", "--gres=gpu:1", "--comment=rota-mc-route=a."} {
		if !strings.Contains(strings.Join(s.Args, " "), want) {
			t.Errorf("copy's args %v lack %s", s.Args, want)
		}
	}
}

func (f *fakeSlurm) submittedID(i int) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, c := range f.comments {
		if strings.HasPrefix(c, CommentPrefix) && i == 0 {
			return id
		}
	}
	return 0
}

// TestTakeOnce: the receiver submits one copy per route ID, whatever the
// retries, an sbatch that lost its answer, or an abort after it.
func TestTakeOnce(t *testing.T) {
	url := startNATS(t)
	sb := newFake(500)
	nc, mc := conn(t, url, "b")
	m, _ := New(testConfig("b"), zerolog.Nop(), sb, fakeLocal{snap: snap(map[string]int{"k80": 4})}, nc, mc, nil)
	ctx := context.Background()
	req := &wire.MCRouteRequest{ID: "a.7", From: "a", FromJob: 7, User: "root", Script: []byte("#!/bin/sh\n")}
	sb.failNext = true
	if rep := m.take(ctx, req); rep.Error == "" {
		t.Fatalf("lost answer: %+v", rep)
	}
	// The record says failed; the abort is answered as such.
	if rep := m.take(ctx, &wire.MCRouteRequest{ID: "a.7", From: "a", FromJob: 7, Abort: true}); !rep.Aborted {
		t.Fatalf("abort after failure: %+v", rep)
	}
	// A route interrupted between sbatch and its record (state
	// submitting) is found by its comment.
	m.in["a.8"] = &Route{ID: "a.8", State: InSubmitting, Incoming: true}
	id, _ := sb.Submit(ctx, slurm.Submission{User: "root", Args: []string{"--comment=" + CommentPrefix + "a.8"}})
	for i := 0; i < 3; i++ {
		if rep := m.take(ctx, &wire.MCRouteRequest{ID: "a.8", From: "a", FromJob: 8, User: "root"}); rep.JobID != id {
			t.Fatalf("retry %d: %+v, want job %d", i, rep, id)
		}
	}
	// Abort first: a late request is refused.
	if rep := m.take(ctx, &wire.MCRouteRequest{ID: "a.9", From: "a", FromJob: 9, Abort: true}); !rep.Aborted {
		t.Fatal(rep)
	}
	if rep := m.take(ctx, &wire.MCRouteRequest{ID: "a.9", From: "a", FromJob: 9, User: "root"}); !rep.Aborted || rep.JobID != 0 {
		t.Fatalf("late request after abort: %+v", rep)
	}
	if n := len(sb.submitted); n != 2 { // the lost answer's and a.8's
		t.Errorf("%d submissions, want 2", n)
	}
}

// TestRestartMidRoute: a controller that stops after asking, before the
// answer was recorded, asks again on restart and gets the same copy.
func TestRestartMidRoute(t *testing.T) {
	url := startNATS(t)
	sa, sb := newFake(100), newFake(500)
	id := sa.add("gres:gpu:1")
	la := fakeLocal{snap: snap(map[string]int{"v100": 4}), hint: map[uint32]wire.Hints{id: {Types: []string{"k80"}}}}
	nca, mca := conn(t, url, "a")
	ncb, mcb := conn(t, url, "b")
	store := newMemStore()
	cb := testConfig("b")
	cb.RouteOff = true
	mb, _ := New(cb, zerolog.Nop(), sb, fakeLocal{snap: snap(map[string]int{"k80": 4})}, ncb, mcb, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mb.Run(ctx)
	// a's first life: asked, and b submitted, but a died before recording.
	ma1, _ := New(testConfig("a"), zerolog.Nop(), sa, la, nca, mca, store)
	r := &Route{ID: "a.100", From: "a", FromJob: id, To: "b", State: OutHolding, At: time.Now(), Name: "job100"}
	ma1.out[id] = r
	ma1.hold(ctx, r)
	if r.State != OutAsked {
		t.Fatalf("state %s", r.State)
	}
	_ = ma1.save(ctx)
	eventually.True(t, 5*time.Second, "b's view", func() bool { return true })
	if rep := mb.take(ctx, r.Req); rep.JobID == 0 {
		t.Fatalf("b: %+v", rep)
	}
	// a's second life, from the saved state.
	ma2, _ := New(testConfig("a"), zerolog.Nop(), sa, la, nca, mca, store)
	go ma2.Run(ctx)
	eventually.True(t, 5*time.Second, "the route done", func() bool { r := ma2.Explain(id); return r != nil && r.State == OutRouted })
	if n := len(sb.submitted); n != 1 {
		t.Fatalf("b has %d copies", n)
	}
	if sa.jobs[id].State != "CANCELLED" {
		t.Fatalf("a's job %s", sa.jobs[id].State)
	}
}

func TestDeclaredGBAndUntype(t *testing.T) {
	for _, tc := range []struct {
		script string
		gb     float64
		ok     bool
	}{{"#!/bin/sh\n#ROTA --data-gb=2.5\n", 2.5, true}, {"#ROTA --checkpoint-gb=1 --data-gb=40\n", 40, true}, {"#SBATCH --data-gb=3\n", 0, false}} {
		gb, ok := xcluster.DeclaredGB([]byte(tc.script), "data-gb")
		if gb != tc.gb || ok != tc.ok {
			t.Errorf("%q: %g %v", tc.script, gb, ok)
		}
	}
	for in, want := range map[string]string{"gres:gpu:v100:1": "gres:gpu:1", "gres/gpu:k80:2": "gres/gpu:2", "gpu:p100:1": "gpu:1", "gres:gpu:1": "gres:gpu:1"} {
		if got := untype(in); got != want {
			t.Errorf("untype(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestStartedAsHeld: a job Slurm starts in the instant it is held stays
// here, released, and no copy is asked for.
func TestStartedAsHeld(t *testing.T) {
	url := startNATS(t)
	sa := newFake(100)
	id := sa.add("gres:gpu:1")
	sa.startOnHold[id] = true
	nca, mca := conn(t, url, "a")
	ma, _ := New(testConfig("a"), zerolog.Nop(), sa, fakeLocal{snap: snap(map[string]int{"v100": 4})}, nca, mca, nil)
	r := &Route{ID: "a.100", From: "a", FromJob: id, To: "b", State: OutHolding, At: time.Now()}
	ma.out[id] = r
	ma.advance(context.Background(), r)
	if r.State != OutStayed || sa.held[id] || r.Req != nil {
		t.Fatalf("state %s, held %v, request %v", r.State, sa.held[id], r.Req != nil)
	}
}

// TestMoves: of two running checkpointable jobs on a loaded a with b idle,
// the one with a small checkpoint moves (checkpointed, its file sent over
// the link into b's transfer dir byte for byte, resubmitted on b with
// ROTA_MC_RESUME there), the one whose checkpoint takes too long over the
// link stays, counted as refused. Once on one NATS server, once between
// two sites' embedded servers joined by their leaf link (the link's
// rights, the mc inbox, headers and chunks as the controllers have them).
func TestMoves(t *testing.T) {
	t.Parallel()
	for _, tr := range []struct {
		name  string
		conns func(t *testing.T) (nca, mca, ncb, mcb *nats.Conn)
	}{
		{"one server", func(t *testing.T) (*nats.Conn, *nats.Conn, *nats.Conn, *nats.Conn) {
			url := startNATS(t)
			nca, mca := conn(t, url, "a")
			ncb, mcb := conn(t, url, "b")
			return nca, mca, ncb, mcb
		}},
		{"leaf link", leafSites},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			testMoves(t, tr.conns)
		})
	}
}

// leafSites opens two sites' buses joined as docs/multicluster.md says: a
// listens (creds_dir, the link user), b dials it.
func leafSites(t *testing.T) (nca, mca, ncb, mcb *nats.Conn) {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "link.secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Consecutive(1)
	if err != nil {
		t.Fatal(err)
	}
	credsDir := t.TempDir()
	if _, err := creds.Init(credsDir, nil); err != nil {
		t.Fatal(err)
	}
	a, err := bus.Open(bus.Config{Listen: "127.0.0.1:-1", StateDir: t.TempDir(), CredsDir: credsDir, LeafListen: fmt.Sprintf("127.0.0.1:%d", port),
		LinkSecretFile: secret, JSDomain: "a", MCInbox: wire.SubjectMCReplyPrefix("a")}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := bus.Open(bus.Config{Listen: "127.0.0.1:-1", StateDir: t.TempDir(), LeafRemotes: []string{fmt.Sprintf("nats-leaf://127.0.0.1:%d", port)},
		LinkSecretFile: secret, JSDomain: "b", MCInbox: wire.SubjectMCReplyPrefix("b")}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return a.NC, a.MC, b.NC, b.MC
}

func testMoves(t *testing.T, conns func(t *testing.T) (nca, mca, ncb, mcb *nats.Conn)) {
	sa, sb := newFake(100), newFake(500)
	// The copy is asked for from what was read before the checkpoint:
	// Slurm may have forgotten the ended job by the time it landed.
	sa.forget = true
	dir := t.TempDir()
	ckpt := dir + "/small.ckpt"
	content := make([]byte, 600_000) // 3 chunks
	_, _ = rand.Read(content)
	if err := os.WriteFile(ckpt, content, 0o644); err != nil {
		t.Fatal(err)
	}
	h := wire.Hints{Steps: 6000, Throughput: map[string]float64{"v100": 10, "p100": 9, "k80": 3}, CheckpointSignal: "USR1"}
	la := fakeLocal{snap: snap(map[string]int{"v100": 4, "p100": 4}), hint: map[uint32]wire.Hints{}, left: map[uint32]float64{}}
	small, big := sa.add("gres:gpu:1"), sa.add("gres:gpu:1")
	for _, id := range []uint32{small, big} {
		sa.jobs[id].State, sa.jobs[id].RunSeconds = "RUNNING", 600
		la.hint[id], la.left[id] = h, 3000
	}
	sa.scripts = map[uint32]string{small: "#ROTA --checkpoint-gb=0.0006 --checkpoint-file=" + ckpt + "\n", big: "#ROTA --checkpoint-gb=50\n"}
	// a is loaded: 14 more GPUs asked (typed p100, which b has not).
	for i := 0; i < 14; i++ {
		sa.add("gres:gpu:p100:1")
	}
	nca, mca, ncb, mcb := conns(t)
	ca := testConfig("a")
	ca.RouteOff, ca.Moves, ca.MoveCost, ca.MinStay = true, true, 10*time.Second, time.Minute
	ca.Links = []xcluster.Link{{A: "a", B: "b", Bandwidth: 1e6, Latency: 0.02}} // 1 MB/s: 50 GB is 14 h
	ma, _ := New(ca, zerolog.Nop(), sa, la, nca, mca, nil)
	cb := testConfig("b")
	cb.RouteOff, cb.TransferDir = true, dir+"/landed"
	mb, _ := New(cb, zerolog.Nop(), sb, fakeLocal{snap: snap(map[string]int{"k80": 8, "v100": 8})}, ncb, mcb, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mb.Run(ctx)
	go ma.Run(ctx)
	eventually.True(t, 15*time.Second, "the leaf link up", func() bool { return len(ma.Links()) > 0 })
	eventually.True(t, 5*time.Second, "the small job moved", func() bool { r := ma.Explain(small); return r != nil && r.State == OutRouted })
	eventually.True(t, 5*time.Second, "the big job judged", func() bool { r := ma.Explain(big); return r != nil && r.State == "refused_slow" })
	ma.probe("b") // the probe crosses too
	if l := ma.Links()[0]; l.LatencyAgeSeconds < 0 || l.ProbeError != "" {
		t.Errorf("probe: %+v", l)
	}
	cancel()
	r := ma.Explain(small)
	if !r.Move || r.ActualS <= 0 || math.Abs(r.PredictedS-0.62) > 1e-9 || r.ToJob == 0 || r.SizeBytes != 600_000 || r.SentBytes != 600_000 {
		t.Errorf("small job's move: %+v (600 kB at 1 MB/s + 20 ms is 0.62 s)", r)
	}
	if !strings.Contains(r.Why, "predicted 0.62s (1 MB/s configured)") {
		t.Errorf("why: %s", r.Why)
	}
	if got := ma.Explain(big); got == nil || got.State != "refused_slow" || !strings.Contains(got.Why, "does not pay") {
		t.Errorf("big job: %+v", got)
	}
	if len(sb.submitted) != 1 || !strings.Contains(strings.Join(sb.submitted[0].Env, " "), "ROTA_MC_RESUME="+dir+"/landed/a.") {
		t.Errorf("b's submissions: %+v", sb.submitted)
	}
	if len(sa.signals) != 1 || sa.signals[0] != "USR1" {
		t.Errorf("signals %v", sa.signals)
	}
	if got, err := os.ReadFile(dir + "/landed/a." + fmt.Sprint(small) + ".ckpt"); err != nil || !bytes.Equal(got, content) {
		t.Errorf("landed checkpoint: %d bytes, %v; want the job's %d", len(got), err, len(content))
	}
	if tr := ma.Transfers(); tr.Count != 1 || tr.LastBytes != 600_000 || tr.LastActualS != r.ActualS {
		t.Errorf("transfers: %+v", tr)
	}
	// On b the copy may not move on before it has run what the move cost
	// it (checkpoint+restart 10 s + the transfer), nor before MinStay.
	mb.cfg.MinStay = time.Second
	if got, want := mb.minStay(r.ToJob), 10+r.ActualS; math.Abs(got-want) > 1e-9 {
		t.Errorf("copy's least stay on b %gs, want %gs", got, want)
	}
	if got := mb.minStay(r.ToJob + 1000); got != 1 {
		t.Errorf("another job's least stay %gs, want MinStay", got)
	}
}

// TestMoveNotTakenResumesHere: a moved job has ended here at its
// checkpoint when its checkpoint is sent and the other cluster asked for
// its copy. If b refuses the copy, or the checkpoint itself, or the link
// is down past the route timeout and the abort is then confirmed, the job
// is submitted again here, as its user, from its checkpoint, once; it is
// never left run nowhere.
func TestMoveNotTakenResumesHere(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  bool // b answers, refusing the copy
		linkCut bool // b does not answer until after the route timeout
		noDir   bool // b takes no checkpoints
		why     string
	}{
		{"b refuses", true, false, false, "Invalid account"},
		{"link cut past the timeout", false, true, false, "no answer in time, move aborted"},
		{"b takes no checkpoint", false, false, true, "takes no checkpoints (its mc_transfer_dir is not set)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := startNATS(t)
			sa, sb := newFake(100), newFake(500)
			sb.refuse = tc.refuse
			dir := t.TempDir()
			ckpt := dir + "/job.ckpt"
			if err := os.WriteFile(ckpt, []byte("step 45"), 0o644); err != nil {
				t.Fatal(err)
			}
			id := sa.add("gres:gpu:1")
			sa.jobs[id].State, sa.jobs[id].User, sa.jobs[id].Partition = "RUNNING", "alice", "long"
			sa.scripts = map[uint32]string{id: "#!/bin/sh\n#ROTA --checkpoint-file=" + ckpt + "\ntrain\n"}
			h := wire.Hints{Steps: 6000, CheckpointSignal: "USR1"}
			la := fakeLocal{snap: snap(map[string]int{"v100": 4}), hint: map[uint32]wire.Hints{id: h}}
			nca, mca := conn(t, url, "a")
			ca := testConfig("a")
			ca.AskTimeout, ca.RouteTimeout = 100*time.Millisecond, time.Minute
			ma, _ := New(ca, zerolog.Nop(), sa, la, nca, mca, nil)
			clock := time.Now()
			ma.now = func() time.Time { return clock }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			startB := func() {
				ncb, mcb := conn(t, url, "b")
				cb := testConfig("b")
				cb.RouteOff, cb.TransferDir = true, dir+"/landed"
				if tc.noDir {
					cb.TransferDir = ""
				}
				mb, _ := New(cb, zerolog.Nop(), sb, fakeLocal{snap: snap(map[string]int{"k80": 8})}, ncb, mcb, nil)
				go mb.Run(ctx)
				// Its checkpoint subject answers (a malformed request, an error).
				eventually.True(t, 5*time.Second, "b's checkpoint subject to answer", func() bool {
					_, err := mca.Request(wire.SubjectMCCheckpoint("b"), nil, 100*time.Millisecond)
					return !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout)
				})
			}
			if !tc.linkCut {
				startB()
			}
			r := &Route{ID: fmt.Sprintf("a.%d", id), From: "a", FromJob: id, To: "b", State: OutCheckpointing, At: clock,
				Name: "train", Move: true, Signal: "USR1", CkptFile: ckpt, Why: "running job moved"}
			ma.out[id] = r
			ma.advance(ctx, r)
			if sa.jobs[id].State != "COMPLETED" {
				t.Fatalf("job here %s after the checkpoint signal", sa.jobs[id].State)
			}
			if tc.linkCut {
				// The checkpoint cannot cross: the move waits in its
				// transfer, then aborts like a route with no answer.
				if r.State != OutTransferring {
					t.Fatalf("state %s with the link down, want transferring", r.State)
				}
				clock = clock.Add(2 * time.Minute) // past the route timeout
				ma.advance(ctx, r)
				if r.State != OutAborting {
					t.Fatalf("state %s past the timeout, want aborting", r.State)
				}
				ma.advance(ctx, r) // still no answer: nothing resubmitted yet
				if r.State != OutAborting || len(sa.submitted) != 0 {
					t.Fatalf("state %s, %d resubmitted before b confirmed the abort", r.State, len(sa.submitted))
				}
				startB() // the link is back
				ma.advance(ctx, r)
			}
			if r.State != OutResumed {
				t.Fatalf("state %s (%s), want resumed", r.State, r.Why)
			}
			if len(sb.submitted) != 0 {
				t.Errorf("b has %d copies, want none", len(sb.submitted))
			}
			if len(sa.submitted) != 1 {
				t.Fatalf("%d resubmitted here, want 1", len(sa.submitted))
			}
			s := sa.submitted[0]
			args := strings.Join(s.Args, " ")
			if s.User != "alice" || !strings.Contains(args, "--partition=long") || !strings.Contains(args, "--comment="+ResumeCommentPrefix+r.ID) ||
				strings.Join(s.Env, " ") != "ROTA_MC_RESUME="+ckpt || !strings.Contains(string(s.Script), "train") {
				t.Errorf("resubmitted as %+v", s)
			}
			if !strings.Contains(r.Why, tc.why) || !strings.Contains(r.Why, fmt.Sprintf("resumed here as job %d", r.HereJob)) {
				t.Errorf("why: %s", r.Why)
			}
			if e := ma.Explain(r.HereJob); e == nil || e.ID != r.ID {
				t.Errorf("explain of the resumed job: %+v", e)
			}
			// A restart between sbatch and its record finds the job by its
			// comment instead of submitting it again.
			r.State = OutResuming
			ma.advance(ctx, r)
			if r.State != OutResumed || len(sa.submitted) != 1 {
				t.Errorf("after a retry: state %s, %d submissions", r.State, len(sa.submitted))
			}
		})
	}
}
