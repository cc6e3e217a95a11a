// Package simgpu is a synthetic GPU backend for the dev cluster and demos
// on machines without GPUs: Count GPUs of the node's configured type whose
// per-job activity follows the jobs' reported progress. A job that advanced
// its progress file recently keeps its GPU busy; one that stalled leaves it
// idle with its memory still held.
package simgpu

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rota-hpc/rota/agent/gpu"
	"github.com/rota-hpc/rota/wire"
)

// Job is what the simulator needs of one running job.
type Job struct {
	ID          uint32
	StepsPerSec float64
	// Age is how long ago the job last advanced its progress file.
	Age time.Duration
}

// Backend simulates Count GPUs of Type.
type Backend struct {
	Type  string
	Count int
	Node  string
	// Jobs returns the jobs on this node; called once per Sample.
	Jobs func() []Job
	// Active is how recent progress must be to count as busy (default 15 s).
	Active time.Duration

	mu sync.Mutex
}

// Known GPU types: marketing name and memory, so reports look like the
// real thing. Unknown types get 16 GiB.
var models = map[string]struct {
	name  string
	memGB uint64
	watts float64
}{
	"k80":  {"Tesla K80", 12, 150},
	"p100": {"Tesla P100-PCIE-16GB", 16, 250},
	"v100": {"Tesla V100-SXM2-32GB", 32, 300},
	"t4":   {"Tesla T4", 16, 70},
	"a100": {"NVIDIA A100-SXM4-40GB", 40, 400},
	"h100": {"NVIDIA H100 80GB HBM3", 80, 700},
}

// Name implements gpu.Backend.
func (b *Backend) Name() string { return "sim" }

// Close implements gpu.Backend.
func (b *Backend) Close() error { return nil }

// Sample implements gpu.Backend. Jobs are spread over the GPUs in job ID
// order, one job per GPU while there are enough.
func (b *Backend) Sample(ctx context.Context) ([]wire.GPUSample, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := models[strings.ToLower(b.Type)]
	if !ok {
		m.name, m.memGB, m.watts = "Simulated "+b.Type, 16, 250
	}
	active := b.Active
	if active <= 0 {
		active = 15 * time.Second
	}
	var jobs []Job
	if b.Jobs != nil {
		jobs = b.Jobs()
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
	perGPU := make([][]Job, b.Count)
	for i, j := range jobs {
		if b.Count > 0 {
			perGPU[i%b.Count] = append(perGPU[i%b.Count], j)
		}
	}
	total := m.memGB << 30
	out := make([]wire.GPUSample, 0, b.Count)
	for i := 0; i < b.Count; i++ {
		s := wire.GPUSample{
			Index:            i,
			UUID:             fmt.Sprintf("GPU-sim-%s-%s-%d", wire.AgentToken(b.Node), b.Type, i),
			Name:             m.name + " (simulated)",
			MemoryTotalBytes: ptr(total),
		}
		var used uint64
		var util uint32
		for _, j := range perGPU[i] {
			mem := total * 6 / 10 / uint64(len(perGPU[i]))
			var sm uint32
			if j.Age <= active && j.StepsPerSec > 0 {
				sm = uint32(95 / len(perGPU[i]))
			}
			used += mem
			util += sm
			s.Processes = append(s.Processes, wire.GPUProcess{
				JobID: j.ID, UsedMemoryBytes: ptr(mem), SMUtilPercent: ptr(sm), GPUIndex: i,
			})
		}
		s.MemoryUsedBytes = ptr(used)
		s.UtilGPUPercent = ptr(util)
		s.UtilMemPercent = ptr(util / 2)
		clock := uint32(300)
		if util > 0 {
			clock = 1380
		}
		s.SMClockMHz = ptr(clock)
		s.PowerWatts = ptr(m.watts * (0.15 + 0.85*float64(util)/100))
		s.TemperatureC = ptr(uint32(30 + util/3))
		s.PCIeTxBytesPerS = ptr(uint64(util) << 20)
		s.PCIeRxBytesPerS = ptr(uint64(util) << 21)
		out = append(out, s)
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

var _ gpu.Backend = (*Backend)(nil)
