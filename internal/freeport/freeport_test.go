package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestConsecutive(t *testing.T) {
	base, err := Consecutive(5)
	if err != nil {
		t.Fatal(err)
	}
	for p := base; p < base+5; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		l.Close()
	}
	// A port in use is never part of the answer.
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if allFree(base, 1) {
		t.Fatalf("port %d is taken but reported free", base)
	}
}

// Runs start below the ephemeral range, so no outgoing connection can be
// given one of their ports before the daemon listens.
func TestConsecutiveBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 50 {
		base, err := Consecutive(6)
		if err != nil {
			t.Fatal(err)
		}
		if base+6 > low && low > 21000 {
			t.Fatalf("run %d..%d reaches the ephemeral range starting at %d", base, base+5, low)
		}
	}
}
