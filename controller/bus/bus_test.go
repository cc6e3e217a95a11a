package bus

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"embedded on loopback", Config{Listen: "127.0.0.1:-1"}, ""},
		{"open on the network", Config{Listen: "0.0.0.0:-1"}, "without creds_dir would let anyone on the network"},
		{"bad listen", Config{Listen: "127.0.0.1"}, `listen "127.0.0.1"`},
		{"cert without key", Config{Listen: "127.0.0.1:-1", TLSCert: "/nonexistent.pem"}, "tls_cert and tls_key go together"},
		{"no creds", Config{Listen: "127.0.0.1:-1", CredsDir: "/nonexistent"}, "creds_dir"},
		{"external down", Config{NATSURL: "nats://127.0.0.1:1"}, "connecting to NATS at nats://127.0.0.1:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := c.cfg
			cfg.StateDir = t.TempDir()
			b, err := Open(cfg, zerolog.Nop())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if !b.Embedded() || !b.NC.IsConnected() || !b.Ingest.IsConnected() || !strings.HasPrefix(b.ClientURL(cfg), "nats://127.0.0.1:") ||
				b.Auth != "none (loopback only)" {
				t.Fatalf("embedded %v, connected %v/%v, url %q, auth %q", b.Embedded(), b.NC.IsConnected(), b.Ingest.IsConnected(), b.ClientURL(cfg), b.Auth)
			}
		})
	}
}
