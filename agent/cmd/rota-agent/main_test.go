package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/agent"
)

// Flags override the file, which overrides the defaults; a missing default
// file is fine unless the old YAML sits where it should be.
func TestOptionsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.conf")
	if err := os.WriteFile(cfg, []byte("node = fromfile\ninterval = 2s\nbacklog = 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, path, err := options([]string{"--node", "fromflag", "--log-level", "debug"}, cfg)
	if err != nil || path != cfg {
		t.Fatalf("options: %v (%s)", err, path)
	}
	want := agent.Defaults()
	want.Node, want.Interval, want.Backlog, want.LogLevel = "fromflag", 2*time.Second, 7, "debug"
	if o != want {
		t.Fatalf("got  %+v\nwant %+v", o, want)
	}

	missing := filepath.Join(dir, "none", "agent.conf")
	if o, _, err := options(nil, missing); err != nil || o != agent.Defaults() {
		t.Errorf("missing default file: %v, %+v", err, o)
	}
	if _, _, err := options([]string{"--config", missing}, cfg); err == nil {
		t.Error("a missing file named by --config is no error")
	}

	os.Mkdir(filepath.Join(dir, "old"), 0o755)
	os.WriteFile(filepath.Join(dir, "old", "agent.yaml"), []byte("node: gpu01\n"), 0o644)
	_, _, err = options(nil, filepath.Join(dir, "old", "agent.conf"))
	if err == nil || !strings.Contains(err.Error(), "not YAML") {
		t.Errorf("old yaml beside the missing default file: %v", err)
	}

	os.WriteFile(cfg, []byte("node: gpu01\ncolour = red\n"), 0o644)
	_, _, err = options([]string{"--config", cfg}, cfg)
	t.Logf("bad file:\n%v", err)
	if err == nil || !strings.Contains(err.Error(), cfg+":1:") || !strings.Contains(err.Error(), cfg+":2:") {
		t.Errorf("bad file: %v", err)
	}
}

// --help prints the usage and is no error (exit 0), as for the other
// commands; an unknown flag is one.
func TestHelpIsNoError(t *testing.T) {
	t.Parallel()
	if err := run([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v, want flag.ErrHelp (exit 0)", err)
	}
	if err := run([]string{"--no-such-flag"}); err == nil || errors.Is(err, flag.ErrHelp) {
		t.Fatalf("an unknown flag: %v", err)
	}
}
