package slurmtime

import "testing"

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in   string
		min  uint32
		back string
	}{
		{"30", 30, "00:30:00"},
		{"1:30:00", 90, "01:30:00"},
		{"2-00:00:00", 2880, "2-00:00:00"},
		{"1-12", 2160, "1-12:00:00"},
		{"0-06:15", 375, "06:15:00"},
		{"5:30", 6, "00:06:00"}, // M:S rounds up
		{"UNLIMITED", Unlimited, "UNLIMITED"},
	}
	for _, tc := range tests {
		got, err := Parse(tc.in)
		if err != nil || got != tc.min {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.min)
			continue
		}
		if f := Format(got); f != tc.back {
			t.Errorf("Format(%d) = %q, want %q", got, f, tc.back)
		}
	}
	for _, bad := range []string{"", "x", "1:2:3:4", "a-1", "N/A", "-1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
