package site

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
)

// stateKey is the knowledge base's key in the controller's state.
const stateKey = "site"

// Book keeps the site's knowledge base: built anew at each refresh from
// Slurm, saved in the controller's state when it changed (its time
// aside), and read back from there at start, so a controller that starts
// or takes over shows the site before Slurm answers.
type Book struct {
	// Open opens the state store; the Book opens it when it first needs it.
	Open func(ctx context.Context) (state.Store, error)
	Log  zerolog.Logger

	mu    sync.Mutex
	kb    *wire.Site
	saved []byte // last stored form, without its time
	store state.Store
}

// Current is the latest knowledge base (a copy of its top level), nil
// before any.
func (b *Book) Current() *wire.Site {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kb == nil {
		return nil
	}
	kb := *b.kb
	return &kb
}

// Set makes kb the knowledge base and stores it when it differs from the
// last one stored. Only the leader's refresh sets, so the check and the
// write need no lock held across the store's call; readers never wait
// for it.
func (b *Book) Set(ctx context.Context, kb *wire.Site) {
	b.mu.Lock()
	b.kb = kb
	b.mu.Unlock()
	cp := *kb
	cp.At = time.Time{}
	body, err := json.Marshal(cp)
	if err != nil {
		return
	}
	b.mu.Lock()
	same, store := bytes.Equal(body, b.saved), b.store
	b.mu.Unlock()
	if same || b.Open == nil {
		return
	}
	if store == nil {
		if store, err = b.Open(ctx); err != nil {
			b.Log.Warn().Err(err).Msg("cannot store the site knowledge base; it is rebuilt from Slurm at every refresh")
			return
		}
	}
	full, err := json.Marshal(kb)
	if err != nil {
		return
	}
	if err := store.Put(ctx, stateKey, full); err != nil {
		b.Log.Warn().Err(err).Msg("cannot store the site knowledge base")
		return
	}
	b.mu.Lock()
	b.store, b.saved = store, body
	b.mu.Unlock()
}

// Restore reads the stored knowledge base, for the time before the first
// refresh succeeds; a Book that has one already keeps it.
func (b *Book) Restore(ctx context.Context) {
	if b.Open == nil {
		return
	}
	st, err := b.Open(ctx)
	if err != nil {
		return
	}
	data, err := st.Get(ctx, stateKey)
	if err != nil {
		return
	}
	var kb wire.Site
	if err := json.Unmarshal(data, &kb); err != nil || kb.V != wire.Version {
		b.Log.Warn().Msg("stored site knowledge base unreadable; it is rebuilt from Slurm")
		return
	}
	b.mu.Lock()
	if b.kb == nil {
		b.kb, b.store = &kb, st
	}
	b.mu.Unlock()
}
