package multicluster

// The sending half of a checkpoint's transfer (transfer.go says how it
// goes; receive.go is the other half). The route's bookkeeping, what was
// sent and how long it took, is the manager's (sendCheckpoint).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/wire"
)

// sender sends checkpoint files over the link, chunk by chunk.
type sender struct {
	mc      *nats.Conn    // requests over the link
	timeout time.Duration // each answer (mc_ask_timeout)
}

// sendFile is what one slice sends: a route's checkpoint file, of size
// bytes and sha256, from the have bytes its receiver held at the last
// answer.
type sendFile struct {
	route, from, to, path, sha256 string
	size, have                    int64
}

// slice opens the transfer of sf on its receiver and sends chunks of f
// from what the receiver holds until the file landed, until, or a
// failure: the bytes the receiver holds, and the file's path there once
// landed.
func (s sender) slice(ctx context.Context, sf sendFile, f *os.File, until time.Time) (int64, string, error) {
	subj := wire.SubjectMCCheckpoint(sf.to)
	header := func() nats.Header {
		h := nats.Header{}
		h.Set(wire.MCChunkRoute, sf.route)
		h.Set(wire.MCChunkFrom, sf.from)
		h.Set(wire.MCChunkSize, strconv.FormatInt(sf.size, 10))
		return h
	}
	open := header()
	open.Set(wire.MCChunkOpen, "1")
	open.Set(wire.MCChunkSHA256, sf.sha256)
	msg, err := s.mc.RequestMsg(&nats.Msg{Subject: subj, Header: open}, s.timeout)
	rep, err := s.reply(sf.to, msg, err)
	if err != nil {
		return sf.have, "", err
	}
	if rep.Error != "" {
		err := fmt.Errorf("cluster %s refused the checkpoint: %s", sf.to, rep.Error)
		if rep.Refused {
			err = refusedError{err}
		}
		return sf.have, "", err
	}
	if rep.Done {
		return sf.size, rep.Path, nil
	}
	have := rep.Have
	inbox := s.mc.NewRespInbox()
	sub, err := s.mc.SubscribeSync(inbox)
	if err != nil {
		return have, "", err
	}
	defer func() { _ = sub.Unsubscribe() }()
	buf := make([]byte, chunkBytes)
	// At least one window per slice, and at least one chunk: an empty one
	// at the end when the receiver holds every byte but has not checked
	// them (stopped in between).
	next, inflight, sent := have, 0, 0
	for {
		for inflight < chunkWindow && (sent == 0 || next < sf.size) && (sent < chunkWindow || time.Now().Before(until)) && ctx.Err() == nil {
			n := min(int64(chunkBytes), sf.size-next)
			if k, err := f.ReadAt(buf[:n], next); int64(k) < n {
				return have, "", fmt.Errorf("reading the checkpoint file %s at %d: %w", sf.path, next, err)
			}
			h := header()
			h.Set(wire.MCChunkOffset, strconv.FormatInt(next, 10))
			// PublishMsg copies the body out before it returns: buf is free.
			if err := s.mc.PublishMsg(&nats.Msg{Subject: subj, Reply: inbox, Header: h, Data: buf[:n]}); err != nil {
				return have, "", err
			}
			next += n
			inflight++
			sent++
		}
		if inflight == 0 {
			return have, "", nil // the slice is over; the next goes on
		}
		msg, err := sub.NextMsg(s.timeout)
		rep, err := s.reply(sf.to, msg, err)
		if err != nil {
			return have, "", err
		}
		inflight--
		if rep.Error != "" {
			err := fmt.Errorf("cluster %s refused a chunk: %s", sf.to, rep.Error)
			if rep.Refused {
				err = refusedError{err}
			}
			return rep.Have, "", err
		}
		if rep.Done {
			return sf.size, rep.Path, nil
		}
		have = max(have, rep.Have)
		if rep.Have < rep.Offset {
			// It lost a chunk before this one: the next slice goes on
			// from what it holds (the replies still in flight go to this
			// slice's inbox, which ends here).
			return have, "", nil
		}
	}
}

// refusedError is the receiver refusing the file for good: the move is
// aborted rather than retried.
type refusedError struct{ error }

func (e refusedError) Unwrap() error { return e.error }

// reply reads a checkpoint answer from peer.
func (s sender) reply(peer string, msg *nats.Msg, err error) (wire.MCChunkReply, error) {
	var rep wire.MCChunkReply
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return rep, fmt.Errorf("nobody answers checkpoints for cluster %s (its controller is down or not leading, or the link is cut)", peer)
	case errors.Is(err, nats.ErrTimeout):
		return rep, fmt.Errorf("no answer from cluster %s within %s (mc_ask_timeout): the link may be cut or slow", peer, s.timeout)
	case err != nil:
		return rep, err
	}
	if err := wire.Decode(msg.Data, &rep); err != nil {
		return rep, fmt.Errorf("cluster %s answered a checkpoint request with something else: %w", peer, err)
	}
	return rep, nil
}
