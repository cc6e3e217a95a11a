package multicluster

// The receiving side of a moved job's checkpoint (the protocol:
// transfer.go): the transfers open here, each chunk written at its
// offset, and the file checked and landed whole. It keeps its own lock;
// its receipts are saved with the manager's routes (save).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/wire"
)

// receipt is the receiver's record of a checkpoint coming in, saved with
// the routes: what the sender opened, and whether it landed whole.
type receipt struct {
	ID     string    `json:"id"`
	From   string    `json:"from"`
	Size   int64     `json:"size"`
	SHA256 string    `json:"sha256"`
	At     time.Time `json:"at"`
	Done   bool      `json:"done,omitempty"`
}

// inbox takes the checkpoints other clusters send here.
type inbox struct {
	name  string  // this cluster's
	dir   string  // mc_transfer_dir ("" takes none)
	maxGB float64 // mc_transfer_max_gb
	log   zerolog.Logger
	// warned is the manager's: a failure retried each tick warns once.
	warned *onceLog
	now    func() time.Time
	// save writes the manager's state, receipts included (snapshot).
	save func(context.Context) error

	mu   sync.Mutex
	recv map[string]*receipt
}

// newInbox takes checkpoints for the cluster cfg names, into its
// mc_transfer_dir; save writes the manager's state (nil: nothing to save).
func newInbox(cfg Config, log zerolog.Logger, warned *onceLog, now func() time.Time, save func(context.Context) error) *inbox {
	if save == nil {
		save = func(context.Context) error { return nil }
	}
	return &inbox{name: cfg.Name, dir: cfg.TransferDir, maxGB: cfg.TransferMaxGB, log: log, warned: warned,
		now: now, save: save, recv: map[string]*receipt{}}
}

// snapshot copies the receipts, to be saved.
func (in *inbox) snapshot() map[string]*receipt {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]*receipt, len(in.recv))
	for id, rc := range in.recv {
		c := *rc
		out[id] = &c
	}
	return out
}

// restore replaces the receipts with those saved.
func (in *inbox) restore(recv map[string]*receipt) {
	in.mu.Lock()
	in.recv = recv
	in.mu.Unlock()
}

// count is how many transfers are open or landed here.
func (in *inbox) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.recv)
}

// prune forgets the transfers opened before cut; the part of one that
// never landed is deleted (a landed checkpoint is the job's).
func (in *inbox) prune(cut time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for id, rc := range in.recv {
		if rc.At.Before(cut) {
			if !rc.Done {
				_ = os.Remove(in.partPath(id))
			}
			delete(in.recv, id)
		}
	}
}

// finalPath and partPath are where route id's checkpoint lands here.
func (in *inbox) finalPath(id string) string {
	return filepath.Join(in.dir, id+".ckpt")
}

func (in *inbox) partPath(id string) string { return in.finalPath(id) + ".part" }

// onCheckpoint is another cluster sending a moved job's checkpoint here.
func (in *inbox) onCheckpoint(msg *nats.Msg) {
	c, err := decodeChunk(msg.Header, msg.Data)
	var rep wire.MCChunkReply
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch {
	case err != nil:
		rep = wire.MCChunkReply{V: wire.Version, ID: msg.Header.Get(wire.MCChunkRoute), Error: err.Error()}
	case c.Open:
		rep = in.openReceipt(ctx, c)
	default:
		rep = in.receiveChunk(ctx, c)
	}
	if rep.Error != "" {
		in.log.Debug().Str("route", rep.ID).Str("error", rep.Error).Msg("checkpoint request refused")
	}
	b, _ := json.Marshal(rep)
	if err := msg.Respond(b); err != nil {
		in.log.Debug().Err(err).Msg("cannot answer a checkpoint request")
	}
}

// takes says why this cluster takes no checkpoint of c's size from c's
// sender ("" it does).
func (in *inbox) takes(c chunkReq) string {
	switch {
	case in.dir == "":
		return "cluster " + in.name + " takes no checkpoints (its mc_transfer_dir is not set)"
	case c.From == in.name:
		return "a checkpoint from this cluster itself"
	case float64(c.Size) > in.maxGB*1e9:
		return fmt.Sprintf("the checkpoint (%.3g GB) is over cluster %s's mc_transfer_max_gb (%g): raise it there, or make the checkpoint smaller",
			float64(c.Size)/1e9, in.name, in.maxGB)
	}
	return ""
}

