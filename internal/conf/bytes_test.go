package conf

import "testing"

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]uint64{"16GiB": 16 << 30, "16G": 16 << 30, "40 GB": 40 << 30, "512M": 512 << 20,
		"1.5T": 3 << 39, "1024": 1024, "2KiB": 2048} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "G", "-1G", "16Q", "1e400G"} {
		if _, err := ParseBytes(s); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", s)
		}
	}
}
