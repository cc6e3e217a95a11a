package placer

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
)

func snapshot(used map[string]int) *cluster.Snapshot {
	var nodes []slurm.Node
	for _, t := range []string{"v100", "p100", "k80"} {
		nodes = append(nodes, slurm.Node{Name: "node-" + t, State: "idle", Partitions: []string{"gpu"},
			GPUs: map[string]int{t: 4}, GPUsUsed: map[string]int{t: used[t]}})
	}
	nodes = append(nodes, slurm.Node{Name: "big-a100", State: "idle", Partitions: []string{"big"},
		GPUs: map[string]int{"a100": 8}, GPUsUsed: map[string]int{}})
	parts := []slurm.Partition{{Name: "gpu", Default: true, MaxTimeMin: 2880}, {Name: "big", MaxTimeMin: 600}}
	return cluster.Build(time.Unix(0, 0), nodes, parts)
}

func cfg() Config {
	c := DefaultConfig()
	c.Speed = map[string]float64{"v100": 3.36, "p100": 3.17, "k80": 1, "a100": 6}
	return c
}

func TestPlacerPlace(t *testing.T) {
	tests := []struct {
		name       string
		used       map[string]int
		cfg        func(*Config)
		req        wire.PlaceRequest
		wantType   string
		wantTime   uint32
		wantReason string
	}{
		{name: "fastest free type wins", req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}},
			wantType: "v100", wantReason: "v100 has the most free GPUs weighted by speed"},
		{name: "busy fast type loses to free slower one", used: map[string]int{"v100": 3}, req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}},
			wantType: "p100"},
		{name: "type must have room on one node", used: map[string]int{"p100": 0}, req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 4}},
			wantType: "v100"},
		{name: "nothing free: most capacity by speed", used: map[string]int{"v100": 4, "p100": 4, "k80": 4}, req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}},
			wantType: "v100", wantReason: "no type has 1 GPUs free now"},
		{name: "partition limits the types", req: wire.PlaceRequest{Partition: "big", GPU: wire.GPUAsk{PerNode: 2}},
			wantType: "a100"},
		{name: "more GPUs per node than any node has", req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 5}},
			wantType: "", wantReason: "no single GPU type has a node with 5 GPUs in partition gpu; left as asked"},
		{name: "more GPUs than exist", req: wire.PlaceRequest{GPU: wire.GPUAsk{PerJob: 100}},
			wantType: "", wantReason: "no single GPU type has 100 GPUs in all in partition gpu; left as asked"},
		{name: "typed kept", req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1, Type: "k80"}},
			wantType: "", wantReason: "user named type k80"},
		{name: "unknown type kept", req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1, Type: "h100"}},
			wantType: "", wantReason: "which no usable node has"},
		{name: "typed retyped when allowed", cfg: func(c *Config) { c.RetypeTyped = true }, req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1, Type: "k80"}},
			wantType: "v100"},
		{name: "several types kept", cfg: func(c *Config) { c.RetypeTyped = true }, req: wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 2, Types: []string{"k80", "v100"}}},
			wantType: "", wantReason: "several GPU types"},
		{name: "walltime from hints on chosen type",
			req:      wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Steps: 36000, Throughput: map[string]float64{"v100": 10}}},
			wantType: "v100", wantTime: 95}, // 3600 s * 1.5 / 60 + 5
		{name: "walltime scaled from another type", used: map[string]int{"v100": 4},
			req:      wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Steps: 36000, Throughput: map[string]float64{"v100": 10}}},
			wantType: "p100", wantTime: 101}, // rate 10*3.17/3.36 = 9.43/s -> 95.4 min + 5, rounded up
		{name: "walltime capped by user limit",
			req:      wire.PlaceRequest{TimeLimitMin: 30, GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Steps: 36000, Throughput: map[string]float64{"v100": 10}}},
			wantType: "v100", wantTime: 30},
		{name: "walltime capped by MaxTime",
			req:      wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Steps: 1e9, Throughput: map[string]float64{"v100": 1}}},
			wantType: "v100", wantTime: 2880},
		{name: "no steps no estimate",
			req:      wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Throughput: map[string]float64{"v100": 1}}},
			wantType: "v100", wantTime: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg()
			if tc.cfg != nil {
				tc.cfg(&c)
			}
			p := New(c)
			p.Update(snapshot(tc.used))
			r := p.Place(&tc.req)
			if r.GPUType != tc.wantType {
				t.Errorf("type %q, want %q (%s)", r.GPUType, tc.wantType, r.Reason)
			}
			if r.TimeLimitMin != tc.wantTime {
				t.Errorf("time %d, want %d", r.TimeLimitMin, tc.wantTime)
			}
			if !strings.Contains(r.Reason, tc.wantReason) {
				t.Errorf("reason %q lacks %q", r.Reason, tc.wantReason)
			}
		})
	}
}

