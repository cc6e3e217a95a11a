package freeport

import (
	"net"
	"os"
	"os/exec"
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

// A port claimed by a live process (here pid 1), or by this one before, is
// never handed out again though nothing listens on it; a claim whose
// process has ended is taken over.
func TestClaims(t *testing.T) {
	old := ClaimDir
	ClaimDir = t.TempDir()
	t.Cleanup(func() { ClaimDir = old })
	base, err := Consecutive(3)
	if err != nil {
		t.Fatal(err)
	}
	if claim(base, 3) {
		t.Fatalf("ports %d-%d handed out twice", base, base+2)
	}
	other := base + 10
	if err := os.WriteFile(claimPath(other), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if claim(other, 1) {
		t.Fatalf("port %d claimed by a live process was handed out", other)
	}
	// A process that has ended: a child that ran and was reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(claimPath(other), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if !claim(other, 1) {
		t.Fatalf("port %d's stale claim was not taken over", other)
	}
	// All or nothing: a run that meets a claimed port leaves none claimed.
	if err := os.WriteFile(claimPath(other+12), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if claim(other+10, 3) {
		t.Fatal("a run over a claimed port was claimed")
	}
	if _, err := os.Stat(claimPath(other + 10)); err == nil {
		t.Fatal("a failed run left its first port claimed")
	}
}
