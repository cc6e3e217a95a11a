package multicluster

// A moved job's checkpoint crosses the link between sites itself, as
// request/reply on wire.SubjectMCCheckpoint(receiver):
//
//   - the sender opens the transfer (route ID, size, sha256); the receiver
//     records it and answers the bytes it already holds of it;
//   - the sender sends the file from there in chunks (chunkBytes, several
//     in flight), each request's body written by the receiver at its
//     offset into <its mc_transfer_dir>/<route id>.ckpt.part, each answered
//     with the bytes it now holds;
//   - the chunk that completes the file has the receiver check the whole
//     file's sha256 and rename it <route id>.ckpt: the answer is its path,
//     which the copy there resumes from (ROTA_MC_RESUME).
//
// A send runs a slice of time per tick (transferSlice), so this cluster's
// views and routes go on meanwhile, and the next slice opens again and
// goes on from what the receiver holds: a cut link, a lost answer or a
// restart of either controller costs at most what was in flight, and a
// chunk sent twice is written twice at the same offset, harmlessly.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/wire"
)

const (
	// chunkBytes is one chunk's body, well under NATS's 1 MiB
	// max_payload.
	chunkBytes = 256 << 10
	// chunkWindow chunks are in flight at once (2 MiB), so a link of
	// 20 ms round trip still carries ~100 MB/s, which one chunk waiting
	// for its answer at a time would cut to ~13 MB/s.
	chunkWindow = 8
	// maxChunkBytes is the largest body the receiver takes.
	maxChunkBytes = 1 << 20
	// minSampleBytes: a transfer this large or larger is a sample of the
	// link's bandwidth (a smaller one measures mostly its latency).
	minSampleBytes = 1 << 20
	// errMismatch starts the receiver's answer when the file it holds
	// fails its sha256: the sender reads the file again and starts over.
	errMismatch = "checksum mismatch"
)

// TransferStats are the checkpoints sent from here: how many, their
// bytes, and the last one's predicted and actual seconds.
type TransferStats struct {
	Count          uint64
	Bytes          float64
	LastBytes      int64
	LastPredictedS float64
	LastActualS    float64
}

// Transfers are the checkpoints sent from here (the metrics).
func (m *Manager) Transfers() TransferStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.xfers
}

// chunkReq is one request on the checkpoint subject, decoded.
type chunkReq struct {
	ID, From     string
	Open         bool
	Size, Offset int64
	SHA256       string
	Data         []byte
}

