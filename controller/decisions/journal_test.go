package decisions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

func openStore(t *testing.T, url string) *Store {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), js, time.Hour, 1, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// journaled is a store on a fresh JetStream server that journals to a new
// directory (returned), cut past maxBytes.
func journaled(t *testing.T, maxBytes int64) (*Store, string) {
	t.Helper()
	srv := natstest.StartJetStream(t)
	dir := t.TempDir()
	s := openStore(t, srv.URL())
	j := openJournal(t, dir)
	j.maxBytes = maxBytes
	s.UseJournal(j)
	return s, dir
}

// openJournal opens the journal in dir, closed when the test ends.
func openJournal(t *testing.T, dir string) *Journal {
	t.Helper()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

// runStore runs s's writer until stop (or the test's end); stop returns
// once Run has flushed and returned.
func runStore(t *testing.T, s *Store) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func decision(id string, job uint32) *wire.Decision {
	return &wire.Decision{ID: id, At: time.Now().UTC(), JobID: job, Given: wire.PlaceReply{DecisionID: id, GPUType: "v100", TimeLimitMin: 30}}
}

func inKV(t *testing.T, s *Store, id string) *wire.Decision {
	t.Helper()
	e, err := s.kv.Get(context.Background(), "d."+id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var d wire.Decision
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// A controller killed after answering but before its writer stored the
// decision: the next controller's replay stores it, and leaves alone a
// decision JetStream already has in a newer form (bound to its job).
func TestJournalReplayAfterKill(t *testing.T) {
	srv := natstest.StartJetStream(t)
	dir := t.TempDir()

	first := openStore(t, srv.URL())
	j := openJournal(t, dir)
	if n, err := first.Replay(context.Background(), j); err != nil || n != 0 {
		t.Fatalf("replay of an empty journal: %d, %v", n, err)
	}
	first.UseJournal(j)
	// No Run: nothing reaches JetStream from the queue, as when the
	// process dies right after answering.
	first.Record(decision("lost", 0))
	first.Record(decision("bound", 0))
	// "bound" reached JetStream and was bound to its job since.
	if err := first.write(context.Background(), decision("bound", 42)); err != nil {
		t.Fatal(err)
	}
	if inKV(t, first, "lost") != nil {
		t.Fatal("test set-up: the decision is already stored")
	}
	// kill -9: the file stays as the kernel has it; nothing is closed.

	second := openStore(t, srv.URL())
	n, err := second.Replay(context.Background(), openJournal(t, dir))
	if err != nil || n != 1 {
		t.Fatalf("replay stored %d (want 1), err %v", n, err)
	}
	if d := inKV(t, second, "lost"); d == nil || d.Given.GPUType != "v100" {
		t.Fatalf("the answered decision was not restored: %+v", d)
	}
	if d := inKV(t, second, "bound"); d == nil || d.JobID != 42 {
		t.Fatalf("replay overwrote the bound decision: %+v", d)
	}
	if d, err := second.Get(context.Background(), "lost"); err != nil || d.ID != "lost" {
		t.Fatalf("explain cannot find the restored decision: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, JournalFile)); err != nil || st.Size() != 0 {
		t.Fatalf("journal not emptied after a full replay: %v %v", st, err)
	}
}

// A line torn by a host crash (or garbage) is skipped; the whole lines
// around it are replayed.
func TestJournalReplaySkipsTornLines(t *testing.T) {
	srv := natstest.StartJetStream(t)
	dir := t.TempDir()
	good, _ := json.Marshal(journalLine{Seq: 1, D: decision("a", 0)})
	good2, _ := json.Marshal(journalLine{Seq: 3, D: decision("b", 0)})
	content := string(good) + "\n" + `{"seq":2,"d":{"id":` + "\n" + "\n" + `{"seq":4,"d":null}` + "\n" + string(good2) + "\n" + `{"seq":5,"d":{"id":"c"`
	if err := os.WriteFile(filepath.Join(dir, JournalFile), []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, srv.URL())
	n, err := s.Replay(context.Background(), openJournal(t, dir))
	if err != nil || n != 2 {
		t.Fatalf("replay stored %d (want 2), err %v", n, err)
	}
	for _, id := range []string{"a", "b"} {
		if inKV(t, s, id) == nil {
			t.Errorf("decision %s not replayed", id)
		}
	}
}

// The journal is cut when large, and the cut-off part is deleted once the
// writer has stored everything in it; what is still unstored is replayed.
func TestJournalCutAndCleanup(t *testing.T) {
	s, dir := journaled(t, 1) // cut after every append while no .old waits
	old := filepath.Join(dir, JournalFile+".old")

	s.Record(decision("d1", 0))
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("journal not cut: %v", err)
	}
	s.Record(decision("d2", 0)) // .old waits: d2 stays in the current file
	stop := runStore(t, s)
	eventually.True(t, 10*time.Second, "d1 and d2 stored", func() bool {
		return inKV(t, s, "d1") != nil && inKV(t, s, "d2") != nil
	})
	stop()
	eventually.True(t, 5*time.Second, "the stored .old deleted", func() bool {
		_, err := os.Stat(old)
		return errors.Is(err, os.ErrNotExist)
	})
	ds, bad, err := readJournal(filepath.Join(dir, JournalFile))
	if err != nil || bad != 0 || len(ds) != 1 || ds[0].ID != "d2" {
		t.Fatalf("current journal holds %v (bad %d, err %v), want d2", ds, bad, err)
	}
}

// What a journal holds is decoded whatever bytes it contains.
func FuzzReadJournal(f *testing.F) {
	good, _ := json.Marshal(journalLine{Seq: 1, D: decision("a", 7)})
	f.Add(string(good) + "\n")
	f.Add(`{"seq":2,"d":{"id":`)
	f.Add("\n\n{}\n")
	f.Fuzz(func(t *testing.T, content string) {
		p := filepath.Join(t.TempDir(), "j")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		ds, _, err := readJournal(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d == nil || d.ID == "" {
				t.Fatalf("accepted a decision without id: %+v", d)
			}
		}
	})
}

// Only ids Slurm assigned get a job index key: a submission's decision has
// none yet (0; NO_VAL from older plugins).
func TestHasJobID(t *testing.T) {
	for id, want := range map[uint32]bool{0: false, 1: true, 4242: true, 0xfffffffd: true, 0xfffffffe: false, 0xffffffff: false} {
		if got := hasJobID(&wire.Decision{JobID: id}); got != want {
			t.Errorf("job id %d: %v, want %v", id, got, want)
		}
	}
}

// A burst recorded faster than JetStream acknowledges goes out in
// batches: every decision and job index lands in the bucket, a record
// that arrived encoded is stored byte for byte as it came (fields this
// build does not know included), and the journal learns that all were
// stored (its cut .old file is deleted).
func TestRunStoresABurst(t *testing.T) {
	s, dir := journaled(t, 20<<10) // cut once, a few dozen decisions in
	const n = 300
	raw := map[string]string{}
	for i := range n {
		id := fmt.Sprintf("b%d", i)
		d := decision(id, 0)
		switch i % 3 {
		case 0:
			d.JobID = uint32(1000 + i) // bound already: its job index goes too
			s.Record(d)
		case 1:
			b, _ := json.Marshal(d)
			b = append(b[:len(b)-1], `,"x_future":1}`...) // a newer plugin's record
			raw[id] = string(b)
			s.RecordEncoded(d, b)
		default:
			b, _ := json.MarshalIndent(d, "", " ") // line breaks: encoded again for the journal
			s.RecordEncoded(d, b)
		}
	}
	runStore(t, s)
	eventually.True(t, 20*time.Second, "every decision stored", func() bool {
		return inKV(t, s, fmt.Sprintf("b%d", n-1)) != nil
	})
	for i := range n {
		id := fmt.Sprintf("b%d", i)
		e, err := s.kv.Get(context.Background(), "d."+id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if want, ok := raw[id]; ok && string(e.Value()) != want {
			t.Fatalf("%s stored as %s, want the record as received %s", id, e.Value(), want)
		}
		if i%3 == 0 {
			if d, err := s.ByJob(context.Background(), uint32(1000+i)); err != nil || d.ID != id {
				t.Fatalf("job %d: %v %v", 1000+i, d, err)
			}
		}
	}
	eventually.True(t, 5*time.Second, "the cut journal deleted once all in it were stored", func() bool {
		_, err := os.Stat(filepath.Join(dir, JournalFile+".old"))
		return errors.Is(err, os.ErrNotExist)
	})
	ds, bad, err := readJournal(filepath.Join(dir, JournalFile))
	if err != nil || bad != 0 || len(ds) == 0 {
		t.Fatalf("current journal: %d decisions, %d unreadable, %v", len(ds), bad, err)
	}
}
