package wire

import "time"

// ExplainRequest asks why a job got its GPU type and walltime.
type ExplainRequest struct {
	V     int    `json:"v"`
	JobID uint32 `json:"job_id"`
}

// ExplainReply carries the decision behind a job, or Error when there is none.
type ExplainReply struct {
	V        int       `json:"v"`
	Decision *Decision `json:"decision,omitempty"`
	// Round is what the round loop last decided for the job, when it
	// manages it.
	Round *RoundJob `json:"round,omitempty"`
	// Chain is the chain the job is a segment of; ChainNote says why a
	// job that asked for a chain (or would need one) runs without.
	Chain     *ChainStatus `json:"chain,omitempty"`
	ChainNote string       `json:"chain_note,omitempty"`
	// Fault is the job's periodic checkpoints and the node failures it
	// lived through (docs/faulttolerance.md), when Rota follows it.
	Fault *FaultStatus `json:"fault,omitempty"`
	// Service is the inference service the job is a replica of
	// (docs/serve.md): every replica, where it runs, its rollovers.
	Service *ServiceStatus `json:"service,omitempty"`
	// MultiCluster is where the job went, or came from, between
	// clusters (docs/multicluster.md).
	MultiCluster *MCRoute `json:"multicluster,omitempty"`
	Error        string   `json:"error,omitempty"`
}

// FaultStatus is what Rota did to protect one job from node failures.
// Times are RFC 3339.
type FaultStatus struct {
	// Periodic says whether Rota asks the job for periodic checkpoints;
	// Why gives the interval and its basis, or why not.
	Periodic bool   `json:"periodic"`
	Why      string `json:"why,omitempty"`
	// IntervalSeconds is the current interval between checkpoints.
	IntervalSeconds float64 `json:"interval_s,omitempty"`
	// CostSeconds is the job's checkpoint cost (signal to acknowledgement,
	// smoothed); CostMeasured is false while it is the configured guess.
	CostSeconds  float64 `json:"cost_s,omitempty"`
	CostMeasured bool    `json:"cost_measured,omitempty"`
	// NodeMTBFSeconds is the per-node mean time between failures used,
	// and MTBFSource where it came from (admin, learned).
	NodeMTBFSeconds float64 `json:"node_mtbf_s,omitempty"`
	MTBFSource      string  `json:"mtbf_source,omitempty"`
	Checkpoints     int     `json:"checkpoints"`
	// LastCheckpoint and LastStep: the latest acknowledged one.
	LastCheckpoint string       `json:"last_checkpoint,omitempty"`
	LastStep       uint64       `json:"last_step,omitempty"`
	Events         []FaultEvent `json:"events,omitempty"`
}

// FaultEvent is one thing that happened to a job through a node failure:
// the failure, Slurm's requeue, the restart and what it resumed from.
type FaultEvent struct {
	Time string `json:"time"`
	// Kind: node_failed, requeued, not_requeued, restarted, resumed.
	Kind string `json:"kind"`
	Node string `json:"node,omitempty"`
	Text string `json:"text"`
}

// ServiceStatus is an inference service: its replicas, each a line of
// jobs that roll over before their time limits (docs/serve.md).
type ServiceStatus struct {
	Name string `json:"name"`
	User string `json:"user,omitempty"`
	// Spread is what its replicas are kept apart by: nodes or types.
	Spread   string           `json:"spread"`
	Replicas []ServiceReplica `json:"replicas"`
}

// ServiceReplica is one replica: the job serving now, the ones it rolled
// over from, and its successor.
type ServiceReplica struct {
	ID    uint32       `json:"id"` // its first job's id
	State string       `json:"state"`
	Why   string       `json:"why,omitempty"`
	Jobs  []ServiceJob `json:"jobs"`
}

// ServiceJob is one job of a replica. Times are RFC 3339, "" unknown.
type ServiceJob struct {
	JobID uint32 `json:"job_id"`
	N     int    `json:"n"`
	State string `json:"state,omitempty"`
	Nodes string `json:"nodes,omitempty"`
	// Excluded are the nodes Rota kept it off (ExcNodeList).
	Excluded  string `json:"excluded,omitempty"`
	Submitted string `json:"submitted,omitempty"`
	Started   string `json:"started,omitempty"`
	Ready     string `json:"ready,omitempty"`
	Ended     string `json:"ended,omitempty"`
	// OverlapSeconds is how long this job was ready while its
	// predecessor still ran; GapSeconds how long the replica had no ready
	// job between its predecessor's end and this one's readiness.
	OverlapSeconds *float64 `json:"overlap_s,omitempty"`
	GapSeconds     *float64 `json:"gap_s,omitempty"`
	Why            string   `json:"why,omitempty"`
}

