package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/site"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// failingSlurm cannot read nodes: a controller with it shows only what it
// stored.
type failingSlurm struct{ fakeSlurm }

func (f *failingSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	return nil, errors.New("sinfo: down")
}

func TestControllerSiteAndEstimate(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Site = site.Config{Unit: "SU", Debug: []string{"debug"}, GPUMemory: map[string]uint64{"k80": 12 << 30},
		Rates: []wire.Rate{{Resource: site.GPU, GPUType: "v100", PerHour: 3}, {Resource: site.GPU, GPUType: "k80", PerHour: 1}}}
	cfg.ThroughputTable = filepath.Join("..", "..", "..", "shared", "data", "gavel", "simulation_throughputs.json")
	url, stop := startWith(t, cfg, &fakeSlurm{comments: map[uint32]string{}})

	var st wire.StatusReply
	request(t, url, wire.SubjectStatus, wire.StatusRequest{V: wire.Version, Site: true}, &st)
	if st.Site == nil || len(st.Site.Partitions) != 1 || len(st.Site.GPUTypes) != 2 || !strings.Contains(st.Site.QueueWait, "no model") {
		t.Fatalf("site %+v", st.Site)
	}
	var plain wire.StatusReply
	request(t, url, wire.SubjectStatus, wire.StatusRequest{V: wire.Version}, &plain)
	if plain.Site != nil {
		t.Error("site sent without being asked for")
	}

	tests := []struct {
		name  string
		req   wire.EstimateRequest
		check func(t *testing.T, rep *wire.EstimateReply)
	}{
		{"hint on v100, scaled to k80 by the speed table", wire.EstimateRequest{GPUsPerNode: 1, Steps: 36000, Throughput: map[string]float64{"v100": 10}},
			func(t *testing.T, rep *wire.EstimateReply) {
				v, k := rowOf(t, rep, "v100"), rowOf(t, rep, "k80")
				if !near(*v.RunMin, 60) || !near(*k.RunMin, 180) || !near(*v.Cost, 3) || !near(*k.Cost, 3) {
					t.Errorf("v100 %v min %v SU, k80 %v min %v SU", *v.RunMin, *v.Cost, *k.RunMin, *k.Cost)
				}
				if v.WaitMin != nil || !strings.Contains(v.WaitWhy, "no model") || rep.Fastest == nil || rep.Fastest.GPUType != "v100" {
					t.Errorf("wait %v (%q), fastest %+v", v.WaitMin, v.WaitWhy, rep.Fastest)
				}
			}},
		{"model from Gavel's table: v100 faster than k80", wire.EstimateRequest{GPUsPerNode: 1, Steps: 100000, Model: "resnet-50 (batch size 64)"},
			func(t *testing.T, rep *wire.EstimateReply) {
				v, k := rowOf(t, rep, "v100"), rowOf(t, rep, "k80")
				if v.RunMin == nil || k.RunMin == nil || !(*v.RunMin < *k.RunMin) || !strings.Contains(v.RateBasis, "throughput table") {
					t.Errorf("v100 %+v k80 %+v", v, k)
				}
			}},
		{"GPU memory: k80 too small, v100 unknown", wire.EstimateRequest{GPUsPerNode: 1, GPUMemBytes: 16 << 30},
			func(t *testing.T, rep *wire.EstimateReply) {
				if k := rowOf(t, rep, "k80"); k.Fits != forecast.No {
					t.Errorf("k80 %+v", k)
				}
				if v := rowOf(t, rep, "v100"); v.Fits != forecast.Unknown {
					t.Errorf("v100 %+v", v)
				}
			}},
		{"unknown model is an error", wire.EstimateRequest{GPUsPerNode: 1, Model: "GPT-5"},
			func(t *testing.T, rep *wire.EstimateReply) {
				if !strings.Contains(rep.Error, "not in the throughput table") {
					t.Errorf("error %q", rep.Error)
				}
			}},
		{"nothing known: run time unknown, never guessed", wire.EstimateRequest{GPUsPerNode: 1, Steps: 1000},
			func(t *testing.T, rep *wire.EstimateReply) {
				for _, r := range rep.Rows {
					if r.RunMin != nil || r.Cost != nil || !strings.Contains(r.RunWhy, "--throughput") {
						t.Errorf("%+v", r)
					}
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.V = wire.Version
			var rep wire.EstimateReply
			request(t, url, wire.SubjectEstimate, tc.req, &rep)
			tc.check(t, &rep)
		})
	}
	stop()

	// Restarted with Slurm unreadable, the controller shows the stored site.
	url, stop = startWith(t, cfg, &failingSlurm{fakeSlurm{comments: map[uint32]string{}}})
	defer stop()
	st = wire.StatusReply{}
	request(t, url, wire.SubjectStatus, wire.StatusRequest{V: wire.Version, Site: true}, &st)
	if st.Site == nil || len(st.Site.Partitions) != 1 || st.Site.Partitions[0].Name != "gpu" {
		t.Fatalf("stored site not restored: %+v", st.Site)
	}
}

func rowOf(t *testing.T, rep *wire.EstimateReply, typ string) wire.EstimateRow {
	t.Helper()
	for _, r := range rep.Rows {
		if r.GPUType == typ {
			return r
		}
	}
	t.Fatalf("no %s row: %+v (error %q)", typ, rep.Rows, rep.Error)
	return wire.EstimateRow{}
}

func near(a, b float64) bool { return a > b-1e-6 && a < b+1e-6 }

func TestLoadConfigSiteKeys(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.conf")
	writeFile(t, good, `charge.unit = SU
charge.gpu_hour = 1
charge.gpu_hour.partition.gpu.type.a100 = 4
charge.core_hour = 0.02
debug_partitions = debug, dev
gpu_mem.v100 = 32GiB
throughput_table = /t.json
queuewait_model = /m.json
`)
	c, err := LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Site.Unit != "SU" || len(c.Site.Rates) != 3 || len(c.Site.Debug) != 2 || !c.Site.IsDebug("dev") ||
		c.Site.GPUMemory["v100"] != 32<<30 || c.ThroughputTable != "/t.json" || c.QueueWaitModel != "/m.json" {
		t.Fatalf("site config %+v, table %q, model %q", c.Site, c.ThroughputTable, c.QueueWaitModel)
	}
	for text, want := range map[string]string{
		"charge.gpu_hour.queue.gpu = 1\n": "want charge.gpu_hour",
		"gpu_mem.v100 = big\n":            "want a size",
		"charge.gpu_hourly = 1\n":         "want charge.gpu_hour",
	} {
		bad := filepath.Join(dir, "bad.conf")
		writeFile(t, bad, text)
		if _, err := LoadConfig(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", text, err, want)
		}
	}
	// The shipped example, with its site keys turned on, loads.
	b, err := os.ReadFile("../../contrib/controller.conf")
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, k := range []string{"#charge.", "#debug_partitions", "#gpu_mem.", "#throughput_table", "#queuewait_model"} {
			if strings.HasPrefix(l, k) {
				l = l[1:]
			}
		}
		on = append(on, l)
	}
	ex := filepath.Join(dir, "example.conf")
	writeFile(t, ex, strings.Join(on, "\n"))
	if c, err := LoadConfig(ex); err != nil || len(c.Site.Rates) != 5 {
		t.Fatalf("contrib/controller.conf with site keys: %v (%d rates)", err, len(c.Site.Rates))
	}
}
