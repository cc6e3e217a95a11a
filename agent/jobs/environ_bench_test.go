package jobs

import (
	"os/exec"
	"strconv"
	"testing"
)

// BenchmarkEnvironScan: one scan of the real /proc with 300 job processes
// (and whatever else runs): a new scanner each scan, which reads every
// environment (fresh), against one that remembers the processes it read
// (remembering).
//
//	go test -run '^$' -bench EnvironScan ./agent/jobs/
func BenchmarkEnvironScan(b *testing.B) {
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	for i := 0; i < 300; i++ {
		c := exec.Command("sleep", "300")
		c.Env = []string{"SLURM_JOB_ID=" + strconv.Itoa(4000000000+i), "SLURMD_NODENAME=node-" + strconv.Itoa(i%66)}
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	b.Run("fresh", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if len((&EnvironScanner{}).Scan()) < 300 {
				b.Fatal("jobs missing")
			}
		}
	})
	b.Run("remembering", func(b *testing.B) {
		var s EnvironScanner
		for i := 0; i < b.N; i++ {
			if len(s.Scan()) < 300 {
				b.Fatal("jobs missing")
			}
		}
	})
}