// ChainStatus is a job run as a chain of segments past MaxTime
// (docs/chains.md): one logical job whose id is its first segment's.
type ChainStatus struct {
	ID    uint32 `json:"id"`
	State string `json:"state"` // running, done, cancelled, failed
	Why   string `json:"why,omitempty"`
	User  string `json:"user,omitempty"`
	Name  string `json:"name,omitempty"`
	// Mode is how successors are submitted: ahead or after_end.
	Mode string `json:"mode,omitempty"`
	// Planned is the number of segments the work was estimated to need.
	Planned  int            `json:"planned,omitempty"`
	Step     uint64         `json:"step,omitempty"`
	Total    uint64         `json:"total,omitempty"`
	Segments []ChainSegment `json:"segments"`
}

// ChainSegment is one job of a chain. Times are RFC 3339, "" unknown.
type ChainSegment struct {
	JobID     uint32 `json:"job_id"`
	N         int    `json:"n"`
	Partition string `json:"partition,omitempty"`
	Type      string `json:"type,omitempty"`
	State     string `json:"state,omitempty"`
	LimitMin  uint32 `json:"limit_min,omitempty"`
	Submitted string `json:"submitted,omitempty"`
	Started   string `json:"started,omitempty"`
	Ended     string `json:"ended,omitempty"`
	// GapSeconds is the time from the previous segment's end to this
	// one's start.
	GapSeconds *float64 `json:"gap_s,omitempty"`
	Checkpoint string   `json:"checkpoint,omitempty"`
	FirstStep  uint64   `json:"first_step,omitempty"`
	LastStep   uint64   `json:"last_step,omitempty"`
	Why        string   `json:"why,omitempty"`
}

// StatusRequest asks for the controller's view of the cluster.
type StatusRequest struct {
	V int `json:"v"`
	// Jobs asks for the measured throughput of each job (at most
	// MaxStatusJobs of them) besides the cluster view.
	Jobs bool `json:"jobs,omitempty"`
	// Site asks for the controller's knowledge base of the cluster.
	Site bool `json:"site,omitempty"`
}

// MaxStatusJobs bounds the jobs listed in a StatusReply, so the reply
// stays far below NATS's payload limit on a large cluster.
const MaxStatusJobs = 1000

// StatusReply is the controller's view: capacity and use per GPU type.
type StatusReply struct {
	V           int         `json:"v"`
	Policy      string      `json:"policy"`
	RefreshedAt string      `json:"refreshed_at"`
	Types       []TypeState `json:"types"`
	Partitions  []Partition `json:"partitions"`
	Decisions   uint64      `json:"decisions"`
	// Leader is the answering controller's lease id (host:pid:random)
	// when controllers share a NATS cluster and elect one; empty when the
	// controller runs its own embedded server.
	Leader string `json:"leader,omitempty"`
	// MultiCluster is the other clusters as this one sees them, and the
	// jobs sent between them (docs/multicluster.md); nil when alone.
	MultiCluster *MCStatus `json:"multicluster,omitempty"`
	// Ingest counts the agents' reports the controller took in.
	Ingest *IngestStatus `json:"ingest,omitempty"`
	// Jobs is the measured throughput of running jobs, by job id, when
	// the request asked for it; JobsTruncated says some were left out.
	Jobs          []JobThroughput `json:"jobs,omitempty"`
	JobsTruncated bool            `json:"jobs_truncated,omitempty"`
	// Rounds is the round loop's state, when it runs.
	Rounds *RoundsStatus `json:"rounds,omitempty"`
	// Site is the knowledge base, when the request asked for it.
	Site *Site `json:"site,omitempty"`
	// Chains are the jobs run as chains of segments (with Jobs).
	Chains []ChainStatus `json:"chains,omitempty"`
	// Services are the inference services (with Jobs).
	Services []ServiceStatus `json:"services,omitempty"`
	// QueueWaits is the queue-wait history the controller holds (read
	// from slurmdbd at start, then the starts it sees itself).
	QueueWaits *QueueWaitHistory `json:"queue_waits,omitempty"`
}

// QueueWaitHistory is where the controller's recent queue waits came
// from and what they are, per partition and GPU type.
type QueueWaitHistory struct {
	// Source says in words where the history came from, e.g. "12 jobs
	// from slurmdbd since 2026-11-18 10:00" or why slurmdbd was not read.
	Source string `json:"source"`
	// FromAccounting counts the started jobs read from slurmdbd (sacct)
	// and Since is the start of the window read (zero: not read).
	FromAccounting int       `json:"from_accounting"`
	Since          time.Time `json:"since,omitempty"`
	// Seen counts the starts the controller saw itself in the queue.
	Seen   int              `json:"seen"`
	Groups []QueueWaitGroup `json:"groups,omitempty"`
}

// QueueWaitGroup is the waits of the jobs of one partition and GPU type
// (type "" for jobs without GPUs or of an unknown type).
type QueueWaitGroup struct {
	Partition     string    `json:"partition"`
	GPUType       string    `json:"gpu_type"`
	Jobs          int       `json:"jobs"`
	MeanWaitSec   float64   `json:"mean_wait_s"`
	MedianWaitSec float64   `json:"median_wait_s"`
	MaxWaitSec    float64   `json:"max_wait_s"`
	LastStart     time.Time `json:"last_start"`
}

