package app

import (
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/serve"
)

// serve_* reach the manager, the hold reaches the plugins only while a
// manager runs to release it, and bad values are refused.
func TestLoadConfigServe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, conf string
		ok         bool
		want       serve.Config
		hold       uint32
	}{
		{"defaults", "", true, serve.Config{Tick: 10 * time.Second, Lead: 10 * time.Minute, Spread: "nodes", Hold: 30 * time.Second, Priority: 1_200_000, MaxTries: 3}, 30},
		{"set", "serve_tick = 1s\nserve_rollover_lead = 40s\nserve_spread = types\nserve_hold = 20s\nserve_max_tries = 2\nchain_priority = 4294967000\n", true,
			serve.Config{Tick: time.Second, Lead: 40 * time.Second, Spread: "types", Hold: 20 * time.Second, Priority: 4294967000, MaxTries: 2}, 20},
		{"off: no hold", "serve_off = true\nserve_spread = racks\n", true,
			serve.Config{Off: true, Tick: 10 * time.Second, Lead: 10 * time.Minute, Spread: "racks", Hold: 30 * time.Second, Priority: 1_200_000, MaxTries: 3}, 0},
		{"rounds off: no hold", "rounds_off = true\n", true, serve.Config{Tick: 10 * time.Second, Lead: 10 * time.Minute, Spread: "nodes", Hold: 30 * time.Second, Priority: 1_200_000, MaxTries: 3}, 0},
		{"unknown spread", "serve_spread = racks\n", false, serve.Config{}, 0},
		{"lead under two ticks", "serve_tick = 30s\nserve_rollover_lead = 40s\n", false, serve.Config{}, 0},
		{"hold too long", "serve_hold = 1h\n", false, serve.Config{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := ""
			if c.conf != "" {
				p = t.TempDir() + "/c.conf"
				writeFile(t, p, c.conf)
			}
			got, err := LoadConfig(p)
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if got.Serve != c.want || got.Placement.ServeHoldS != c.hold || got.Placement.Rule().ServeHoldS != c.hold {
				t.Fatalf("serve %+v hold %d; want %+v %d", got.Serve, got.Placement.ServeHoldS, c.want, c.hold)
			}
		})
	}
}
