package creds

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

// initDir makes a credentials dir with the fixed roles and agents n1, n2.
func initDir(t *testing.T) (string, []Identity) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "creds")
	if _, err := Init(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := AddAgent(dir, n, Owner{}); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := ReadIdentities(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 6 {
		t.Fatalf("identities: got %d, want 6: %v", len(ids), ids)
	}
	return dir, ids
}

// client is a connection under one identity that records the server's
// asynchronous errors (permission violations arrive there).
type client struct {
	nc   *nats.Conn
	mu   sync.Mutex
	errs []error
}

func (c *client) permErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		if auth.IsPermissionError(e) {
			return e
		}
	}
	return nil
}

func connectAs(t *testing.T, url, seed string) *client {
	t.Helper()
	c := &client{}
	opts, err := auth.ClientOptions(seed, "")
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
	}))
	c.nc, err = nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connecting with %s: %v", seed, err)
	}
	t.Cleanup(c.nc.Close)
	return c
}

// servers runs the permission table against the embedded server's options
// and against the nats-server configuration written for external clusters.
func servers(t *testing.T, ids []Identity) map[string]*natstest.Server {
	cfgPath := filepath.Join(t.TempDir(), "rota-auth.conf")
	if err := os.WriteFile(cfgPath, []byte(ServerConfig(ids)), 0o644); err != nil {
		t.Fatal(err)
	}
	parsed, err := server.ProcessConfigFile(cfgPath)
	if err != nil {
		t.Fatalf("nats-server cannot read the generated config: %v\n%s", err, ServerConfig(ids))
	}
	if len(parsed.Nkeys) != len(ids) {
		t.Fatalf("generated config has %d nkey users, want %d", len(parsed.Nkeys), len(ids))
	}
	// Same rules both ways (a "$" or quote lost in the config would show here).
	want := NkeyUsers(ids)
	for i, u := range parsed.Nkeys {
		w := want[i]
		if u.Nkey != w.Nkey || !reflect.DeepEqual(u.Permissions.Publish.Allow, w.Permissions.Publish.Allow) ||
			!reflect.DeepEqual(u.Permissions.Subscribe.Allow, w.Permissions.Subscribe.Allow) ||
			(u.Permissions.Response == nil) != (w.Permissions.Response == nil) ||
			u.Permissions.Response != nil && *u.Permissions.Response != *w.Permissions.Response {
			t.Fatalf("config user %d: %+v %+v %+v, want %+v %+v %+v", i, u.Permissions.Publish, u.Permissions.Subscribe, u.Permissions.Response,
				w.Permissions.Publish, w.Permissions.Subscribe, w.Permissions.Response)
		}
	}
	return map[string]*natstest.Server{
		"embedded": natstest.StartWith(t, func(o *server.Options) { o.Nkeys = NkeyUsers(ids) }),
		"config":   natstest.StartWith(t, func(o *server.Options) { o.Nkeys = parsed.Nkeys }),
	}
}

