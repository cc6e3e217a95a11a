package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// The parsers below read slurmrestd's answers of every supported API
// version. v0.0.37/v0.0.38 (Slurm 22.05) give plain numbers (null for
// NO_VAL), states as strings and flat partition records; v0.0.39 and later
// give numbers as {"set","infinite","number"}, states as arrays, and
// partitions nested (nodes.configured, maximums.time, ...). Each field
// type accepts both shapes.

// restNum is a Slurm number: a JSON number, null (unset), or
// {"set": bool, "infinite": bool, "number": n}.
type restNum struct {
	N        int64
	Set      bool
	Infinite bool
}

func (n *restNum) UnmarshalJSON(b []byte) error {
	*n = restNum{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	if b[0] == '{' {
		var o struct {
			Set      *bool           `json:"set"`
			Infinite bool            `json:"infinite"`
			Number   json.RawMessage `json:"number"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		n.Infinite = o.Infinite
		if o.Infinite {
			n.Set = true
			return nil
		}
		if o.Set != nil && !*o.Set {
			return nil
		}
		if len(o.Number) == 0 {
			return nil
		}
		return n.UnmarshalJSON(o.Number)
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch strings.ToUpper(s) {
		case "", "N/A", "NONE":
			return nil
		case "UNLIMITED", "INFINITE":
			n.Set, n.Infinite = true, true
			return nil
		}
		b = []byte(s)
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("want a number, got %s", trunc(string(b)))
	}
	if math.IsNaN(f) || f > math.MaxInt64 || f < math.MinInt64 {
		return fmt.Errorf("number out of range: %s", trunc(string(b)))
	}
	n.N, n.Set = int64(f), true
	return nil
}

// u32 is the number as a count or limit: 0 when unset, infinite, negative
// (v0.0.38 prints -1 for unlimited) or Slurm's NO_VAL/INFINITE.
func (n restNum) u32() uint32 {
	if !n.Set || n.Infinite || n.N < 0 || n.N >= 0xfffffffe {
		return 0
	}
	return uint32(n.N)
}

func (n restNum) u64() uint64 {
	if !n.Set || n.Infinite || n.N < 0 || uint64(n.N) >= 0xfffffffffffffffe {
		return 0
	}
	return uint64(n.N)
}

// nice is the number as a nice value. v0.0.38 prints a negative nice as
// its 32-bit two's complement (-77 as 4294967219; verified on 22.05.8),
// and NO_VAL/INFINITE mean none.
func (n restNum) nice() int32 {
	switch {
	case !n.Set || n.Infinite || n.N >= 0xfffffffe || n.N < math.MinInt32:
		return 0
	case n.N > math.MaxInt32:
		return int32(uint32(n.N))
	}
	return int32(n.N)
}

// time is the number as a Unix time; zero when unset or 0.
func (n restNum) time() time.Time {
	if !n.Set || n.Infinite || n.N <= 0 || n.N >= 0xfffffffe {
		return time.Time{}
	}
	return time.Unix(n.N, 0)
}

// restList is a list of strings: a JSON array, or one comma-separated
// string (v0.0.38's features), null for none.
type restList []string

func (l *restList) UnmarshalJSON(b []byte) error {
	*l = nil
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*l = list(s)
		return nil
	}
	var a []string
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("want a string or a list of strings, got %s", trunc(string(b)))
	}
	for _, s := range a {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// restStr is a string that may also come as null or a number.
type restStr string

func (s *restStr) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*s = ""
	case b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = restStr(v)
	case b[0] == '[' || b[0] == '{':
		return fmt.Errorf("want a string, got %s", trunc(string(b)))
	default:
		*s = restStr(b)
	}
	return nil
}

// restJob is the part of a job record Rota reads.
type restJob struct {
	JobID         restNum  `json:"job_id"`
	JobState      restList `json:"job_state"`
	StateReason   restStr  `json:"state_reason"`
	UserName      restStr  `json:"user_name"`
	Account       restStr  `json:"account"`
	Name          restStr  `json:"name"`
	Partition     restStr  `json:"partition"`
	QOS           restStr  `json:"qos"`
	SubmitTime    restNum  `json:"submit_time"`
	StartTime     restNum  `json:"start_time"`
	SuspendTime   restNum  `json:"suspend_time"`
	TimeLimit     restNum  `json:"time_limit"`
	Nodes         restStr  `json:"nodes"`
	NodeCount     restNum  `json:"node_count"`
	TresPerJob    restStr  `json:"tres_per_job"`
	TresPerNode   restStr  `json:"tres_per_node"`
	TresPerSocket restStr  `json:"tres_per_socket"`
	TresPerTask   restStr  `json:"tres_per_task"`
	Features      restStr  `json:"features"`
	Priority      restNum  `json:"priority"`
	RestartCnt    restNum  `json:"restart_cnt"`
	Tasks         restNum  `json:"tasks"`
	Nice          restNum  `json:"nice"`
	AdminComment  string   `json:"admin_comment"`
	// GresDetail is read only by JobGPUs (a form it cannot read must not
	// fail the queue's read).
	GresDetail json.RawMessage `json:"gres_detail"`
}

func decodeJobs(body []byte) ([]restJob, error) {
	var env struct {
		Jobs []restJob `json:"jobs"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("slurmrestd job list: %w", err)
	}
	return env.Jobs, nil
}

// ParseRestdJobs reads a slurmrestd job list (GET .../jobs or
// .../job/{id}) into the pending and running jobs, as ParseSqueue fills
// them. now gives running jobs their run time (the API has no elapsed
// time field in v0.0.38).
func ParseRestdJobs(body []byte, now time.Time) ([]Job, error) {
	recs, err := decodeJobs(body)
	if err != nil {
		return nil, err
	}
	return restdJobs(recs, now)
}

// restdJobs converts job records; now gives running jobs their run time.
func restdJobs(recs []restJob, now time.Time) ([]Job, error) {
	var err error
	jobs := make([]Job, 0, len(recs))
	for i := range recs {
		rj := &recs[i]
		state := ""
		if len(rj.JobState) > 0 {
			state = strings.ToUpper(rj.JobState[0])
		}
		switch state {
		case "PENDING", "RUNNING", "CONFIGURING":
		default:
			continue
		}
		if !rj.JobID.Set || rj.JobID.N <= 0 || rj.JobID.N > math.MaxUint32 {
			return nil, fmt.Errorf("slurmrestd job list: job %d has no valid job_id", i)
		}
		j := Job{ID: uint32(rj.JobID.N), State: state, Reason: string(rj.StateReason), User: string(rj.UserName),
			Account: null(string(rj.Account)), Name: string(rj.Name), Partition: string(rj.Partition),
			QOS: null(string(rj.QOS)), TresPerJob: na(string(rj.TresPerJob)), TresPerNode: na(string(rj.TresPerNode)),
			TresPerSocket: na(string(rj.TresPerSocket)), TresPerTask: na(string(rj.TresPerTask)),
			Features: null(string(rj.Features)), TimeLimitMin: rj.TimeLimit.u32(), NumNodes: int(rj.NodeCount.u32()),
			NumTasks: int(rj.Tasks.u32()), Priority: rj.Priority.u32(), Restarts: int(rj.RestartCnt.u32()),
			Submit: rj.SubmitTime.time(), DecisionRead: true}
		if j.Reason == "" {
			j.Reason = "None"
		}
		j.Nice = rj.Nice.nice()
		if j.Running() {
			j.Start = rj.StartTime.time()
			if !j.Start.IsZero() && now.After(j.Start) {
				j.RunSeconds = math.Floor(now.Sub(j.Start).Seconds())
			}
			if j.Nodes, err = ExpandHostlist(string(rj.Nodes)); err != nil {
				return nil, fmt.Errorf("slurmrestd job %d node list: %w", j.ID, err)
			}
		}
		j.Decision, j.Noted = DecisionInComment(rj.AdminComment), IsRotaNote(rj.AdminComment)
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// restNode is the part of a node record Rota reads.
type restNode struct {
	Name       restStr  `json:"name"`
	State      restList `json:"state"`
	StateFlags restList `json:"state_flags"`
	Partitions restList `json:"partitions"`
	Gres       restStr  `json:"gres"`
	GresUsed   restStr  `json:"gres_used"`
	Features   restList `json:"features"`
}

// ParseRestdNodes reads GET .../nodes into nodes as ParseSinfoNodes
// gives them. The state is sinfo's long form: the base state and its
// flags, lower case, joined by '+' ("idle+drain"), which cluster.Usable
// reads.
func ParseRestdNodes(body []byte) ([]Node, error) {
	var env struct {
		Nodes []restNode `json:"nodes"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("slurmrestd node list: %w", err)
	}
	nodes := make([]Node, 0, len(env.Nodes))
	for _, rn := range env.Nodes {
		if rn.Name == "" {
			return nil, fmt.Errorf("slurmrestd node list: a node without a name")
		}
		gpus, used, err := NodeGres(string(rn.Gres), string(rn.GresUsed))
		if err != nil {
			return nil, fmt.Errorf("node %s: gres %q, gres_used %q: %w", rn.Name, rn.Gres, rn.GresUsed, err)
		}
		parts := append(restList(nil), rn.State...)
		parts = append(parts, rn.StateFlags...)
		for i := range parts {
			parts[i] = strings.ToLower(parts[i])
		}
		n := Node{Name: string(rn.Name), State: strings.Join(parts, "+"), GPUs: gpus, GPUsUsed: used,
			Partitions: []string(rn.Partitions), Features: []string(rn.Features), Shards: NodeShards(string(rn.Gres))}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// restPartNodes is a partition's nodes: a host list string (v0.0.38) or
// {"configured": "...", "total": n} (v0.0.39 and later).
type restPartNodes struct {
	List  string
	Total restNum
}

func (p *restPartNodes) UnmarshalJSON(b []byte) error {
	*p = restPartNodes{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	if b[0] == '"' {
		return json.Unmarshal(b, &p.List)
	}
	var o struct {
		Configured restStr `json:"configured"`
		Total      restNum `json:"total"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("partition nodes: %w", err)
	}
	p.List, p.Total = string(o.Configured), o.Total
	return nil
}

// restPartition is a partition record of either shape.
type restPartition struct {
	Name  restStr       `json:"name"`
	Nodes restPartNodes `json:"nodes"`
	Flags restList      `json:"flags"`
	State restList      `json:"state"`
	// v0.0.37/38.
	MaxTimeLimit     restNum `json:"max_time_limit"`
	DefaultTimeLimit restNum `json:"default_time_limit"`
	MaxNodesPerJob   restNum `json:"maximum_nodes_per_job"`
	MinNodesPerJob   restNum `json:"min_nodes_per_job"`
	MinNodesPerJob22 restNum `json:"min nodes per job"` // 22.05's own spelling
	MaxCPUsPerNode   restNum `json:"maximum_cpus_per_node"`
	MaxMemPerNode    restNum `json:"maximum_memory_per_node"`
	MaxMemPerCPU     restNum `json:"maximum_memory_per_cpu"`
	TotalNodes       restNum `json:"total_nodes"`
	TotalCPUs        restNum `json:"total_cpus"`
	BillingWeights   restStr `json:"billing_weights"`
	// v0.0.39 and later.
	Partition *struct {
		State restList `json:"state"`
	} `json:"partition"`
	Maximums *struct {
		Time                   restNum `json:"time"`
		Nodes                  restNum `json:"nodes"`
		CPUsPerNode            restNum `json:"cpus_per_node"`
		MemoryPerCPU           restNum `json:"memory_per_cpu"`
		PartitionMemoryPerNode restNum `json:"partition_memory_per_node"`
		PartitionMemoryPerCPU  restNum `json:"partition_memory_per_cpu"`
	} `json:"maximums"`
	Minimums *struct {
		Nodes restNum `json:"nodes"`
	} `json:"minimums"`
	Defaults *struct {
		Time restNum `json:"time"`
	} `json:"defaults"`
	CPUs *struct {
		Total restNum `json:"total"`
	} `json:"cpus"`
	// TRES is a string in v0.0.38 ("cpu=48,..."), an object with
	// billing_weights from v0.0.39.
	TRES json.RawMessage `json:"tres"`
}

// ParseRestdPartitions reads GET .../partitions into partitions as
// ParsePartitions gives them (0: unlimited or not reported).
func ParseRestdPartitions(body []byte) ([]Partition, error) {
	var env struct {
		Partitions []restPartition `json:"partitions"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("slurmrestd partition list: %w", err)
	}
	out := make([]Partition, 0, len(env.Partitions))
	for _, rp := range env.Partitions {
		if rp.Name == "" {
			return nil, fmt.Errorf("slurmrestd partition list: a partition without a name")
		}
		p := Partition{Name: string(rp.Name), Nodes: rp.Nodes.List, MaxTimeMin: rp.MaxTimeLimit.u32(),
			DefaultTimeMin: rp.DefaultTimeLimit.u32(), MaxNodes: rp.MaxNodesPerJob.u32(),
			MinNodes: max(rp.MinNodesPerJob.u32(), rp.MinNodesPerJob22.u32()), MaxCPUsPerNode: rp.MaxCPUsPerNode.u32(),
			MaxMemPerNodeMB: rp.MaxMemPerNode.u64(), MaxMemPerCPUMB: rp.MaxMemPerCPU.u64(),
			TotalNodes: rp.TotalNodes.u32(), TotalCPUs: rp.TotalCPUs.u32(), BillingWeights: string(rp.BillingWeights)}
		var tres struct {
			BillingWeights restStr `json:"billing_weights"`
		}
		if len(rp.TRES) > 0 && rp.TRES[0] == '{' && json.Unmarshal(rp.TRES, &tres) == nil && tres.BillingWeights != "" {
			p.BillingWeights = string(tres.BillingWeights)
		}
		for _, f := range rp.Flags {
			if strings.EqualFold(f, "default") {
				p.Default = true
			}
		}
		state := rp.State
		if rp.Partition != nil && len(rp.Partition.State) > 0 {
			state = rp.Partition.State
		}
		if len(state) > 0 {
			p.State = strings.ToUpper(state[0])
		}
		if m := rp.Maximums; m != nil {
			p.MaxTimeMin, p.MaxNodes, p.MaxCPUsPerNode = m.Time.u32(), m.Nodes.u32(), m.CPUsPerNode.u32()
			p.MaxMemPerNodeMB = m.PartitionMemoryPerNode.u64()
			p.MaxMemPerCPUMB = max(m.PartitionMemoryPerCPU.u64(), m.MemoryPerCPU.u64())
		}
		if m := rp.Minimums; m != nil {
			p.MinNodes = m.Nodes.u32()
		}
		if d := rp.Defaults; d != nil {
			p.DefaultTimeMin = d.Time.u32()
		}
		if rp.Nodes.Total.Set {
			p.TotalNodes = rp.Nodes.Total.u32()
		}
		if c := rp.CPUs; c != nil {
			p.TotalCPUs = c.Total.u32()
		}
		out = append(out, p)
	}
	return out, nil
}
