package wire

import "time"

// Site is the controller's knowledge of the cluster (`rota status --site`):
// what Slurm says of partitions and nodes, and what the admin added in the
// controller's config (charging rates, debug partitions, GPU memory). The
// controller keeps the latest in its JetStream KV state (key "site" of the
// bucket rota_state).
type Site struct {
	V          int             `json:"v"`
	At         time.Time       `json:"at"`
	Partitions []SitePartition `json:"partitions"`
	Nodes      []SiteNode      `json:"nodes"`
	GPUTypes   []SiteGPUType   `json:"gpu_types"`
	Charging   Charging        `json:"charging"`
	// QueueWait says which queue-wait model the controller uses, or why
	// none.
	QueueWait string `json:"queue_wait"`
	// Problems are what could not be read, in words (say, node sizes
	// when the Slurm client cannot read `scontrol show node`).
	Problems []string `json:"problems,omitempty"`
}

// SitePartition is a partition with its limits. Counts and sizes of 0 are
// unlimited (limits) or unknown (sizes).
type SitePartition struct {
	Name            string `json:"name"`
	Default         bool   `json:"default,omitempty"`
	Debug           bool   `json:"debug,omitempty"` // a short debug/development queue (admin config)
	State           string `json:"state,omitempty"`
	MaxTimeMin      uint32 `json:"max_time_min,omitempty"`
	DefaultTimeMin  uint32 `json:"default_time_min,omitempty"`
	MaxNodes        uint32 `json:"max_nodes,omitempty"`
	MinNodes        uint32 `json:"min_nodes,omitempty"`
	MaxCPUsPerNode  uint32 `json:"max_cpus_per_node,omitempty"`
	MaxMemPerNodeMB uint64 `json:"max_mem_per_node_mb,omitempty"`
	MaxMemPerCPUMB  uint64 `json:"max_mem_per_cpu_mb,omitempty"`
	TotalNodes      uint32 `json:"total_nodes,omitempty"`
	TotalCPUs       uint32 `json:"total_cpus,omitempty"`
	Nodes           string `json:"nodes"`
	// Types are the GPU types on the partition's usable nodes.
	Types []SitePartitionType `json:"types,omitempty"`
}

// SitePartitionType is one GPU type within a partition.
type SitePartitionType struct {
	Type       string `json:"type"`
	Nodes      int    `json:"nodes"`        // usable nodes with this type
	GPUs       int    `json:"gpus"`         // GPUs on them
	MaxPerNode int    `json:"max_per_node"` // most GPUs of this type on one node
	Used       int    `json:"used"`         // allocated now
	// Smallest node of this type in the partition (0: unknown).
	MinCPUsPerNode  int    `json:"min_cpus_per_node,omitempty"`
	MinMemPerNodeMB uint64 `json:"min_mem_per_node_mb,omitempty"`
}

// SiteNode is one node.
type SiteNode struct {
	Name         string         `json:"name"`
	State        string         `json:"state"`
	Usable       bool           `json:"usable"`
	GPUs         map[string]int `json:"gpus,omitempty"` // type -> count
	CPUs         int            `json:"cpus,omitempty"` // 0: unknown
	RealMemoryMB uint64         `json:"real_memory_mb,omitempty"`
	Partitions   []string       `json:"partitions,omitempty"`
}

// SiteGPUType is what is known of one GPU type.
type SiteGPUType struct {
	Type string `json:"type"`
	// MemoryBytes per GPU, 0 when unknown; MemorySource says where it came
	// from: "config" (gpu_mem.<type>), "agents" (the smallest total the
	// node agents report for this type) or "unknown".
	MemoryBytes  uint64  `json:"memory_bytes,omitempty"`
	MemorySource string  `json:"memory_source"`
	Speed        float64 `json:"relative_speed,omitempty"` // admin's speed.<type>, 0 when not set
}

// Charging is the admin's rates. Rates are per GPU-hour and per
// core-hour in Unit, looked up most specific first: partition and type,
// type, partition, site-wide.
type Charging struct {
	Unit  string `json:"unit,omitempty"`
	Rates []Rate `json:"rates,omitempty"`
}

// Rate is one configured rate; empty Partition or GPUType match any.
type Rate struct {
	Resource  string  `json:"resource"` // "gpu" (per GPU-hour) or "core" (per core-hour)
	Partition string  `json:"partition,omitempty"`
	GPUType   string  `json:"gpu_type,omitempty"`
	PerHour   float64 `json:"per_hour"`
}