// A burst spreads: each placement reserves its GPUs until the next view.
func TestPlacerReservesUntilRefresh(t *testing.T) {
	p := New(cfg())
	p.Update(snapshot(nil))
	counts := map[string]int{}
	for i := 0; i < 12; i++ {
		r := p.Place(&wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}})
		counts[r.GPUType]++
	}
	if counts["v100"] != 4 || counts["p100"] != 4 || counts["k80"] != 4 {
		t.Fatalf("12 one-GPU jobs on 3x4 GPUs spread as %v", counts)
	}
	p.Update(snapshot(nil))
	if r := p.Place(&wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}); r.GPUType != "v100" {
		t.Fatalf("after refresh got %q", r.GPUType)
	}
}

func TestPlacerBeforeFirstView(t *testing.T) {
	r := New(cfg()).Place(&wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}})
	if r.GPUType != "" || r.TimeLimitMin != 0 || !strings.Contains(r.Reason, "no view of the cluster") {
		t.Fatalf("%+v", r)
	}
}

// Place is on slurmctld's submit path: it must be a lookup.
func BenchmarkPlacerPlace(b *testing.B) {
	p := New(cfg())
	s := snapshot(nil)
	req := &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Steps: 1000, Throughput: map[string]float64{"v100": 10}}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if i%1000 == 0 {
			p.Update(s)
		}
		p.Place(req)
	}
}

// A job that hints its own speeds is placed by them, not by the table:
// one that runs faster on the K80 than anywhere else goes there.
func TestPlaceByJobSpeed(t *testing.T) {
	p := New(Config{Speed: map[string]float64{"v100": 3, "k80": 1}, WalltimeMargin: 1.5})
	snap := cluster.Build(time.Now(), []slurm.Node{
		{Name: "a", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"v100": 4}, GPUsUsed: map[string]int{}},
		{Name: "b", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"k80": 4}, GPUsUsed: map[string]int{}},
	}, []slurm.Partition{{Name: "gpu", Default: true}})
	p.Update(snap)
	for _, c := range []struct {
		hints map[string]float64
		want  string
	}{
		{nil, "v100"},
		{map[string]float64{"v100": 10}, "v100"},
		{map[string]float64{"v100": 10, "k80": 14}, "k80"},
	} {
		r := p.Place(&wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Throughput: c.hints}})
		if r.GPUType != c.want {
			t.Errorf("hints %v: %s (%s), want %s", c.hints, r.GPUType, r.Reason, c.want)
		}
		p.Update(snap) // drop the reservation
	}
}