// openReceipt records a checkpoint coming in (a new one, or another file
// under a route ID already open: it starts over) and answers what is
// held of it.
func (in *inbox) openReceipt(ctx context.Context, c chunkReq) wire.MCChunkReply {
	rep := wire.MCChunkReply{V: wire.Version, ID: c.ID}
	if why := in.takes(c); why != "" {
		rep.Error, rep.Refused = why, true
		return rep
	}
	if err := os.MkdirAll(in.dir, 0o755); err != nil {
		rep.Error = fmt.Sprintf("cluster %s cannot make its mc_transfer_dir: %v", in.name, err)
		in.warned.warn("receiving", c.ID, err, "cannot make mc_transfer_dir for a checkpoint coming in; fix the directory")
		return rep
	}
	in.mu.Lock()
	rc := in.recv[c.ID]
	fresh := rc == nil || rc.Size != c.Size || rc.SHA256 != c.SHA256
	if fresh {
		rc = &receipt{ID: c.ID, From: c.From, Size: c.Size, SHA256: c.SHA256, At: in.now()}
		in.recv[c.ID] = rc
	}
	in.mu.Unlock()
	final, part := in.finalPath(c.ID), in.partPath(c.ID)
	if fresh {
		// Whatever an earlier file under this ID left is not this one.
		_ = os.Remove(part)
		_ = os.Remove(final)
		if err := in.save(ctx); err != nil {
			in.mu.Lock()
			delete(in.recv, c.ID) // not recorded: not open
			in.mu.Unlock()
			rep.Error = "cannot record the transfer: " + err.Error()
			return rep
		}
		in.log.Debug().Str("route", c.ID).Str("from", c.From).Int64("bytes", c.Size).Msg("checkpoint transfer opened")
	}
	in.mu.Lock()
	done := rc.Done
	in.mu.Unlock()
	if !done {
		// Landed but not recorded (stopped between the rename and the
		// save): the file itself says.
		if sum, n, err := fileSum(final); err == nil && n == rc.Size && sum == rc.SHA256 {
			in.landed(ctx, rc)
			done = true
		}
	}
	if done {
		if st, err := os.Stat(final); err == nil && st.Size() == rc.Size {
			rep.Have, rep.Done, rep.Path = rc.Size, true, final
			return rep
		}
		// Landed once, gone since: take it again.
		in.mu.Lock()
		rc.Done = false
		in.mu.Unlock()
	}
	rep.Have = in.held(rc)
	return rep
}

// held is the bytes of rc's part file here (0 none, or one longer than
// the file, which is not this file's and is deleted).
func (in *inbox) held(rc *receipt) int64 {
	st, err := os.Stat(in.partPath(rc.ID))
	if err != nil {
		return 0
	}
	if st.Size() > rc.Size {
		_ = os.Remove(in.partPath(rc.ID))
		return 0
	}
	return st.Size()
}

// receiveChunk writes one chunk at its offset and answers the bytes held;
// the chunk that completes the file checks its sha256 and lands it.
func (in *inbox) receiveChunk(ctx context.Context, c chunkReq) wire.MCChunkReply {
	rep := wire.MCChunkReply{V: wire.Version, ID: c.ID, Offset: c.Offset}
	if why := in.takes(c); why != "" {
		rep.Error, rep.Refused = why, true
		return rep
	}
	in.mu.Lock()
	rc := in.recv[c.ID]
	var done bool
	if rc != nil {
		done = rc.Done
	}
	in.mu.Unlock()
	switch {
	case rc == nil:
		rep.Error = "no transfer " + c.ID + " is open here: open it first"
		return rep
	case c.Size != rc.Size:
		rep.Error = fmt.Sprintf("size %d differs from the transfer opened (%d bytes): open it again", c.Size, rc.Size)
		return rep
	case done:
		rep.Have, rep.Done, rep.Path = rc.Size, true, in.finalPath(c.ID)
		return rep
	}
	have := in.held(rc)
	if c.Offset > have {
		// Out of step (a chunk before it was lost): nothing written, the
		// sender goes on from what is held.
		rep.Have = have
		return rep
	}
	// Never through a link another user may have put in the dir.
	f, err := os.OpenFile(in.partPath(c.ID), os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err == nil {
		_, err = f.WriteAt(c.Data, c.Offset)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		rep.Error = fmt.Sprintf("cluster %s cannot write the checkpoint: %v", in.name, err)
		rep.Have = in.held(rc)
		in.warned.warn("receiving", c.ID, err, "cannot write a checkpoint coming in; check mc_transfer_dir's space and rights")
		return rep
	}
	have = max(have, c.Offset+int64(len(c.Data)))
	rep.Have = have
	in.log.Debug().Str("route", c.ID).Int64("offset", c.Offset).Int("bytes", len(c.Data)).Int64("have", have).Int64("size", rc.Size).Msg("checkpoint chunk written")
	if have < rc.Size {
		return rep
	}
	sum, _, err := fileSum(in.partPath(c.ID))
	if err != nil || sum != rc.SHA256 {
		_ = os.Remove(in.partPath(c.ID))
		rep.Have = 0
		rep.Error = errMismatch + ": the checkpoint arrived damaged (or changed while it was sent); send it again from the start"
		in.log.Warn().Str("route", c.ID).Str("from", c.From).Msg("a checkpoint coming in failed its sha256 check; deleted, the sender starts over")
		return rep
	}
	if err := syncRename(in.partPath(c.ID), in.finalPath(c.ID)); err != nil {
		rep.Error = fmt.Sprintf("cluster %s cannot keep the checkpoint: %v", in.name, err)
		return rep
	}
	in.landed(ctx, rc)
	in.log.Info().Str("route", c.ID).Str("from", c.From).Int64("bytes", rc.Size).Str("path", in.finalPath(c.ID)).Msg("checkpoint received")
	rep.Done, rep.Path = true, in.finalPath(c.ID)
	return rep
}

// landed records rc whole here.
func (in *inbox) landed(ctx context.Context, rc *receipt) {
	in.mu.Lock()
	rc.Done = true
	in.mu.Unlock()
	in.warned.clear("receiving", rc.ID)
	_ = in.save(ctx) // unsaved, the next open finds the file itself
}
