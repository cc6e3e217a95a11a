package slurmsize

import "testing"

func TestMB(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"16000", 16000, true},
		{"512M", 512, true},
		{"16G", 16384, true},
		{"2t", 2 * 1024 * 1024, true},
		{"1K", 1, true},
		{"1025K", 2, true},
		{" 8G ", 8192, true},
		{"0", 0, true},
		{"", 0, false},
		{"G", 0, false},
		{"-1G", 0, false},
		{"1.5G", 0, false},
		{"16GB", 0, false},
		{"99999999999999999", 0, false},
	}
	for _, tc := range tests {
		got, err := MB(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("MB(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzMB(f *testing.F) {
	for _, s := range []string{"16000", "512M", "16G", "1K", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if mb, err := MB(s); err != nil && mb != 0 {
			t.Fatalf("%q: %d with error %v", s, mb, err)
		}
	})
}
