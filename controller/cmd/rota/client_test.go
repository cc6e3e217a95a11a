package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

// ask with each credential against a server with Rota's permissions and a
// stand-in controller: the errors say what went wrong, not just "timeout".
func TestAskCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	if _, err := creds.Init(dir, nil); err != nil {
		t.Fatal(err)
	}
	ids, _ := creds.ReadIdentities(dir)
	srv := natstest.StartWith(t, func(o *server.Options) { o.Nkeys = creds.NkeyUsers(ids) })
	ctlOpts, _ := auth.ClientOptions(creds.SeedPath(dir, creds.Controller, ""), "")
	ctl, err := nats.Connect(srv.URL(), ctlOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	ctl.Subscribe(wire.SubjectStatus, func(m *nats.Msg) { m.Respond([]byte(`{"v":1,"policy":"interim"}`)) })
	ctl.Flush()

	for _, c := range []struct {
		name, seed, wantErr string
	}{
		{"cli", creds.SeedPath(dir, creds.CLI, ""), ""},
		{"admin", creds.SeedPath(dir, creds.Admin, ""), ""},
		{"plugin's seed", creds.SeedPath(dir, creds.Plugin, ""), "may not ask on rota.v1.status"},
		{"no seed", "", "refused the credentials"},
		{"missing seed file", filepath.Join(dir, "nope.nk"), "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rep wire.StatusReply
			start := time.Now()
			err := ask(context.Background(), &natsConn{url: srv.URL(), seed: c.seed, timeout: 3 * time.Second}, wire.SubjectStatus, wire.StatusRequest{V: wire.Version}, &rep)
			if c.wantErr == "" {
				if err != nil || rep.Policy != "interim" {
					t.Fatalf("%+v %v", rep, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v, want %q", err, c.wantErr)
			}
			if time.Since(start) > 2*time.Second {
				t.Errorf("took %v: a refusal should not wait for the timeout", time.Since(start))
			}
		})
	}
}
