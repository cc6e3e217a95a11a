package wire

import (
	"strings"
	"time"
)

// Agent subjects. Every node agent publishes under
// "rota.v1.agent.<node>.", where <node> is AgentToken(the Slurm node name),
// so a controller subscribes to "rota.v1.agent.*.report" for every node and
// "rota.v1.agent.*.job.<id>" to follow one job across nodes.
//
//	rota.v1.agent.<node>.report            agent -> controller, NodeReport, every interval
//	rota.v1.agent.<node>.job.<jobid>       agent -> controller, JobReport, every interval per job
//	rota.v1.agent.<node>.checkpoint        controller -> agent, request/reply:
//	                                       CheckpointRequest, reply CheckpointReply
//	rota.v1.agent.<node>.checkpoint.result agent -> controller, CheckpointResult, once per request
const (
	agentPrefix = "rota.v1.agent."
	// SubjectAgentReports matches every node's report.
	SubjectAgentReports = "rota.v1.agent.*.report"
	// SubjectAgentJobs matches every per-job report of every node.
	SubjectAgentJobs = "rota.v1.agent.*.job.*"
	// SubjectAgentCheckpointResults matches every node's checkpoint outcomes.
	SubjectAgentCheckpointResults = "rota.v1.agent.*.checkpoint.result"
)

// AgentToken turns a node name into one NATS subject token: '.', '*', '>'
// and white space (which NATS gives meaning to) become '_'. "gpu01.cluster"
// is published as "gpu01_cluster"; Slurm node names rarely contain any.
func AgentToken(node string) string {
	if node == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, node)
}

// SubjectAgentReport is where node's NodeReport is published.
func SubjectAgentReport(node string) string { return agentPrefix + AgentToken(node) + ".report" }

// SubjectAgentJob is where node's JobReport for job is published.
func SubjectAgentJob(node string, job uint32) string {
	return agentPrefix + AgentToken(node) + ".job." + itoa(uint64(job))
}

// SubjectAgentNodeJobs matches every JobReport subject of node.
func SubjectAgentNodeJobs(node string) string { return agentPrefix + AgentToken(node) + ".job.*" }

// SubjectAgentCheckpoint is the request/reply subject the controller sends
// node's checkpoint commands to.
func SubjectAgentCheckpoint(node string) string {
	return agentPrefix + AgentToken(node) + ".checkpoint"
}

