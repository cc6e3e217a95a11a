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
	c := New("gpu01", func() Stats { return Stats{Reports: 7, Dropped: 1, Backlog: 2, SampleSeconds: 0.004} })
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
rota_job_steps_per_second{Hostname="gpu01",gpu_type="v100",hpc_job="42"} 9.5
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

// Before the first sample only the agent's own metrics are exposed: its
// checkpoint histogram, each outcome at 0.
func TestNoSampleYet(t *testing.T) {
	c := New("gpu01", nil)
	if n := testutil.CollectAndCount(c); n != 3 {
		t.Fatalf("%d series before any sample, want the 3 checkpoint outcomes", n)
	}
	if n := testutil.CollectAndCount(c, "rota_agent_checkpoint_duration_seconds"); n != 3 {
		t.Fatalf("%d checkpoint series", n)
	}
}

// What the agent adds for Rota's dashboards, by case: GPUs in use per
// node and type (a GPU with a job's process), the info metric that joins
// dcgm-exporter's metrics to the Slurm GPU type, and node_exporter's host
// names.
func TestNodeMetrics(t *testing.T) {
	busy := wire.GPUSample{Index: 0, UUID: "GPU-a", Name: "Tesla V100", Processes: []wire.GPUProcess{{PID: 10, JobID: 42}}}
	idle := wire.GPUSample{Index: 1, UUID: "GPU-b", Name: "Tesla V100"}
	stray := wire.GPUSample{Index: 2, UUID: "GPU-c", Name: "Tesla V100", Processes: []wire.GPUProcess{{PID: 11}}}
	for _, tc := range []struct {
		name   string
		report wire.NodeReport
		want   string
	}{
		{"one of three busy; a process of no job does not count",
			wire.NodeReport{Node: "n1", GPUType: "v100", Backend: "sim", GPUs: []wire.GPUSample{busy, idle, stray}},
			`
# HELP rota_agent_info 1, labelled with the node's Slurm GPU type and the GPU backend: join on Hostname to group dcgm-exporter's metrics by GPU type.
# TYPE rota_agent_info gauge
rota_agent_info{Hostname="n1",backend="sim",gpu_type="v100"} 1
# HELP rota_node_gpus GPUs (or MIG instances) the agent sees on the node.
# TYPE rota_node_gpus gauge
rota_node_gpus{Hostname="n1",gpu_type="v100"} 3
# HELP rota_node_gpus_in_use GPUs on the node running a process of a Slurm job.
# TYPE rota_node_gpus_in_use gauge
rota_node_gpus_in_use{Hostname="n1",gpu_type="v100"} 1
`},
		{"no GPU readable: zero of zero, the node still named",
			wire.NodeReport{Node: "n2", GPUType: "k80", Backend: "none",
				Host: wire.HostSample{MemTotalBytes: 8 << 30, MemAvailBytes: 6 << 30, Load1: f64(1), Load5: f64(0.5), Load15: f64(0.25)}},
			`
# HELP node_load1 1m load average.
# TYPE node_load1 gauge
node_load1{Hostname="n2"} 1
# HELP node_load15 15m load average.
# TYPE node_load15 gauge
node_load15{Hostname="n2"} 0.25
# HELP node_load5 5m load average.
# TYPE node_load5 gauge
node_load5{Hostname="n2"} 0.5
# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.
# TYPE node_memory_MemAvailable_bytes gauge
node_memory_MemAvailable_bytes{Hostname="n2"} 6.442450944e+09
# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.
# TYPE node_memory_MemTotal_bytes gauge
node_memory_MemTotal_bytes{Hostname="n2"} 8.589934592e+09
# HELP rota_agent_info 1, labelled with the node's Slurm GPU type and the GPU backend: join on Hostname to group dcgm-exporter's metrics by GPU type.
# TYPE rota_agent_info gauge
rota_agent_info{Hostname="n2",backend="none",gpu_type="k80"} 1
# HELP rota_node_gpus GPUs (or MIG instances) the agent sees on the node.
# TYPE rota_node_gpus gauge
rota_node_gpus{Hostname="n2",gpu_type="k80"} 0
# HELP rota_node_gpus_in_use GPUs on the node running a process of a Slurm job.
# TYPE rota_node_gpus_in_use gauge
rota_node_gpus_in_use{Hostname="n2",gpu_type="k80"} 0
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.report.Node, nil)
			r := tc.report
			c.Update(&r)
			names := []string{"rota_agent_info", "rota_node_gpus", "rota_node_gpus_in_use",
				"node_load1", "node_load5", "node_load15", "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes"}
			if err := testutil.CollectAndCompare(c, strings.NewReader(tc.want), names...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Checkpoint times land in the outcome's buckets, on this node.
func TestCheckpointHistogram(t *testing.T) {
	for _, tc := range []struct {
		name            string
		observe         map[string][]float64 // outcome -> seconds
		outcome         string
		wantCount       uint64
		wantSum         float64
		wantBelow5Count uint64 // le="5"
	}{
		{"none yet", nil, wire.CheckpointAcknowledged, 0, 0, 0},
		{"two acknowledged", map[string][]float64{wire.CheckpointAcknowledged: {0.3, 7}}, wire.CheckpointAcknowledged, 2, 7.3, 1},
		{"a time-out apart", map[string][]float64{wire.CheckpointAcknowledged: {1}, wire.CheckpointTimedOut: {60}}, wire.CheckpointTimedOut, 1, 60, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New("n1", nil)
			for o, secs := range tc.observe {
				for _, s := range secs {
					c.ObserveCheckpoint(o, s)
				}
			}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range fams {
				if f.GetName() != "rota_agent_checkpoint_duration_seconds" {
					continue
				}
				for _, m := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["outcome"] != tc.outcome || labels["Hostname"] != "n1" {
						continue
					}
					found = true
					h := m.GetHistogram()
					var below5 uint64
					for _, b := range h.GetBucket() {
						if b.GetUpperBound() == 5 {
							below5 = b.GetCumulativeCount()
						}
					}
					if h.GetSampleCount() != tc.wantCount || h.GetSampleSum() != tc.wantSum || below5 != tc.wantBelow5Count {
						t.Errorf("count %d sum %v le=5 %d; want %d %v %d", h.GetSampleCount(), h.GetSampleSum(), below5, tc.wantCount, tc.wantSum, tc.wantBelow5Count)
					}
				}
			}
			if !found {
				t.Fatalf("no series for outcome %s", tc.outcome)
			}
		})
	}
}