func TestPermissions(t *testing.T) {
	dir, ids := initDir(t)
	seed := func(r Role, node string) string { return SeedPath(dir, r, node) }
	pub := func(r Role) string { id, _ := Find(ids, r, ""); return id.PublicKey }

	type tc struct {
		name string
		// actor publishes subject (sub=false) or subscribes to it (sub=true);
		// other is the counterpart: it subscribes to see the publish, or
		// publishes for the actor's subscription to see.
		actor, other string
		subject      string
		sub          bool
		allowed      bool
	}
	ctl, plug, cli, adm := seed(Controller, ""), seed(Plugin, ""), seed(CLI, ""), seed(Admin, "")
	n1, n2 := seed(Agent, "n1"), seed(Agent, "n2")
	cases := []tc{
		// Agents.
		{"agent reports as itself", n1, ctl, wire.SubjectAgentReport("n1"), false, true},
		{"agent job report as itself", n1, ctl, wire.SubjectAgentJob("n1", 42), false, true},
		{"agent checkpoint result as itself", n1, ctl, wire.SubjectAgentCheckpointResult("n1"), false, true},
		{"agent reports as another node", n1, ctl, wire.SubjectAgentReport("n2"), false, false},
		{"agent job report as another node", n1, ctl, wire.SubjectAgentJob("n2", 42), false, false},
		{"agent checkpoint result as another node", n1, ctl, wire.SubjectAgentCheckpointResult("n2"), false, false},
		{"agent sends a checkpoint command to another node", n1, n2, wire.SubjectAgentCheckpoint("n2"), false, false},
		{"agent sends a checkpoint command to its own node", n1, ctl, wire.SubjectAgentCheckpoint("n1"), false, false},
		{"agent asks for a placement", n1, ctl, wire.SubjectPlace, false, false},
		{"agent publishes an admin command", n1, ctl, wire.SubjectAdminPrefix + "policy", false, false},
		{"agent receives its own checkpoint commands", n1, ctl, wire.SubjectAgentCheckpoint("n1"), true, true},
		{"agent reads another node's checkpoint commands", n1, ctl, wire.SubjectAgentCheckpoint("n2"), true, false},
		{"agent reads another node's reports", n1, n2, wire.SubjectAgentReport("n2"), true, false},
		// Plugin.
		{"plugin asks for a placement", plug, ctl, wire.SubjectPlace, false, true},
		{"plugin publishes an agent report", plug, ctl, wire.SubjectAgentReport("n1"), false, false},
		{"plugin asks for status", plug, ctl, wire.SubjectStatus, false, false},
		{"plugin reads the CLI's replies", plug, ctl, auth.InboxPrefix(pub(CLI)) + ".x", true, false},
		{"plugin reads placement requests", plug, ctl, wire.SubjectPlace, true, false},
		{"plugin reads its own replies", plug, ctl, auth.InboxPrefix(pub(Plugin)) + ".x", true, true},
		// Local placement: the controller pushes the state, plugins send
		// decisions; nobody else may do either (a forged state would place
		// every job, a forged decision would reserve GPUs and answer
		// explain).
		{"plugin receives the placement state", plug, ctl, wire.SubjectPlaceState, true, true},
		{"plugin publishes a decision", plug, ctl, wire.SubjectPlaceDecision, false, true},
		{"plugin asks for the state", plug, ctl, wire.SubjectPlaceSync, false, true},
		{"plugin forges the placement state", plug, ctl, wire.SubjectPlaceState, false, false},
		{"plugin reads other plugins' decisions", plug, ctl, wire.SubjectPlaceDecision, true, false},
		{"controller publishes the placement state", ctl, plug, wire.SubjectPlaceState, false, true},
		{"controller receives decisions", ctl, plug, wire.SubjectPlaceDecision, true, true},
		{"agent forges the placement state", n1, plug, wire.SubjectPlaceState, false, false},
		{"agent forges a decision", n1, ctl, wire.SubjectPlaceDecision, false, false},
		{"cli forges the placement state", cli, plug, wire.SubjectPlaceState, false, false},
		{"cli forges a decision", cli, ctl, wire.SubjectPlaceDecision, false, false},
		{"admin forges a decision", adm, ctl, wire.SubjectPlaceDecision, false, false},
		{"agent reads the placement state", n1, ctl, wire.SubjectPlaceState, true, false},
		// CLI and admin.
		{"cli asks for status", cli, ctl, wire.SubjectStatus, false, true},
		{"cli asks to explain", cli, ctl, wire.SubjectExplain, false, true},
		{"cli asks for an estimate", cli, ctl, wire.SubjectEstimate, false, true},
		{"plugin asks for an estimate", plug, ctl, wire.SubjectEstimate, false, false},
		{"agent asks for an estimate", n1, ctl, wire.SubjectEstimate, false, false},
		{"admin asks for an estimate", adm, ctl, wire.SubjectEstimate, false, true},
		{"cli asks for a placement", cli, ctl, wire.SubjectPlace, false, false},
		{"cli publishes an admin command", cli, ctl, wire.SubjectAdminPrefix + "policy", false, false},
		{"cli reads the admin's replies", cli, ctl, auth.InboxPrefix(pub(Admin)) + ".x", true, false},
		{"admin asks for status", adm, ctl, wire.SubjectStatus, false, true},
		{"admin publishes an admin command", adm, ctl, wire.SubjectAdminPrefix + "policy", false, true},
		{"admin publishes an agent report", adm, ctl, wire.SubjectAgentReport("n1"), false, false},
		// Controller.
		{"controller sends a checkpoint command", ctl, n1, wire.SubjectAgentCheckpoint("n1"), false, true},
		{"controller answers the plugin", ctl, plug, auth.InboxPrefix(pub(Plugin)) + ".x", false, true},
		{"controller reads every node's reports", ctl, n2, wire.SubjectAgentReport("n2"), true, true},
	}
	for name, srv := range servers(t, ids) {
		t.Run(name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					actor, other := connectAs(t, srv.URL(), c.actor), connectAs(t, srv.URL(), c.other)
					pubC, subC := actor, other
					if c.sub {
						pubC, subC = other, actor
					}
					got := make(chan *nats.Msg, 1)
					if _, err := subC.nc.ChanSubscribe(c.subject, got); err != nil {
						t.Fatal(err)
					}
					if err := subC.nc.Flush(); err != nil {
						t.Fatal(err)
					}
					// The server answers a refused subscription asynchronously;
					// publishing only after the PING round trip above makes
					// sure the subscription is in place if it was allowed.
					if err := pubC.nc.Publish(c.subject, []byte(`{"v":1}`)); err != nil {
						t.Fatal(err)
					}
					if err := pubC.nc.Flush(); err != nil {
						t.Fatal(err)
					}
					if c.allowed {
						select {
						case <-got:
						case <-time.After(3 * time.Second):
							t.Fatalf("message on %s not delivered; actor errors: %v", c.subject, actor.errs)
						}
						if err := actor.permErr(); err != nil {
							t.Fatalf("allowed action reported %v", err)
						}
						return
					}
					eventually.True(t, 3*time.Second, "the permissions violation error", func() bool { return actor.permErr() != nil })
					if !strings.Contains(actor.permErr().Error(), c.subject) {
						t.Errorf("violation %q does not name %s", actor.permErr(), c.subject)
					}
					// Anything delivered would have arrived by now: the server
					// handles one connection's commands in order, and both
					// sides have flushed.
					subC.nc.Flush()
					select {
					case m := <-got:
						t.Fatalf("refused action still delivered a message on %s", m.Subject)
					case <-time.After(100 * time.Millisecond):
					}
				})
			}
		})
	}
}