// SubjectAgentCheckpointResult is where node publishes checkpoint outcomes.
func SubjectAgentCheckpointResult(node string) string {
	return agentPrefix + AgentToken(node) + ".checkpoint.result"
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// NodeReport is one sample of a node: its GPUs, host, and the jobs on it.
// Pointer fields are nil when the device or driver does not report that
// metric (NVML "not supported"); one missing metric never hides the others.
type NodeReport struct {
	V       int       `json:"v"`
	Node    string    `json:"node"`
	GPUType string    `json:"gpu_type"` // the node's configured Slurm GPU type, e.g. "v100"
	Backend string    `json:"backend"`  // "nvml", "sim", or "none" when NVML is absent
	At      time.Time `json:"at"`
	// Seq counts reports since the agent started; a gap means lost reports.
	Seq  uint64      `json:"seq"`
	Host HostSample  `json:"host"`
	GPUs []GPUSample `json:"gpus,omitempty"`
	Jobs []JobReport `json:"jobs,omitempty"`
	// Unmapped lists GPU processes that belong to no Slurm job.
	Unmapped []GPUProcess `json:"unmapped,omitempty"`
	// Problems are what went wrong in this sample, in words, e.g. an NVML
	// error on one GPU. Empty when all went well.
	Problems []string `json:"problems,omitempty"`
}

// HostSample is the node's CPU, memory and load.
type HostSample struct {
	CPUPercent     *float64 `json:"cpu_percent,omitempty"` // all cores, 0-100
	Cores          int      `json:"cores,omitempty"`
	MemTotalBytes  uint64   `json:"mem_total_bytes,omitempty"`
	MemUsedBytes   uint64   `json:"mem_used_bytes,omitempty"`
	MemAvailBytes  uint64   `json:"mem_available_bytes,omitempty"`
	Load1          *float64 `json:"load1,omitempty"`
	Load5          *float64 `json:"load5,omitempty"`
	Load15         *float64 `json:"load15,omitempty"`
	UptimeSeconds  uint64   `json:"uptime_s,omitempty"`
	ProcessesTotal int      `json:"processes,omitempty"`
}

// GPUSample is one GPU (or MIG device) at one instant.
type GPUSample struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid,omitempty"`
	Name  string `json:"name,omitempty"`
	// MIG is set for a MIG device: Index is its parent's, MIG.Index its own.
	MIG              *MIGInfo `json:"mig,omitempty"`
	MemoryTotalBytes *uint64  `json:"memory_total_bytes,omitempty"`
	MemoryUsedBytes  *uint64  `json:"memory_used_bytes,omitempty"`
	UtilGPUPercent   *uint32  `json:"util_gpu_percent,omitempty"`
	UtilMemPercent   *uint32  `json:"util_memory_percent,omitempty"`
	SMClockMHz       *uint32  `json:"sm_clock_mhz,omitempty"`
	PowerWatts       *float64 `json:"power_w,omitempty"`
	TemperatureC     *uint32  `json:"temperature_c,omitempty"`
	PCIeTxBytesPerS  *uint64  `json:"pcie_tx_bytes_per_s,omitempty"`
	PCIeRxBytesPerS  *uint64  `json:"pcie_rx_bytes_per_s,omitempty"`
	// GPM holds Hopper-and-newer GPM metrics, percent, by name
	// ("sm_util", "sm_occupancy", "tensor_util", "dram_bw_util",
	// "graphics_util"); absent where GPM is not supported.
	GPM       map[string]float64 `json:"gpm,omitempty"`
	Processes []GPUProcess       `json:"processes,omitempty"`
	// Problems: metrics that failed on this device for a reason other than
	// "not supported", e.g. "power: GPU is lost".
	Problems []string `json:"problems,omitempty"`
}

// MIGInfo identifies a MIG device within its parent GPU.
type MIGInfo struct {
	Index int `json:"index"`
	// Profile is the MIG profile ("3g.20gb", from the device's name "NVIDIA
	// A100-SXM4-40GB MIG 3g.20gb"); the Slurm GPU type of the slice is the
	// node's type and the profile (gputype.SliceType).
	Profile         string `json:"profile,omitempty"`
	GPUInstanceID   uint32 `json:"gi,omitempty"`
	ComputeInstance uint32 `json:"ci,omitempty"`
	ParentUUID      string `json:"parent_uuid,omitempty"`
}

// GPUProcess is one process using a GPU and, when known, its Slurm job.
type GPUProcess struct {
	PID             uint32  `json:"pid,omitempty"`
	UsedMemoryBytes *uint64 `json:"used_memory_bytes,omitempty"`
	SMUtilPercent   *uint32 `json:"sm_util_percent,omitempty"`
	JobID           uint32  `json:"job_id,omitempty"` // 0: no Slurm job
	Step            string  `json:"step,omitempty"`   // "batch", "extern", "0", ...
	GPUIndex        int     `json:"gpu_index"`
}

// JobReport is what one node knows of one Slurm job.
type JobReport struct {
	V       int       `json:"v"`
	Node    string    `json:"node"`
	GPUType string    `json:"gpu_type"`
	At      time.Time `json:"at"`
	JobID   uint32    `json:"job_id"`
	// Steps are the Slurm job steps seen on this node's GPUs.
	Steps []string `json:"steps,omitempty"`
	// GPUs are the indices of the GPUs the job's processes use.
	GPUs           []int   `json:"gpus,omitempty"`
	GPUMemoryBytes uint64  `json:"gpu_memory_bytes,omitempty"`
	SMUtilPercent  *uint32 `json:"sm_util_percent,omitempty"` // summed over its processes
	Processes      int     `json:"processes,omitempty"`
	// Progress is nil when the job writes no progress file.
	Progress *JobProgress `json:"progress,omitempty"`
}

