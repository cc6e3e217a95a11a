// Package metrics exposes the agent's last sample on Prometheus /metrics.
// GPU metrics use dcgm-exporter's names and units where they mean the same
// thing (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED in MiB, ...) and its
// labels (gpu, UUID, modelName, Hostname, hpc_job), so existing dashboards
// work; host metrics node_exporter also has use its names (node_load1,
// node_memory_MemTotal_bytes, ...); what neither has a name for is rota_*.
// A Slurm job is labelled hpc_job everywhere: "job" is Prometheus' own
// target label, which would rename a metric's to exported_job.
package metrics

import (
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rota-hpc/rota/wire"
)

// Stats are the agent's own counters, read at scrape time.
type Stats struct {
	Reports, Dropped uint64
	Backlog          int
	SampleSeconds    float64
}

// Collector is a prometheus.Collector over the latest report, and the
// agent's checkpoint times.
type Collector struct {
	node  string
	stats func() Stats
	ckpt  *prometheus.HistogramVec

	mu   sync.Mutex
	last *wire.NodeReport
}

// New returns a collector for node's agent; stats may be nil.
func New(node string, stats func() Stats) *Collector {
	c := &Collector{node: node, stats: stats, ckpt: newCheckpointHistogram()}
	// Every outcome from 0, so a dashboard's rate is 0, not absent.
	for _, o := range []string{wire.CheckpointAcknowledged, wire.CheckpointExited, wire.CheckpointTimedOut} {
		c.ckpt.WithLabelValues(node, o)
	}
	return c
}

func newCheckpointHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rota_agent_checkpoint_duration_seconds",
		Help: "Checkpoints of jobs on this node, from the signal to the outcome: acknowledged (the job reported a new checkpoint), " +
			"exited, or timed_out (the grace period passed).",
		Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}}, []string{"Hostname", "outcome"})
}

// ObserveCheckpoint records a checkpoint that played out: its outcome
// (wire.Checkpoint*) and how long from the signal.
func (c *Collector) ObserveCheckpoint(outcome string, seconds float64) {
	c.ckpt.WithLabelValues(c.node, outcome).Observe(seconds)
}

// Update replaces the report the next scrape shows.
func (c *Collector) Update(r *wire.NodeReport) {
	c.mu.Lock()
	c.last = r
	c.mu.Unlock()
}

var gpuLabels = []string{"gpu", "UUID", "modelName", "Hostname", "GPU_I_ID", "hpc_job"}

func gpuDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, gpuLabels, nil)
}

