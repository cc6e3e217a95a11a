// Package host samples the node itself through gopsutil: CPU, memory and
// load. A part that cannot be read is left out of the sample and named in
// the returned problems; the rest is still reported.
package host

import (
	"context"
	"fmt"
	"runtime"

	"github.com/shirou/gopsutil/v3/cpu"
	"github.com/shirou/gopsutil/v3/host"
	"github.com/shirou/gopsutil/v3/load"
	"github.com/shirou/gopsutil/v3/mem"

	"github.com/rota-hpc/rota/wire"
)

// Sampler reads the host. CPU percent is measured between two calls, so
// the first sample has none.
type Sampler struct {
	last *cpu.TimesStat
}

// Sample reads CPU, memory and load.
func (s *Sampler) Sample(ctx context.Context) (wire.HostSample, []string) {
	var out wire.HostSample
	var problems []string
	out.Cores = runtime.NumCPU()
	if t, err := cpu.TimesWithContext(ctx, false); err != nil || len(t) == 0 {
		problems = append(problems, fmt.Sprintf("host cpu: %v", err))
	} else {
		if s.last != nil {
			if p, ok := busyPercent(*s.last, t[0]); ok {
				out.CPUPercent = &p
			}
		}
		s.last = &t[0]
	}
	if m, err := mem.VirtualMemoryWithContext(ctx); err != nil {
		problems = append(problems, fmt.Sprintf("host memory: %v", err))
	} else {
		out.MemTotalBytes, out.MemUsedBytes, out.MemAvailBytes = m.Total, m.Used, m.Available
	}
	if l, err := load.AvgWithContext(ctx); err != nil {
		problems = append(problems, fmt.Sprintf("host load: %v", err))
	} else {
		out.Load1, out.Load5, out.Load15 = &l.Load1, &l.Load5, &l.Load15
	}
	if up, err := host.UptimeWithContext(ctx); err == nil {
		out.UptimeSeconds = up
	}
	return out, problems
}

func total(t cpu.TimesStat) (all, busy float64) {
	all = t.User + t.System + t.Idle + t.Nice + t.Iowait + t.Irq + t.Softirq + t.Steal
	busy = all - t.Idle - t.Iowait
	return all, busy
}

func busyPercent(a, b cpu.TimesStat) (float64, bool) {
	a1, b1 := total(a)
	a2, b2 := total(b)
	if a2 <= a1 {
		return 0, false
	}
	p := (b2 - b1) / (a2 - a1) * 100
	if p < 0 {
		p = 0
	}
	if p > 100 {
		p = 100
	}
	return p, true
}
