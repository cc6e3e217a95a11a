package placement

import (
	"testing"

	"github.com/rota-hpc/rota/wire"
)

// devState is the dev cluster as the controller sends it: three types,
// one node of four GPUs each, in partition gpu.
func devState() *wire.PlaceState {
	types := map[string]wire.TypeView{}
	for _, t := range []string{"v100", "p100", "k80"} {
		types[t] = wire.TypeView{Nodes: 1, Total: 4, MaxPerNode: 4, Partitions: []string{"gpu"},
			Shapes: map[string][]wire.NodeGroup{"gpu": {{GPUs: 4, Nodes: 1, Features: []string{t}}}}}
	}
	return &wire.PlaceState{V: wire.Version, Rule: wire.PlaceRule{Speed: map[string]float64{"v100": 3.36, "p100": 3.17, "k80": 1}, WalltimeMargin: 1.5},
		Cluster: &wire.ClusterView{Types: types, Partitions: map[string]wire.PartitionView{"gpu": {MaxTimeMin: 2880}}, DefaultPartition: "gpu", ByFeature: true}}
}

// BenchmarkViewDecide is the rule's share of a submission on slurmctld's
// thread (View.Decide), for a one-GPU job and for a two-node one.
//
//	go test -run XXX -bench ViewDecide -benchmem ./placement/
func BenchmarkViewDecide(b *testing.B) {
	for _, bc := range []struct {
		name string
		req  wire.PlaceRequest
	}{
		{"gres1", wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}},
		{"N2xgpn2", wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 2, Nodes: 2}}},
		{"gpus2", wire.PlaceRequest{GPU: wire.GPUAsk{PerJob: 2}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v := NewView(devState(), nil)
			b.ReportAllocs()
			for b.Loop() {
				v.Decide(&bc.req)
			}
		})
	}
}
