package bus

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
	"github.com/rota-hpc/rota/wire"
)

// TestLeafLink joins two embedded servers as two sites do: the link
// carries the cross-cluster subjects both ways and nothing else, and each
// site's JetStream stays its own.
func TestLeafLink(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "link.secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Consecutive(1)
	if err != nil {
		t.Fatal(err)
	}
	credsDir := t.TempDir()
	if _, err := creds.Init(credsDir, nil); err != nil {
		t.Fatal(err)
	}
	hub := Config{Listen: "127.0.0.1:-1", StateDir: t.TempDir(), CredsDir: credsDir, LeafListen: fmt.Sprintf("127.0.0.1:%d", port),
		LinkSecretFile: secret, JSDomain: "a", MCInbox: wire.SubjectMCReplyPrefix("a")}
	a, err := Open(hub, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	spoke := Config{Listen: "127.0.0.1:-1", StateDir: t.TempDir(), LeafRemotes: []string{fmt.Sprintf("nats-leaf://127.0.0.1:%d", port)},
		LinkSecretFile: secret, JSDomain: "b", MCInbox: wire.SubjectMCReplyPrefix("b")}
	b, err := Open(spoke, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	// A request over the link, answered across it, both ways.
	for _, dir := range []struct {
		name        string
		asker, resp *nats.Conn
		subject     string
	}{{"b asks a", b.MC, a.NC, wire.SubjectMCRoute("a")}, {"a asks b", a.MC, b.NC, wire.SubjectMCRoute("b")}} {
		sub, err := dir.resp.Subscribe(dir.subject, func(m *nats.Msg) { _ = m.Respond([]byte("ok")) })
		if err != nil {
			t.Fatal(err)
		}
		_ = dir.resp.Flush()
		var reply *nats.Msg
		var last error // the last try's, shown if the wait fails
		defer func() {
			if last != nil {
				t.Logf("%s: last error %v", dir.name, last)
			}
		}()
		eventually.True(t, 5*time.Second, dir.name+": a reply across the leaf link", func() bool { // until the leaf connection is up and has the interest
			reply, last = dir.asker.Request(dir.subject, []byte("x"), 100*time.Millisecond)
			return last == nil
		})
		if string(reply.Data) != "ok" {
			t.Fatalf("%s: reply %q", dir.name, reply.Data)
		}
		_ = sub.Unsubscribe()
	}

	// Anything else stays on its site: a's placement state, a's decisions,
	// and requests with a plain _INBOX reply.
	for _, subject := range []string{wire.SubjectPlaceState, "rota.v1.place.decision", "$KV.rota_state.x", "rota.v1.agent.report.n1"} {
		for _, pair := range [][2]*Bus{{a, b}, {b, a}} {
			from, to := pair[0], pair[1]
			got := make(chan string, 1)
			sub, err := to.NC.Subscribe(subject, func(m *nats.Msg) { got <- m.Subject })
			if err != nil {
				t.Fatal(err)
			}
			_ = to.NC.Flush()
			time.Sleep(200 * time.Millisecond) // time for the interest to cross, if it wrongly would: nothing to wait for
			_ = from.NC.Publish(subject, []byte("secret"))
			_ = from.NC.Flush()
			select {
			case s := <-got:
				t.Fatalf("%s crossed the link", s)
			case <-time.After(300 * time.Millisecond):
			}
			_ = sub.Unsubscribe()
		}
	}
	if _, err := b.NC.Request(wire.SubjectMCRoute("a"), []byte("x"), 300*time.Millisecond); err == nil {
		t.Fatal("a reply to b's _INBOX crossed the link")
	}
}

func TestLeafConfig(t *testing.T) {
	short, long := filepath.Join(t.TempDir(), "short"), filepath.Join(t.TempDir(), "long")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(long, []byte("0123456789abcdef0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no secret", Config{LeafListen: "127.0.0.1:-1"}, "mc_link_secret_file"},
		{"no creds_dir", Config{LeafListen: "127.0.0.1:-1", LinkSecretFile: long}, "needs creds_dir"},
		{"short secret", Config{LeafListen: "127.0.0.1:-1", LinkSecretFile: short}, "16 characters"},
		{"missing secret", Config{LeafRemotes: []string{"nats-leaf://127.0.0.1:1"}, LinkSecretFile: "/nonexistent"}, "mc_link_secret_file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Listen, cfg.StateDir = "127.0.0.1:-1", t.TempDir()
			_, err := Open(cfg, zerolog.Nop())
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err %v, want %q", err, c.wantErr)
			}
		})
	}
}
