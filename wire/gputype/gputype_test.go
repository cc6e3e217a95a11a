package gputype

import (
	"testing"
)

func TestParseSlice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Slice
		ok   bool
	}{
		{"a100_3g.20gb", Slice{Whole: "a100", Compute: 3, Of: 7, MemoryBytes: 20 << 30}, true},
		{"a100_1g.5gb", Slice{Whole: "a100", Compute: 1, Of: 7, MemoryBytes: 5 << 30}, true},
		{"nvidia_a100_2g.10gb", Slice{Whole: "a100", Compute: 2, Of: 7, MemoryBytes: 10 << 30}, true},
		{"h100_1g.10gb+me", Slice{Whole: "h100", Compute: 1, Of: 7, MemoryBytes: 10 << 30}, true},
		{"A100_7G.40GB", Slice{Whole: "a100", Compute: 7, Of: 7, MemoryBytes: 40 << 30}, true},
		{"a30_2g.12gb", Slice{Whole: "a30", Compute: 2, Of: 4, MemoryBytes: 12 << 30}, true},
		{"a100_1c.3g.20gb", Slice{Whole: "a100", Compute: 1, Of: 7, MemoryBytes: 20 << 30}, true},
		{"a100-80gb_3g.40gb", Slice{Whole: "a100-80gb", Compute: 3, Of: 7, MemoryBytes: 40 << 30}, true},
		{"a100", Slice{}, false},
		{"v100", Slice{}, false},
		{"a100_8g.40gb", Slice{}, false}, // more than the GPU has
		{"a30_5g.24gb", Slice{}, false},
		{"a100_0g.5gb", Slice{}, false},
		{"a100_3g.0gb", Slice{}, false},
		{"a100_4c.3g.20gb", Slice{}, false},
		{"_3g.20gb", Slice{}, false},
		{"a100_3g.20gb.x", Slice{}, false},
	}
	for _, c := range cases {
		got, ok := ParseSlice(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseSlice(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestSpeed(t *testing.T) {
	t.Parallel()
	table := map[string]float64{"a100": 7, "v100": 2.5, "a100_3g.20gb": 3.5, "bad": -1}
	cases := []struct {
		t    string
		want float64
		src  string
	}{
		{"v100", 2.5, FromTable},
		{"a100_3g.20gb", 3.5, FromTable},     // the admin's figure wins
		{"a100_2g.10gb", 2, FromSlice},       // 7 x 2/7
		{"nvidia_a100_1g.5gb", 1, FromSlice}, // 7 x 1/7
		{"h100_3g.40gb", 1, FromDefault},     // its whole GPU's speed unknown
		{"k80", 1, FromDefault},
		{"bad", 1, FromDefault},
	}
	for _, c := range cases {
		got, src := Speed(table, c.t)
		if got != c.want || src != c.src {
			t.Errorf("Speed(%q) = %g, %s; want %g, %s", c.t, got, src, c.want, c.src)
		}
	}
	if got := SpeedBasis(table, "a100_2g.10gb"); got != "2 (MIG slice: a100's 7 x 2/7 of its compute)" {
		t.Errorf("SpeedBasis = %q", got)
	}
}

func TestMemoryAndFits(t *testing.T) {
	t.Parallel()
	conf := map[string]uint64{"v100": 32 << 30}
	meas := map[string]uint64{"v100": 16 << 30, "a100": 40 << 30}
	for _, c := range []struct {
		t    string
		want uint64
		src  string
	}{
		{"v100", 32 << 30, FromTable},
		{"a100", 40 << 30, FromAgents},
		{"a100_3g.20gb", 20 << 30, FromSlice},
		{"k80", 0, FromDefault},
	} {
		if got, src := Memory(c.t, conf, meas); got != c.want || src != c.src {
			t.Errorf("Memory(%q) = %d, %s; want %d, %s", c.t, got, src, c.want, c.src)
		}
	}
	for _, c := range []struct {
		name           string
		t              string
		mem, need, min uint64
		ok             bool
	}{
		{"fits", "a100_3g.20gb", 20 << 30, 10 << 30, 0, true},
		{"too big", "a100_3g.20gb", 20 << 30, 30 << 30, 0, false},
		{"type memory unknown", "k80", 0, 30 << 30, 0, true},
		{"need unknown, slice at the minimum", "a100_3g.20gb", 20 << 30, 0, 20 << 30, true},
		{"need unknown, slice under the minimum", "a100_1g.5gb", 5 << 30, 0, 10 << 30, false},
		{"need unknown, whole GPU under the minimum", "k80", 12 << 30, 0, 20 << 30, true},
		{"need unknown, no minimum", "a100_1g.5gb", 5 << 30, 0, 0, true},
	} {
		if ok, why := Fits(c.t, c.mem, c.need, c.min); ok != c.ok || (ok == (why != "")) {
			t.Errorf("%s: Fits = %v %q, want %v", c.name, ok, why, c.ok)
		}
	}
}

func FuzzParseSlice(f *testing.F) {
	for _, s := range []string{"a100_3g.20gb", "h100_1g.10gb+me", "a30_2g.12gb", "a100_1c.3g.20gb", "v100", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sl, ok := ParseSlice(s)
		if !ok {
			return
		}
		if sl.Compute < 1 || sl.Compute > sl.Of || sl.MemoryBytes == 0 || sl.Whole == "" {
			t.Fatalf("ParseSlice(%q) = %+v", s, sl)
		}
	})
}
