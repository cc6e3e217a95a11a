// Package nvmlgpu samples GPUs through NVIDIA's NVML (go-nvml, which
// dlopens libnvidia-ml.so.1 at run time, so nothing links against the
// driver at build time).
//
// Error handling follows go-nvlib: every nvml.Return is checked. "Not
// supported" (and a symbol missing from an old driver) means the metric is
// absent on that device: it is left nil, remembered, and not asked for
// again. Any other error is recorded in the device's Problems and the other
// metrics are still read.
package nvmlgpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/rota-hpc/rota/agent/gpu"
	"github.com/rota-hpc/rota/wire"
)

// Backend is the NVML GPU backend.
type Backend struct {
	lib nvml.Interface

	mu sync.Mutex
	// absent[uuid][metric] is set once a device said "not supported".
	absent map[string]map[string]bool
	// lastSeen is the newest process-utilisation timestamp per device, so
	// each call asks only for newer samples.
	lastSeen map[string]uint64
	gpm      map[string]*gpmState
}

// Open loads the system's NVML and initialises it. With no NVML library on
// the node it returns an error wrapping gpu.ErrNoGPU.
func Open() (*Backend, error) { return New(nvml.New()) }

// New initialises lib (a real library or a go-nvml mock) and returns a
// backend over it.
func New(lib nvml.Interface) (*Backend, error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("loading NVML (libnvidia-ml.so.1): %w: no NVIDIA driver library on this node", gpu.ErrNoGPU)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("initialising NVML: %w: the NVIDIA kernel driver is not loaded", gpu.ErrNoGPU)
	default:
		return nil, fmt.Errorf("initialising NVML: %w", ret)
	}
	return &Backend{
		lib:      lib,
		absent:   map[string]map[string]bool{},
		lastSeen: map[string]uint64{},
		gpm:      map[string]*gpmState{},
	}, nil
}

// Name implements gpu.Backend.
func (b *Backend) Name() string { return "nvml" }

// Close shuts NVML down.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.gpm {
		g.free()
	}
	b.gpm = map[string]*gpmState{}
	if ret := b.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("shutting NVML down: %w", ret)
	}
	return nil
}

// Sample implements gpu.Backend.
func (b *Backend) Sample(ctx context.Context) ([]wire.GPUSample, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ret := b.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("counting GPUs through NVML: %w", ret)
	}
	out := make([]wire.GPUSample, 0, n)
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		dev, ret := b.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			out = append(out, wire.GPUSample{Index: i, Problems: []string{fmt.Sprintf("getting a handle for GPU %d: %v", i, ret)}})
			continue
		}
		s := b.sampleDevice(dev, i, nil)
		migs := b.sampleMIG(dev, &s)
		out = append(out, s)
		out = append(out, migs...)
	}
	return out, nil
}

// ok sorts one NVML answer: true on success; on "not supported" it
// remembers the metric as absent; anything else becomes a problem.
func (b *Backend) ok(s *wire.GPUSample, metric string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		if s.UUID != "" {
			m := b.absent[s.UUID]
			if m == nil {
				m = map[string]bool{}
				b.absent[s.UUID] = m
			}
			m[metric] = true
		}
		return false
	default:
		s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", metric, ret))
		return false
	}
}

func (b *Backend) skip(s *wire.GPUSample, metric string) bool {
	return s.UUID != "" && b.absent[s.UUID][metric]
}

func (b *Backend) sampleDevice(dev nvml.Device, index int, mig *wire.MIGInfo) wire.GPUSample {
	s := wire.GPUSample{Index: index, MIG: mig}
	if uuid, ret := dev.GetUUID(); b.ok(&s, "uuid", ret) {
		s.UUID = uuid
	}
	if !b.skip(&s, "name") {
		if name, ret := dev.GetName(); b.ok(&s, "name", ret) {
			s.Name = name
		}
	}
	if !b.skip(&s, "memory") {
		if m, ret := dev.GetMemoryInfo(); b.ok(&s, "memory", ret) {
			s.MemoryTotalBytes, s.MemoryUsedBytes = ptr(m.Total), ptr(m.Used)
		}
	}
	if !b.skip(&s, "utilization") {
		if u, ret := dev.GetUtilizationRates(); b.ok(&s, "utilization", ret) {
			s.UtilGPUPercent, s.UtilMemPercent = ptr(u.Gpu), ptr(u.Memory)
		}
	}
	if !b.skip(&s, "sm_clock") {
		if c, ret := dev.GetClockInfo(nvml.CLOCK_SM); b.ok(&s, "sm_clock", ret) {
			s.SMClockMHz = ptr(c)
		}
	}
	if !b.skip(&s, "power") {
		if mw, ret := dev.GetPowerUsage(); b.ok(&s, "power", ret) {
			s.PowerWatts = ptr(float64(mw) / 1000)
		}
	}
	if !b.skip(&s, "temperature") {
		if t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); b.ok(&s, "temperature", ret) {
			s.TemperatureC = ptr(t)
		}
	}
	if !b.skip(&s, "pcie_tx") {
		if kb, ret := dev.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES); b.ok(&s, "pcie_tx", ret) {
			s.PCIeTxBytesPerS = ptr(uint64(kb) * 1024)
		}
	}
	if !b.skip(&s, "pcie_rx") {
		if kb, ret := dev.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES); b.ok(&s, "pcie_rx", ret) {
			s.PCIeRxBytesPerS = ptr(uint64(kb) * 1024)
		}
	}
	b.sampleGPM(dev, &s)
	return s
}

