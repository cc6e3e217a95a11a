package rounds

import (
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// TestRetypeByType: a pending job's new type is written the way that type
// is chosen on this cluster (cluster.TypeCap.ByFeature): whole GPUs whose
// nodes carry their type as a feature by constraint, a MIG slice (its node
// carries its model) in the GPU request, which only 24.11 and later can
// change on a pending job. A MIG node beside whole GPUs no longer makes
// every type go in the request, where 22.05 can retype none.
func TestRetypeByType(t *testing.T) {
	t.Parallel()
	node := func(name string, gpus map[string]int, feats ...string) slurm.Node {
		return slurm.Node{Name: name, State: "idle", Partitions: []string{"gpu"}, GPUs: gpus, Features: feats}
	}
	snap := cluster.Build(time.Now(), []slurm.Node{
		node("v", map[string]int{"v100": 4}, "v100"), node("k", map[string]int{"k80": 4}, "k80"),
		node("m", map[string]int{"a100_3g.20gb": 2, "a100_1g.5gb": 4}, "a100"),
	}, nil)
	str := func(p *string) string {
		if p == nil {
			return "<unchanged>"
		}
		return *p
	}
	for _, c := range []struct {
		name               string
		gres               bool   // Slurm retypes a pending job's GPU request (24.11+)
		tres, features     string // the job's now
		userFeatures       string // what its user asked
		to                 string
		ok                 bool
		wantFeat, wantTres string
	}{
		{"untyped to a whole GPU: constraint", false, "gres:gpu:1", "", "", "v100", true, "v100", ""},
		{"Rota's constraint to another whole GPU", false, "gres:gpu:1", "k80", "", "v100", true, "v100", ""},
		{"with the user's own constraint kept", false, "gres:gpu:1", "ib&k80", "ib", "v100", true, "ib&v100", ""},
		{"22.05: Rota's constraint to a slice cannot be written", false, "gres:gpu:1", "k80", "", "a100_3g.20gb", false, "<unchanged>", ""},
		{"22.05: a typed request stays", false, "gres:gpu:a100_3g.20gb:1", "", "", "v100", false, "<unchanged>", ""},
		{"24.11: Rota's constraint to a slice: request typed, the user's constraint back", true, "gres/gpu:1", "ib&k80", "ib", "a100_3g.20gb", true, "ib", "gres/gpu:a100_3g.20gb:1"},
		{"24.11: a slice to a whole GPU in the request", true, "gres/gpu:a100_3g.20gb:1", "", "", "v100", true, "<unchanged>", "gres/gpu:v100:1"},
		{"24.11: untyped to a whole GPU still by constraint", true, "gres/gpu:1", "", "", "k80", true, "k80", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &Loop{retypeGres: c.gres}
			j := &slurm.Job{ID: 7, State: "PENDING", TresPerNode: c.tres, Features: c.features}
			tr := &tracked{decision: &wire.Decision{Asked: wire.PlaceRequest{Features: c.userFeatures}}}
			var u slurm.JobUpdate
			ok := l.retype(&u, j, tr, c.to, snap)
			tres := ""
			if u.GPU != nil {
				tres = u.GPU.PerNode
			}
			if ok != c.ok || str(u.Features) != c.wantFeat || tres != c.wantTres {
				t.Errorf("ok %v Features %q TresPerNode %q; want %v %q %q", ok, str(u.Features), tres, c.ok, c.wantFeat, c.wantTres)
			}
		})
	}
}
