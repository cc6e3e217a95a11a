// Package freeport finds runs of free loopback TCP ports, so a test
// cluster (slurmctld, several slurmd, NATS) never collides with a demo
// cluster or another checkout's tests on the same machine.
package freeport

import (
	"fmt"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Consecutive returns the first of n consecutive ports that are free on
// 127.0.0.1 now, chosen at random below the kernel's ephemeral range
// (ip_local_port_range; 20000 to 32767 by default).
//
// Why below it: a port in the ephemeral range can be handed to an
// outgoing connection between this check and the daemon's listen. CI lost
// a run to that: the installed controller's NATS port (36184) was taken
// while the test cluster's agents were already dialling it.
func Consecutive(n int) (int, error) {
	lo, hi := window(n)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for try := 0; try < 200; try++ {
		base := lo + rng.Intn(hi-lo)
		if allFree(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports on 127.0.0.1 in [%d, %d)", n, lo, hi+n)
}

// window is where a run of n ports may start: [lo, hi).
func window(n int) (lo, hi int) {
	lo, hi = 20000, ephemeralLow()-n
	if hi-lo < 1000 { // an unusual range: fall back below the default one
		lo, hi = 10000, 32768-n
	}
	return lo, hi
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil || v < 1024 {
		return 32768
	}
	return v
}

func allFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
