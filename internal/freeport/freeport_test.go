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
