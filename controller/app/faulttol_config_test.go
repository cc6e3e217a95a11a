package app

import (
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/faulttol"
)

func TestLoadConfigFaultTol(t *testing.T) {
	path := t.TempDir() + "/c.conf"
	for _, tc := range []struct {
		name, conf string
		want       func(faulttol.Config) bool
		bad        bool
	}{
		{"defaults", "", func(c faulttol.Config) bool {
			return !c.Off && c.NodeMTBF == 0 && c.PriorMTBF == 720*time.Hour && c.InitialCost == time.Minute &&
				c.MinInterval == 5*time.Minute && c.MaxInterval == 24*time.Hour && c.Tick == 10*time.Second && c.Grace == time.Minute
		}, false},
		{"every key", "checkpoint_periodic = false\nnode_mtbf = 5m\nnode_mtbf_prior = 100h\ncheckpoint_cost_initial = 2s\n" +
			"checkpoint_interval_min = 5s\ncheckpoint_interval_max = 1h\nfaulttol_tick = 1s\ncheckpoint_grace = 10s\n", func(c faulttol.Config) bool {
			return c.Off && c.NodeMTBF == 5*time.Minute && c.PriorMTBF == 100*time.Hour && c.InitialCost == 2*time.Second &&
				c.MinInterval == 5*time.Second && c.MaxInterval == time.Hour && c.Tick == time.Second && c.Grace == 10*time.Second
		}, false},
		{"min above max", "checkpoint_interval_min = 2h\ncheckpoint_interval_max = 1h\n", nil, true},
		{"not a duration", "node_mtbf = often\n", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, path, tc.conf)
			c, err := LoadConfig(path)
			if tc.bad {
				if err == nil {
					t.Errorf("%q accepted", tc.conf)
				}
				return
			}
			if err != nil || !tc.want(c.FaultTol) {
				t.Errorf("%+v, %v", c.FaultTol, err)
			}
		})
	}
}
