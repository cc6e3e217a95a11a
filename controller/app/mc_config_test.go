package app

import (
	"path/filepath"
	"testing"
	"time"
)

// The multi-cluster keys reach the manager, the bus and the plugins' hold.
func TestLoadConfigMC(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, conf string
		ok         bool
		links      int
		hold       uint32
		domain     string
		inbox      string
	}{
		{"alone", "", true, 0, 0, "", ""},
		{"named, no link", "cluster_name = a\n", true, 0, 60, "", "rota.v1.mc.reply.a"},
		{"joined", "cluster_name = a\nmc_link = a-b:1GB/s:20ms\nmc_leaf_listen = 127.0.0.1:22223\nmc_link_secret_file = /x\nmc_hold = 30s\n",
			true, 1, 30, "a", "rota.v1.mc.reply.a"},
		{"routes off: no hold", "cluster_name = a\nmc_route = false\n", true, 0, 0, "", "rota.v1.mc.reply.a"},
		{"link without a name", "mc_link = a-b:1GB/s\n", false, 0, 0, "", ""},
		{"leaf without a name", "mc_leaf_listen = 127.0.0.1:22223\n", false, 0, 0, "", ""},
		{"bad link", "cluster_name = a\nmc_link = a-b:fast\n", false, 0, 0, "", ""},
		{"bad name", "cluster_name = a.b\n", false, 0, 0, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "controller.conf")
			writeFile(t, p, c.conf)
			cfg, err := LoadConfig(p)
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			b := cfg.bus()
			if len(cfg.MC.Links) != c.links || cfg.Placement.ElsewhereHoldS != c.hold || b.JSDomain != c.domain || b.MCInbox != c.inbox {
				t.Fatalf("links %d hold %d domain %q inbox %q", len(cfg.MC.Links), cfg.Placement.ElsewhereHoldS, b.JSDomain, b.MCInbox)
			}
			if cfg.MC.Tick != 2*time.Second {
				t.Fatalf("tick %v", cfg.MC.Tick)
			}
		})
	}
}
