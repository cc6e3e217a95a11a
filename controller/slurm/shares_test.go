package slurm

import (
	"math"
	"testing"
)

func TestParseShares(t *testing.T) {
	for _, c := range []struct {
		name string
		out  string
		want map[string]float64 // nil: an error
	}{
		// Captured from the dev cluster (22.05.8, `sshare -a -P -n -o
		// Account,User,NormShares`): lab-a 3 shares, lab-b 1, root's own
		// user 1.
		{"flat", "root||0.000000\n root|root|0.200000\n lab-a||0.600000\n  lab-a|rota-a|1.000000\n lab-b||0.200000\n  lab-b|rota-b|1.000000\n",
			map[string]float64{"lab-a": 1, "lab-b": 1.0 / 3}},
		{"nested accounts multiply down the tree",
			"root||0.000000\n phys||0.500000\n  astro||0.250000\n   astro|ann|1.000000\n  hep||0.750000\n chem||0.500000\n",
			map[string]float64{"phys": 1, "astro": 0.25, "hep": 0.75, "chem": 1}},
		{"no accounts", "", nil},
		{"bad share", "root||0\n a||x\n", nil},
		{"short line", "root\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseShares(c.out)
			if c.want == nil {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k, w := range c.want {
				if math.Abs(got[k]-w) > 1e-9 {
					t.Errorf("%s: %g, want %g (all %v)", k, got[k], w, got)
				}
			}
		})
	}
}
