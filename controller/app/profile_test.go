package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/rs/zerolog"
)

// Profiles are served only where profile_listen names an address, and
// only there: the metrics endpoint does not carry them.
func TestProfileOnlyWhereAsked(t *testing.T) {
	path := t.TempDir() + "/c.conf"
	writeFile(t, path, "profile_listen = 127.0.0.1:0\n")
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ProfileListen != "127.0.0.1:0" {
		t.Fatalf("profile_listen read as %q", cfg.ProfileListen)
	}
	writeFile(t, path, "")
	if cfg, err = LoadConfig(path); err != nil || cfg.ProfileListen != "" {
		t.Fatalf("default profile_listen %q (%v), want off", cfg.ProfileListen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &Controller{log: zerolog.Nop()}
	prof, met := freeAddr(t), freeAddr(t)
	if err := c.serveProfile(ctx, prof); err != nil {
		t.Fatal(err)
	}
	if err := c.serveMetrics(ctx, met); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr string
		want int
	}{{prof, http.StatusOK}, {met, http.StatusNotFound}} {
		resp, err := http.Get("http://" + tc.addr + "/debug/pprof/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s/debug/pprof/cmdline: %d, want %d", tc.addr, resp.StatusCode, tc.want)
		}
	}
}

// freeAddr is a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// round_apply_around_saves is on unless turned off.
func TestApplyAroundSavesConfig(t *testing.T) {
	path := t.TempDir() + "/c.conf"
	for _, c := range []struct {
		conf string
		want bool
	}{{"", true}, {"round_apply_around_saves = no\n", false}, {"round_apply_around_saves = yes\n", true}} {
		writeFile(t, path, c.conf)
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ApplyAroundSaves != c.want {
			t.Errorf("%q: ApplyAroundSaves %v, want %v", c.conf, cfg.ApplyAroundSaves, c.want)
		}
	}
}
