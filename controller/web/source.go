package web

import (
	"context"
	"time"

	"github.com/rota-hpc/rota/controller/trend"
	"github.com/rota-hpc/rota/wire"
)

// Source is what the web view reads from the controller. Every method only
// reads: nothing the page does can change the cluster. controller/app
// implements it.
type Source interface {
	// Overview is the cluster as the controller last read it.
	Overview(ctx context.Context) Overview
	// Jobs are the pending and running GPU jobs in Slurm's queue, with
	// what Rota gave them and why.
	Jobs(ctx context.Context) (Jobs, error)
	// Explain is what `rota explain` answers for a job.
	Explain(ctx context.Context, jobID uint32) wire.ExplainReply
	// Trend is the fairness and JCT samples, oldest first.
	Trend() []trend.Sample
	// Moves are the round loop's migrations and the chains of segments.
	Moves() Moves
	// Agents are the GPU nodes and what their agents last reported.
	Agents() Agents
	// Estimate answers as the controller answers `rota estimate`.
	Estimate(ctx context.Context, req *wire.EstimateRequest) wire.EstimateReply
	// Models are the throughput table's job types (the estimate form's
	// --model), none without a table.
	Models() []string
}

// Overview is the controller and the cluster's GPU types.
type Overview struct {
	// Leading: this controller serves requests and drives Slurm; a
	// standby shows what it last knew. Leader is this controller's lease
	// candidate id when controllers elect one.
	Leading bool
	Leader  string
	Policy  string
	// RefreshedAt is when the cluster was last read from Slurm (zero:
	// not yet).
	RefreshedAt time.Time
	Decisions   uint64
	Types       []wire.TypeState
	Partitions  []wire.Partition
	// Rounds are the round loop's counters; nil when it does not run.
	Rounds *wire.RoundsStatus
}

// Jobs are the GPU jobs of Slurm's queue at one read.
type Jobs struct {
	At   time.Time
	List []Job
}

// Job is one pending or running GPU job.
type Job struct {
	ID                             uint32
	State, Reason                  string
	User, Account, Name, Partition string
	Submit, Start                  time.Time // Start zero while pending
	TimeLimitMin                   uint32    // 0 unlimited
	Nodes                          string
	// GPUs is how many it asks for in all; Request the GPU request as
	// Slurm holds it (TRES per job, node, socket or task).
	GPUs    int
	Request string
	// Type is the GPU type it runs on or is constrained to ("" any).
	Type string
	// Decision is the Rota decision id in its annotation ("" none: the
	// plugin failed open or the job opted out).
	Decision string
	// Given is what Rota's decision gave (type, time limit), in words;
	// "" when the decision was not found.
	Given string
	// Why is the round loop's reason for the job's type, else the
	// decision's.
	Why   string
	Moves int
}

// Moves are the round loop's migrations and the chains.
type Moves struct {
	Rounds *wire.RoundsStatus // nil when the round loop does not run
	// Moved are the jobs of the last plan that were moved at least once
	// or are being moved now.
	Moved  []Moved
	Chains []wire.ChainStatus
}

// Moved is one job the round loop moved.
type Moved struct {
	JobID     uint32
	Type      string
	Moves     int
	Migrating bool // checkpointed and requeued this round
	Why       string
}

// Agents are the GPU nodes and their agents.
type Agents struct {
	Ingest *wire.IngestStatus // nil before the intake started
	Nodes  []AgentNode
	// SlurmAt is when the nodes' Slurm state was read (the controller's
	// refresh).
	SlurmAt time.Time
}

// AgentNode is one GPU node: Slurm's view and its agent's last report.
type AgentNode struct {
	Node, SlurmState, GPUType string
	GPUs                      int // Slurm's count
	// Seen is when the controller received the agent's last report
	// (zero: never, or forgotten).
	Seen          time.Time
	ReportedGPUs  int
	UtilPercent   float64 // mean over its GPUs
	MemUsedBytes  uint64
	MemTotalBytes uint64
	Jobs          int
	LostReports   uint64
	ReportedType  string
}