// RoundsStatus is what the round loop did and its last plan.
type RoundsStatus struct {
	Policy            string `json:"policy"`
	Rounds            uint64 `json:"rounds"`
	RoundErrors       uint64 `json:"round_errors"`
	SlurmErrors       uint64 `json:"slurm_errors"`
	Retyped           uint64 `json:"retyped"`
	Migrations        uint64 `json:"migrations"`
	MigrationFailures uint64 `json:"migration_failures"`
	// LimitsRaised counts running jobs' limits raised to follow their
	// progress (docs/rounds.md).
	LimitsRaised     uint64  `json:"limits_raised"`
	LastRoundSeconds float64 `json:"last_round_s"`
	SolveSeconds     float64 `json:"solve_s"`
	Objective        float64 `json:"objective"`
	// Jobs of the last plan (at most MaxStatusJobs).
	Jobs []RoundJob `json:"jobs,omitempty"`
}

// RoundJob is one job in the last round's plan.
type RoundJob struct {
	JobID  uint32             `json:"job_id"`
	Type   string             `json:"type,omitempty"`
	Placed bool               `json:"placed"`
	Share  map[string]float64 `json:"share,omitempty"`
	// Rates are steps/s per type and RateSource where each came from
	// (measured, hint, completed, table).
	Rates      map[string]float64 `json:"rates,omitempty"`
	RateSource map[string]string  `json:"rate_source,omitempty"`
	StepsLeft  float64            `json:"steps_left,omitempty"`
	Why        string             `json:"why"`
	// WalltimeMin is the limit Rota would give the job on Type now, and
	// WalltimeBasis how it was reckoned.
	WalltimeMin   uint32 `json:"walltime_min,omitempty"`
	WalltimeBasis string `json:"walltime_basis,omitempty"`
	Moves         int    `json:"moves,omitempty"`
}

// IngestStatus is the controller's count of agent reports since it started.
type IngestStatus struct {
	// Received counts messages on the agent subjects; Decoded those taken
	// in. The rest were dropped: Malformed (not JSON of the right shape,
	// too big, wrong version), Invalid (values out of range, node name not
	// matching the subject, table full), SlowConsumer (the controller fell
	// behind and the NATS client discarded them before they were read).
	Received     uint64 `json:"received"`
	Decoded      uint64 `json:"decoded"`
	Malformed    uint64 `json:"malformed"`
	Invalid      uint64 `json:"invalid"`
	SlowConsumer uint64 `json:"slow_consumer"`
	// Pending is how many messages wait to be read right now.
	Pending int `json:"pending"`
	// Nodes and Jobs are those heard of within the forget period;
	// Forgotten counts those dropped for silence.
	Nodes     int    `json:"nodes"`
	Jobs      int    `json:"jobs"`
	Forgotten uint64 `json:"forgotten"`
	// LostReports sums the gaps in the agents' sequence numbers.
	LostReports uint64 `json:"lost_reports"`
}

// JobThroughput is what the agents measured of one job on one GPU type.
type JobThroughput struct {
	JobID   uint32 `json:"job_id"`
	GPUType string `json:"gpu_type"`
	// StepsPerSec is smoothed over the reports of every node of the job
	// with that type; 0 when the job reports no progress.
	StepsPerSec float64 `json:"steps_per_s"`
	Step        uint64  `json:"step,omitempty"`
	Total       uint64  `json:"total,omitempty"`
	// PeakGPUMemoryBytes is the most GPU memory the job used on one node;
	// PeakGPUMemoryPerGPU the most per GPU (node total / its GPUs).
	PeakGPUMemoryBytes  uint64 `json:"peak_gpu_memory_bytes,omitempty"`
	PeakGPUMemoryPerGPU uint64 `json:"peak_gpu_memory_per_gpu_bytes,omitempty"`
	Nodes               int    `json:"nodes"`
	LastSeen            string `json:"last_seen"`
}

// TypeState is one GPU type's capacity as the controller last saw it.
type TypeState struct {
	Type  string  `json:"type"`
	Nodes int     `json:"nodes"`
	Total int     `json:"total"`
	Used  int     `json:"used"`
	Speed float64 `json:"relative_speed"`
}

// Partition is what the controller knows of a Slurm partition.
type Partition struct {
	Name           string `json:"name"`
	MaxTimeMin     uint32 `json:"max_time_min,omitempty"` // 0 = unlimited
	DefaultTimeMin uint32 `json:"default_time_min,omitempty"`
	Default        bool   `json:"default,omitempty"`
	Nodes          string `json:"nodes"`
}

func (m *ExplainRequest) version() int { return m.V }
func (m *ExplainReply) version() int   { return m.V }
func (m *StatusRequest) version() int  { return m.V }
func (m *StatusReply) version() int    { return m.V }
