package wire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
)

func sampleState() wire.PlaceState {
	return wire.PlaceState{V: wire.Version, Controller: "c1", Gen: 7, At: time.Unix(100, 0).UTC(), Policy: "interim",
		Rule: wire.PlaceRule{Speed: map[string]float64{"v100": 3.36}, RetypeTyped: true, WalltimeMargin: 1.5, WalltimeOverheadMin: 5},
		Cluster: &wire.ClusterView{At: time.Unix(90, 0).UTC(), DefaultPartition: "gpu", ByFeature: true,
			Types: map[string]wire.TypeView{"v100": {Nodes: 3, Total: 10, Used: 1, MaxPerNode: 4, Partitions: []string{"gpu"},
				Shapes: map[string][]wire.NodeGroup{"gpu": {{GPUs: 4, Nodes: 2, Features: []string{"ib", "v100"}}, {GPUs: 2, Nodes: 1}}}}},
			Partitions: map[string]wire.PartitionView{"gpu": {MaxTimeMin: 2880, DefaultTimeMin: 60}}},
		Reserved: map[string]int{"v100": 2}, Absorbed: map[string]uint64{"p": 3}}
}

func TestPlaceStateRoundTrip(t *testing.T) {
	s := sampleState()
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	var got wire.PlaceState
	if err := wire.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip:\n%+v\n%+v", got, s)
	}
	for _, tc := range []struct {
		name string
		mod  func(*wire.PlaceState)
		want string
	}{
		{"margin below 1", func(s *wire.PlaceState) { s.Rule.WalltimeMargin = 0.5 }, "walltime_margin"},
		{"negative speed", func(s *wire.PlaceState) { s.Rule.Speed["k80"] = -1 }, "speed"},
		{"negative reservation", func(s *wire.PlaceState) { s.Reserved["v100"] = -1 }, "reserved"},
		{"huge total", func(s *wire.PlaceState) { s.Cluster.Types["x"] = wire.TypeView{Total: 1 << 30} }, "count"},
		// The rule stops at the first node group too small for a job.
		{"node groups not largest first", func(s *wire.PlaceState) {
			s.Cluster.Types["v100"].Shapes["gpu"][0].GPUs = 1
		}, "most GPUs first"},
		{"empty node group", func(s *wire.PlaceState) { s.Cluster.Types["v100"].Shapes["gpu"][1].Nodes = 0 }, "node group"},
		{"ok", func(*wire.PlaceState) {}, ""},
	} {
		s := sampleState()
		tc.mod(&s)
		err := s.Check()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check() = %v, want %q", tc.name, err, tc.want)
		}
	}
	s.V = 2
	b, _ = json.Marshal(&s)
	if err := wire.Decode(b, &got); err == nil {
		t.Fatal("v=2 accepted")
	}
}

// FuzzPlaceState: whatever arrives on the state subject, decoding never
// panics, a state that passes Check re-encodes to itself, and the rule
// never panics on it (the plugin runs it inside slurmctld).
func FuzzPlaceState(f *testing.F) {
	s := sampleState()
	b, _ := json.Marshal(&s)
	f.Add(b)
	f.Add([]byte(`{"v":1,"rule":{"walltime_margin":1},"cluster":{"types":{"a":{"total":-1}}}}`))
	f.Add([]byte(`{"v":1,"rule":{"walltime_margin":1,"speed":{"a":1e300}},"cluster":{"types":{"a":{"total":3,"max_per_node":3,"used":9}}}}`))
	reqs := []wire.PlaceRequest{
		{GPU: wire.GPUAsk{PerNode: 1}},
		{GPU: wire.GPUAsk{PerTask: 2, Tasks: 3}, Partition: "gpu,debug", Hints: wire.Hints{Steps: 1 << 40, Throughput: map[string]float64{"a": 1e-300}}},
		{GPU: wire.GPUAsk{PerJob: 1, Type: "v100"}, TimeLimitMin: 10, Hints: wire.Hints{Steps: 5, Throughput: map[string]float64{"zz": 2}}},
		{GPU: wire.GPUAsk{PerSocket: 3, SocketsPerNode: 2, Nodes: 2, MaxNodes: 3, TasksPerNode: 4}, Features: "ib|x"},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var st wire.PlaceState
		if wire.Decode(data, &st) != nil || st.Check() != nil {
			return
		}
		again, err := json.Marshal(&st)
		if err != nil {
			t.Fatal(err)
		}
		var st2 wire.PlaceState
		if err := wire.Decode(again, &st2); err != nil {
			t.Fatalf("re-encoded state refused: %v", err)
		}
		for i := range reqs {
			extra := []wire.Reservation{{Type: "a", GPUs: 1, FinishS: 5}}
			r := placement.Place(&st, extra, &reqs[i])
			if d := placement.Decide(&st, extra, &reqs[i]); d.GPUType != r.GPUType || d.TimeLimitMin != r.TimeLimitMin || !reflect.DeepEqual(d.Reserve, r.Reserve) {
				t.Fatalf("Decide %+v, Place %+v", d, r)
			}
			if r.Reserve != nil && r.Reserve.GPUs < 0 {
				t.Fatalf("negative reservation %+v", r.Reserve)
			}
		}
	})
}
