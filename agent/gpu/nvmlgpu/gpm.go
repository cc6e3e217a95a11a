package nvmlgpu

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/rota-hpc/rota/wire"
)

// GPM (GPU Performance Monitoring) exists on Hopper and newer. A metric is
// computed from two samples, so the first interval of a device yields none.

// gpmMetrics are the GPM metrics the agent reads, by report name.
var gpmMetrics = []struct {
	name string
	id   nvml.GpmMetricId
}{
	{"graphics_util", nvml.GPM_METRIC_GRAPHICS_UTIL},
	{"sm_util", nvml.GPM_METRIC_SM_UTIL},
	{"sm_occupancy", nvml.GPM_METRIC_SM_OCCUPANCY},
	{"tensor_util", nvml.GPM_METRIC_ANY_TENSOR_UTIL},
	{"dram_bw_util", nvml.GPM_METRIC_DRAM_BW_UTIL},
}

type gpmState struct {
	lib  nvml.Interface
	prev nvml.GpmSample
	cur  nvml.GpmSample
	have bool // prev holds a sample
}

func (g *gpmState) free() {
	if g.prev != nil {
		g.prev.Free()
	}
	if g.cur != nil {
		g.cur.Free()
	}
}

// gpmSupported asks once per device: pre-Hopper devices are not asked at
// all (their NVML answers "not supported" or IsSupportedDevice=0).
func (b *Backend) gpmSupported(dev nvml.Device, s *wire.GPUSample) bool {
	if s.MIG != nil || s.UUID == "" || b.skip(s, "gpm") {
		return false
	}
	if _, ok := b.gpm[s.UUID]; ok {
		return true
	}
	arch, ret := dev.GetArchitecture()
	if ret == nvml.SUCCESS && arch < nvml.DEVICE_ARCH_HOPPER {
		b.ok(s, "gpm", nvml.ERROR_NOT_SUPPORTED)
		return false
	}
	sup, ret := dev.GpmQueryDeviceSupport()
	if !b.ok(s, "gpm", ret) {
		return false
	}
	if sup.IsSupportedDevice == 0 {
		b.ok(s, "gpm", nvml.ERROR_NOT_SUPPORTED)
		return false
	}
	g := &gpmState{lib: b.lib}
	var r1, r2 nvml.Return
	g.prev, r1 = b.lib.GpmSampleAlloc()
	g.cur, r2 = b.lib.GpmSampleAlloc()
	if r1 != nvml.SUCCESS || r2 != nvml.SUCCESS {
		g.free()
		if r1 == nvml.SUCCESS {
			r1 = r2
		}
		b.ok(s, "gpm", r1)
		return false
	}
	b.gpm[s.UUID] = g
	return true
}

func (b *Backend) sampleGPM(dev nvml.Device, s *wire.GPUSample) {
	if !b.gpmSupported(dev, s) {
		return
	}
	g := b.gpm[s.UUID]
	if ret := dev.GpmSampleGet(g.cur); !b.ok(s, "gpm", ret) {
		return
	}
	if g.have {
		req := nvml.GpmMetricsGetType{
			NumMetrics: uint32(len(gpmMetrics)),
			Sample1:    g.prev,
			Sample2:    g.cur,
		}
		for i, m := range gpmMetrics {
			req.Metrics[i].MetricId = uint32(m.id)
		}
		if ret := b.lib.GpmMetricsGet(&req); b.ok(s, "gpm", ret) {
			for i, m := range gpmMetrics {
				if nvml.Return(req.Metrics[i].NvmlReturn) == nvml.SUCCESS {
					if s.GPM == nil {
						s.GPM = map[string]float64{}
					}
					s.GPM[m.name] = req.Metrics[i].Value
				}
			}
		}
	}
	g.prev, g.cur, g.have = g.cur, g.prev, true
}
