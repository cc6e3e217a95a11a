package multicluster

import (
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/conf"
)

// The manager's keys: the name, links, the link's measure and the
// checkpoint transfer: defaults, set, refused.
func TestConfigRead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, conf string
		ok         bool
		probe      time.Duration
		maxAge     time.Duration
		maxGB      float64
		dir        string
	}{
		{"defaults", "cluster_name = a\n", true, 5 * time.Minute, 0, 100, ""},
		{"dev", "cluster_name = a\nmc_probe_interval = 10s\nmc_link_max_age = 1m\nmc_transfer_max_gb = 2.5\nmc_transfer_dir = /var/lib/rota/mc-in\n",
			true, 10 * time.Second, time.Minute, 2.5, "/var/lib/rota/mc-in"},
		{"probes off", "cluster_name = a\nmc_probe_interval = 0\n", true, 0, 0, 100, ""},
		{"probing too often", "cluster_name = a\nmc_probe_interval = 100ms\n", false, 0, 0, 0, ""},
		{"negative probe interval", "cluster_name = a\nmc_probe_interval = -1s\n", false, 0, 0, 0, ""},
		{"no transfer at all", "cluster_name = a\nmc_transfer_max_gb = 0\n", false, 0, 0, 0, ""},
		{"not a number", "cluster_name = a\nmc_transfer_max_gb = lots\n", false, 0, 0, 0, ""},
		{"link without a name", "mc_link = a-b:1GB/s\n", false, 0, 0, 0, ""},
		{"bad link", "cluster_name = a\nmc_link = a-b:fast\n", false, 0, 0, 0, ""},
		{"bad name", "cluster_name = a.b\n", false, 0, 0, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v, err := conf.Parse(strings.NewReader(c.conf), "controller.conf")
			if err != nil {
				t.Fatal(err)
			}
			m := DefaultConfig()
			if err = m.Read(v); err == nil {
				err = v.Err()
			}
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if m.ProbeInterval != c.probe || m.LinkMaxAge != c.maxAge || m.TransferMaxGB != c.maxGB || m.TransferDir != c.dir {
				t.Fatalf("probe %v max age %v max GB %g dir %q", m.ProbeInterval, m.LinkMaxAge, m.TransferMaxGB, m.TransferDir)
			}
		})
	}
}
