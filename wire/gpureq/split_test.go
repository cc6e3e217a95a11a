package gpureq

import (
	"slices"
	"testing"
)

func TestSplitTop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", []string{""}},
		{"gpu:v100:1", []string{"gpu:v100:1"}},
		{"gpu:v100:2(IDX:0,2),nvme:1", []string{"gpu:v100:2(IDX:0,2)", "nvme:1"}},
		{"gpu:v100:0(IDX:N/A),nvme:0,shard:v100:2(2/2,0/2,0/2,0/2)", []string{"gpu:v100:0(IDX:N/A)", "nvme:0", "shard:v100:2(2/2,0/2,0/2,0/2)"}},
		{"a(b(c,d),e),f", []string{"a(b(c,d),e)", "f"}},
		{"a),b", []string{"a)", "b"}}, // a stray ')' does not swallow what follows
	} {
		if got := SplitTop(c.in); !slices.Equal(got, c.want) {
			t.Errorf("SplitTop(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
