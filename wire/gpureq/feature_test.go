package gpureq

import "testing"

func TestWithTypeFeature(t *testing.T) {
	for _, c := range []struct {
		user, typ, want string
		ok              bool
	}{
		{"", "v100", "v100", true},
		{" ", "v100", "v100", true},
		{"ib", "v100", "ib&v100", true},
		{"ib&v100", "v100", "ib&v100", true},
		{"ib|eth", "v100", "", false},
		{"[rack1|rack2]", "v100", "", false},
		{"(a&b)", "v100", "", false},
		{"ib*2", "v100", "", false},
		// A choice of types becomes the one chosen, never another.
		{"v100|p100", "p100", "p100", true},
		{"v100|p100", "k80", "", false},
		{"v100||p100", "v100", "", false},
	} {
		got, ok := WithTypeFeature(c.user, c.typ)
		if got != c.want || ok != c.ok {
			t.Errorf("WithTypeFeature(%q, %q) = %q, %v; want %q, %v", c.user, c.typ, got, ok, c.want, c.ok)
		}
	}
}

func TestFeatureType(t *testing.T) {
	isType := func(f string) bool { return f == "v100" || f == "k80" }
	for in, want := range map[string]string{"": "", "ib": "", "ib&v100": "v100", "[k80|v100]": "k80", "(ib)&k80*2": "k80",
		"k80|v100": "", "ib|v100": "v100", "v100|v100": "v100"} {
		if got := FeatureType(in, isType); got != want {
			t.Errorf("FeatureType(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTypeChoice(t *testing.T) {
	t.Parallel()
	isType := func(f string) bool { return f == "v100" || f == "p100" || f == "k80" }
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"v100", nil},
		{"v100|p100", []string{"v100", "p100"}},
		{" k80|v100|p100 ", []string{"k80", "v100", "p100"}},
		{"v100|v100", nil}, // one type: named, not a choice
		{"v100|ib", nil},   // not only types
		{"[v100|p100]", nil},
		{"v100|p100&ib", nil},
		{"v100||p100", nil},
		{"v100|p100*2", nil},
	} {
		got := TypeChoice(c.in, isType)
		if len(got) != len(c.want) {
			t.Errorf("TypeChoice(%q) = %v, want %v", c.in, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("TypeChoice(%q) = %v, want %v", c.in, got, c.want)
			}
		}
	}
}
