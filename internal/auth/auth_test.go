package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestLoadSeed(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	acct, _ := nkeys.CreateAccount()
	acctSeed, _ := acct.Seed()
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		content []byte
		mode    os.FileMode
		wantErr string // "" = loads
	}{
		{"0600", seed, 0o600, ""},
		{"0400", seed, 0o400, ""},
		{"0640 for a group", seed, 0o640, ""},
		{"trailing newline", append(append([]byte{}, seed...), '\n'), 0o600, ""},
		{"world readable", seed, 0o644, "chmod 600"},
		{"group writable", seed, 0o660, "chmod 600"},
		{"not a seed", []byte("hello\n"), 0o600, "no user nkey seed"},
		{"account seed", acctSeed, 0o600, "no user nkey seed"},
		{"too big", make([]byte, 5000), 0o600, "bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(p, c.content, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, c.mode); err != nil {
				t.Fatal(err)
			}
			got, err := LoadSeed(p)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("want error containing %q, got %v", c.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if gp, _ := got.PublicKey(); gp != pub {
				t.Fatalf("public key %s, want %s", gp, pub)
			}
		})
	}
	if _, err := LoadSeed(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := LoadSeed(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
}

func TestClientOptionsCA(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not pem"), 0o644)
	if _, err := ClientOptions("", bad); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("bad CA: %v", err)
	}
	if _, err := ClientOptions("", filepath.Join(dir, "missing.pem")); err == nil {
		t.Fatal("missing CA accepted")
	}
	if opts, err := ClientOptions("", ""); err != nil || len(opts) != 0 {
		t.Fatalf("no seed, no CA: %v %v", opts, err)
	}
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "127.1.2.3": true,
		"0.0.0.0": false, "": false, "10.0.0.1": false, "example.org": false, "::": false} {
		if IsLoopback(host) != want {
			t.Errorf("IsLoopback(%q) = %v", host, !want)
		}
	}
}
