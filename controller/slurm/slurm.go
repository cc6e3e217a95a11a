// Package slurm is the controller's boundary to Slurm: what it reads of
// the cluster (nodes, GPUs, partitions, a job's annotation). Client is an
// interface so tests and slurmrestd (Restd, restd.go) can stand in for the
// command line tools (CLI).
package slurm

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rota-hpc/rota/controller/limits"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Node is one Slurm node and its GPUs by type.
type Node struct {
	Name       string
	State      string
	Partitions []string
	GPUs       map[string]int // type -> configured count ("" for untyped)
	GPUsUsed   map[string]int // type -> allocated now
	// Features are the node's available features (AvailableFeatures).
	// Rota types jobs by constraint onto a GPU type whose nodes carry it
	// as a feature (see cluster.TypeCap.ByFeature).
	Features []string
	// Shards is how many gres/shard the node offers (its Gres), 0 none:
	// its GPUs can be shared by jobs asking for shards.
	Shards int
}

// ShardsPerGPU is how many shards each of the node's GPUs is offered as
// (0 none) and the GPU type they are of; ok is false where that cannot be
// told: the node holds GPUs of several types (or untyped ones beside
// typed), or its shards do not divide evenly among its GPUs.
func (n *Node) ShardsPerGPU() (per int, typ string, ok bool) {
	count := 0
	for t, c := range n.GPUs {
		if c <= 0 {
			continue
		}
		if count > 0 {
			return 0, "", false
		}
		typ, count = t, c
	}
	if count == 0 || n.Shards%count != 0 {
		return 0, "", false
	}
	return n.Shards / count, typ, true
}

// Partition is what Rota needs of a Slurm partition. Times in minutes,
// 0 meaning unlimited / not set.
type Partition struct {
	Name           string
	Default        bool
	MaxTimeMin     uint32
	DefaultTimeMin uint32
	Nodes          string
	// Limits and size as `scontrol show partition -o` prints them (read
	// by ParsePartitions; 0 means unlimited or not reported). State is
	// UP, DOWN, DRAIN or INACTIVE ("" when not reported).
	State           string
	MaxNodes        uint32
	MinNodes        uint32
	MaxCPUsPerNode  uint32
	MaxMemPerNodeMB uint64
	MaxMemPerCPUMB  uint64
	TotalNodes      uint32
	TotalCPUs       uint32
	// BillingWeights is its TRESBillingWeights as written
	// ("CPU=1.0,GRES/gpu=2.0"; "" none): what fair share counts a job's
	// use by (billing).
	BillingWeights string
}

// Client reads Slurm's state.
type Client interface {
	Nodes(ctx context.Context) ([]Node, error)
	Partitions(ctx context.Context) ([]Partition, error)
	// JobAdminComment returns a job's AdminComment ("" when none).
	JobAdminComment(ctx context.Context, jobID uint32) (string, error)
}

// Scheduler is the part of Slurm the round loop drives: it reads the
// queue and changes pending and running jobs. Every call is one command;
// a failure affects that job only.
type Scheduler interface {
	Client
	// Jobs lists pending and running jobs.
	Jobs(ctx context.Context) ([]Job, error)
	// Job reads one job; ok is false when it is neither pending nor
	// running.
	Job(ctx context.Context, id uint32) (j Job, ok bool, err error)
	// DecisionIDs maps job ids to the Rota decision id in their
	// AdminComment, for the jobs that have one. Only needed when Jobs
	// cannot read AdminComment (Job.DecisionRead false).
	DecisionIDs(ctx context.Context) (map[uint32]string, error)
	// Update changes a job; only the set fields of u are sent.
	Update(ctx context.Context, jobID uint32, u JobUpdate) error
	// Requeue puts a running batch job back in the queue (same id).
	Requeue(ctx context.Context, jobID uint32) error
}

// JobsAter is a Scheduler that also says when the queue it returns was
// read: a shared read (CLI.ShareReads, QueueSince) can be older than the
// call. A stand-in whose reads are never shared answers with JobsNow.
type JobsAter interface {
	Scheduler
	JobsAt(ctx context.Context) ([]Job, time.Time, error)
}

// CLI runs sinfo and scontrol: formatted output of these is stable across
// Slurm versions and needs nothing but the client package.
type CLI struct {
	// Env is added to the environment of each command (e.g. SLURM_CONF=...).
	Env []string
	// Timeout bounds each command.
	Timeout time.Duration

	// commentField indexes commentFields: the name this squeue knows
	// AdminComment by, found on first use (len: none).
	commentField atomic.Int32
	// config caches `scontrol show config` (configValue, statesave.go).
	config atomic.Value

	// ShareReads lets the controller's parts that read the queue, the
	// nodes and the partitions on their own ticks (rounds, chains, fault
	// tolerance, services, the refresh) share one read made less than this
	// long ago, unless a write went through this CLI since (shared.go).
	// 0: every call reads.
	ShareReads time.Duration
	share      shared
}