var (
	// routeID is "<cluster>.<job id>": no path separator, no "..".
	routeID = regexp.MustCompile(`^[A-Za-z0-9_]+\.[0-9]+$`)
	hexSum  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// decodeChunk reads a checkpoint request and refuses what is not one: a
// route ID other than "<from>.<job id>" (so nothing but a plain file
// name can come of it), a size or offset that is not a number from 0, a
// chunk that would reach past the file's size, a body over maxChunkBytes,
// an open without the file's sha256.
func decodeChunk(h nats.Header, data []byte) (chunkReq, error) {
	c := chunkReq{ID: h.Get(wire.MCChunkRoute), From: h.Get(wire.MCChunkFrom), Open: h.Get(wire.MCChunkOpen) == "1",
		SHA256: h.Get(wire.MCChunkSHA256), Data: data}
	if len(c.ID) > 200 || !routeID.MatchString(c.ID) || !strings.HasPrefix(c.ID, c.From+".") {
		return c, fmt.Errorf("bad route id %q from %q: want <from cluster>.<job id>", c.ID, c.From)
	}
	size, err := strconv.ParseInt(h.Get(wire.MCChunkSize), 10, 64)
	if err != nil || size < 0 {
		return c, fmt.Errorf("bad size %q", h.Get(wire.MCChunkSize))
	}
	c.Size = size
	if c.Open {
		if !hexSum.MatchString(c.SHA256) {
			return c, errors.New("an open needs the file's sha256 (64 hex digits)")
		}
		if len(data) > 0 {
			return c, errors.New("an open carries no data")
		}
		return c, nil
	}
	off, err := strconv.ParseInt(h.Get(wire.MCChunkOffset), 10, 64)
	if err != nil || off < 0 {
		return c, fmt.Errorf("bad offset %q", h.Get(wire.MCChunkOffset))
	}
	c.Offset = off
	if len(data) > maxChunkBytes {
		return c, fmt.Errorf("chunk of %d bytes, over %d", len(data), maxChunkBytes)
	}
	if off > size || int64(len(data)) > size-off {
		return c, fmt.Errorf("chunk at %d of %d bytes is past the file's size %d", off, len(data), size)
	}
	return c, nil
}

// syncRename flushes part to disk and renames it final.
func syncRename(part, final string) error {
	f, err := os.OpenFile(part, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(part, final)
}

// fileSum is a file's sha256 (hex) and size.
func fileSum(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// transferSlice is how long one tick sends a checkpoint: a quarter of
// the views' max age (so this cluster's views stay fresh at the others
// meanwhile), at least a tick.
func (m *Manager) transferSlice() time.Duration {
	return max(m.cfg.ViewMaxAge/4, m.cfg.Tick)
}

// sendCheckpoint sends r's checkpoint file to r.To for at most budget,
// from what the receiver holds. It returns the file's path there once it
// landed whole, "" while more remains. The first call reads the file's
// size and sha256 and the prediction; each call adds its time to the
// actual, so a transfer a cut link split counts the time spent sending.
func (m *Manager) sendCheckpoint(ctx context.Context, r *Route, budget time.Duration) (string, error) {
	m.mu.Lock()
	sum := r.SHA256
	m.mu.Unlock()
	if sum == "" {
		s, size, err := fileSum(r.CkptFile)
		if err != nil {
			return "", fmt.Errorf("cannot read the checkpoint file %s (the job's #ROTA --checkpoint-file): %w", r.CkptFile, err)
		}
		l := m.link(r.To)
		m.mu.Lock()
		r.Size, r.SHA256, r.Sent, r.XferS = size, s, 0, 0
		r.PredictedS, r.Link = l.Transfer(float64(size)), l.words()
		m.mu.Unlock()
	}
	f, err := os.Open(r.CkptFile)
	if err != nil {
		return "", fmt.Errorf("cannot read the checkpoint file %s: %w", r.CkptFile, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() != r.Size {
		m.mu.Lock()
		r.SHA256 = "" // read it again next tick and start over
		m.mu.Unlock()
		return "", fmt.Errorf("the checkpoint file %s changed since its transfer began; sending it again from the start", r.CkptFile)
	}
	m.mu.Lock()
	sf := sendFile{route: r.ID, from: r.From, to: r.To, path: r.CkptFile, sha256: r.SHA256, size: r.Size, have: r.Sent}
	m.mu.Unlock()
	start := time.Now()
	have, path, err := m.send.slice(ctx, sf, f, start.Add(budget))
	took := time.Since(start).Seconds()
	m.mu.Lock()
	if have > r.Sent || path != "" {
		r.XferAt = m.now() // progress
	}
	r.Sent = have
	r.XferS += took
	if err != nil && strings.Contains(err.Error(), errMismatch) {
		r.SHA256 = ""
	}
	m.mu.Unlock()
	if err != nil || path == "" {
		return "", err
	}
	m.mu.Lock()
	r.ActualS = r.XferS
	r.Why += fmt.Sprintf("; checkpoint %d bytes sent to %s in %.2fs, predicted %.2fs (%s)", r.Size, r.To, r.ActualS, r.PredictedS, r.Link)
	m.xfers.Count++
	m.xfers.Bytes += float64(r.Size)
	m.xfers.LastBytes, m.xfers.LastPredictedS, m.xfers.LastActualS = r.Size, r.PredictedS, r.ActualS
	pred, actual, size := r.PredictedS, r.ActualS, r.Size
	m.mu.Unlock()
	if size >= minSampleBytes {
		// A sample in the prediction's own terms: latency + bytes /
		// bandwidth took actual.
		if s := actual - m.link(r.To).Latency; s > 0 {
			m.links.add(r.To, float64(size)/s, -1)
		}
	}
	m.log.Info().Str("route", r.ID).Str("to", r.To).Int64("bytes", size).Float64("predicted_s", pred).Float64("actual_s", actual).
		Str("path", path).Msg("checkpoint transferred")
	return path, nil
}
