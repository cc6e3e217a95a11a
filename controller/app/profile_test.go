package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/freeport"
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
	port, err := freeport.Consecutive(2)
	if err != nil {
		t.Fatal(err)
	}
	prof, met := fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", port+1)
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
