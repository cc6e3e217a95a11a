// Package freeport finds runs of free loopback TCP ports, so a test
// cluster (slurmctld, several slurmd, NATS) never collides with a demo
// cluster or another checkout's tests on the same machine.
package freeport

import (
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ClaimDir holds a file per claimed port, named by the port, holding the
// claiming process's pid: under /tmp, which the Slurm releases' chroots
// share with the host (scripts/slurm-release), and with one pid space.
var ClaimDir = filepath.Join(os.TempDir(), "rota-freeport")

// Consecutive returns the first of n consecutive ports that are free on
// 127.0.0.1 now, chosen at random below the kernel's ephemeral range
// (ip_local_port_range; 20000 to 32767 by default).
//
// Why below it: a port in the ephemeral range can be handed to an
// outgoing connection between this check and the daemon's listen. CI lost
// a run to that: the installed controller's NATS port (36184) was taken
// while the test cluster's agents were already dialling it.
//
// Free now is not enough: a cluster may not listen on all its ports yet
// (a web view or a controller started later), and another test binary on
// the host (another release's suite, another checkout) could be handed
// the same ones meanwhile. So each port returned is also claimed, in
// ClaimDir, for as long as the calling process lives, and a port another
// live process claimed is never returned.
func Consecutive(n int) (int, error) {
	lo, hi := window(n)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for try := 0; try < 200; try++ {
		base := lo + rng.Intn(hi-lo)
		if allFree(base, n) && claim(base, n) {
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

// claim takes ports base..base+n-1 for this process, or none of them.
func claim(base, n int) bool {
	if err := os.MkdirAll(ClaimDir, 0o1777); err != nil {
		return true // no claims possible: free is the best there is
	}
	for p := base; p < base+n; p++ {
		if !claimOne(p) {
			for q := base; q < p; q++ {
				os.Remove(claimPath(q))
			}
			return false
		}
	}
	return true
}

func claimPath(p int) string { return filepath.Join(ClaimDir, strconv.Itoa(p)) }

// claimOne claims port p, taking over a claim whose process has ended.
func claimOne(p int) bool {
	me := strconv.Itoa(os.Getpid())
	for try := 0; try < 2; try++ {
		f, err := os.OpenFile(claimPath(p), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, werr := f.WriteString(me)
			f.Close()
			return werr == nil
		}
		if !errors.Is(err, os.ErrExist) {
			return true // cannot claim here: free is the best there is
		}
		b, _ := os.ReadFile(claimPath(p))
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if perr == nil && (pid == os.Getpid() || alive(pid)) {
			return false
		}
		os.Remove(claimPath(p)) // its process is gone (or the file half written)
	}
	return false
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