var (
	descUtil    = gpuDesc("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
	descMemUtil = gpuDesc("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).")
	descFBUsed  = gpuDesc("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
	descFBFree  = gpuDesc("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")
	descSMClock = gpuDesc("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).")
	descPower   = gpuDesc("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")
	descTemp    = gpuDesc("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).")
	descPCIeTx  = gpuDesc("DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus, including protocol headers and data payloads, in bytes per second.")
	descPCIeRx  = gpuDesc("DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus, including protocol headers and data payloads, in bytes per second.")
	// GPM metrics (percent in NVML) as DCGM's profiling ratios (0-1).
	gpmDescs = map[string]*prometheus.Desc{
		"graphics_util": gpuDesc("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
		"sm_util":       gpuDesc("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned."),
		"sm_occupancy":  gpuDesc("DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM."),
		"tensor_util":   gpuDesc("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active."),
		"dram_bw_util":  gpuDesc("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data."),
	}
	descGPUProblems = gpuDesc("rota_gpu_sample_problems", "Metrics that failed on this GPU in the last sample (other than 'not supported').")

	jobLabels        = []string{"hpc_job", "gpu_type", "Hostname"}
	descJobRate      = prometheus.NewDesc("rota_job_steps_per_second", "The job's smoothed training steps per second on this node's GPU type, from its progress file.", jobLabels, nil)
	descJobStep      = prometheus.NewDesc("rota_job_step", "The last step the job reported in its progress file.", jobLabels, nil)
	descJobAge       = prometheus.NewDesc("rota_job_progress_age_seconds", "Seconds since the job last advanced its progress file.", jobLabels, nil)
	descJobMem       = prometheus.NewDesc("rota_job_gpu_memory_used_bytes", "GPU memory used by the job's processes on this node.", jobLabels, nil)
	descJobGPUs      = prometheus.NewDesc("rota_job_gpus", "GPUs the job's processes use on this node.", jobLabels, nil)
	descJobProcs     = prometheus.NewDesc("rota_job_gpu_processes", "GPU processes of the job on this node.", jobLabels, nil)
	hostLabels       = []string{"Hostname"}
	descHostCPU      = prometheus.NewDesc("rota_host_cpu_percent", "Host CPU busy (in %, all cores).", hostLabels, nil)
	descHostMemAvail = prometheus.NewDesc("node_memory_MemAvailable_bytes", "Memory information field MemAvailable_bytes.", hostLabels, nil)
	descHostMemTotal = prometheus.NewDesc("node_memory_MemTotal_bytes", "Memory information field MemTotal_bytes.", hostLabels, nil)
	descHostLoad1    = prometheus.NewDesc("node_load1", "1m load average.", hostLabels, nil)
	descHostLoad5    = prometheus.NewDesc("node_load5", "5m load average.", hostLabels, nil)
	descHostLoad15   = prometheus.NewDesc("node_load15", "15m load average.", hostLabels, nil)
	descUnmapped     = prometheus.NewDesc("rota_gpu_unmapped_processes", "GPU processes that belong to no Slurm job.", hostLabels, nil)
	typeLabels       = []string{"Hostname", "gpu_type"}
	descInfo         = prometheus.NewDesc("rota_agent_info", "1, labelled with the node's Slurm GPU type and the GPU backend: join on Hostname to group dcgm-exporter's metrics by GPU type.", []string{"Hostname", "gpu_type", "backend"}, nil)
	descGPUs         = prometheus.NewDesc("rota_node_gpus", "GPUs (or MIG instances) the agent sees on the node.", typeLabels, nil)
	descGPUsInUse    = prometheus.NewDesc("rota_node_gpus_in_use", "GPUs on the node running a process of a Slurm job.", typeLabels, nil)
	descReports      = prometheus.NewDesc("rota_agent_reports_published_total", "Reports handed to NATS.", nil, nil)
	descDropped      = prometheus.NewDesc("rota_agent_reports_dropped_total", "Reports dropped because the backlog was full while NATS was unreachable.", nil, nil)
	descBacklog      = prometheus.NewDesc("rota_agent_report_backlog", "Reports waiting for NATS.", nil, nil)
	descSampleSecs   = prometheus.NewDesc("rota_agent_sample_duration_seconds", "How long the last sample took.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUtil, descMemUtil, descFBUsed, descFBFree, descSMClock, descPower, descTemp, descPCIeTx, descPCIeRx, descGPUProblems,
		descJobRate, descJobStep, descJobAge, descJobMem, descJobGPUs, descJobProcs, descHostCPU, descHostMemAvail, descHostMemTotal, descHostLoad1,
		descHostLoad5, descHostLoad15, descUnmapped, descInfo, descGPUs, descGPUsInUse, descReports, descDropped, descBacklog, descSampleSecs} {
		ch <- d
	}
	c.ckpt.Describe(ch)
	for _, d := range gpmDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.stats != nil {
		s := c.stats()
		ch <- prometheus.MustNewConstMetric(descReports, prometheus.CounterValue, float64(s.Reports))
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(s.Dropped))
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(s.Backlog))
		ch <- prometheus.MustNewConstMetric(descSampleSecs, prometheus.GaugeValue, s.SampleSeconds)
	}
	c.ckpt.Collect(ch)
	c.mu.Lock()
	r := c.last
	c.mu.Unlock()
	if r == nil {
		return
	}
	host := r.Node
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descInfo, 1, host, r.GPUType, r.Backend)
	inUse := 0
	for _, g := range r.GPUs {
		if jobsOn(g) != "" {
			inUse++
		}
		gi := ""
		if g.MIG != nil {
			gi = strconv.FormatUint(uint64(g.MIG.GPUInstanceID), 10)
		}
		l := []string{strconv.Itoa(g.Index), g.UUID, g.Name, host, gi, jobsOn(g)}
		if g.UtilGPUPercent != nil {
			gauge(descUtil, float64(*g.UtilGPUPercent), l...)
		}
		if g.UtilMemPercent != nil {
			gauge(descMemUtil, float64(*g.UtilMemPercent), l...)
		}
		if g.MemoryUsedBytes != nil {
			gauge(descFBUsed, float64(*g.MemoryUsedBytes>>20), l...)
			if g.MemoryTotalBytes != nil && *g.MemoryTotalBytes >= *g.MemoryUsedBytes {
				gauge(descFBFree, float64((*g.MemoryTotalBytes-*g.MemoryUsedBytes)>>20), l...)
			}
		}
		if g.SMClockMHz != nil {
			gauge(descSMClock, float64(*g.SMClockMHz), l...)
		}
		if g.PowerWatts != nil {
			gauge(descPower, *g.PowerWatts, l...)
		}
		if g.TemperatureC != nil {
			gauge(descTemp, float64(*g.TemperatureC), l...)
		}
		if g.PCIeTxBytesPerS != nil {
			gauge(descPCIeTx, float64(*g.PCIeTxBytesPerS), l...)
		}
		if g.PCIeRxBytesPerS != nil {
			gauge(descPCIeRx, float64(*g.PCIeRxBytesPerS), l...)
		}
		for k, v := range g.GPM {
			if d, ok := gpmDescs[k]; ok {
				gauge(d, v/100, l...)
			}
		}
		gauge(descGPUProblems, float64(len(g.Problems)), l...)
	}
	gauge(descGPUs, float64(len(r.GPUs)), host, r.GPUType)
	gauge(descGPUsInUse, float64(inUse), host, r.GPUType)
	for _, j := range r.Jobs {
		l := []string{strconv.FormatUint(uint64(j.JobID), 10), r.GPUType, host}
		gauge(descJobMem, float64(j.GPUMemoryBytes), l...)
		gauge(descJobGPUs, float64(len(j.GPUs)), l...)
		gauge(descJobProcs, float64(j.Processes), l...)
		if p := j.Progress; p != nil {
			gauge(descJobRate, p.StepsPerSec, l...)
			gauge(descJobStep, float64(p.Step), l...)
			gauge(descJobAge, p.AgeSeconds, l...)
		}
	}
	h := r.Host
	if h.CPUPercent != nil {
		gauge(descHostCPU, *h.CPUPercent, host)
	}
	if h.MemTotalBytes > 0 {
		gauge(descHostMemAvail, float64(h.MemAvailBytes), host)
		gauge(descHostMemTotal, float64(h.MemTotalBytes), host)
	}
	for _, l := range []struct {
		d *prometheus.Desc
		v *float64
	}{{descHostLoad1, h.Load1}, {descHostLoad5, h.Load5}, {descHostLoad15, h.Load15}} {
		if l.v != nil {
			gauge(l.d, *l.v, host)
		}
	}
	gauge(descUnmapped, float64(len(r.Unmapped)), host)
}

// jobsOn is dcgm-exporter's hpc_job label: the Slurm jobs on a GPU, comma
// separated, "" when none.
func jobsOn(g wire.GPUSample) string {
	seen := map[uint32]bool{}
	var ids []int
	for _, p := range g.Processes {
		if p.JobID != 0 && !seen[p.JobID] {
			seen[p.JobID] = true
			ids = append(ids, int(p.JobID))
		}
	}
	sort.Ints(ids)
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, ",")
}
