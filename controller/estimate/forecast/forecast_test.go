package forecast

import (
	"math"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// fakeSources answers from tables; a missing entry is unknown.
type fakeSources struct {
	rates map[string]float64
	waits map[string]float64 // partition/type -> minutes
	asked []WaitQuery
}

func (f *fakeSources) Rates(types []string) []Rate {
	out := make([]Rate, len(types))
	for i, t := range types {
		if v, ok := f.rates[t]; ok {
			out[i] = Rate{StepsPerSec: v, Basis: "test"}
		} else {
			out[i] = Rate{Basis: "nothing known"}
		}
	}
	return out
}

func (f *fakeSources) Wait(q WaitQuery) Wait {
	f.asked = append(f.asked, q)
	if m, ok := f.waits[q.Partition+"/"+q.GPUType]; ok {
		return Wait{Minutes: m, Known: true}
	}
	return Wait{Basis: "no model"}
}

func testSite() *wire.Site {
	return &wire.Site{
		Partitions: []wire.SitePartition{
			{Name: "debug", Debug: true, State: "UP", MaxTimeMin: 30, MaxNodes: 1, Types: []wire.SitePartitionType{
				{Type: "v100", Nodes: 1, GPUs: 4, MaxPerNode: 4, MinCPUsPerNode: 16, MinMemPerNodeMB: 16000}}},
			{Name: "gpu", Default: true, State: "UP", MaxTimeMin: 600, Types: []wire.SitePartitionType{
				{Type: "k80", Nodes: 1, GPUs: 8, MaxPerNode: 8, MinCPUsPerNode: 16, MinMemPerNodeMB: 64000},
				{Type: "v100", Nodes: 2, GPUs: 8, MaxPerNode: 4, MinCPUsPerNode: 32, MinMemPerNodeMB: 16000}}},
		},
		GPUTypes: []wire.SiteGPUType{{Type: "k80", MemoryBytes: 12 << 30, MemorySource: "config"}, {Type: "v100", MemorySource: "unknown"}},
		Charging: wire.Charging{Unit: "SU", Rates: []wire.Rate{
			{Resource: "gpu", GPUType: "v100", PerHour: 3}, {Resource: "gpu", GPUType: "k80", PerHour: 1},
			{Resource: "gpu", Partition: "debug", GPUType: "v100", PerHour: 0}}},
	}
}

func rowOf(t *testing.T, rep *wire.EstimateReply, part, typ string) wire.EstimateRow {
	t.Helper()
	for _, r := range rep.Rows {
		if r.Partition == part && r.GPUType == typ {
			return r
		}
	}
	t.Fatalf("no row %s/%s in %+v", part, typ, rep.Rows)
	return wire.EstimateRow{}
}

func near(a *float64, b float64) bool { return a != nil && math.Abs(*a-b) < 1e-6 }

func TestEstimate(t *testing.T) {
	type want struct {
		part, typ string
		fits      string
		why       string // substring of the reasons, "" none
		run       float64
		segments  int
		wait      float64 // -1 unknown
		cost      float64 // -1 unknown
	}
	tests := []struct {
		name     string
		req      wire.EstimateRequest
		src      fakeSources
		rows     []want
		fastest  string // partition/type, "" none
		cheapest string
		err      string
		note     string
	}{
		{
			name: "one GPU, all known: v100 fastest, debug cheapest",
			req:  wire.EstimateRequest{GPUsPerNode: 1, Steps: 36000},
			src:  fakeSources{rates: map[string]float64{"v100": 20, "k80": 5}, waits: map[string]float64{"gpu/v100": 10, "gpu/k80": 0, "debug/v100": 20}},
			rows: []want{
				{"debug", "v100", Yes, "", 30, 1, 20, 0},
				{"gpu", "k80", Yes, "", 120, 1, 0, 2},
				{"gpu", "v100", Yes, "", 30, 1, 10, 1.5},
			},
			fastest: "gpu/v100", cheapest: "debug/v100",
		},
		{
			name: "longer than MaxTime: chain on gpu, debug left out",
			req:  wire.EstimateRequest{GPUsPerNode: 1, Steps: 1_440_000},
			src:  fakeSources{rates: map[string]float64{"v100": 20, "k80": 5}, waits: map[string]float64{"gpu/v100": 30, "gpu/k80": 0, "debug/v100": 0}},
			rows: []want{
				{"debug", "v100", Yes, "", 1200, 40, 0, 0},
				{"gpu", "k80", Yes, "", 4800, 8, 0, 80},
				{"gpu", "v100", Yes, "", 1200, 2, 30, 60},
			},
			// v100: 2 x 30 + 1200 = 1260 < k80's 4800.
			fastest: "gpu/v100", cheapest: "gpu/v100", note: "debug partition, would need a chain",
		},
		{
			name: "the job's own --time cuts a chain shorter than MaxTime",
			req:  wire.EstimateRequest{GPUsPerNode: 1, Steps: 1_440_000, TimeLimitMin: 60, Partition: "gpu"},
			src:  fakeSources{rates: map[string]float64{"v100": 20, "k80": 5}, waits: map[string]float64{"gpu/v100": 0, "gpu/k80": 0}},
			rows: []want{
				{"gpu", "k80", Yes, "", 4800, 80, 0, 80},
				{"gpu", "v100", Yes, "", 1200, 20, 0, 60},
			},
			fastest: "gpu/v100", cheapest: "gpu/v100",
		},
		{
			name: "too many GPUs per node for v100",
			req:  wire.EstimateRequest{GPUsPerNode: 8, Steps: 3600},
			src:  fakeSources{rates: map[string]float64{"v100": 10, "k80": 1}, waits: map[string]float64{"gpu/k80": 5}},
			rows: []want{
				{"debug", "v100", No, "8 GPUs per node", 6, 1, -1, 0},
				{"gpu", "k80", Yes, "", 60, 1, 5, 8},
				{"gpu", "v100", No, "v100 nodes have 4", 6, 1, -1, 48.0 / 60 * 3},
			},
			fastest: "gpu/k80", cheapest: "gpu/k80",
		},
		{
			name: "8 GPUs per job spread over two v100 nodes; debug MaxNodes=1",
			req:  wire.EstimateRequest{GPUsPerJob: 8, Steps: 3600},
			src:  fakeSources{rates: map[string]float64{"v100": 10, "k80": 1}, waits: map[string]float64{"gpu/k80": 5, "gpu/v100": 0}},
			rows: []want{
				{"debug", "v100", No, "MaxNodes=1", 6, 1, -1, 0},
				{"gpu", "k80", Yes, "", 60, 1, 5, 8},
				{"gpu", "v100", Yes, "", 6, 1, 0, 8 * 3 * 0.1},
			},
			fastest: "gpu/v100", cheapest: "gpu/v100",
		},
		{
			name: "GPU memory: k80 too small, v100 unknown",
			req:  wire.EstimateRequest{GPUsPerNode: 1, Steps: 3600, GPUMemBytes: 16 << 30, Partition: "gpu"},
			src:  fakeSources{rates: map[string]float64{"v100": 10, "k80": 1}, waits: map[string]float64{"gpu/k80": 5, "gpu/v100": 1}},
			rows: []want{
				{"gpu", "k80", No, "k80 has 12.0 GiB", 60, 1, -1, 1},
				{"gpu", "v100", Unknown, "gpu_mem.v100", 6, 1, 1, 0.3},
			},
			note: "no partition and GPU type is known to fit",
		},
		{
			name: "no steps: run time, cost and finish unknown",
			req:  wire.EstimateRequest{GPUsPerNode: 1, GPUType: "v100"},
			src:  fakeSources{rates: map[string]float64{"v100": 10}, waits: map[string]float64{"gpu/v100": 3, "debug/v100": 1}},
			rows: []want{
				{"debug", "v100", Yes, "", -1, 0, 1, -1},
				{"gpu", "v100", Yes, "", -1, 0, 3, -1},
			},
			note: "run time is unknown on every row",
		},
		{
			name: "no wait known: fastest by run time, said so",
			req:  wire.EstimateRequest{GPUsPerNode: 1, Steps: 36000, Partition: "gpu"},
			src:  fakeSources{rates: map[string]float64{"v100": 20, "k80": 5}},
			rows: []want{
				{"gpu", "k80", Yes, "", 120, 1, -1, 2},
				{"gpu", "v100", Yes, "", 30, 1, -1, 1.5},
			},
			fastest: "gpu/v100", cheapest: "gpu/v100",
		},
		{
			name: "rate unknown on one type",
			req:  wire.EstimateRequest{GPUsPerNode: 1, Steps: 36000, Partition: "gpu"},
			src:  fakeSources{rates: map[string]float64{"k80": 5}, waits: map[string]float64{"gpu/v100": 0, "gpu/k80": 60}},
			rows: []want{
				{"gpu", "k80", Yes, "", 120, 1, 60, 2},
				{"gpu", "v100", Yes, "", -1, 0, 0, -1},
			},
			fastest: "gpu/k80", cheapest: "gpu/k80",
		},
		{
			name: "--time above MaxTime",
			req:  wire.EstimateRequest{GPUsPerNode: 1, Steps: 3600, TimeLimitMin: 120},
			src:  fakeSources{rates: map[string]float64{"v100": 10, "k80": 1}, waits: map[string]float64{"gpu/v100": 0, "gpu/k80": 0}},
			rows: []want{
				{"debug", "v100", No, "above MaxTime", 6, 1, -1, 0},
				{"gpu", "k80", Yes, "", 60, 1, 0, 1},
				{"gpu", "v100", Yes, "", 6, 1, 0, 0.3},
			},
			fastest: "gpu/v100", cheapest: "gpu/v100",
		},
		{
			name: "too many CPUs for the k80 node; memory too big for v100",
			req:  wire.EstimateRequest{GPUsPerNode: 1, Steps: 3600, Tasks: 1, CPUsPerTask: 20, MemPerNodeMB: 32000, Partition: "gpu"},
			src:  fakeSources{rates: map[string]float64{"v100": 10, "k80": 1}, waits: map[string]float64{"gpu/v100": 0, "gpu/k80": 0}},
			rows: []want{
				{"gpu", "k80", No, "20 CPUs per node, the k80 nodes have 16", 60, 1, -1, 1},
				{"gpu", "v100", No, "the v100 nodes have 16000 MB", 6, 1, -1, 0.3},
			},
			note: "no partition and GPU type is known to fit",
		},
		{name: "no GPUs", req: wire.EstimateRequest{Steps: 10}, err: "asks for no GPUs"},
		{name: "unknown partition", req: wire.EstimateRequest{GPUsPerNode: 1, Partition: "nope"}, err: `no partition "nope"`},
		{name: "unknown type", req: wire.EstimateRequest{GPUsPerNode: 1, GPUType: "h100"}, err: "no usable h100 GPUs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src
			rep := Estimate(testSite(), &tc.req, &src)
			if tc.err != "" {
				if !strings.Contains(rep.Error, tc.err) {
					t.Fatalf("error %q, want %q", rep.Error, tc.err)
				}
				return
			}
			if rep.Error != "" {
				t.Fatal(rep.Error)
			}
			if len(rep.Rows) != len(tc.rows) {
				t.Fatalf("%d rows, want %d: %+v", len(rep.Rows), len(tc.rows), rep.Rows)
			}
			for _, w := range tc.rows {
				r := rowOf(t, rep, w.part, w.typ)
				if r.Fits != w.fits || (w.why != "" && !strings.Contains(strings.Join(r.Why, "; "), w.why)) {
					t.Errorf("%s/%s fits %s %v, want %s (%q)", w.part, w.typ, r.Fits, r.Why, w.fits, w.why)
				}
				if w.run < 0 {
					if r.RunMin != nil || r.RunWhy == "" || r.Segments != 0 || r.FinishMin != nil {
						t.Errorf("%s/%s run %v (%q) segments %d finish %v, want unknown with a reason", w.part, w.typ, r.RunMin, r.RunWhy, r.Segments, r.FinishMin)
					}
				} else if !near(r.RunMin, w.run) || r.Segments != w.segments {
					t.Errorf("%s/%s run %v min in %d segments, want %v in %d", w.part, w.typ, deref(r.RunMin), r.Segments, w.run, w.segments)
				}
				if w.wait < 0 {
					if r.WaitMin != nil || r.WaitWhy == "" {
						t.Errorf("%s/%s wait %v (%q), want unknown with a reason", w.part, w.typ, r.WaitMin, r.WaitWhy)
					}
				} else if !near(r.WaitMin, w.wait) {
					t.Errorf("%s/%s wait %v, want %v", w.part, w.typ, deref(r.WaitMin), w.wait)
				}
				if w.cost < 0 {
					if r.Cost != nil || !strings.Contains(r.CostBasis, "unknown") {
						t.Errorf("%s/%s cost %v (%q), want unknown", w.part, w.typ, r.Cost, r.CostBasis)
					}
				} else if !near(r.Cost, w.cost) {
					t.Errorf("%s/%s cost %v (%s), want %v", w.part, w.typ, deref(r.Cost), r.CostBasis, w.cost)
				}
			}
			if got := planName(rep.Fastest); got != tc.fastest {
				t.Errorf("fastest %s, want %s (%+v)", got, tc.fastest, rep.Fastest)
			}
			if got := planName(rep.Cheapest); got != tc.cheapest {
				t.Errorf("cheapest %s, want %s", got, tc.cheapest)
			}
			if tc.note != "" && !strings.Contains(strings.Join(rep.Notes, "; "), tc.note) {
				t.Errorf("notes %q, want %q", rep.Notes, tc.note)
			}
		})
	}
}

