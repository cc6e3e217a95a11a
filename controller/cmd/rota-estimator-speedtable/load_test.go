package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/estimate/external"
)

// The example as an admin runs it: built, named in the config with its
// table, launched by the controller's go-plugin host, answering through
// gRPC; the built-in answers what the table does not know.
func TestLoadThroughGoPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the estimator")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rota-estimator-speedtable")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	build := exec.Command(goTool, "build", "-o", bin, "github.com/rota-hpc/rota/controller/cmd/rota-estimator-speedtable")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	table := filepath.Join(dir, "speeds.csv")
	if err := os.WriteFile(table, []byte(testTable), 0o644); err != nil {
		t.Fatal(err)
	}

	// The built-in: the controller's own estimator, which has measured
	// resnet18 on the K80.
	tp := estimate.NewThroughputs(estimate.ThroughputConfig{Speed: map[string]float64{"k80": 1, "p100": 3, "v100": 4}})
	if err := tp.Observe("alice/resnet18", "k80", 6, time.Now()); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	// A deadline that the real answer meets: the default (200 ms) would
	// be tight for a busy CI machine, where this test must not flake.
	host, err := external.NewThroughput(external.Config{Command: bin + " --table " + table, Timeout: 10 * time.Second,
		Log: zerolog.New(&log).Level(zerolog.InfoLevel)}, estimate.BuiltinThroughput{T: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()

	types := []string{"k80", "p100", "v100"}
	for _, tc := range []struct {
		key  string
		want []estimate.Rate // Basis not compared
	}{
		{"alice/resnet18", []estimate.Rate{
			{GPUType: "k80", StepsPerSec: 6, Source: estimate.SourceMeasured},     // the built-in's measurement
			{GPUType: "p100", StepsPerSec: 18, Source: estimate.SourceTable},      // not in the table: built-in, speed table
			{GPUType: "v100", StepsPerSec: 24, Source: "external:table-scaled"}}}, // 12 x 6/3
		{"bob/lm/abc", []estimate.Rate{
			{GPUType: "k80", Source: estimate.SourceUnknown},
			{GPUType: "p100", Source: estimate.SourceUnknown},
			{GPUType: "v100", StepsPerSec: 40, Source: "external:table"}}},
	} {
		a, err := host.Throughput(context.Background(), estimate.ThroughputQueryFor(tp, tc.key, types))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range a.Rates {
			w := tc.want[i]
			if r.GPUType != w.GPUType || r.Source != w.Source || math.Abs(r.StepsPerSec-w.StepsPerSec) > 1e-9*w.StepsPerSec {
				t.Errorf("%s on %s: got %+v, want %+v", tc.key, w.GPUType, r, w)
			}
		}
	}
	if s := host.Stats(); s.Answered != 2 || len(s.Fallbacks) != 0 {
		t.Errorf("stats %+v; log:\n%s", s, log.String())
	}
}