// timeout bounds one Slurm command: Timeout, or 10 s.
func (c *CLI) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 10 * time.Second
}

func (c *CLI) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, _, err := c.runOut(ctx, name, args...)
	return out, err
}

// runOut is run with the command's stderr too: some Slurm commands
// report a problem there and still exit 0.
func (c *CLI) runOut(ctx context.Context, name string, args ...string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(cmd.Environ(), c.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if writes(name, args) {
		c.wrote() // even when it failed: it may have done part
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), errb.String(), nil
}

// ParseSinfoNodes reads `sinfo -h -N -O NodeList,Gres,GresUsed,StateLong,Partition[,Features]`.
// A node in several partitions appears once per partition; they merge.
func ParseSinfoNodes(out string) ([]Node, error) {
	byName := map[string]*Node{}
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 5 && len(f) != 6 {
			return nil, fmt.Errorf("sinfo line %d: want 5 or 6 fields, got %d: %q", i+1, len(f), line)
		}
		n := byName[f[0]]
		if n == nil {
			gpus, used, err := NodeGres(f[1], f[2])
			if err != nil {
				return nil, fmt.Errorf("node %s: Gres %q, GresUsed %q: %w", f[0], f[1], f[2], err)
			}
			n = &Node{Name: f[0], State: f[3], GPUs: gpus, GPUsUsed: used, Shards: NodeShards(f[1])}
			if len(f) == 6 && f[5] != "(null)" {
				n.Features = strings.Split(f[5], ",")
			}
			byName[f[0]] = n
		}
		n.Partitions = append(n.Partitions, strings.TrimSuffix(f[4], "*"))
	}
	nodes := make([]Node, 0, len(byName))
	for _, n := range byName {
		nodes = append(nodes, *n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// ParseReservedNodes reads `scontrol show reservation -o` (one reservation
// a line) into the nodes of the active ones that a job must ask for: a job
// that does not name the reservation cannot run there, and Rota never
// places a job that names one (the plugin leaves it as asked). A MAGNETIC
// reservation takes jobs that do not name it, so its nodes stay usable.
func ParseReservedNodes(out string) (map[string]bool, error) {
	nodes := map[string]bool{}
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "No reservations") {
			continue
		}
		kv := fields(line)
		if kv["ReservationName"] == "" {
			return nil, fmt.Errorf("reservation line %d: no ReservationName: %q", i+1, line)
		}
		if kv["State"] != "ACTIVE" || slices.Contains(list(kv["Flags"]), "MAGNETIC") {
			continue
		}
		if unlimited(kv["Nodes"]) {
			continue // licenses or burst buffer only
		}
		names, err := ExpandHostlist(kv["Nodes"])
		if err != nil {
			return nil, fmt.Errorf("reservation %s: Nodes: %w", kv["ReservationName"], err)
		}
		for _, n := range names {
			nodes[n] = true
		}
	}
	return nodes, nil
}

// MarkReserved adds the flag "reserved" to the state of the nodes in
// reserved (cluster.Usable then leaves them out).
func MarkReserved(nodes []Node, reserved map[string]bool) []Node {
	for i := range nodes {
		if reserved[nodes[i].Name] && !strings.Contains(nodes[i].State, "reserved") {
			nodes[i].State += "+reserved"
		}
	}
	return nodes
}

// ParseGres reads a node's gres list as sinfo prints it, e.g.
// "gpu:v100:4(S:0-1),nvme:1" or "gpu:k80:2(IDX:0-1,3)", into GPUs by type.
// "(null)" means none.
func ParseGres(s string) (map[string]int, error) {
	s = stripParens(s)
	out := map[string]int{}
	if s == "" || s == "null" || s == "(null)" || s == "N/A" {
		return out, nil
	}
	spec, err := gpureq.Parse(s)
	if err != nil {
		return nil, err
	}
	for _, e := range spec.Entries {
		if e.GPU {
			out[e.Type] += int(e.Count)
		}
	}
	return out, nil
}

// NodeGres reads a node's Gres and GresUsed into its GPUs and the GPUs in
// use by type. A GPU some job holds shards of (gres/shard) is in use: no
// job can have it whole meanwhile. Slurm lists the shards allocated on
// each GPU ("shard:3(2/4,1/4,0/4,-/4)": two GPUs hold shards); without
// that list, each shard counts as a GPU of its own, at most the node's.
// Shards are untyped: they count on the node's one GPU type, and on a
// node of several types on none (Slurm does not say which GPU they are).
func NodeGres(gres, gresUsed string) (gpus, used map[string]int, err error) {
	if gpus, err = ParseGres(gres); err != nil {
		return nil, nil, err
	}
	if used, err = ParseGres(gresUsed); err != nil {
		return nil, nil, err
	}
	if t := NodeType(gpus); t != "" {
		if n := shardGPUs(gresUsed); n > 0 {
			used[t] = min(used[t]+n, gpus[t])
		}
	}
	return gpus, used, nil
}

// NodeShards is how many shards a node's Gres offers
// ("gpu:v100:4,shard:v100:8(S:0)" offers 8); 0 none or unreadable.
func NodeShards(gres string) int {
	spec, err := gpureq.Parse(stripParens(gres))
	if err != nil {
		return 0
	}
	n, _ := spec.Shards()
	return int(n)
}

// shardGPUs is how many GPUs hold shards in a GresUsed string: each
// shard entry's list of shards per GPU where it has one, else its count
// (gpureq reads the entry).
func shardGPUs(s string) int {
	// Untyped shards: "shard:(null):1(IDX:0)" (22.05: the count is of
	// GPUs), "shard:(null):2(1/2,1/2,0/2,0/2)" (24.11), "shard:2(...)"
	// (newer).
	s = strings.ReplaceAll(s, "(null)", "")
	n := 0
	for _, e := range gpureq.SplitTop(s) {
		head, detail, _ := strings.Cut(e, "(")
		spec, err := gpureq.Parse(head)
		count, has := spec.Shards()
		if err != nil || !has {
			continue
		}
		listed := false
		for _, g := range strings.Split(strings.TrimSuffix(detail, ")"), ",") {
			if a, _, ok := strings.Cut(g, "/"); ok {
				listed = true
				if c, err := strconv.Atoi(a); err == nil && c > 0 {
					n++
				}
			}
		}
		if !listed {
			n += int(count)
		}
	}
	return n
}

// stripParens drops "(...)" groups, which may hold commas of their own.
func stripParens(s string) string {
	if s == "(null)" {
		return ""
	}
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')':
			if depth > 0 {
				depth--
			}
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Partitions lists partitions with their time limits.
// ParsePartitions reads `scontrol show partition -o`.
func ParsePartitions(out string) ([]Partition, error) {
	var ps []Partition
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		p := Partition{Name: kv["PartitionName"], Default: kv["Default"] == "YES", Nodes: kv["Nodes"], BillingWeights: kv["TRESBillingWeights"]}
		if p.Name == "" {
			return nil, fmt.Errorf("partition line without PartitionName: %q", line)
		}
		var err error
		if p.MaxTimeMin, err = limit(kv["MaxTime"]); err != nil {
			return nil, fmt.Errorf("partition %s MaxTime: %w", p.Name, err)
		}
		if p.DefaultTimeMin, err = limit(kv["DefaultTime"]); err != nil {
			return nil, fmt.Errorf("partition %s DefaultTime: %w", p.Name, err)
		}
		if err := partitionLimits(&p, kv); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// limit reads a partition time; UNLIMITED and NONE are 0.
func limit(s string) (uint32, error) {
	switch strings.ToUpper(s) {
	case "", "NONE", "UNLIMITED", "INFINITE", "N/A":
		return 0, nil
	}
	return slurmtime.Parse(s)
}

// JobAdminComment reads a job's AdminComment from `scontrol show job`,
// which prints it on a line of its own (it may contain spaces).
func (c *CLI) JobAdminComment(ctx context.Context, jobID uint32) (string, error) {
	out, err := c.run(ctx, "scontrol", "show", "job", strconv.FormatUint(uint64(jobID), 10))
	if err != nil {
		return "", err
	}
	return ParseAdminComment(string(out)), nil
}

// ParseAdminComment finds "AdminComment=..." in `scontrol show job` output.
func ParseAdminComment(out string) string {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "AdminComment="); ok {
			if v == "(null)" {
				return ""
			}
			return v
		}
	}
	return ""
}

// Backend is all the controller asks of Slurm: each part of the
// controller takes the subset it uses (an interface of its own, which
// controller/app checks against Backend when it compiles), and both
// backends are all of it, checked here. So no part finds out at run time
// that its backend lacks a capability and turns its feature off.
type Backend interface {
	Client
	JobsAter // a Scheduler that dates its reads
	Submitter
	AccountingReader
	NodeDetailer
	ShareReader
	PacedUpdater
	GPUIndexer
	// Limits reads the site's typed GPU limits (rounds.LimitReader).
	Limits(ctx context.Context) (*limits.Set, error)
	// Release is Slurm's release, major and minor.
	Release(ctx context.Context) (major, minor int, err error)
	// StateSaveDir is slurmctld's StateSaveLocation.
	StateSaveDir(ctx context.Context) (string, error)
	// Hold keeps a pending job from starting; Unhold gives it back.
	Hold(ctx context.Context, id uint32) error
	Unhold(ctx context.Context, id uint32) error
	// FindByComment is the job whose comment is exactly comment.
	FindByComment(ctx context.Context, comment string) (uint32, bool, error)
}

var (
	_ Backend = (*CLI)(nil)
	_ Backend = (*Restd)(nil)
)
