package conf

import (
	"testing"
	"time"
)

func TestParseWindow(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"7d", 7 * 24 * time.Hour, false},
		{"0", 0, false},
		{"0d", 0, false},
		{"1.5d", 36 * time.Hour, false},
		{"36h", 36 * time.Hour, false},
		{" 2d ", 48 * time.Hour, false},
		{"366d", 366 * 24 * time.Hour, false},
		{"367d", 0, true},
		{"1e300d", 0, true},
		{"-1d", 0, true},
		{"-5h", 0, true},
		{"d", 0, true},
		{"NaNd", 0, true},
		{"week", 0, true},
	}
	for _, c := range cases {
		got, err := ParseWindow(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseWindow(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
	if FormatWindow(7*24*time.Hour) != "7d" || FormatWindow(36*time.Hour) != "36h0m0s" {
		t.Errorf("FormatWindow: %s %s", FormatWindow(7*24*time.Hour), FormatWindow(36*time.Hour))
	}
}