// TestCheckpointRoundTrip: the controller's command reaches the agent of
// that node, whose reply (allowed as a response only) reaches the
// controller.
func TestCheckpointRoundTrip(t *testing.T) {
	dir, ids := initDir(t)
	srv := natstest.StartWith(t, func(o *server.Options) { o.Nkeys = NkeyUsers(ids) })
	agent := connectAs(t, srv.URL(), SeedPath(dir, Agent, "n1"))
	ctl := connectAs(t, srv.URL(), SeedPath(dir, Controller, ""))
	if _, err := agent.nc.Subscribe(wire.SubjectAgentCheckpoint("n1"), func(m *nats.Msg) { m.Respond([]byte(`{"v":1,"accepted":true}`)) }); err != nil {
		t.Fatal(err)
	}
	agent.nc.Flush()
	m, err := ctl.nc.Request(wire.SubjectAgentCheckpoint("n1"), []byte(`{"v":1,"job_id":7}`), 3*time.Second)
	if err != nil {
		t.Fatalf("checkpoint request: %v (agent errors %v)", err, agent.errs)
	}
	if !strings.Contains(string(m.Data), "accepted") {
		t.Fatalf("reply %s", m.Data)
	}
	// The agent may answer, but not publish into the controller's inbox
	// on its own.
	c, _ := Find(ids, Controller, "")
	agent.nc.Publish(auth.InboxPrefix(c.PublicKey)+".forged", []byte("x"))
	agent.nc.Flush()
	eventually.True(t, 3*time.Second, "violation", func() bool { return agent.permErr() != nil })
}

