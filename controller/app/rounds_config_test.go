package app

import (
	"testing"

	"github.com/rota-hpc/rota/controller/slurm"
)

// round_apply_around_saves is on unless turned off.
func TestApplyAroundSavesConfig(t *testing.T) {
	path := t.TempDir() + "/c.conf"
	for _, c := range []struct {
		conf string
		want bool
	}{{"", true}, {"round_apply_around_saves = no\n", false}, {"round_apply_around_saves = yes\n", true}} {
		writeFile(t, path, c.conf)
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ApplyAroundSaves != c.want {
			t.Errorf("%q: ApplyAroundSaves %v, want %v", c.conf, cfg.ApplyAroundSaves, c.want)
		}
	}
}

// migAndShards finds what Slurm 22.05 cannot offer together: MIG slice
// types on some node and gres/shard on some node.
func TestMigAndShards(t *testing.T) {
	t.Parallel()
	mig := slurm.Node{Name: "m", GPUs: map[string]int{"a100_3g.20gb": 2, "a100_1g.5gb": 1}}
	sh := slurm.Node{Name: "s", GPUs: map[string]int{"v100": 4}, Shards: 8}
	whole := slurm.Node{Name: "w", GPUs: map[string]int{"a100": 2}}
	for _, c := range []struct {
		name          string
		nodes         []slurm.Node
		wantM, wantSh string
	}{
		{"both", []slurm.Node{mig, sh, whole}, "m", "s"},
		{"slices only", []slurm.Node{mig, whole}, "m", ""},
		{"shards only", []slurm.Node{sh, whole}, "", "s"},
	} {
		if m, s := migAndShards(c.nodes); m != c.wantM || s != c.wantSh {
			t.Errorf("%s: %q %q, want %q %q", c.name, m, s, c.wantM, c.wantSh)
		}
	}
}
