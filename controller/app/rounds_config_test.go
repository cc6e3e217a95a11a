package app

import "testing"

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
