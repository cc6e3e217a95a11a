// Package fakenvml is a whole-machine NVML fake for tests and benchmarks:
// go-nvml's DGX A100 mock with the sampling calls the agent makes filled in
// the way a real driver answers them. Tests change a device's fields, or
// replace one of its Func fields, to model another GPU or a failure.
package fakenvml

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// Machine is a fake node with eight A100s.
type Machine struct {
	*dgxa100.Server
	GPUs []*GPU
}

// GPU is one fake device and the values it reports.
type GPU struct {
	*dgxa100.Device
	mu           sync.Mutex
	Util         nvml.Utilization
	MemUsed      uint64
	SMClockMHz   uint32
	PowerMilliW  uint32
	TempC        uint32
	PCIeTxKBps   uint32
	PCIeRxKBps   uint32
	Procs        []nvml.ProcessInfo
	ProcSMUtil   map[uint32]uint32 // pid -> SM %
	sampleTimeUs uint64
}

// New returns a machine with n (1-8) A100-like GPUs, every metric supported
// except GPM (Ampere has none), as a real A100 reports.
func New(n int) *Machine {
	s := dgxa100.New()
	m := &Machine{Server: s}
	for i := 0; i < n; i++ {
		d := s.Devices[i].(*dgxa100.Device)
		g := &GPU{Device: d, SMClockMHz: 1410, PowerMilliW: 60000, TempC: 33, ProcSMUtil: map[uint32]uint32{}}
		g.install()
		m.GPUs = append(m.GPUs, g)
	}
	s.Devices = make([]nvml.Device, len(m.GPUs))
	for i, g := range m.GPUs {
		s.Devices[i] = g.Device
	}
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return len(m.GPUs), nvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(m.GPUs) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return m.GPUs[i].Device, nvml.SUCCESS
	}
	return m
}

// SetLoad sets a device's utilisation and the processes on it, each with
// its used memory and SM utilisation.
func (g *GPU) SetLoad(util uint32, procs map[uint32][2]uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.Util = nvml.Utilization{Gpu: util, Memory: util / 2}
	g.Procs = g.Procs[:0]
	g.ProcSMUtil = map[uint32]uint32{}
	g.MemUsed = 0
	for pid, v := range procs {
		g.Procs = append(g.Procs, nvml.ProcessInfo{Pid: pid, UsedGpuMemory: v[0], GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF})
		g.ProcSMUtil[pid] = uint32(v[1])
		g.MemUsed += v[0]
	}
	if util > 0 {
		g.PowerMilliW = 60000 + 3000*util
	}
}

func (g *GPU) install() {
	d := g.Device
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return nvml.Memory{Total: d.MemoryInfo.Total, Used: g.MemUsed, Free: d.MemoryInfo.Total - g.MemUsed}, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.Util, nvml.SUCCESS
	}
	d.GetClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		if t != nvml.CLOCK_SM {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return g.SMClockMHz, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return g.PowerMilliW, nvml.SUCCESS }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return g.TempC, nvml.SUCCESS }
	d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
		if c == nvml.PCIE_UTIL_TX_BYTES {
			return g.PCIeTxKBps, nvml.SUCCESS
		}
		return g.PCIeRxKBps, nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return append([]nvml.ProcessInfo(nil), g.Procs...), nvml.SUCCESS
	}
	// Like the driver: samples newer than lastSeen, or NOT_FOUND when none.
	d.GetProcessUtilizationFunc = func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.sampleTimeUs += 1_000_000
		var out []nvml.ProcessUtilizationSample
		for _, p := range g.Procs {
			if g.sampleTimeUs > lastSeen {
				out = append(out, nvml.ProcessUtilizationSample{Pid: p.Pid, TimeStamp: g.sampleTimeUs, SmUtil: g.ProcSMUtil[p.Pid]})
			}
		}
		if len(out) == 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return out, nvml.SUCCESS
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{IsSupportedDevice: 0}, nvml.SUCCESS
	}
	// Until a test makes MIG devices, every slot is empty.
	d.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
}

// MIGDevice is a fake MIG device of an A100-SXM4-40GB with the given
// profile ("3g.20gb"): like a real one it reports identity, its name
// ("NVIDIA A100-SXM4-40GB MIG 3g.20gb"), memory and processes, and "not
// supported" for utilisation, clocks, power, temperature and PCIe.
func MIGDevice(uuid, profile string, gi, ci int, memTotal, memUsed uint64, procs []nvml.ProcessInfo) *mock.Device {
	ns := func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	return &mock.Device{
		GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc:              func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB MIG " + profile, nvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi, nvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ci, nvml.SUCCESS },
		GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: memTotal, Used: memUsed}, nvml.SUCCESS },
		GetUtilizationRatesFunc:  func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED },
		GetClockInfoFunc:         func(nvml.ClockType) (uint32, nvml.Return) { return ns() },
		GetPowerUsageFunc:        ns,
		GetTemperatureFunc:       func(nvml.TemperatureSensors) (uint32, nvml.Return) { return ns() },
		GetPcieThroughputFunc:    func(nvml.PcieUtilCounter) (uint32, nvml.Return) { return ns() },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return procs, nvml.SUCCESS
		},
		GetProcessUtilizationFunc: func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			return nil, nvml.ERROR_NOT_SUPPORTED
		},
	}
}
