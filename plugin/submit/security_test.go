package submit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

func TestLoadConfigCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		wantErr    string
		check      func(t *testing.T, c Config)
	}{
		{"nkey seed and CA", "nats_nkey_seed_file = /etc/slurm/rota-plugin.nk\nnats_tls_ca = /etc/rota/ca.pem\n", "", func(t *testing.T, c Config) {
			if c.NATSNkeySeedFile != "/etc/slurm/rota-plugin.nk" || c.NATSTLSCA != "/etc/rota/ca.pem" || !c.Enabled {
				t.Fatalf("%+v", c)
			}
		}},
		{"nats.go instead of natsync", "nats_sync = false\n", "", func(t *testing.T, c Config) {
			if c.NATSSync {
				t.Fatalf("%+v", c)
			}
		}},
		{"seed and creds file", "nats_nkey_seed_file = a\nnats_creds_file = b\n", "alternatives", nil},
		{"seed and user", "nats_nkey_seed_file = a\nnats_user = u\n", "alternatives", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			os.WriteFile(p, []byte(c.text), 0o644)
			got, err := LoadConfig(p)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || got.Enabled {
					t.Fatalf("got %v (enabled %v), want %q and the plugin disabled", err, got.Enabled, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, got)
		})
	}
}

// A seed others can read is refused at setup (the cgo layer then passes
// every job through); a seed of another role connects but is refused the
// placement subject, which costs one deadline and says why.
func TestPluginCredentials(t *testing.T) {
	eachClient(t, func(t *testing.T, testConfig func(string) Config) {
		dir := filepath.Join(t.TempDir(), "creds")
		if _, err := creds.Init(dir, nil); err != nil {
			t.Fatal(err)
		}
		ids, _ := creds.ReadIdentities(dir)
		srv := natstest.StartWith(t, func(o *server.Options) { o.Nkeys = creds.NkeyUsers(ids) })

		loose := filepath.Join(t.TempDir(), "loose.nk")
		b, _ := os.ReadFile(creds.SeedPath(dir, creds.Plugin, ""))
		os.WriteFile(loose, b, 0o644)
		c := testConfig(srv.URL())
		c.NATSNkeySeedFile = loose
		if _, err := Dial(c, Hooks{}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("world-readable seed: %v", err)
		}

		// A stand-in controller answering placements.
		ctlOpts, _ := auth.ClientOptions(creds.SeedPath(dir, creds.Controller, ""), "")
		ctl, err := nats.Connect(srv.URL(), ctlOpts...)
		if err != nil {
			t.Fatal(err)
		}
		defer ctl.Close()
		ctl.Subscribe(wire.SubjectPlace, func(m *nats.Msg) { m.Respond([]byte(`{"v":1,"gpu_type":"v100"}`)) })
		ctl.Flush()

		for _, tc := range []struct {
			role creds.Role
			ok   bool
		}{{creds.Plugin, true}, {creds.CLI, false}} {
			t.Run(string(tc.role), func(t *testing.T) {
				c := testConfig(srv.URL())
				c.Deadline = time.Second
				c.NATSNkeySeedFile = creds.SeedPath(dir, tc.role, "")
				var mu sync.Mutex
				var events []string
				a, err := Dial(c, Hooks{OnEvent: func(_ bool, m string) { mu.Lock(); events = append(events, m); mu.Unlock() }})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				eventually.True(t, 5*time.Second, "connected", a.Connected)
				rep, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version})
				if tc.ok {
					if err != nil || rep.GPUType != "v100" {
						t.Fatalf("place: %+v %v", rep, err)
					}
					return
				}
				if err == nil {
					t.Fatal("placement answered under the cli's credential")
				}
				eventually.True(t, 3*time.Second, "the refusal logged", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(events) > 0 && strings.Contains(strings.Join(events, "\n"), "refused the plugin")
				})
			})
		}
	})
}
