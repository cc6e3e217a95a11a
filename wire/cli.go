package wire

// ExplainRequest asks why a job got its GPU type and walltime.
type ExplainRequest struct {
	V     int    `json:"v"`
	JobID uint32 `json:"job_id"`
}

// ExplainReply carries the decision behind a job, or Error when there is none.
type ExplainReply struct {
	V        int       `json:"v"`
	Decision *Decision `json:"decision,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// StatusRequest asks for the controller's view of the cluster.
type StatusRequest struct {
	V int `json:"v"`
}

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
