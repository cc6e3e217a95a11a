// Package freeport finds runs of free loopback TCP ports, so a test
// cluster (slurmctld, several slurmd, NATS) never collides with a demo
// cluster or another checkout's tests on the same machine.
package freeport

import (
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"time"
)

// Consecutive returns the first of n consecutive ports that are free on
// 127.0.0.1 now, chosen at random in [20000, 40000).
func Consecutive(n int) (int, error) {
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for try := 0; try < 200; try++ {
		base := 20000 + rng.Intn(20000)
		if allFree(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports on 127.0.0.1", n)
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
