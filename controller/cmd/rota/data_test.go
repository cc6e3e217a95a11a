package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without --throughput-table the table is the controller's
// throughput_table, else the package's, else one under the executable's
// prefix (an install in /usr/local, or a checkout's bin/rota).
func TestThroughputTablePlaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "controller.conf")
	if err := os.WriteFile(conf, []byte("state_dir = /x\nthroughput_table = /site/table.json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "prefix", "bin", "rota")
	got := throughputTablePlaces(conf, exe)
	want := []string{"/site/table.json", "/usr/share/rota/simulation_throughputs.json",
		filepath.Join(dir, "prefix/share/rota/simulation_throughputs.json"), filepath.Join(dir, "prefix/contrib/gavel/simulation_throughputs.json")}
	if len(got) != len(want)+1 || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") || !strings.HasSuffix(got[len(want)], "/shared/data/gavel/simulation_throughputs.json") {
		t.Errorf("places\n%q\nwant\n%q + ../shared/data/gavel/", got, want)
	}
	// No conf, or one without the key: the package's copy first.
	if got := throughputTablePlaces(filepath.Join(dir, "none.conf"), ""); got[0] != "/usr/share/rota/simulation_throughputs.json" {
		t.Errorf("without controller.conf: %q", got)
	}
}

func TestFindThroughputTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing, present := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := os.WriteFile(present, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := findThroughputTable("", []string{missing, dir, present}); p != present || err != nil {
		t.Errorf("got %q %v, want the first file that exists", p, err)
	}
	if p, err := findThroughputTable("/given.json", []string{present}); p != "/given.json" || err != nil {
		t.Errorf("the flag's path is taken as given: %q %v", p, err)
	}
	// Nothing found: the error says where it looked and which flag to give.
	_, err := findThroughputTable("", []string{missing, filepath.Join(dir, "c.json")})
	if err == nil || !strings.Contains(err.Error(), "looked in "+missing+", "+filepath.Join(dir, "c.json")+";") ||
		!strings.Contains(err.Error(), "--throughput-table FILE") {
		t.Errorf("error %v", err)
	}
}

// The repository carries one copy of Gavel's table for the packages; it
// is the project's reference data, byte for byte.
func TestContribTableIsTheReference(t *testing.T) {
	t.Parallel()
	ref, err := os.ReadFile("../../../../shared/data/gavel/simulation_throughputs.json")
	if os.IsNotExist(err) {
		t.Skip("../shared/data beside the repository is not present")
	}
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.ReadFile("../../../contrib/gavel/simulation_throughputs.json")
	if err != nil || !bytes.Equal(ours, ref) {
		t.Errorf("contrib/gavel/simulation_throughputs.json differs from ../shared/data/gavel/ (%v)", err)
	}
}
