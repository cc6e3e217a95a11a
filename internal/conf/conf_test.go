package conf

import (
	"strings"
	"testing"
	"time"
)

func TestParseAndRead(t *testing.T) {
	in := `
# comment
nats_url = nats://127.0.0.1:4222   # trailing comment
Deadline_MS = 40
accounts = a, b,,c
enabled = yes
speed = 2.5
`
	v, err := Parse(strings.NewReader(in), "test.conf")
	if err != nil {
		t.Fatal(err)
	}
	var (
		url     string
		d       time.Duration
		accts   []string
		enabled bool
		speed   float64
	)
	v.String("nats_url", &url)
	v.Duration("deadline_ms", &d, time.Millisecond, time.Second)
	v.List("accounts", &accts)
	v.Bool("enabled", &enabled)
	v.Float("speed", &speed, 0, 100)
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	if url != "nats://127.0.0.1:4222" || d != 40*time.Millisecond || strings.Join(accts, "|") != "a|b|c" || !enabled || speed != 2.5 {
		t.Fatalf("got %q %v %v %v %v", url, d, accts, enabled, speed)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no equals", "oops\n", "test.conf:1: want key = value"},
		{"duplicate", "a = 1\na = 2\n", "test.conf:2: a already set on line 1"},
		{"unknown key", "typo = 1\n", `unknown key "typo"`},
		{"bad bool", "enabled = maybe\n", "enabled: want true or false"},
		{"bad duration", "deadline_ms = soon\n", "want a duration"},
		{"duration range", "deadline_ms = 5s\n", "outside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Parse(strings.NewReader(tc.in), "test.conf")
			if err == nil {
				var b bool
				var d time.Duration
				v.Bool("enabled", &b)
				v.Duration("deadline_ms", &d, time.Millisecond, time.Second)
				err = v.Err()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
