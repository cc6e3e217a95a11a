package wire

import "time"

// NodeReportView is the part of a NodeReport the controller keeps. A
// receiver that decodes into it instead of NodeReport skips the rest (GPU
// names and UUIDs, per-process lists, GPM maps, problems) without building
// it: at 1 Hz from thousands of nodes, decoding is most of the controller's
// ingest cost. Metrics the agent leaves out (nil in NodeReport) read 0 here.
type NodeReportView struct {
	V       int       `json:"v"`
	Node    string    `json:"node"`
	GPUType string    `json:"gpu_type"`
	At      time.Time `json:"at"`
	Seq     uint64    `json:"seq"`
	GPUs    []GPUView `json:"gpus"`
	Jobs    []JobRef  `json:"jobs"`
}

// GPUView is the part of a GPUSample the controller keeps.
type GPUView struct {
	Index            int    `json:"index"`
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	MemoryUsedBytes  uint64 `json:"memory_used_bytes"`
	UtilGPUPercent   uint32 `json:"util_gpu_percent"`
}

// JobRef names a job inside a NodeReport; its details come on the job's
// own subject.
type JobRef struct {
	JobID uint32 `json:"job_id"`
}

// JobReportView is the part of a JobReport the controller keeps.
type JobReportView struct {
	V              int          `json:"v"`
	Node           string       `json:"node"`
	GPUType        string       `json:"gpu_type"`
	At             time.Time    `json:"at"`
	JobID          uint32       `json:"job_id"`
	GPUs           []int        `json:"gpus"`
	GPUMemoryBytes uint64       `json:"gpu_memory_bytes"`
	Progress       ProgressView `json:"progress"`
}

// ProgressView is the part of a JobProgress the controller keeps. A report
// without progress leaves it zero.
type ProgressView struct {
	Step        uint64  `json:"step"`
	Total       uint64  `json:"total"`
	StepsPerSec float64 `json:"steps_per_s"`
	AgeSeconds  float64 `json:"age_s"`
	Ready       bool    `json:"ready"`
}

func (m *NodeReportView) version() int { return m.V }
func (m *JobReportView) version() int  { return m.V }
