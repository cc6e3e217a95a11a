package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestAgentCredentials runs real agents against a server with Rota's
// permissions: with its own node's seed an agent's reports reach the
// controller; with another node's seed they are refused, the agent logs
// the violation, and nothing arrives.
func TestAgentCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	if _, err := creds.Init(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := creds.AddAgent(dir, n, creds.Owner{}); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := creds.ReadIdentities(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartWith(t, func(o *server.Options) { o.Nkeys = creds.NkeyUsers(ids) })
	ctlOpts, err := auth.ClientOptions(creds.SeedPath(dir, creds.Controller, ""), "")
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := nats.Connect(srv.URL(), ctlOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	reports, err := ctl.SubscribeSync(wire.SubjectAgentReports)
	if err != nil {
		t.Fatal(err)
	}
	ctl.Flush()

	run := func(node, seedOf string) (*syncBuf, func()) {
		o := Defaults()
		o.Node, o.GPUType, o.Backend, o.NATS, o.Interval, o.MetricsAddr = node, "v100", "sim", srv.URL(), 100*time.Millisecond, ""
		o.ProgressDir, o.ProcRoot = t.TempDir(), t.TempDir()
		o.NATSNkeySeedFile = creds.SeedPath(dir, creds.Agent, seedOf)
		logs := &syncBuf{}
		a, err := New(o, Deps{Log: zerolog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		return logs, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent %s: %v", node, err)
			}
		}
	}

	// n2's seed on n1: every report is refused.
	logs, stop := run("n1", "n2")
	eventually.True(t, 5*time.Second, "the agent to log the refusal", func() bool {
		return strings.Contains(logs.String(), "Permissions Violation") && strings.Contains(logs.String(), wire.SubjectAgentReport("n1"))
	})
	stop()
	if m, err := reports.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("a report under another node's credential arrived on %s", m.Subject)
	}

	// Its own seed: reports arrive.
	_, stop = run("n1", "n1")
	defer stop()
	m, err := reports.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatalf("no report from the agent with its own seed: %v", err)
	}
	if m.Subject != wire.SubjectAgentReport("n1") {
		t.Fatalf("report on %s", m.Subject)
	}
}

func TestAgentRefusesBadSeed(t *testing.T) {
	seed := filepath.Join(t.TempDir(), "n1.nk")
	os.WriteFile(seed, []byte("SUAxxx\n"), 0o644)
	o := Defaults()
	o.Node, o.GPUType, o.Backend, o.MetricsAddr = "n1", "v100", "sim", ""
	o.ProgressDir, o.ProcRoot, o.NATSNkeySeedFile = t.TempDir(), t.TempDir(), seed
	a, err := New(o, Deps{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("Run with a world-readable seed: %v", err)
	}
}
