package state

import (
	"context"
	"errors"
	"fmt"
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

// limited is a store that refuses what NATS refuses: a value larger than
// the server's max_payload.
type limited struct {
	mem
	max int
}

func (l limited) Put(ctx context.Context, key string, data []byte) error {
	if len(data) > l.max {
		return errors.New("nats: maximum payload exceeded")
	}
	return l.mem.Put(ctx, key, data)
}

// A large value is saved gzipped, so it fits one NATS message, and reads
// back; a small one stays plain JSON; a broken zip is a clear error.
func TestLargeJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := limited{mem: mem{}, max: 1 << 20}
	type job struct {
		Decision, Key string
		Nice          int32
	}
	big := map[uint32]job{}
	for i := range uint32(20000) {
		big[i] = job{Decision: fmt.Sprintf("d%021d", i*7919), Key: fmt.Sprintf("user%d/train-%d.sh", i%50, i%300), Nice: int32(i)}
	}
	if err := PutJSON(ctx, s, "big", big); err != nil {
		t.Fatalf("20,000 entries: %v", err)
	}
	var got map[uint32]job
	if found, err := GetJSON(ctx, s, "big", &got); !found || err != nil || len(got) != len(big) || got[4321] != big[4321] {
		t.Fatalf("read back %d entries, found %v, err %v", len(got), found, err)
	}
	if err := PutJSON(ctx, s, "small", map[string]int{"a": 1}); err != nil || string(s.mem["small"]) != `{"a":1}` {
		t.Fatalf("small value saved as %q (err %v), want plain JSON", s.mem["small"], err)
	}
	s.mem["broken"] = append([]byte{0x1f, 0x8b}, "not a zip"...)
	if _, err := GetJSON(ctx, s, "broken", &got); err == nil || !strings.Contains(err.Error(), "saved broken does not unzip") {
		t.Fatalf("broken zip: %v", err)
	}
}
