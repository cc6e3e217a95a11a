package placement

import (
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// migState is a cluster with whole V100s (16 GiB, the admin says) and an
// A100 cut into MIG slices: two 3g.20gb and one 1g.5gb; the A100 is 8 times
// a K80, so a 3g slice counts 8 x 3/7.
func migState() *wire.PlaceState {
	tv := func(n, total, used int) wire.TypeView {
		return wire.TypeView{Nodes: n, Total: total, Used: used, MaxPerNode: total / n, Partitions: []string{"gpu"}}
	}
	return &wire.PlaceState{V: wire.Version,
		Rule: wire.PlaceRule{Speed: map[string]float64{"v100": 5, "a100": 8}, WalltimeMargin: 1.5,
			GPUMemory: map[string]uint64{"v100": 16 << 30}, SliceMinMemory: 10 << 30},
		Cluster: &wire.ClusterView{
			Types: map[string]wire.TypeView{
				"v100":         tv(1, 4, 3),
				"a100_3g.20gb": tv(1, 2, 0),
				"a100_1g.5gb":  tv(1, 1, 0),
			},
			Partitions: map[string]wire.PartitionView{"gpu": {MaxTimeMin: 120}}, DefaultPartition: "gpu"},
		Reserved: map[string]int{}}
}

// TestPlaceOnSlices: a plain one-GPU job goes to a MIG slice when it is
// the best choice (2 free x 8 x 3/7 beats 1 free V100 x 5), never to a
// slice its memory need does not fit, and a job of unknown need never to
// a slice under the site's minimum; a need no type fits leaves it as
// asked, saying so.
func TestPlaceOnSlices(t *testing.T) {
	t.Parallel()
	one := wire.GPUAsk{PerNode: 1}
	for _, tc := range []struct {
		name     string
		mod      func(*wire.PlaceState)
		req      wire.PlaceRequest
		wantType string
		why      string
	}{
		{"a slice is the best choice", nil, wire.PlaceRequest{GPU: one}, "a100_3g.20gb", ""},
		{"a need the slice holds", nil, wire.PlaceRequest{GPU: one, Hints: wire.Hints{GPUMemBytes: 20 << 30}}, "a100_3g.20gb", ""},
		{"a need over the slice's memory", nil, wire.PlaceRequest{GPU: one, Hints: wire.Hints{GPUMemBytes: 21 << 30}}, "", "needs 21GiB of GPU memory, a100_3g.20gb has 20GiB"},
		{"a need only a V100 holds", nil, wire.PlaceRequest{GPU: one, Hints: wire.Hints{GPUMemBytes: 14 << 30}}, "a100_3g.20gb", ""},
		{"unknown need: not the small slice", func(s *wire.PlaceState) {
			s.Cluster.Types["a100_3g.20gb"] = wire.TypeView{Nodes: 1, Total: 2, Used: 2, MaxPerNode: 2, Partitions: []string{"gpu"}}
			s.Cluster.Types["v100"] = wire.TypeView{Nodes: 1, Total: 4, Used: 4, MaxPerNode: 4, Partitions: []string{"gpu"}}
		}, wire.PlaceRequest{GPU: one}, "v100", "MIG slice of 5GiB, under the site's minimum 10GiB"},
		{"a small need may take the small slice", func(s *wire.PlaceState) {
			s.Cluster.Types["a100_3g.20gb"] = wire.TypeView{Nodes: 1, Total: 2, Used: 2, MaxPerNode: 2, Partitions: []string{"gpu"}}
			s.Cluster.Types["v100"] = wire.TypeView{Nodes: 1, Total: 4, Used: 4, MaxPerNode: 4, Partitions: []string{"gpu"}}
		}, wire.PlaceRequest{GPU: one, Hints: wire.Hints{GPUMemBytes: 4 << 30}}, "a100_1g.5gb", ""},
		{"no minimum set", func(s *wire.PlaceState) {
			s.Rule.SliceMinMemory = 0
			s.Cluster.Types["a100_3g.20gb"] = wire.TypeView{Nodes: 1, Total: 2, Used: 2, MaxPerNode: 2, Partitions: []string{"gpu"}}
			s.Cluster.Types["v100"] = wire.TypeView{Nodes: 1, Total: 4, Used: 4, MaxPerNode: 4, Partitions: []string{"gpu"}}
		}, wire.PlaceRequest{GPU: one}, "a100_1g.5gb", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := migState()
			if tc.mod != nil {
				tc.mod(s)
			}
			res := Place(s, nil, &tc.req)
			if res.GPUType != tc.wantType || !strings.Contains(res.Reason, tc.why) {
				t.Fatalf("placed on %q (%s), want %q with %q", res.GPUType, res.Reason, tc.wantType, tc.why)
			}
			if strings.HasPrefix(res.GPUType, "a100_") && !strings.Contains(res.Reason, "(MIG slice: a100's 8 x ") {
				t.Errorf("a slice's speed is not explained: %s", res.Reason)
			}
			if d := Decide(s, nil, &tc.req); d.GPUType != res.GPUType {
				t.Fatalf("Decide gave %q, Place %q", d.GPUType, res.GPUType)
			}
		})
	}
}

// An interactive session takes a slice (training loses least there) but
// never one its memory need does not fit.
func TestInteractiveOnSlices(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		need uint64
		want string
	}{{0, "a100_3g.20gb"}, {24 << 30, ""}} {
		s := migState()
		s.Cluster.Types["v100"] = wire.TypeView{Nodes: 1, Total: 4, Used: 0, MaxPerNode: 4, Partitions: []string{"gpu"}}
		res := Place(s, nil, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Kind: wire.KindInteractive, GPUMemBytes: tc.need}})
		got := res.GPUType
		if tc.want == "" && strings.HasPrefix(got, "a100") || tc.want != "" && got != tc.want {
			t.Fatalf("need %d: interactive placed on %q (%s), want %q", tc.need, got, res.Reason, tc.want)
		}
	}
}
