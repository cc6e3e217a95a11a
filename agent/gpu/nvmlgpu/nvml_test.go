package nvmlgpu

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/rota-hpc/rota/agent/gpu"
	"github.com/rota-hpc/rota/agent/gpu/nvmlgpu/fakenvml"
	"github.com/rota-hpc/rota/wire"
)

func open(t *testing.T, m *fakenvml.Machine) *Backend {
	t.Helper()
	b, err := New(m)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func sample(t *testing.T, b *Backend) []wire.GPUSample {
	t.Helper()
	s, err := b.Sample(context.Background())
	if err != nil {
		t.Fatalf("Sample: %v", err)
	}
	return s
}

func TestInit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ret    nvml.Return
		noGPU  bool
		wantOK bool
	}{
		{"success", nvml.SUCCESS, false, true},
		{"no library", nvml.ERROR_LIBRARY_NOT_FOUND, true, false},
		{"driver not loaded", nvml.ERROR_DRIVER_NOT_LOADED, true, false},
		{"no permission", nvml.ERROR_NO_PERMISSION, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fakenvml.New(1)
			m.InitFunc = func() nvml.Return { return tc.ret }
			_, err := New(m)
			if (err == nil) != tc.wantOK {
				t.Fatalf("err = %v, want ok=%v", err, tc.wantOK)
			}
			if got := errors.Is(err, gpu.ErrNoGPU); got != tc.noGPU {
				t.Fatalf("errors.Is(ErrNoGPU) = %v, want %v (err %v)", got, tc.noGPU, err)
			}
		})
	}
}