func TestUnauthenticatedRefused(t *testing.T) {
	_, ids := initDir(t)
	srv := natstest.StartWith(t, func(o *server.Options) { o.Nkeys = NkeyUsers(ids) })
	if nc, err := nats.Connect(srv.URL()); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("want an authorization error, got %v", err)
	}
	// A valid nkey that is not listed is refused too.
	stranger := filepath.Join(t.TempDir(), "stranger.nk")
	kp, _ := nkeys.CreateUser()
	s, _ := kp.Seed()
	os.WriteFile(stranger, s, 0o600)
	opts, err := auth.ClientOptions(stranger, "")
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(srv.URL(), opts...); err == nil {
		nc.Close()
		t.Fatal("an unlisted nkey connected")
	}
}

func TestInitAndAddAgent(t *testing.T) {
	dir, ids := initDir(t)
	for _, id := range ids {
		fi, err := os.Stat(SeedPath(dir, id.Role, id.Node))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s seed mode %04o, want 0600", id, fi.Mode().Perm())
		}
		if got, _ := auth.PublicKey(SeedPath(dir, id.Role, id.Node)); got != id.PublicKey {
			t.Errorf("%s: listed key %s, seed's %s", id, id.PublicKey, got)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, IdentitiesFile)); fi.Mode().Perm() != 0o644 {
		t.Errorf("identities mode %04o", fi.Mode().Perm())
	}
	// Again: nothing created, same keys, agents still listed.
	res, err := Init(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Created {
			t.Errorf("%s recreated", r.Identity)
		}
	}
	again, err := ReadIdentities(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(ids) {
		t.Fatalf("after a second init: %v, want %v", again, ids)
	}
	for _, id := range ids {
		if got, ok := Find(again, id.Role, id.Node); !ok || got.PublicKey != id.PublicKey {
			t.Errorf("%s changed: %v", id, got)
		}
	}

	for _, c := range []struct{ node, wantErr string }{
		{"", "1 to 128"},
		{"../etc", "must not start"},
		{"a/b", "not allowed"},
		{"a b", "not allowed"},
		{"-x", "must not start"},
		{"n1", ""}, // existing: kept
	} {
		_, err := AddAgent(dir, c.node, Owner{})
		if (err == nil) != (c.wantErr == "") || err != nil && !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("AddAgent(%q): %v, want %q", c.node, err, c.wantErr)
		}
	}
	// "n.1" and "n_1" are both "n_1" on the wire.
	if _, err := AddAgent(dir, "n_1", Owner{}); err != nil {
		t.Fatal(err)
	}
	if _, err := AddAgent(dir, "n.1", Owner{}); err == nil || !strings.Contains(err.Error(), "subject token") {
		t.Fatalf("token collision: %v", err)
	}
	if _, err := AddAgent(t.TempDir(), "n1", Owner{}); err == nil || !strings.Contains(err.Error(), "creds init") {
		t.Fatalf("add-agent before init: %v", err)
	}

	os.Chmod(filepath.Join(dir, IdentitiesFile), 0o666)
	if _, err := ReadIdentities(dir); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("world-writable identities: %v", err)
	}
}

func TestParseIdentities(t *testing.T) {
	k := func() string { kp, _ := nkeys.CreateUser(); p, _ := kp.PublicKey(); return p }
	a, b := k(), k()
	acct, _ := nkeys.CreateAccount()
	ak, _ := acct.PublicKey()
	for _, c := range []struct{ name, text, wantErr string }{
		{"good", "# c\ncontroller - " + a + "\n\nagent n1 " + b + "\n", ""},
		{"two fields", "controller " + a, "want 'role node public-key'"},
		{"unknown role", "root - " + a, "unknown role"},
		{"node on a fixed role", "plugin n1 " + a, "takes no node"},
		{"second controller", "controller - " + a + "\ncontroller - " + b, "second controller"},
		{"shared key", "plugin - " + a + "\ncli - " + a, "already listed"},
		{"account key", "plugin - " + ak, "not a user public nkey"},
		{"bad node", "agent a/b " + a, "not allowed"},
		{"token collision", "agent a.b " + a + "\nagent a_b " + b, "share the subject token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseIdentities("ids", []byte(c.text))
			if (err == nil) != (c.wantErr == "") || err != nil && !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v, want %q", err, c.wantErr)
			}
		})
	}
}
