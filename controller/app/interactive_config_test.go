package app

import (
	"maps"
	"testing"
)

func TestLoadConfigInteractiveReserve(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, text string
		want       map[string]int
		bad        bool
	}{
		{"none", "", nil, false},
		{"two types", "interactive_reserve.v100 = 2\ninteractive_reserve.k80 = 1\n", map[string]int{"v100": 2, "k80": 1}, false},
		{"negative", "interactive_reserve.v100 = -1\n", nil, true},
		{"not a type name", "interactive_reserve.v 100 = 1\n", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := t.TempDir() + "/c.conf"
			writeFile(t, path, c.text)
			cfg, err := LoadConfig(path)
			if (err != nil) != c.bad {
				t.Fatalf("err %v, want an error: %v", err, c.bad)
			}
			if c.bad {
				return
			}
			// The rule the plugins get and the round loop keep the same reserve.
			if !maps.Equal(cfg.Placement.InteractiveReserve, c.want) || !maps.Equal(cfg.Rounds.InteractiveReserve, c.want) ||
				!maps.Equal(cfg.Placement.Rule().InteractiveReserve, c.want) {
				t.Fatalf("placement %v rounds %v, want %v", cfg.Placement.InteractiveReserve, cfg.Rounds.InteractiveReserve, c.want)
			}
		})
	}
}