func TestNormalDevices(t *testing.T) {
	m := fakenvml.New(8)
	m.GPUs[2].SetLoad(87, map[uint32][2]uint64{4242: {10 << 30, 80}, 4243: {1 << 30, 7}})
	m.GPUs[2].PCIeTxKBps, m.GPUs[2].PCIeRxKBps = 100, 200
	b := open(t, m)
	got := sample(t, b)
	if len(got) != 8 {
		t.Fatalf("got %d samples, want 8", len(got))
	}
	s := got[2]
	if s.Index != 2 || !strings.HasPrefix(s.UUID, "GPU-") || s.Name != "Mock NVIDIA A100-SXM4-40GB" {
		t.Errorf("identity = %d %q %q", s.Index, s.UUID, s.Name)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"memory total", *s.MemoryTotalBytes, uint64(42949672960)},
		{"memory used", *s.MemoryUsedBytes, uint64(11 << 30)},
		{"gpu util", *s.UtilGPUPercent, uint32(87)},
		{"mem util", *s.UtilMemPercent, uint32(43)},
		{"sm clock", *s.SMClockMHz, uint32(1410)},
		{"power W", *s.PowerWatts, float64(60000+3000*87) / 1000},
		{"temperature", *s.TemperatureC, uint32(33)},
		{"pcie tx", *s.PCIeTxBytesPerS, uint64(100 * 1024)},
		{"pcie rx", *s.PCIeRxBytesPerS, uint64(200 * 1024)},
		{"processes", len(s.Processes), 2},
		{"problems", len(s.Problems), 0},
		{"gpm on ampere", len(s.GPM), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	byPID := map[uint32]wire.GPUProcess{}
	for _, p := range s.Processes {
		byPID[p.PID] = p
	}
	if p := byPID[4242]; p.UsedMemoryBytes == nil || *p.UsedMemoryBytes != 10<<30 || p.SMUtilPercent == nil || *p.SMUtilPercent != 80 || p.GPUIndex != 2 {
		t.Errorf("process 4242 = %+v", p)
	}
	// Ampere is never asked for GPM.
	if n := len(m.GPUs[2].GpmQueryDeviceSupportCalls()); n != 0 {
		t.Errorf("GpmQueryDeviceSupport called %d times on Ampere", n)
	}
}

// A device that does not support some metrics (as a K80 lacks process
// utilisation, a GeForce power and PCIe counters) still reports the others,
// records no problem, and is not asked again.
func TestMissingMetrics(t *testing.T) {
	m := fakenvml.New(2)
	d := m.GPUs[1].Device
	d.Config.Architecture = nvml.DEVICE_ARCH_KEPLER
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetPcieThroughputFunc = func(nvml.PcieUtilCounter) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	m.GPUs[1].SetLoad(50, map[uint32][2]uint64{7: {1 << 20, 0}})
	b := open(t, m)
	for round := 0; round < 3; round++ {
		s := sample(t, b)[1]
		if s.PowerWatts != nil || s.PCIeTxBytesPerS != nil || s.PCIeRxBytesPerS != nil {
			t.Errorf("round %d: unsupported metrics reported: %+v", round, s)
		}
		if s.UtilGPUPercent == nil || *s.UtilGPUPercent != 50 || s.TemperatureC == nil || s.MemoryUsedBytes == nil {
			t.Errorf("round %d: supported metrics missing: %+v", round, s)
		}
		if len(s.Problems) != 0 {
			t.Errorf("round %d: problems %v, want none for 'not supported'", round, s.Problems)
		}
		if len(s.Processes) != 1 || s.Processes[0].SMUtilPercent != nil || *s.Processes[0].UsedMemoryBytes != 1<<20 {
			t.Errorf("round %d: processes = %+v", round, s.Processes)
		}
	}
	if n := len(d.GetPowerUsageCalls()); n != 1 {
		t.Errorf("GetPowerUsage called %d times, want 1 (remembered as absent)", n)
	}
	if n := len(d.GetProcessUtilizationCalls()); n != 1 {
		t.Errorf("GetProcessUtilization called %d times, want 1", n)
	}
	if n := len(m.GPUs[0].GetPowerUsageCalls()); n != 3 {
		t.Errorf("the other GPU's power asked %d times, want 3", n)
	}
}

// NVML errors that start mid-run (a GPU falling off the bus, a driver
// hiccup) show up as problems on that device or sample, never as a crash,
// and sampling recovers when they stop.
func TestErrorsMidRun(t *testing.T) {
	m := fakenvml.New(4)
	b := open(t, m)
	sample(t, b)

	lost := m.GPUs[3].Device
	lost.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	lost.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	s := sample(t, b)
	if got := s[3].Problems; len(got) != 2 || got[0] != "power: ERROR_GPU_IS_LOST" {
		t.Errorf("problems = %q", got)
	}
	if s[3].UtilGPUPercent == nil || s[3].MemoryTotalBytes == nil {
		t.Errorf("other metrics of the failing GPU lost: %+v", s[3])
	}
	if len(s[2].Problems) != 0 {
		t.Errorf("healthy GPU has problems %v", s[2].Problems)
	}
	// Errors are not "not supported": the metric is asked for again.
	lost.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 70000, nvml.SUCCESS }
	if s := sample(t, b); s[3].PowerWatts == nil || *s[3].PowerWatts != 70 {
		t.Errorf("power not read again after recovery: %+v", s[3])
	}

	// A handle that cannot be had is reported for that index only.
	m.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 1 {
			return nil, nvml.ERROR_UNKNOWN
		}
		return m.GPUs[i].Device, nvml.SUCCESS
	}
	s = sample(t, b)
	if len(s) != 4 || len(s[1].Problems) != 1 || s[0].UUID == "" {
		t.Errorf("samples with one bad handle = %+v", s)
	}

	// The whole library failing is an error for the sample, then recovers.
	m.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNINITIALIZED }
	if _, err := b.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "ERROR_UNINITIALIZED") {
		t.Errorf("err = %v", err)
	}
	m.DeviceGetCountFunc = func() (int, nvml.Return) { return 4, nvml.SUCCESS }
	if s := sample(t, b); len(s) != 4 {
		t.Errorf("after recovery got %d samples", len(s))
	}
}