// Jobs whose work is known are list-scheduled: each goes where it would
// finish first, waiting for a fast GPU only while that beats running on a
// slower one now.
func TestPlaceEarliestFinish(t *testing.T) {
	p := New(Config{Speed: map[string]float64{"v100": 3, "k80": 1}, WalltimeMargin: 1.5})
	p.SetBusy(map[string][]float64{"v100": {10}}) // the one busy V100 frees in 10 s
	p.Update(cluster.Build(time.Now(), []slurm.Node{
		{Name: "a", State: "mixed", Partitions: []string{"gpu"}, GPUs: map[string]int{"v100": 2}, GPUsUsed: map[string]int{"v100": 1}},
		{Name: "b", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"k80": 2}, GPUsUsed: map[string]int{}},
	}, []slurm.Partition{{Name: "gpu", Default: true}}))
	place := func(steps uint64, v100, k80 float64) Result {
		return p.Place(&wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1},
			Hints: wire.Hints{Steps: steps, Throughput: map[string]float64{"v100": v100, "k80": k80}}})
	}
	// 1: the free V100 (finishes at 10 s; a K80 would take 40 s).
	// 2: waits for the busy V100 (10 + 10 s) rather than 40 s on a K80.
	// 3: the V100s are booked until 20 s; 100 steps at 5/s on a K80
	//    finish at 20 s, at 10/s on a V100 at 30 s: the K80.
	for i, c := range []struct {
		steps     uint64
		v100, k80 float64
		want      string
	}{{100, 10, 2.5, "v100"}, {100, 10, 2.5, "v100"}, {100, 10, 5, "k80"}} {
		if r := place(c.steps, c.v100, c.k80); r.GPUType != c.want {
			t.Errorf("job %d: %s (%s), want %s", i+1, r.GPUType, r.Reason, c.want)
		}
	}
	// Without known work the old rule holds.
	if r := p.Place(&wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}); !strings.Contains(r.Reason, "weighted by speed") {
		t.Errorf("unknown work: %s", r.Reason)
	}
}

// TestSharedStateDecidesAlike: a plugin placing from the Placer's State, with
// its own reservations counted locally, decides exactly what the Placer
// decides, and Absorb makes the next State count the plugin's GPUs.
func TestSharedStateDecidesAlike(t *testing.T) {
	ctl, plugin := New(cfg()), New(cfg())
	ctl.Update(snapshot(map[string]int{"v100": 2}))
	plugin.Update(snapshot(map[string]int{"v100": 2}))
	st := ctl.State(time.Now())
	var extra []wire.Reservation
	reserved := map[string]int{}
	req := &wire.PlaceRequest{V: wire.Version, GPU: wire.GPUAsk{PerNode: 1}}
	for i := range 12 {
		want := plugin.Place(req)
		got := placement.Place(st, extra, req)
		if got.GPUType != want.GPUType || got.Reason != want.Reason {
			t.Fatalf("placement %d: shared state gave %q (%s), the Placer %q (%s)", i, got.GPUType, got.Reason, want.GPUType, want.Reason)
		}
		extra = append(extra, *got.Reserve)
		reserved[got.Reserve.Type] += got.Reserve.GPUs
		ctl.Absorb(&wire.Decision{Origin: "p1", Seq: uint64(i + 1), Reserve: got.Reserve})
	}
	next := ctl.State(time.Now())
	if !reflect.DeepEqual(next.Reserved, reserved) || next.Absorbed["p1"] != 12 || next.Gen <= st.Gen {
		t.Fatalf("after absorbing: reserved %v absorbed %v gen %d->%d, want reserved %v", next.Reserved, next.Absorbed, st.Gen, next.Gen, reserved)
	}
	if len(st.Reserved) != 0 {
		t.Fatalf("an earlier State changed under its reader: %v", st.Reserved)
	}
	// A refresh ends reservations but remembers what was absorbed.
	ctl.Update(snapshot(nil))
	if s := ctl.State(time.Now()); len(s.Reserved) != 0 || s.Absorbed["p1"] != 12 {
		t.Fatalf("after refresh: %v %v", s.Reserved, s.Absorbed)
	}
}