// The wait is asked for the shape the job would have there: a chain's
// segment asks for MaxTime, a short job for its run time.
func TestWaitQuery(t *testing.T) {
	src := fakeSources{rates: map[string]float64{"v100": 1, "k80": 1}}
	Estimate(testSite(), &wire.EstimateRequest{GPUsPerJob: 6, Steps: 60 * 1000, Partition: "gpu"}, &src)
	want := map[string]WaitQuery{
		"k80":  {Partition: "gpu", GPUType: "k80", Nodes: 1, GPUs: 6, LimitMin: 600},
		"v100": {Partition: "gpu", GPUType: "v100", Nodes: 2, GPUs: 6, LimitMin: 600},
	}
	if len(src.asked) != 2 {
		t.Fatalf("asked %+v", src.asked)
	}
	for _, q := range src.asked {
		if q != want[q.GPUType] {
			t.Errorf("asked %+v, want %+v", q, want[q.GPUType])
		}
	}
	src.asked = nil
	Estimate(testSite(), &wire.EstimateRequest{GPUsPerNode: 1, Steps: 90, Partition: "gpu", GPUType: "v100"}, &src)
	if len(src.asked) != 1 || src.asked[0].LimitMin != 2 {
		t.Errorf("short job asked %+v, want a 2-minute limit (90 s rounded up)", src.asked)
	}
}

func deref(p *float64) any {
	if p == nil {
		return "unknown"
	}
	return *p
}

func planName(p *wire.Plan) string {
	if p == nil {
		return ""
	}
	return p.Partition + "/" + p.GPUType
}

// One formatter for the table and the plans' words.
func TestMinutes(t *testing.T) {
	for m, want := range map[float64]string{0.5: "30s", 2: "2m", 119: "119m", 150: "2.5h", 47 * 60: "47.0h", 7632: "5.3d"} {
		if got := Minutes(m); got != want {
			t.Errorf("Minutes(%v) = %q, want %q", m, got, want)
		}
	}
}