func TestMIG(t *testing.T) {
	m := fakenvml.New(2)
	d := m.GPUs[0].Device
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	// The parent, as the driver does, lists nothing of its own here; each
	// MIG device lists its own processes.
	migs := map[int]nvml.Device{
		0: fakenvml.MIGDevice("MIG-aaa", "3g.20gb", 1, 0, 20<<30, 5<<30, []nvml.ProcessInfo{{Pid: 11, UsedGpuMemory: 5 << 30, GpuInstanceId: 1}}),
		2: fakenvml.MIGDevice("MIG-bbb", "2g.10gb", 2, 0, 10<<30, 0, nil),
	}
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if g, ok := migs[i]; ok {
			return g, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	b := open(t, m)
	got := sample(t, b)
	if len(got) != 4 { // 2 GPUs + 2 MIG devices
		t.Fatalf("got %d samples, want 4: %+v", len(got), got)
	}
	parent, a, bb := got[0], got[1], got[2]
	if parent.MIG != nil || a.MIG == nil || a.MIG.Index != 0 || a.MIG.GPUInstanceID != 1 || a.MIG.ParentUUID != parent.UUID || bb.MIG.Index != 2 {
		t.Errorf("MIG identity: parent %+v a %+v b %+v", parent.MIG, a.MIG, bb.MIG)
	}
	if a.MIG.Profile != "3g.20gb" || bb.MIG.Profile != "2g.10gb" {
		t.Errorf("MIG profiles %q and %q, want 3g.20gb and 2g.10gb (from the devices' names)", a.MIG.Profile, bb.MIG.Profile)
	}
	if len(parent.Processes) != 0 {
		t.Errorf("parent in MIG mode lists processes %v", parent.Processes)
	}
	if len(a.Processes) != 1 || a.Processes[0].PID != 11 || a.Processes[0].GPUIndex != 0 {
		t.Errorf("MIG processes = %+v", a.Processes)
	}
	if a.UtilGPUPercent != nil || a.PowerWatts != nil || *a.MemoryUsedBytes != 5<<30 || len(a.Problems) != 0 {
		t.Errorf("MIG device metrics = %+v", a)
	}
	if len(d.GetComputeRunningProcessesCalls()) != 0 {
		t.Errorf("parent's processes asked for in MIG mode")
	}
}

// Hopper: GPM metrics appear from the second sample on.
func TestGPMOnHopper(t *testing.T) {
	m := fakenvml.New(1)
	d := m.GPUs[0].Device
	d.Config.Architecture = nvml.DEVICE_ARCH_HOPPER
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(nvml.GpmSample) nvml.Return { return nvml.SUCCESS }
	m.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		return &mock.GpmSample{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}, nvml.SUCCESS
	}
	m.GpmMetricsGetFunc = func(g *nvml.GpmMetricsGetType) nvml.Return {
		for i := 0; i < int(g.NumMetrics); i++ {
			g.Metrics[i].Value = float64(10 * g.Metrics[i].MetricId)
			if nvml.GpmMetricId(g.Metrics[i].MetricId) == nvml.GPM_METRIC_DRAM_BW_UTIL {
				g.Metrics[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return nvml.SUCCESS
	}
	b := open(t, m)
	if s := sample(t, b)[0]; s.GPM != nil {
		t.Errorf("first sample has GPM %v", s.GPM)
	}
	s := sample(t, b)[0]
	want := map[string]float64{"graphics_util": 10, "sm_util": 20, "sm_occupancy": 30, "tensor_util": 50}
	if len(s.GPM) != len(want) {
		t.Fatalf("GPM = %v, want %v", s.GPM, want)
	}
	for k, v := range want {
		if s.GPM[k] != v {
			t.Errorf("GPM[%s] = %v, want %v", k, s.GPM[k], v)
		}
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A Hopper whose driver says GPM is unsupported (e.g. a vGPU) is asked once.
func TestGPMUnsupported(t *testing.T) {
	m := fakenvml.New(1)
	d := m.GPUs[0].Device
	d.Config.Architecture = nvml.DEVICE_ARCH_HOPPER
	b := open(t, m)
	for i := 0; i < 3; i++ {
		if s := sample(t, b)[0]; s.GPM != nil || len(s.Problems) != 0 {
			t.Errorf("GPM %v problems %v", s.GPM, s.Problems)
		}
	}
	if n := len(d.GpmQueryDeviceSupportCalls()); n != 1 {
		t.Errorf("GpmQueryDeviceSupport called %d times, want 1", n)
	}
}
