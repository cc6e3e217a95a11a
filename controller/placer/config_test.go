package placer

import (
	"strings"
	"testing"

	"github.com/rota-hpc/rota/internal/conf"
)

// The rule's keys, read by the part that uses them.
func TestConfigRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		check      func(c Config) bool
		err        string // in Read's error or v.Err
	}{
		{"defaults", "", func(c Config) bool { return c.WalltimeMargin == 1.5 && c.SliceMinMemory == 10<<30 && len(c.Speed) == 0 }, ""},
		{"everything", "retype_typed = true\nwalltime_margin = 2\nwalltime_overhead_min = 0\nspeed.v100 = 3.36\nspeed.a100_3g.20gb = 2\n" +
			"interactive_reserve.k80 = 2\ninteractive_partitions = interactive\nslice_min_gpu_mem = 20GiB\n",
			func(c Config) bool {
				return c.RetypeTyped && c.WalltimeMargin == 2 && c.WalltimeOverheadMin == 0 && c.Speed["v100"] == 3.36 &&
					c.Speed["a100_3g.20gb"] == 2 && c.InteractiveReserve["k80"] == 2 &&
					c.Kinds.Interactive.Partitions[0] == "interactive" && c.SliceMinMemory == 20<<30
			}, ""},
		{"no slice minimum", "slice_min_gpu_mem = 0\n", func(c Config) bool { return c.SliceMinMemory == 0 }, ""},
		{"a bad type name", "speed.v 100 = 2\n", nil, "speed.v 100"},
		{"a bad size", "slice_min_gpu_mem = lots\n", nil, "slice_min_gpu_mem"},
		{"a bad rule", "serve_names = llm-[\n", nil, "llm-["},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := conf.Parse(strings.NewReader(tc.file), "c.conf")
			if err != nil {
				t.Fatal(err)
			}
			c := DefaultConfig()
			err = c.Read(v)
			if err == nil {
				err = v.Err()
			}
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one naming %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.check != nil && !tc.check(c):
				t.Fatalf("read %+v", c)
			}
		})
	}
}
