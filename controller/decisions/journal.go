package decisions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rota-hpc/rota/wire"
)

// A Journal makes the embedded controller's decisions survive kill -9
// without putting a JetStream write on the submit path.
//
// The embedded controller answers the plugin first and stores the decision
// in JetStream a few milliseconds later (a synchronous JetStream write
// overran the plugin's deadline on a loaded machine). In between, the
// decision lived only in memory. Now Record appends it to this file first:
// one write(2) of one line, tens of microseconds, and once write returns
// the bytes are the kernel's, so they outlive the process. (Not the host:
// without fsync a power loss can drop them, as it can the last seconds of
// JetStream's own file store, which syncs on an interval by default.) At
// start the controller replays the journal into JetStream before it
// answers anything.
//
// Two files bound its size: decisions.journal takes appends; when it
// passes maxBytes it becomes decisions.journal.old and a fresh file
// starts; .old is deleted once every decision in it is in JetStream. If a
// store failed, .old stays until the next start replays it.
type Journal struct {
	path     string
	maxBytes int64

	mu        sync.Mutex
	f         *os.File
	size      int64
	seq       uint64 // last seq appended
	oldLast   uint64 // last seq in .old; 0 when there is no .old
	oldFailed bool   // a decision in .old was not stored
	curFailed bool   // a decision in the current file was not stored
	buf       bytes.Buffer
}

// JournalFile is the journal's name in the controller's state directory.
const JournalFile = "decisions.journal"

// defaultJournalBytes is when the journal is cut: about 4,000 decisions.
const defaultJournalBytes = 4 << 20

type journalLine struct {
	Seq uint64         `json:"seq"`
	D   *wire.Decision `json:"d"`
}

// OpenJournal opens (creating) the journal in dir. Call Store.Replay
// before appending to it, so what a killed controller left is stored.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("decision journal directory %s: %w", dir, err)
	}
	j := &Journal{path: filepath.Join(dir, JournalFile), maxBytes: defaultJournalBytes}
	if err := j.openCurrent(); err != nil {
		return nil, err
	}
	return j, nil
}

func (j *Journal) openCurrent() error {
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("opening the decision journal: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("decision journal %s: %w", j.path, err)
	}
	j.f, j.size = f, st.Size()
	return nil
}

// Path is the current journal file.
func (j *Journal) Path() string { return j.path }

// Close closes the journal file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// Append writes decision id, encoded as d (JSON), as one line and
// returns its sequence number. The line is in the kernel when Append
// returns.
func (j *Journal) Append(id string, d []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return 0, errors.New("decision journal is closed")
	}
	j.seq++
	// The line is journalLine's encoding, put together around d so the
	// decision is encoded once for the journal and the bucket alike.
	j.buf.Reset()
	j.buf.WriteString(`{"seq":`)
	j.buf.WriteString(strconv.FormatUint(j.seq, 10))
	j.buf.WriteString(`,"d":`)
	j.buf.Write(d)
	j.buf.WriteString("}\n")
	// One write of the whole line: with O_APPEND it lands after every
	// earlier line, and a kill leaves whole lines (a torn last line after
	// a host crash is skipped at replay).
	n, err := j.f.Write(j.buf.Bytes())
	j.size += int64(n)
	if err != nil {
		j.curFailed = true
		return 0, fmt.Errorf("appending decision %s to %s: %w", id, j.path, err)
	}
	j.cutIfLarge()
	return j.seq, nil
}

// cutIfLarge starts a fresh file when the current one is large and no .old
// is waiting; j.mu is held.
func (j *Journal) cutIfLarge() {
	if j.size < j.maxBytes || j.oldLast != 0 {
		return
	}
	old := j.path + ".old"
	if err := j.f.Close(); err != nil {
		j.curFailed = true // keep .old: it may not be whole
	}
	j.f = nil
	if err := os.Rename(j.path, old); err != nil {
		_ = j.openCurrent() // go on appending to the large file
		return
	}
	j.oldLast, j.oldFailed, j.curFailed = j.seq, j.curFailed, false
	if err := j.openCurrent(); err != nil {
		j.f = nil // Append reports it; Record logs it
	}
}

// stored reports what became of decision seq: in JetStream (ok) or not.
// Calls come in seq order from the store's one writer. A nil journal or
// seq 0 (not journaled) is a no-op.
func (j *Journal) stored(seq uint64, ok bool) {
	if j == nil || seq == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.oldLast != 0 && seq <= j.oldLast {
		if !ok {
			j.oldFailed = true
		}
		if seq == j.oldLast && !j.oldFailed {
			if err := os.Remove(j.path + ".old"); err == nil || errors.Is(err, os.ErrNotExist) {
				j.oldLast = 0
			}
		}
		return
	}
	if !ok {
		j.curFailed = true
	}
}

// readJournal returns the decisions in a journal file, oldest first, and
// how many lines could not be read (a torn or corrupt line).
func readJournal(path string) ([]*wire.Decision, int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var (
		out []*wire.Decision
		bad int
	)
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var l journalLine
			if jerr := json.Unmarshal(line, &l); jerr != nil || l.D == nil || l.D.ID == "" {
				bad++
			} else {
				out = append(out, l.D)
			}
		}
		if errors.Is(err, io.EOF) {
			return out, bad, nil
		}
		if err != nil {
			return out, bad, err
		}
	}
}

// Replay stores in JetStream every journaled decision it does not hold yet
// (one that is there may have been bound to its job since, so it is not
// overwritten), remembers them for explain, and empties the journal. On
// error the journal is kept for the next start. It returns how many
// decisions it stored.
func (s *Store) Replay(ctx context.Context, j *Journal) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	stored, skipped := 0, 0
	for _, path := range []string{j.path + ".old", j.path} {
		ds, bad, err := readJournal(path)
		if err != nil {
			return stored, fmt.Errorf("reading the decision journal %s: %w", path, err)
		}
		skipped += bad
		for _, d := range ds {
			_, err := s.kv.Get(ctx, "d."+d.ID)
			switch {
			case err == nil:
				continue
			case !errors.Is(err, jetstream.ErrKeyNotFound):
				return stored, fmt.Errorf("replaying the decision journal: %w", err)
			}
			if err := s.write(ctx, d); err != nil {
				return stored, fmt.Errorf("replaying the decision journal: %w", err)
			}
			s.remember(d)
			stored++
		}
	}
	if skipped > 0 {
		s.log.Warn().Int("lines", skipped).Str("journal", j.path).
			Msg("skipped unreadable lines in the decision journal (torn by a host crash?); those decisions are not explainable")
	}
	// Everything is in JetStream: start both files afresh.
	if err := os.Remove(j.path + ".old"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return stored, fmt.Errorf("clearing the decision journal: %w", err)
	}
	if j.f != nil {
		if err := j.f.Truncate(0); err != nil {
			return stored, fmt.Errorf("clearing the decision journal: %w", err)
		}
	}
	j.size, j.oldLast, j.oldFailed, j.curFailed = 0, 0, false, false
	return stored, nil
}
