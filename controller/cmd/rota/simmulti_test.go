package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/controller/sim"
)

func TestParseClusters(t *testing.T) {
	t.Parallel()
	types, cls, err := parseClusters("a:v100=32,p100=32; b:k80=64,v100=16")
	want := []sim.Cluster{{Name: "a", Capacity: []int{32, 32, 0}}, {Name: "b", Capacity: []int{16, 0, 64}}}
	if err != nil || !reflect.DeepEqual(types, []string{"v100", "p100", "k80"}) || !reflect.DeepEqual(cls, want) {
		t.Fatalf("got %v %+v %v", types, cls, err)
	}
	for _, bad := range []string{"a:v100=1", "a:v100=1;a:k80=2", "a-b:v100=1;c:k80=1", "a:v100=x;b:k80=1", "a;b:k80=1"} {
		if _, _, err := parseClusters(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want sim.Link
		ok   bool
	}{
		{"a-b:1GB/s", sim.Link{A: "a", B: "b", Bandwidth: 1e9}, true},
		{"a-b:10Gb/s:20ms", sim.Link{A: "a", B: "b", Bandwidth: 1.25e9, Latency: 0.02}, true},
		{"x1-y_2:500MB/s", sim.Link{A: "x1", B: "y_2", Bandwidth: 5e8}, true},
		{"a-b:100kb/s", sim.Link{A: "a", B: "b", Bandwidth: 12500}, true},
		{"a-b", sim.Link{}, false},
		{"a:1GB/s", sim.Link{}, false},
		{"a-b:1GB", sim.Link{}, false},
		{"a-b:0GB/s", sim.Link{}, false},
		{"a-b:1GB/s:soon", sim.Link{}, false},
	} {
		got, err := parseLink(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// rota sim --clusters prints one report per mode; the flags that only mean
// something with --clusters are refused without it.
func TestSimClusters(t *testing.T) {
	t.Parallel()
	table := filepath.Join("..", "..", "..", "contrib", "gavel", throughputTableName)
	args := []string{"sim", "--throughput-table", table, "--static", "30", "--clusters", "a:v100=4,p100=4;b:k80=8,v100=2",
		"--link", "a-b:1Gb/s:20ms", "--migration-cost", "2m"}
	stdout, stderr, code := rota(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var reps []sim.MultiReport
	if err := json.Unmarshal([]byte(stdout), &reps); err != nil || len(reps) != 3 {
		t.Fatalf("%v: %s", err, stdout)
	}
	for i, m := range sim.MoveModes {
		if r := reps[i]; r.Mode != string(m) || r.JobsMeasured != 30 || len(r.Clusters) != 2 {
			t.Errorf("report %d: %+v", i, r)
		}
	}
	stdout, _, code = rota(t, append(args, "--moves", "planned")...)
	if code != 0 || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, "moves=planned") {
		t.Errorf("--moves planned: exit %d:\n%s", code, stdout)
	}
	for _, bad := range [][]string{{"sim", "--moves", "none"}, {"sim", "--link", "a-b:1GB/s"},
		append(args, "--moves", "often"), append(args, "--link", "a-c:1GB/s"), append(args, "--data-gb", "5")} {
		if _, stderr, code := rota(t, bad...); code != 2 {
			t.Errorf("%v: exit 0, %s", bad, stderr)
		}
	}
}