// sampleProcesses fills s.Processes from the compute processes and the
// per-process utilisation samples.
func (b *Backend) sampleProcesses(dev nvml.Device, s *wire.GPUSample) {
	if b.skip(s, "processes") {
		return
	}
	procs, ret := dev.GetComputeRunningProcesses()
	if !b.ok(s, "processes", ret) {
		return
	}
	if len(procs) == 0 {
		return
	}
	util := map[uint32]nvml.ProcessUtilizationSample{}
	if !b.skip(s, "process_utilization") {
		samples, ret := dev.GetProcessUtilization(b.lastSeen[s.UUID])
		switch {
		case ret == nvml.ERROR_NOT_FOUND:
			// No sample newer than lastSeen: the processes were idle.
		case b.ok(s, "process_utilization", ret):
			for _, p := range samples {
				if p.TimeStamp > b.lastSeen[s.UUID] {
					b.lastSeen[s.UUID] = p.TimeStamp
				}
				if old, seen := util[p.Pid]; !seen || p.TimeStamp >= old.TimeStamp {
					util[p.Pid] = p
				}
			}
		}
	}
	for _, p := range procs {
		gp := wire.GPUProcess{PID: p.Pid, GPUIndex: s.Index}
		// NVML reports VALUE_NOT_AVAILABLE (all ones) when it may not say,
		// e.g. without permission inside a container.
		if p.UsedGpuMemory != ^uint64(0) {
			gp.UsedMemoryBytes = ptr(p.UsedGpuMemory)
		}
		if u, ok := util[p.Pid]; ok {
			gp.SMUtilPercent = ptr(u.SmUtil)
		} else if !b.skip(s, "process_utilization") {
			gp.SMUtilPercent = ptr(uint32(0))
		}
		s.Processes = append(s.Processes, gp)
	}
}

// sampleMIG returns one sample per MIG device of a GPU in MIG mode, with
// that device's processes; in MIG mode the parent carries no processes so
// they are not counted twice. Without MIG, the parent gets the processes.
func (b *Backend) sampleMIG(dev nvml.Device, parent *wire.GPUSample) []wire.GPUSample {
	if b.skip(parent, "mig") {
		b.sampleProcesses(dev, parent)
		return nil
	}
	cur, _, ret := dev.GetMigMode()
	if !b.ok(parent, "mig", ret) || cur != nvml.DEVICE_MIG_ENABLE {
		b.sampleProcesses(dev, parent)
		return nil
	}
	max, ret := dev.GetMaxMigDeviceCount()
	if !b.ok(parent, "mig_count", ret) {
		return nil
	}
	var out []wire.GPUSample
	for j := 0; j < max; j++ {
		m, ret := dev.GetMigDeviceHandleByIndex(j)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // no MIG device in this slot
		}
		if !b.ok(parent, fmt.Sprintf("mig %d", j), ret) {
			continue
		}
		info := &wire.MIGInfo{Index: j, ParentUUID: parent.UUID}
		if gi, ret := m.GetGpuInstanceId(); ret == nvml.SUCCESS {
			info.GPUInstanceID = uint32(gi)
		}
		if ci, ret := m.GetComputeInstanceId(); ret == nvml.SUCCESS {
			info.ComputeInstance = uint32(ci)
		}
		s := b.sampleDevice(m, parent.Index, info)
		info.Profile = migProfile(s.Name)
		b.sampleProcesses(m, &s)
		out = append(out, s)
	}
	return out
}

// migProfile is the profile in a MIG device's name ("NVIDIA A100-SXM4-40GB
// MIG 3g.20gb" -> "3g.20gb"; "1c.3g.20gb" and "1g.10gb+me" as they come);
// "" when the name has none.
func migProfile(name string) string {
	i := strings.LastIndex(name, " MIG ")
	if i < 0 {
		return ""
	}
	p := strings.ToLower(strings.TrimSpace(name[i+len(" MIG "):]))
	if strings.ContainsAny(p, " \t") {
		return ""
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// IsNoGPU reports whether err means there is no GPU library at all.
func IsNoGPU(err error) bool { return errors.Is(err, gpu.ErrNoGPU) }

var _ gpu.Backend = (*Backend)(nil)
