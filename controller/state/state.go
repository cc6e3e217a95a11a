// Package state is where the controller keeps what must outlive a restart
// or a change of leader: the round loop's jobs, moves and plan, the
// estimators' figures, the chains, the site's knowledge base. In the
// controller it is one JetStream KV bucket (KV); tests keep it in memory.
package state

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/nats-io/nats.go/jetstream"
)

// Store gets and puts saved state by key.
type Store interface {
	// Get returns ErrNotFound for a key never written.
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, data []byte) error
}

// ErrNotFound is a Store's answer for a key never written.
var ErrNotFound = errors.New("no saved state")

// Bucket is the JetStream KV bucket the state is kept in.
const Bucket = "rota_state"

// KV is a Store on a JetStream KV bucket.
type KV struct{ kv jetstream.KeyValue }

// Open opens (or creates) the bucket, with replicas copies on a NATS cluster.
func Open(ctx context.Context, js jetstream.JetStream, replicas int) (*KV, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "Rota round loop state: jobs, moves, learned throughputs, last allocation",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("opening JetStream bucket %s: %w", Bucket, err)
	}
	return &KV{kv: kv}, nil
}

func (s *KV) Get(ctx context.Context, key string) ([]byte, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

func (s *KV) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.kv.Put(ctx, key, data)
	return err
}

// gzipAbove: a value's JSON longer than this is saved gzipped. A KV
// value is one NATS message, at most the server's max_payload (1 MiB by
// default): the round loop's jobs at 10,000 pending jobs are about 1.5
// MB of JSON and a tenth of that gzipped. Small values stay plain JSON,
// readable with `nats kv get`.
const gzipAbove = 64 << 10

// maxUnzipped bounds what a saved value may unzip to.
const maxUnzipped = 1 << 30

// PutJSON saves v under key, encoded as JSON (gzipped when large).
func PutJSON(ctx context.Context, s Store, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > gzipAbove {
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestSpeed)
		if _, err := w.Write(b); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		b = z.Bytes()
	}
	if err := s.Put(ctx, key, b); err != nil {
		return fmt.Errorf("%w (%d bytes)", err, len(b))
	}
	return nil
}

// GetJSON reads key into v; found is false, with no error, for a key never
// written. A value that does not parse is an error.
func GetJSON(ctx context.Context, s Store, key string, v any) (found bool, err error) {
	b, err := s.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b { // gzip; JSON never starts so
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return true, fmt.Errorf("saved %s does not unzip: %w", key, err)
		}
		if b, err = io.ReadAll(io.LimitReader(r, maxUnzipped+1)); err != nil {
			return true, fmt.Errorf("saved %s does not unzip: %w", key, err)
		}
		if len(b) > maxUnzipped {
			return true, fmt.Errorf("saved %s unzips to more than %d bytes", key, maxUnzipped)
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("saved %s does not parse: %w", key, err)
	}
	return true, nil
}