// A plugin placing jobs of known work from the shared state books slots
// as the Placer does: the same list schedule, and the controller's state
// after absorbing its decisions holds the same bookings.
func TestSharedStateListSchedules(t *testing.T) {
	busy := map[string][]float64{"v100": {10}}
	mk := func() *Placer {
		p := New(Config{Speed: map[string]float64{"v100": 3, "k80": 1}, WalltimeMargin: 1.5})
		p.SetBusy(busy)
		p.Update(cluster.Build(time.Now(), []slurm.Node{
			{Name: "a", State: "mixed", Partitions: []string{"gpu"}, GPUs: map[string]int{"v100": 2}, GPUsUsed: map[string]int{"v100": 1}},
			{Name: "b", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"k80": 2}, GPUsUsed: map[string]int{}},
		}, []slurm.Partition{{Name: "gpu", Default: true}}))
		return p
	}
	ctl, ref := mk(), mk()
	st := ctl.State(time.Now())
	if !reflect.DeepEqual(st.Slots, map[string][]float64{"v100": {0, 10}, "k80": {0, 0}}) {
		t.Fatalf("slots %v", st.Slots)
	}
	var extra []wire.Reservation
	var types []string
	for i, c := range []struct{ v100, k80 float64 }{{10, 2.5}, {10, 2.5}, {10, 5}, {10, 5}} {
		req := &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Steps: 100, Throughput: map[string]float64{"v100": c.v100, "k80": c.k80}}}
		want := ref.Place(req)
		got := placement.Place(st, extra, req)
		if got.GPUType != want.GPUType || got.Reason != want.Reason || !reflect.DeepEqual(got.Reserve, want.Reserve) {
			t.Fatalf("job %d: shared state gave %q %+v (%s), the Placer %q %+v (%s)", i+1, got.GPUType, got.Reserve, got.Reason, want.GPUType, want.Reserve, want.Reason)
		}
		extra = append(extra, *got.Reserve)
		types = append(types, got.GPUType)
		ctl.Absorb(&wire.Decision{Origin: "p1", Seq: uint64(i + 1), Reserve: got.Reserve})
	}
	if want := []string{"v100", "v100", "k80", "k80"}; !reflect.DeepEqual(types, want) {
		t.Fatalf("placed %v, want %v", types, want)
	}
	if got, want := ctl.State(time.Now()).Slots, ref.State(time.Now()).Slots; !reflect.DeepEqual(got, want) {
		t.Fatalf("after absorbing: slots %v, the Placer's own %v", got, want)
	}
	if st.Slots["v100"][0] != 0 {
		t.Fatalf("an earlier State's slots changed under its reader: %v", st.Slots)
	}
}

// A user's typed-limit headroom: placements take from it, and a headroom
// counted from a queue read before a placement keeps that placement taken.
func TestPlacerHeadroom(t *testing.T) {
	t.Parallel()
	room := func(v100 int) map[uint32]wire.UserHeadroom {
		return map[uint32]wire.UserHeadroom{7: {DefaultAccount: "lab", Left: map[string]map[string]int{"lab/": {"v100": v100}}}}
	}
	p := New(cfg())
	p.Update(snapshot(nil))
	before := time.Now()
	p.SetHeadroom(room(1), before)
	req := &wire.PlaceRequest{UID: 7, GPU: wire.GPUAsk{PerNode: 1}}
	if r := p.Place(req); r.GPUType != "v100" {
		t.Fatalf("first job: %q, want v100 (one left)", r.GPUType)
	}
	if r := p.Place(req); r.GPUType == "v100" {
		t.Fatal("second job: v100 beyond the limit")
	}
	// The round read the queue before these placements: they stay taken.
	p.SetHeadroom(room(1), before)
	if r := p.Place(req); r.GPUType == "v100" {
		t.Fatal("after a headroom from an older read: v100 beyond the limit")
	}
	// A read after them counts them itself.
	p.SetHeadroom(room(1), time.Now().Add(time.Second))
	if r := p.Place(req); r.GPUType != "v100" {
		t.Fatalf("after a newer read with one left: %q, want v100", r.GPUType)
	}
	if s := p.State(time.Now()); s.Headroom[7].Left["lab/"]["v100"] != 0 {
		t.Fatalf("state headroom %v, want 0 v100 left", s.Headroom[7])
	}
}
