package site

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
)

// memStore is a state.Store in memory that counts its writes.
type memStore struct {
	mu   sync.Mutex
	kv   map[string][]byte
	puts int
}

func (m *memStore) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.kv[key]
	if !ok {
		return nil, state.ErrNotFound
	}
	return b, nil
}

func (m *memStore) Put(_ context.Context, key string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kv[key] = data
	m.puts++
	return nil
}

func TestBookStoresChangesAndRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &memStore{kv: map[string][]byte{}}
	open := func(context.Context) (state.Store, error) { return st, nil }
	b := &Book{Open: open, Log: zerolog.Nop()}
	if b.Current() != nil {
		t.Fatal("a new book has a knowledge base")
	}
	kb := &wire.Site{V: wire.Version, At: time.Unix(100, 0), Partitions: []wire.SitePartition{{Name: "gpu"}}}
	b.Set(ctx, kb)
	later := *kb
	later.At = time.Unix(200, 0) // only the time differs: not stored again
	b.Set(ctx, &later)
	if st.puts != 1 {
		t.Fatalf("%d writes for one change, want 1", st.puts)
	}
	changed := later
	changed.Partitions = []wire.SitePartition{{Name: "gpu"}, {Name: "debug"}}
	b.Set(ctx, &changed)
	if st.puts != 2 || len(b.Current().Partitions) != 2 {
		t.Fatalf("%d writes, current %+v", st.puts, b.Current())
	}

	fresh := &Book{Open: open, Log: zerolog.Nop()}
	fresh.Restore(ctx)
	if got := fresh.Current(); got == nil || len(got.Partitions) != 2 {
		t.Fatalf("restored %+v", got)
	}

	// A store that cannot open, or holds garbage, leaves the book empty.
	broken := &Book{Open: func(context.Context) (state.Store, error) { return nil, errors.New("no JetStream") }, Log: zerolog.Nop()}
	broken.Restore(ctx)
	broken.Set(ctx, kb)
	if broken.Current() == nil {
		t.Fatal("a book without a store keeps no knowledge base")
	}
	st.kv[stateKey] = []byte("{not json")
	garbled := &Book{Open: open, Log: zerolog.Nop()}
	garbled.Restore(ctx)
	if garbled.Current() != nil {
		t.Fatal("restored garbage")
	}
}
