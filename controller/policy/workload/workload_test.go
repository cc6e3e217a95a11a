package workload

import (
	"math"
	"sort"
	"strings"
	"testing"
)

const table = "../../../../shared/data/gavel/simulation_throughputs.json"

// The pairs Gavel measured: two single-GPU jobs sharing a V100 get 1.35
// times a GPU's work done at the median (74% of ordered pairs above 1),
// 1.13 on a P100, 1.04 on a K80 (issue #38's figures, from the table).
func TestPairRates(t *testing.T) {
	t.Parallel()
	tab, err := Load(table, []string{"v100", "p100", "k80"})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[int]float64{0: 1.349, 1: 1.128, 2: 1.038} {
		var gains []float64
		for _, a := range tab.JobTypes {
			for _, b := range tab.JobTypes {
				r := tab.PairRates(a, b, 1)
				if r == nil {
					t.Fatalf("no pair %s / %s", a, b)
				}
				ra, rb := tab.Rates(a, 1)[k], tab.Rates(b, 1)[k]
				g := 0.0
				if r[k][0] > 0 && ra > 0 && rb > 0 {
					g = r[k][0]/ra + r[k][1]/rb
				}
				gains = append(gains, g)
			}
		}
		sort.Float64s(gains)
		med := (gains[len(gains)/2-1] + gains[len(gains)/2]) / 2
		if math.Abs(med-want) > 0.001 {
			t.Errorf("%s: median combined throughput %.4f, want %.3f", tab.GPUTypes[k], med, want)
		}
	}
	if tab.PairRates("nope", "ResNet-18 (batch size 16)", 1) != nil {
		t.Error("a pair of an unknown job type has rates")
	}
}

// Types the table never measured: a MIG slice from its whole GPU's rates
// times its share; a whole type from a given derivation; anything else is
// an error that says how to derive it.
func TestDerivedTypes(t *testing.T) {
	t.Parallel()
	tab, err := LoadDerived(table, []string{"v100", "a100", "a100_3g.20gb", "v100_1g.5gb"}, map[string]Derivation{"a100": {From: "v100", Factor: 2}})
	if err != nil {
		t.Fatal(err)
	}
	job := tab.JobTypes[0]
	r := tab.Rates(job, 1)
	if math.Abs(r[1]-2*r[0]) > 1e-9 || math.Abs(r[2]-2*r[0]*3/7) > 1e-9 || math.Abs(r[3]-r[0]/7) > 1e-9 {
		t.Fatalf("%s: rates %v, want v100, 2x, 2x 3/7, 1/7", job, r)
	}
	if !strings.Contains(tab.Derived["a100_3g.20gb"], "v100 x 2 (given) x 3/7") || tab.Derived["v100"] != "" {
		t.Errorf("derived: %v", tab.Derived)
	}
	if _, err := Load(table, []string{"v100", "a100"}); err == nil || !strings.Contains(err.Error(), "derive it") {
		t.Errorf("an unmeasured whole type: %v", err)
	}
	if _, err := Load(table, []string{"h100_3g.40gb"}); err == nil {
		t.Error("a slice of an unmeasured GPU was derived from nothing")
	}
}

func TestParseDerivations(t *testing.T) {
	t.Parallel()
	got, err := ParseDerivations([]string{"a100=v100*2", "h100=v100*3.5"})
	if err != nil || got["a100"] != (Derivation{"v100", 2}) || got["h100"] != (Derivation{"v100", 3.5}) || len(got) != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"a100", "a100=v100", "=v100*2", "a100=*2", "a100=v100*0", "a100=v100*-1", "a100=v100*x", "a100=v100*Inf"} {
		if _, err := ParseDerivations([]string{bad}); err == nil || !strings.Contains(err.Error(), "want TYPE=FROM*FACTOR") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

// TestShared: the round loop's view of a pair (rounds.PairTable) is the
// table's, whichever case the user wrote the model in, and says no where
// the table has no pair or the type no measurement.
func TestShared(t *testing.T) {
	t.Parallel()
	tab, err := LoadAll(table)
	if err != nil {
		t.Fatal(err)
	}
	a, b := tab.JobTypes[0], tab.JobTypes[1]
	pr, sa, sb := tab.PairRates(a, b, 1), tab.Rates(a, 1), tab.Rates(b, 1)
	k := -1
	for i, g := range tab.GPUTypes {
		if g == "v100" {
			k = i
		}
	}
	for _, c := range []struct {
		name, a, b, typ string
		ok              bool
	}{
		{"as written", a, b, "v100", pr[k][0] > 0},
		{"any case", strings.ToUpper(a), strings.ToLower(b), "v100", pr[k][0] > 0},
		{"unknown model", a, "no such model", "v100", false},
		{"unknown type", a, b, "h100", false},
	} {
		ra, rb, xa, xb, ok := tab.Shared(c.a, c.b, c.typ)
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v", c.name, ok, c.ok)
			continue
		}
		if ok && (ra != pr[k][0] || rb != pr[k][1] || xa != sa[k] || xb != sb[k]) {
			t.Errorf("%s: %v %v %v %v, want %v %v %v %v", c.name, ra, rb, xa, xb, pr[k][0], pr[k][1], sa[k], sb[k])
		}
	}
}