// JobProgress is the job's own count of training steps and the rate the
// agent measured on this node's GPU type.
type JobProgress struct {
	Step  uint64 `json:"step"`
	Total uint64 `json:"total,omitempty"`
	// Ckpt is the step of the job's last completed checkpoint, if it says.
	Ckpt uint64 `json:"ckpt,omitempty"`
	// StepsPerSec is smoothed (exponential, ~30 s time constant); 0 until
	// two distinct readings have been seen.
	StepsPerSec float64 `json:"steps_per_s"`
	// AgeSeconds is how long ago the job last advanced its file.
	AgeSeconds float64 `json:"age_s"`
	// Problem says why the file could not be used this time, if so.
	Problem string `json:"problem,omitempty"`
	// Ready: the job's ready file ($ROTA_READY_FILE) exists, so a service
	// replica says it answers requests (docs/serve.md).
	Ready bool `json:"ready,omitempty"`
}

// CheckpointRequest asks a node's agent to checkpoint one job: signal the
// job's processes on that node, wait up to GraceSeconds, then SIGTERM.
type CheckpointRequest struct {
	V            int     `json:"v"`
	JobID        uint32  `json:"job_id"`
	GraceSeconds float64 `json:"grace_s"`
	// ID is the caller's identifier, echoed in the reply and the result.
	ID string `json:"id,omitempty"`
	// KeepRunning asks for a checkpoint the job survives (the controller's
	// periodic checkpoints for fault tolerance): the agent sends the
	// job's periodic signal (ROTA_CHECKPOINT_PERIODIC_SIGNAL in its
	// environment; a job without one is refused, since its checkpoint
	// signal is the one it saves and exits on),
	// answers as soon as the job acknowledges, and never SIGTERMs it.
	KeepRunning bool `json:"keep_running,omitempty"`
}

// CheckpointReply is the immediate answer: whether the signal went out.
type CheckpointReply struct {
	V         int    `json:"v"`
	ID        string `json:"id,omitempty"`
	JobID     uint32 `json:"job_id"`
	Accepted  bool   `json:"accepted"`
	Signal    string `json:"signal,omitempty"` // e.g. "SIGUSR1"
	Processes int    `json:"processes"`        // how many were signalled
	Error     string `json:"error,omitempty"`
}

// Checkpoint outcomes.
const (
	// CheckpointAcknowledged: the job's progress file reported a new
	// checkpoint (its ckpt= value changed) within the grace period.
	CheckpointAcknowledged = "acknowledged"
	// CheckpointExited: the job's processes exited within the grace period
	// without acknowledging.
	CheckpointExited = "exited"
	// CheckpointTimedOut: neither happened; the agent sent SIGTERM.
	CheckpointTimedOut = "timed_out"
	// CheckpointNoProcesses: the job has no process on this node.
	CheckpointNoProcesses = "no_processes"
)

// CheckpointResult is published once the checkpoint has played out.
type CheckpointResult struct {
	V       int    `json:"v"`
	ID      string `json:"id,omitempty"`
	Node    string `json:"node"`
	JobID   uint32 `json:"job_id"`
	Outcome string `json:"outcome"`
	Signal  string `json:"signal,omitempty"`
	// Signalled counts the processes that got the checkpoint signal.
	Signalled int `json:"signalled"`
	// Exited is true when all the job's processes were gone at the end.
	Exited bool `json:"exited"`
	// Terminated counts processes that got SIGTERM at the end of grace.
	Terminated int `json:"terminated,omitempty"`
	// CkptStep is the checkpoint step the job reported, if it did.
	CkptStep       uint64  `json:"ckpt_step,omitempty"`
	ElapsedSeconds float64 `json:"elapsed_s"`
	Error          string  `json:"error,omitempty"`
}

func (m *NodeReport) version() int        { return m.V }
func (m *JobReport) version() int         { return m.V }
func (m *CheckpointRequest) version() int { return m.V }
func (m *CheckpointReply) version() int   { return m.V }
func (m *CheckpointResult) version() int  { return m.V }