// EstimateRequest asks what a job would need where, and at what cost
// (`rota estimate`). Zero fields are not given.
type EstimateRequest struct {
	V int `json:"v"`
	// GPU request: per node (--gres/--gpus-per-node), per job (--gpus),
	// per task (--gpus-per-task); Nodes and Tasks size the job.
	GPUsPerNode uint32 `json:"gpus_per_node,omitempty"`
	GPUsPerJob  uint32 `json:"gpus_per_job,omitempty"`
	GPUsPerTask uint32 `json:"gpus_per_task,omitempty"`
	Nodes       uint32 `json:"nodes,omitempty"`
	Tasks       uint32 `json:"tasks,omitempty"`
	CPUsPerTask uint32 `json:"cpus_per_task,omitempty"`
	// GPUType restricts the answer to one type (--gres=gpu:v100:1).
	GPUType string `json:"gpu_type,omitempty"`
	// Partition restricts the answer to one partition (-p).
	Partition    string `json:"partition,omitempty"`
	TimeLimitMin uint32 `json:"time_limit_min,omitempty"`
	// MemPerNodeMB is host memory per node (--mem); GPUMemBytes the GPU
	// memory each GPU needs.
	MemPerNodeMB uint64 `json:"mem_per_node_mb,omitempty"`
	GPUMemBytes  uint64 `json:"gpu_mem_bytes,omitempty"`
	Steps        uint64 `json:"steps,omitempty"`
	// Throughput is the user's steps/s per GPU type (--rota-throughput).
	Throughput map[string]float64 `json:"throughput,omitempty"`
	// Model is a job type of the controller's throughput table (Gavel's).
	Model string `json:"model,omitempty"`
	// User, Name and ScriptHash identify earlier runs of the same job,
	// whose measured rates and memory the controller may know.
	User       string `json:"user,omitempty"`
	Name       string `json:"name,omitempty"`
	ScriptHash string `json:"script_hash,omitempty"`
	// DataGB is the data the job reads, which running it on another
	// cluster must copy there (--job-data-gb, #ROTA --data-gb=N).
	DataGB float64 `json:"data_gb,omitempty"`
}

// EstimateReply is the answer: one row per partition and GPU type, and
// the recommended plans. Error is set when the request could not be
// answered at all.
type EstimateReply struct {
	V     int           `json:"v"`
	Unit  string        `json:"unit,omitempty"`
	GPUs  int           `json:"gpus,omitempty"` // GPUs the job asks for in total
	Cores int           `json:"cores,omitempty"`
	Rows  []EstimateRow `json:"rows"`
	// Clusters is the job on every cluster joined to this one, per
	// cluster x partition x type (docs/multicluster.md); nil when alone.
	Clusters []MCEstimate `json:"clusters,omitempty"`
	// Fastest is the plan that finishes first (queue wait + run time),
	// Cheapest the one that costs least; nil with the reason in Notes
	// when no row can be ranked.
	Fastest  *Plan    `json:"fastest,omitempty"`
	Cheapest *Plan    `json:"cheapest,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// EstimateRow is the job on one partition and GPU type. Each number has a
// Known flag or a pointer: unknown numbers are absent, with the reason.
type EstimateRow struct {
	Partition string   `json:"partition"`
	GPUType   string   `json:"gpu_type"`
	Debug     bool     `json:"debug,omitempty"`
	Fits      string   `json:"fits"` // "yes", "no" or "unknown"
	Why       []string `json:"why,omitempty"`
	Nodes     int      `json:"nodes,omitempty"` // nodes the job needs on this type
	// StepsPerSec and its source (measured, hint, table, model...).
	StepsPerSec *float64 `json:"steps_per_s,omitempty"`
	RateBasis   string   `json:"rate_basis,omitempty"`
	RunMin      *float64 `json:"run_min,omitempty"`
	RunWhy      string   `json:"run_why,omitempty"` // why RunMin is unknown
	WaitMin     *float64 `json:"wait_min,omitempty"`
	WaitWhy     string   `json:"wait_why,omitempty"`
	// Segments is how many jobs a chain needs (1: no chain), each at most
	// SegmentMin long: the job's --time within the partition's MaxTime;
	// 0 when the run time is unknown.
	Segments   int      `json:"segments,omitempty"`
	SegmentMin uint32   `json:"segment_min,omitempty"`
	MaxTimeMin uint32   `json:"max_time_min,omitempty"`
	Cost       *float64 `json:"cost,omitempty"`
	CostBasis  string   `json:"cost_basis,omitempty"`
	// FinishMin is WaitMin x Segments + RunMin: every segment of a chain
	// queues again, taken to wait as long as the first would now.
	FinishMin *float64 `json:"finish_min,omitempty"`
}

// Plan is a recommended row; unknown numbers are absent.
type Plan struct {
	Partition string   `json:"partition"`
	GPUType   string   `json:"gpu_type"`
	Segments  int      `json:"segments"`
	RunMin    *float64 `json:"run_min,omitempty"`
	WaitMin   *float64 `json:"wait_min,omitempty"`
	FinishMin *float64 `json:"finish_min,omitempty"`
	Cost      *float64 `json:"cost,omitempty"`
	Why       string   `json:"why"`
}

func (m *EstimateRequest) version() int { return m.V }
func (m *EstimateReply) version() int   { return m.V }
