// Package state is where the controller keeps what must outlive a restart
// or a change of leader: the round loop's jobs, moves and plan, the
// estimators' figures, the chains, the site's knowledge base. In the
// controller it is one JetStream KV bucket (KV); tests keep it in memory.
package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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

// PutJSON saves v under key, encoded as JSON.
func PutJSON(ctx context.Context, s Store, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.Put(ctx, key, b)
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
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("saved %s does not parse: %w", key, err)
	}
	return true, nil
}
