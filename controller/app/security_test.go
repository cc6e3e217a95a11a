package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/creds"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/plugin/submit"
	"github.com/rota-hpc/rota/wire"
)

func credsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "creds")
	if _, err := creds.Init(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := creds.AddAgent(dir, "n1", creds.Owner{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// asClient connects with seed (and CA); errs collects async errors.
func asClient(t *testing.T, url, seed, ca string) (*nats.Conn, func() []error) {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	opts, err := auth.ClientOptions(seed, ca)
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect with %s: %v", seed, err)
	}
	t.Cleanup(nc.Close)
	return nc, func() []error { mu.Lock(); defer mu.Unlock(); return append([]error(nil), errs...) }
}

func TestControllerWithCreds(t *testing.T) {
	dir := credsDir(t)
	cfg := testConfig(t.TempDir())
	cfg.CredsDir = dir
	fs := &fakeSlurm{comments: map[uint32]string{}}
	url, stop := startWith(t, cfg, fs)
	defer stop()

	t.Run("plugin placement round trip, explained to the cli", func(t *testing.T) {
		pc := submit.DefaultConfig()
		pc.NATSURL, pc.NATSNkeySeedFile, pc.Deadline = url, creds.SeedPath(dir, creds.Plugin, ""), 5*time.Second
		var events []string
		a, err := submit.Dial(pc, submit.Hooks{OnEvent: func(_ bool, m string) { events = append(events, m) }})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		eventually.True(t, 5*time.Second, "plugin connected", func() bool {
			_, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version, GPU: wire.GPUAsk{PerNode: 1}})
			return err == nil
		})
		rep, err := a.Place(context.Background(), nil, &wire.PlaceRequest{V: wire.Version, Partition: "gpu", GPU: wire.GPUAsk{PerNode: 1}})
		if err != nil {
			t.Fatalf("place: %v (events %v)", err, events)
		}
		if rep.GPUType != "v100" || rep.DecisionID == "" {
			t.Fatalf("reply %+v", rep)
		}
		// Explaining reads and writes the decision in JetStream KV: the
		// controller's own rights cover its JetStream use.
		fs.mu.Lock()
		fs.comments[7] = wire.Annotation("any", "v100", "none", "none", rep.Policy, rep.DecisionID)
		fs.mu.Unlock()
		nc, _ := asClient(t, url, creds.SeedPath(dir, creds.CLI, ""), "")
		var ex wire.ExplainReply
		eventually.True(t, 5*time.Second, "decision stored", func() bool {
			m, err := nc.Request(wire.SubjectExplain, []byte(`{"v":1,"job_id":7}`), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			ex = wire.ExplainReply{}
			return json.Unmarshal(m.Data, &ex) == nil && ex.Decision != nil
		})
		if ex.Decision.ID != rep.DecisionID || ex.Decision.JobID != 7 {
			t.Fatalf("explain: %+v", ex.Decision)
		}
	})

	t.Run("no credential, no connection", func(t *testing.T) {
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
			t.Fatal("connected without credentials")
		}
	})

	t.Run("cli reads status but may not place", func(t *testing.T) {
		nc, errs := asClient(t, url, creds.SeedPath(dir, creds.CLI, ""), "")
		m, err := nc.Request(wire.SubjectStatus, []byte(`{"v":1}`), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var st wire.StatusReply
		if err := json.Unmarshal(m.Data, &st); err != nil || len(st.Types) != 2 {
			t.Fatalf("status %s: %v", m.Data, err)
		}
		if _, err := nc.Request(wire.SubjectPlace, []byte(`{"v":1}`), 300*time.Millisecond); err == nil {
			t.Fatal("cli got a placement")
		}
		eventually.True(t, 3*time.Second, "permission violation", func() bool {
			for _, e := range errs() {
				if auth.IsPermissionError(e) {
					return true
				}
			}
			return false
		})
	})

	t.Run("agent report reaches the controller identity", func(t *testing.T) {
		ctl, _ := asClient(t, url, creds.SeedPath(dir, creds.Controller, ""), "")
		sub, err := ctl.SubscribeSync(wire.SubjectAgentReports)
		if err != nil {
			t.Fatal(err)
		}
		ctl.Flush()
		ag, _ := asClient(t, url, creds.SeedPath(dir, creds.Agent, "n1"), "")
		ag.Publish(wire.SubjectAgentReport("n1"), []byte(`{"v":1,"node":"n1"}`))
		ag.Flush()
		m, err := sub.NextMsg(3 * time.Second)
		if err != nil || m.Subject != wire.SubjectAgentReport("n1") {
			t.Fatalf("report: %v %v", m, err)
		}
	})

	t.Run("controller answers inboxes only", func(t *testing.T) {
		// The plugin may publish placement requests; naming an agent's
		// command subject as the reply must not make the controller
		// publish a command there on its behalf.
		ag, _ := asClient(t, url, creds.SeedPath(dir, creds.Agent, "n1"), "")
		cmds, err := ag.SubscribeSync(wire.SubjectAgentCheckpoint("n1"))
		if err != nil {
			t.Fatal(err)
		}
		ag.Flush()
		pl, _ := asClient(t, url, creds.SeedPath(dir, creds.Plugin, ""), "")
		if err := pl.PublishRequest(wire.SubjectPlace, wire.SubjectAgentCheckpoint("n1"), []byte(`{"v":1,"gpu":{"per_node":1}}`)); err != nil {
			t.Fatal(err)
		}
		pl.Flush()
		if m, err := cmds.NextMsg(500 * time.Millisecond); err == nil {
			t.Fatalf("the controller published %s onto the agent's command subject", m.Data)
		}
	})
}

func TestControllerRefusesToStart(t *testing.T) {
	for _, c := range []struct {
		name    string
		setup   func(t *testing.T, cfg *Config)
		wantErr string
	}{
		{"creds dir without identities", func(t *testing.T, cfg *Config) { cfg.CredsDir = t.TempDir() }, "creds init"},
		{"seed readable by others", func(t *testing.T, cfg *Config) {
			cfg.CredsDir = credsDir(t)
			os.Chmod(creds.SeedPath(cfg.CredsDir, creds.Controller, ""), 0o644)
		}, "chmod 600"},
		{"seed missing", func(t *testing.T, cfg *Config) {
			cfg.CredsDir = credsDir(t)
			os.Remove(creds.SeedPath(cfg.CredsDir, creds.Controller, ""))
		}, "controller.nk"},
		{"seed not the listed one", func(t *testing.T, cfg *Config) {
			cfg.CredsDir = credsDir(t)
			plugin, _ := os.ReadFile(creds.SeedPath(cfg.CredsDir, creds.Plugin, ""))
			os.WriteFile(creds.SeedPath(cfg.CredsDir, creds.Controller, ""), plugin, 0o600)
		}, "is not the controller key"},
		{"open server beyond loopback", func(t *testing.T, cfg *Config) { cfg.Listen = "0.0.0.0:-1" }, "without creds_dir"},
		{"tls cert without key", func(t *testing.T, cfg *Config) { cfg.TLSCert = "/nonexistent.pem" }, "tls_cert and tls_key"},
		{"port taken", func(t *testing.T, cfg *Config) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			cfg.Listen = l.Addr().String()
		}, "another process has the port"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			c.setup(t, &cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := Run(ctx, Options{Config: cfg, Log: zerolog.Nop(), Slurm: &fakeSlurm{}})
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Run: %v; want an error containing %q", err, c.wantErr)
			}
		})
	}
}

// TestControllerTLS: with tls_cert/tls_key the embedded server speaks TLS;
// a client with the CA gets in, one without does not.
func TestControllerTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	cfg := testConfig(t.TempDir())
	cfg.CredsDir = credsDir(t)
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	url, stop := startWith(t, cfg, &fakeSlurm{})
	defer stop()
	cli := creds.SeedPath(cfg.CredsDir, creds.CLI, "")

	nc, _ := asClient(t, url, cli, certFile)
	if _, err := nc.Request(wire.SubjectStatus, []byte(`{"v":1}`), 5*time.Second); err != nil {
		t.Fatalf("status over TLS: %v", err)
	}
	opts, _ := auth.ClientOptions(cli, "")
	if nc, err := nats.Connect(url, opts...); err == nil {
		nc.Close()
		t.Fatal("connected without trusting the server's certificate")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("want a certificate error, got %v", err)
	}
}

// selfSigned writes a certificate for 127.0.0.1 (its own CA) and its key.
func selfSigned(t *testing.T, dir string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rota test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}
