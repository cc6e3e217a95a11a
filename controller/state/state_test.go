package state

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type mem map[string][]byte

func (m mem) Get(_ context.Context, key string) ([]byte, error) {
	b, ok := m[key]
	if !ok {
		return nil, ErrNotFound
	}
	return b, nil
}

func (m mem) Put(_ context.Context, key string, data []byte) error { m[key] = data; return nil }

type broken struct{ mem }

func (broken) Get(context.Context, string) ([]byte, error) { return nil, errors.New("JetStream down") }

func TestJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := mem{}
	type doc struct{ V, N int }
	var got doc
	if found, err := GetJSON(ctx, s, "k", &got); found || err != nil {
		t.Fatalf("absent key: found %v err %v", found, err)
	}
	if err := PutJSON(ctx, s, "k", doc{1, 7}); err != nil {
		t.Fatal(err)
	}
	if found, err := GetJSON(ctx, s, "k", &got); !found || err != nil || got != (doc{1, 7}) {
		t.Fatalf("got %+v found %v err %v", got, found, err)
	}
	s["bad"] = []byte("{")
	if _, err := GetJSON(ctx, s, "bad", &got); err == nil || !strings.Contains(err.Error(), "saved bad does not parse") {
		t.Fatalf("garbage: %v", err)
	}
	if _, err := GetJSON(ctx, broken{}, "k", &got); err == nil || !strings.Contains(err.Error(), "JetStream down") {
		t.Fatalf("store down: %v", err)
	}
	if err := PutJSON(ctx, s, "f", func() {}); err == nil {
		t.Fatal("a value JSON cannot encode was saved")
	}
}
