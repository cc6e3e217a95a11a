package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rota-hpc/rota/wire"
)

func u32(v uint32) *uint32   { return &v }
func u64(v uint64) *uint64   { return &v }
func f64(v float64) *float64 { return &v }

// The exposition an admin's dashboards read: dcgm-exporter's names, units
// (MiB for framebuffer, ratios for profiling metrics) and labels, with the
// Slurm job in hpc_job; a metric the GPU does not report is absent rather
// than zero.
func TestExposition(t *testing.T) {
	c := New(func() Stats { return Stats{Reports: 7, Dropped: 1, Backlog: 2, SampleSeconds: 0.004} })
	c.Update(&wire.NodeReport{
		V: wire.Version, Node: "gpu01", GPUType: "v100",
		Host: wire.HostSample{CPUPercent: f64(12.5), MemTotalBytes: 1 << 30, MemUsedBytes: 1 << 29, Load1: f64(0.5)},
		GPUs: []wire.GPUSample{
			{Index: 0, UUID: "GPU-aaa", Name: "Tesla V100", UtilGPUPercent: u32(87), MemoryTotalBytes: u64(16 << 30), MemoryUsedBytes: u64(4 << 30),
				GPM:       map[string]float64{"sm_util": 50},
				Processes: []wire.GPUProcess{{PID: 10, JobID: 42, GPUIndex: 0}, {PID: 11, JobID: 41, GPUIndex: 0}}},
			// A K80-like GPU that reports no utilisation: the series is absent.
			{Index: 1, UUID: "GPU-bbb", Name: "Tesla K80", MemoryTotalBytes: u64(12 << 30), MemoryUsedBytes: u64(0), Problems: []string{"power: unknown error"}},
		},
		Jobs: []wire.JobReport{{JobID: 42, GPUs: []int{0}, GPUMemoryBytes: 4 << 30, Processes: 1,
			Progress: &wire.JobProgress{Step: 1000, StepsPerSec: 9.5, AgeSeconds: 1}}},
		Unmapped: []wire.GPUProcess{{PID: 99}},
	})
	want := `
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{GPU_I_ID="",Hostname="gpu01",UUID="GPU-aaa",gpu="0",hpc_job="41,42",modelName="Tesla V100"} 12288
DCGM_FI_DEV_FB_FREE{GPU_I_ID="",Hostname="gpu01",UUID="GPU-bbb",gpu="1",hpc_job="",modelName="Tesla K80"} 12288
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{GPU_I_ID="",Hostname="gpu01",UUID="GPU-aaa",gpu="0",hpc_job="41,42",modelName="Tesla V100"} 4096
DCGM_FI_DEV_FB_USED{GPU_I_ID="",Hostname="gpu01",UUID="GPU-bbb",gpu="1",hpc_job="",modelName="Tesla K80"} 0
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{GPU_I_ID="",Hostname="gpu01",UUID="GPU-aaa",gpu="0",hpc_job="41,42",modelName="Tesla V100"} 87
# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{GPU_I_ID="",Hostname="gpu01",UUID="GPU-aaa",gpu="0",hpc_job="41,42",modelName="Tesla V100"} 0.5
# HELP rota_agent_reports_dropped_total Reports dropped because the backlog was full while NATS was unreachable.
# TYPE rota_agent_reports_dropped_total counter
rota_agent_reports_dropped_total 1
# HELP rota_gpu_sample_problems Metrics that failed on this GPU in the last sample (other than 'not supported').
# TYPE rota_gpu_sample_problems gauge
rota_gpu_sample_problems{GPU_I_ID="",Hostname="gpu01",UUID="GPU-aaa",gpu="0",hpc_job="41,42",modelName="Tesla V100"} 0
rota_gpu_sample_problems{GPU_I_ID="",Hostname="gpu01",UUID="GPU-bbb",gpu="1",hpc_job="",modelName="Tesla K80"} 1
# HELP rota_gpu_unmapped_processes GPU processes that belong to no Slurm job.
# TYPE rota_gpu_unmapped_processes gauge
rota_gpu_unmapped_processes{Hostname="gpu01"} 1
# HELP rota_job_steps_per_second The job's smoothed training steps per second on this node's GPU type, from its progress file.
# TYPE rota_job_steps_per_second gauge
rota_job_steps_per_second{Hostname="gpu01",gpu_type="v100",job="42"} 9.5
`
	names := []string{"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE",
		"rota_agent_reports_dropped_total", "rota_gpu_sample_problems", "rota_gpu_unmapped_processes", "rota_job_steps_per_second"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// Registering with a real registry checks Describe matches Collect.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
}

// Before the first sample only the agent's own counters are exposed.
func TestNoSampleYet(t *testing.T) {
	c := New(nil)
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("%d series before any sample", n)
	}
}
