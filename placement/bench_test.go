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
	// A site's worth of learned speeds (wire.MaxLearnedBytes holds about
	// 200 pairs): a job of a learned name, and one of another name.
	learned := devState()
	learned.Learned = map[string]map[string]float64{}
	for i := range 200 {
		learned.Learned[wire.LearnedKey(uint32(1000+i), "train")] = map[string]float64{"v100": 18.2, "p100": 12.1, "k80": 3.2}
	}
	one := wire.GPUAsk{PerNode: 1}
	for _, bc := range []struct {
		name  string
		state *wire.PlaceState
		req   wire.PlaceRequest
	}{
		{"gres1", devState(), wire.PlaceRequest{GPU: one}},
		{"N2xgpn2", devState(), wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 2, Nodes: 2}}},
		{"gpus2", devState(), wire.PlaceRequest{GPU: wire.GPUAsk{PerJob: 2}}},
		{"gres1-learned", learned, wire.PlaceRequest{UID: 1100, Name: "train", GPU: one}},
		{"gres1-not-learned", learned, wire.PlaceRequest{UID: 1100, Name: "other", GPU: one}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			v := NewView(bc.state, nil)
			b.ReportAllocs()
			for b.Loop() {
				v.Decide(&bc.req)
			}
		})
	}
}
