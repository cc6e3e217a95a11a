package multicluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/wire"
)

// syncBuf is a log sink several goroutines write.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// answers waits until cluster's manager answers on its subjects (want), or
// nobody does.
func answers(t *testing.T, nc *nats.Conn, cluster string, want bool) {
	t.Helper()
	for _, subj := range []string{wire.SubjectMCProbe(cluster), wire.SubjectMCCheckpoint(cluster), wire.SubjectMCRoute(cluster)} {
		eventually.True(t, 5*time.Second, subj+" answered: "+strconv.FormatBool(want), func() bool {
			_, err := nc.Request(subj, []byte("x"), 100*time.Millisecond)
			return (err == nil) == want && (want || errors.Is(err, nats.ErrNoResponders))
		})
	}
}

// TestTransferResumes: a move's checkpoint goes over the link in chunks;
// after the first window both controllers stop (the sender restarts from
// its saved state), then a peer that never answers stands in for a cut
// link: the sender logs once and waits.
// A new receiving controller, from the saved state and the part file, says
// what it holds; the sender goes on from there (no chunk before it is sent
// again), the file lands byte for byte in b's transfer dir, and b submits
// one copy that resumes from it.
func TestTransferResumes(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "job.ckpt")
	content := make([]byte, 3<<20+123) // 13 chunks: one window and 5 more
	_, _ = rand.Read(content)
	if err := os.WriteFile(ckpt, content, 0o644); err != nil {
		t.Fatal(err)
	}
	sa, sb := newFake(100), newFake(500)
	id := sa.add("gres:gpu:1")
	sa.jobs[id].State = "COMPLETED" // ended at its checkpoint
	nca, mca := conn(t, url, "a")
	ncb, mcb := conn(t, url, "b")
	logs := &syncBuf{}
	ca := testConfig("a")
	ca.AskTimeout = 200 * time.Millisecond
	storeA := newMemStore()
	ma, _ := New(ca, zerolog.New(logs).Level(zerolog.WarnLevel), sa, fakeLocal{snap: snap(map[string]int{"v100": 4})}, nca, mca, storeA)
	cb := testConfig("b")
	cb.RouteOff, cb.TransferDir = true, filepath.Join(dir, "b-in")
	storeB := newMemStore()
	newB := func() context.CancelFunc {
		mb, _ := New(cb, zerolog.Nop(), sb, fakeLocal{snap: snap(map[string]int{"k80": 4})}, ncb, mcb, storeB)
		ctx, cancel := context.WithCancel(context.Background())
		go mb.Run(ctx)
		answers(t, nca, "b", true)
		return cancel
	}
	stopB := newB()
	ctx := context.Background()
	r := &Route{ID: "a." + strconv.Itoa(int(id)), From: "a", FromJob: id, To: "b", State: OutTransferring, At: time.Now(),
		Name: "job", Move: true, CkptFile: ckpt}
	ma.out[id] = r
	// One slice of no time: one window (8 chunks), answered.
	if path, err := ma.sendCheckpoint(ctx, r, 0); err != nil || path != "" {
		t.Fatalf("first slice: %q %v", path, err)
	}
	window := int64(chunkWindow * chunkBytes)
	part := filepath.Join(cb.TransferDir, r.ID+".ckpt.part")
	if st, err := os.Stat(part); err != nil || st.Size() != window || r.Sent != window {
		t.Fatalf("after one window: part %v %v, sent %d; want %d", st, err, r.Sent, window)
	}
	stopB()
	answers(t, nca, "b", false)
	// a restarts too, from its saved route.
	if err := ma.save(ctx); err != nil {
		t.Fatal(err)
	}
	ma, _ = New(ca, zerolog.New(logs).Level(zerolog.WarnLevel), sa, fakeLocal{snap: snap(map[string]int{"v100": 4})}, nca, mca, storeA)
	ma.restore(ctx)
	if r = ma.out[id]; r == nil || r.State != OutTransferring || r.Sent != window || r.SHA256 == "" {
		t.Fatalf("a's route after its restart: %+v", r)
	}
	// The link cut: b's checkpoint subject takes requests, answers none.
	hole, err := ncb.Subscribe(wire.SubjectMCCheckpoint("b"), func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	_ = ncb.Flush()
	for i := 0; i < 3; i++ {
		ma.advance(ctx, r)
		if r.State != OutTransferring || r.Sent != window {
			t.Fatalf("cut link, tick %d: state %s, sent %d", i, r.State, r.Sent)
		}
	}
	if n := strings.Count(logs.String(), "cannot send the moved job's checkpoint"); n != 1 || !strings.Contains(logs.String(), "mc_ask_timeout") {
		t.Errorf("%d warnings for 3 failed ticks, want 1:\n%s", n, logs.String())
	}
	_ = hole.Unsubscribe()
	// From here on, every chunk's offset as b's subject sees them.
	var mu sync.Mutex
	var offsets []int64
	spy, err := nca.Subscribe(wire.SubjectMCCheckpoint("b"), func(msg *nats.Msg) {
		if msg.Header.Get(wire.MCChunkOpen) == "" && msg.Header.Get(wire.MCChunkRoute) != "" {
			o, _ := strconv.ParseInt(msg.Header.Get(wire.MCChunkOffset), 10, 64)
			mu.Lock()
			offsets = append(offsets, o)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Unsubscribe()
	_ = nca.Flush()

	stopB = newB()
	defer stopB()
	for i := 0; i < 20 && r.State != OutRouted; i++ {
		ma.advance(ctx, r)
	}
	if r.State != OutRouted {
		t.Fatalf("state %s: %s", r.State, r.Why)
	}
	ma.advance(ctx, r) // once more: nothing happens twice
	landed := filepath.Join(cb.TransferDir, r.ID+".ckpt")
	if got, err := os.ReadFile(landed); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("landed: %d bytes, %v; want the %d sent", len(got), err, len(content))
	}
	if _, err := os.Stat(part); !os.IsNotExist(err) {
		t.Errorf("part file left: %v", err)
	}
	mu.Lock()
	resumed := offsets
	mu.Unlock()
	for _, o := range resumed {
		if o < window {
			t.Errorf("chunk at %d sent again after the receiver held %d", o, window)
		}
	}
	if len(resumed) != 5 {
		t.Errorf("%d chunks after the restart, want 5: %v", len(resumed), resumed)
	}
	if len(sb.submitted) != 1 || !strings.Contains(strings.Join(sb.submitted[0].Env, " "), "ROTA_MC_RESUME="+landed) {
		t.Errorf("b's copies: %+v", sb.submitted)
	}
	if r.ActualS <= 0 || r.PredictedS <= 0 || r.Size != int64(len(content)) || !strings.Contains(r.Why, "checkpoint 3145851 bytes sent to b") {
		t.Errorf("route: actual %g predicted %g size %d why %s", r.ActualS, r.PredictedS, r.Size, r.Why)
	}
	// 3 MB is a bandwidth sample: the link is now measured.
	if f := ma.link("b"); !f.Measured || f.Bandwidth <= 0 {
		t.Errorf("link after the transfer: %+v", f)
	}
}

// chunkMsg is a checkpoint request as a sender makes it.
func chunkMsg(id, from string, open bool, size, offset int64, sum string, data []byte) *nats.Msg {
	h := nats.Header{}
	h.Set(wire.MCChunkRoute, id)
	h.Set(wire.MCChunkFrom, from)
	h.Set(wire.MCChunkSize, strconv.FormatInt(size, 10))
	if open {
		h.Set(wire.MCChunkOpen, "1")
		h.Set(wire.MCChunkSHA256, sum)
	} else {
		h.Set(wire.MCChunkOffset, strconv.FormatInt(offset, 10))
	}
	return &nats.Msg{Header: h, Data: data}
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestChunkRefused: bad checkpoint requests get an error answer and write
// nothing, inside the transfer dir or out of it.
func TestChunkRefused(t *testing.T) {
	t.Parallel()
	url := startNATS(t)
	root := t.TempDir()
	ncb, mcb := conn(t, url, "b")
	cb := testConfig("b")
	cb.RouteOff, cb.TransferDir, cb.TransferMaxGB = true, filepath.Join(root, "in"), 0.001 // 1 MB
	mb, _ := New(cb, zerolog.Nop(), newFake(500), fakeLocal{snap: snap(map[string]int{"k80": 4})}, ncb, mcb, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mb.Run(ctx)
	nc, _ := conn(t, url, "a")
	answers(t, nc, "b", true)
	data := []byte("checkpoint")
	good := sumOf(data)
	ask := func(m *nats.Msg) wire.MCChunkReply {
		t.Helper()
		m.Subject = wire.SubjectMCCheckpoint("b")
		rep, err := nc.RequestMsg(m, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r wire.MCChunkReply
		if err := json.Unmarshal(rep.Data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		name string
		msgs []*nats.Msg // all but the last must succeed
		want string
	}{
		{"traversal in the id", []*nats.Msg{chunkMsg("a/../../etc.1", "a", true, 10, 0, good, nil)}, "bad route id"},
		{"dot-dot id", []*nats.Msg{chunkMsg("..", "a", true, 10, 0, good, nil)}, "bad route id"},
		{"absolute id", []*nats.Msg{chunkMsg("/tmp/a.1", "/tmp/a", true, 10, 0, good, nil)}, "bad route id"},
		{"id of another sender", []*nats.Msg{chunkMsg("c.1", "a", true, 10, 0, good, nil)}, "bad route id"},
		{"from this cluster", []*nats.Msg{chunkMsg("b.1", "b", true, 10, 0, good, nil)}, "this cluster itself"},
		{"over the cap", []*nats.Msg{chunkMsg("a.2", "a", true, 2e6, 0, good, nil)}, "mc_transfer_max_gb"},
		{"open without a sum", []*nats.Msg{chunkMsg("a.3", "a", true, 10, 0, "", nil)}, "sha256"},
		{"unknown route", []*nats.Msg{chunkMsg("a.4", "a", false, 10, 0, "", data)}, "open it first"},
		{"offset past the size", []*nats.Msg{chunkMsg("a.5", "a", true, 10, 0, good, nil), chunkMsg("a.5", "a", false, 10, 11, "", []byte("x"))}, "past the file's size"},
		{"chunk reaching past the size", []*nats.Msg{chunkMsg("a.6", "a", true, 10, 0, good, nil), chunkMsg("a.6", "a", false, 10, 5, "", data)}, "past the file's size"},
		{"negative offset", []*nats.Msg{chunkMsg("a.7", "a", true, 10, 0, good, nil), chunkMsg("a.7", "a", false, 10, -1, "", data)}, "bad offset"},
		{"size other than opened", []*nats.Msg{chunkMsg("a.8", "a", true, 10, 0, good, nil), chunkMsg("a.8", "a", false, 11, 0, "", data)}, "differs"},
		{"wrong checksum", []*nats.Msg{chunkMsg("a.9", "a", true, 10, 0, sumOf([]byte("other file")), nil), chunkMsg("a.9", "a", false, 10, 0, "", data)}, errMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i, m := range c.msgs {
				rep := ask(m)
				if last := i == len(c.msgs)-1; !last && rep.Error != "" {
					t.Fatalf("request %d: %s", i, rep.Error)
				} else if last && !strings.Contains(rep.Error, c.want) {
					t.Fatalf("answer %+v, want an error with %q", rep, c.want)
				}
			}
		})
	}
	// Nothing landed, no part is left (the damaged one was deleted), and
	// nothing was written beside the transfer dir.
	var files []string
	_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("files written: %v", files)
	}
	// The good path on the same receiver, for contrast: open, one chunk.
	if rep := ask(chunkMsg("a.10", "a", true, 10, 0, good, nil)); rep.Error != "" || rep.Have != 0 {
		t.Fatalf("open: %+v", rep)
	}
	rep := ask(chunkMsg("a.10", "a", false, 10, 0, "", data))
	if !rep.Done || rep.Path != filepath.Join(cb.TransferDir, "a.10.ckpt") {
		t.Fatalf("chunk: %+v", rep)
	}
	// A retry of the chunk, and a new open, get the same answer.
	if again := ask(chunkMsg("a.10", "a", false, 10, 0, "", data)); !again.Done || again.Path != rep.Path {
		t.Errorf("retry: %+v", again)
	}
	if again := ask(chunkMsg("a.10", "a", true, 10, 0, good, nil)); !again.Done || again.Have != 10 {
		t.Errorf("open again: %+v", again)
	}
}

// TestTakesNoCheckpoint: a receiver without a transfer dir refuses
// checkpoints and says so in its view (TestMoveWhereItLands: no job with
// a checkpoint file is moved to it).
func TestTakesNoCheckpoint(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"", t.TempDir()} {
		cfg := Config{Name: "b", TransferMaxGB: 100, TransferDir: dir}
		m := &Manager{cfg: cfg, local: fakeLocal{}, now: time.Now, inbox: newInbox(cfg, zerolog.Nop(), &onceLog{}, time.Now, nil)}
		why := m.inbox.takes(chunkReq{ID: "a.1", From: "a", Size: 1})
		v := m.buildView(nil)
		if dir == "" && (!strings.Contains(why, "mc_transfer_dir is not set") || v.CheckpointMaxGB != 0) {
			t.Errorf("no dir: %q, view %g", why, v.CheckpointMaxGB)
		}
		if dir != "" && (why != "" || v.CheckpointMaxGB != 100) {
			t.Errorf("dir: %q, view %g", why, v.CheckpointMaxGB)
		}
	}
}

// FuzzDecodeChunk: whatever comes in, a request decoded is one whose file
// names stay in the transfer dir and whose chunk lies inside its size.
func FuzzDecodeChunk(f *testing.F) {
	f.Add("a.1", "a", "", "10", "0", "", []byte("0123456789"))
	f.Add("a.1", "a", "1", "10", "", strings.Repeat("ab", 32), []byte(nil))
	f.Add("../a.1", "..", "", "10", "5", "", []byte("x"))
	f.Add("a.1", "a", "", "9223372036854775807", "9223372036854775807", "", []byte("x"))
	f.Add("a.1", "a", "", "-1", "0", "", []byte(nil))
	f.Fuzz(func(t *testing.T, id, from, open, size, offset, sum string, data []byte) {
		h := nats.Header{}
		for k, v := range map[string]string{wire.MCChunkRoute: id, wire.MCChunkFrom: from, wire.MCChunkOpen: open,
			wire.MCChunkSize: size, wire.MCChunkOffset: offset, wire.MCChunkSHA256: sum} {
			h.Set(k, v)
		}
		c, err := decodeChunk(h, data)
		if err != nil {
			return
		}
		dir := "/var/lib/rota/in"
		for _, p := range []string{filepath.Join(dir, c.ID+".ckpt"), filepath.Join(dir, c.ID+".ckpt.part")} {
			if filepath.Dir(p) != dir {
				t.Fatalf("route id %q names %s, outside %s", c.ID, p, dir)
			}
		}
		if c.Offset < 0 || c.Size < 0 || c.Offset+int64(len(c.Data)) > c.Size || len(c.Data) > maxChunkBytes {
			t.Fatalf("chunk %d+%d of %d accepted", c.Offset, len(c.Data), c.Size)
		}
		if c.Open && (len(c.Data) > 0 || len(c.SHA256) != 64) {
			t.Fatalf("open %+v accepted", c)
		}
	})
}
