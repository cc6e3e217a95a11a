package wire

// Several clusters under one Rota (docs/multicluster.md). Each site's
// controller publishes what it knows on SubjectMCView(its name) and takes
// copies of other clusters' jobs on SubjectMCRoute(its name), their moved
// jobs' checkpoints on SubjectMCCheckpoint(its name), and answers probes of
// the link on SubjectMCProbe(its name). These are the
// only subjects the link between sites carries (its NATS leaf node
// connection may publish and subscribe SubjectMCAll and nothing else), so
// request replies go to SubjectMCReplyPrefix(the asker), not to _INBOX.
const (
	// SubjectMCAll matches every cross-cluster subject: the link's rights.
	SubjectMCAll = "rota.v1.mc.>"
	// SubjectMCViewAll matches every cluster's view.
	SubjectMCViewAll = "rota.v1.mc.view.*"
)

// SubjectMCView is where cluster publishes its MCView.
func SubjectMCView(cluster string) string { return "rota.v1.mc.view." + cluster }

// SubjectMCRoute is request/reply, another cluster -> cluster: submit a copy
// of a job here (or abort a route). Body MCRouteRequest, reply MCRouteReply.
func SubjectMCRoute(cluster string) string { return "rota.v1.mc.route." + cluster }

// SubjectMCCheckpoint is request/reply, another cluster -> cluster: a moved
// job's checkpoint file, opened (MCChunkOpen) and then sent in chunks at
// offsets. The request's metadata is in NATS headers (MCChunk*), its body
// the chunk's raw bytes; the reply is MCChunkReply.
func SubjectMCCheckpoint(cluster string) string { return "rota.v1.mc.ckpt." + cluster }

// SubjectMCProbe is request/reply, another cluster -> cluster: any body,
// answered with a few bytes, so the asker can time the link (its latency
// from a small request, its bandwidth from a large one).
func SubjectMCProbe(cluster string) string { return "rota.v1.mc.probe." + cluster }

// The headers of a checkpoint request on SubjectMCCheckpoint.
const (
	// MCChunkRoute is the route ID ("<from>.<job id>"), MCChunkFrom the
	// sending cluster.
	MCChunkRoute = "Rota-Route"
	MCChunkFrom  = "Rota-From"
	// MCChunkOpen ("1") opens the transfer: no body; the receiver records
	// it (MCChunkSize, MCChunkSHA256) and answers the bytes it holds.
	MCChunkOpen = "Rota-Open"
	// MCChunkSize is the whole file's size in bytes, MCChunkOffset where
	// this chunk's body goes in it (decimal).
	MCChunkSize   = "Rota-Size"
	MCChunkOffset = "Rota-Offset"
	// MCChunkSHA256 is the whole file's sha256 (hex), on the open.
	MCChunkSHA256 = "Rota-Sha256"
)

// MCChunkReply answers a checkpoint request: the bytes the receiver holds
// from the start of the file (Have: the sender goes on from there), Done
// with the file's path there once it landed whole and its sha256 matched,
// or an error (nothing written); Refused with it when the receiver will
// not take this file at all (no mc_transfer_dir, over its
// mc_transfer_max_gb), so that the sender gives up rather than retry.
// Offset echoes the request's.
type MCChunkReply struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	Offset  int64  `json:"offset"`
	Have    int64  `json:"have"`
	Done    bool   `json:"done,omitempty"`
	Path    string `json:"path,omitempty"`
	Error   string `json:"error,omitempty"`
	Refused bool   `json:"refused,omitempty"`
}

// SubjectMCReplyPrefix is the inbox prefix of cluster's requests over the
// link.
func SubjectMCReplyPrefix(cluster string) string { return "rota.v1.mc.reply." + cluster }

// MCView is one cluster as its controller sees it, published every few
// seconds. Times are RFC 3339.
type MCView struct {
	V       int    `json:"v"`
	Cluster string `json:"cluster"`
	At      string `json:"at"`
	// Types are the GPU types, by name.
	Types map[string]MCType `json:"types"`
	// DefaultPartition is where a copy of a job goes; Partitions their
	// MaxTime in minutes (0 unlimited).
	DefaultPartition string            `json:"default_partition"`
	Partitions       map[string]uint32 `json:"partitions"`
	// DemandGPUs is the GPUs asked by GPU jobs running or pending here
	// (the load the estimate shares a cluster's GPUs by); Running and
	// Pending count those jobs.
	DemandGPUs float64 `json:"demand_gpus"`
	Running    int     `json:"running"`
	Pending    int     `json:"pending"`
	// Speed is the relative speed per GPU type (controller.conf speed.*).
	Speed map[string]float64 `json:"speed,omitempty"`
	// Price per GPU-hour (mc_price; 1 when unset).
	Price float64 `json:"price"`
	// Routed and Received count the jobs this cluster sent away and took.
	Routed   int `json:"routed"`
	Received int `json:"received"`
	// Moved counts running jobs moved away, RefusedSlow the moves a slow
	// link made not pay.
	Moved       int `json:"moved"`
	RefusedSlow int `json:"refused_slow"`
	// CheckpointMaxGB is the largest checkpoint file this cluster takes
	// of a job moved here (mc_transfer_max_gb); 0: it takes none (no
	// mc_transfer_dir).
	CheckpointMaxGB float64 `json:"checkpoint_max_gb,omitempty"`
}

// MCType is one GPU type of a cluster.
type MCType struct {
	GPUs       int `json:"gpus"`
	Used       int `json:"used"`
	MaxPerNode int `json:"max_per_node"`
}

// MCRouteRequest asks a cluster to submit a copy of a job as its user, or
// (Abort) never to. ID names the route ("<from>.<job id>"): the receiver
// answers a repeated ID with the job it already submitted, so a retry
// never makes a second copy.
type MCRouteRequest struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	From    string `json:"from"`
	FromJob uint32 `json:"from_job"`
	Abort   bool   `json:"abort,omitempty"`
	User    string `json:"user,omitempty"`
	Name    string `json:"name,omitempty"`
	Script  []byte `json:"script,omitempty"`
	// Args are the sbatch options of the copy (partition, time, GPUs...).
	Args  []string `json:"args,omitempty"`
	Hints Hints    `json:"hints,omitempty"`
	// Why is the sender's reason, kept for explain on the receiver.
	Why string `json:"why,omitempty"`
	// Resume is the checkpoint a moved job resumes from, where the
	// transfer put it (the copy's ROTA_MC_RESUME); "" none.
	Resume string `json:"resume,omitempty"`
	// MoveCostS is what a move cost the job (checkpoint, restart and the
	// transfer), seconds: the copy stays at least that long before it
	// may move again (the simulator's rule).
	MoveCostS float64 `json:"move_cost_s,omitempty"`
}

// MCRouteReply is the receiver's answer: the job id of its copy, or
// Aborted (it will never submit this route), or an error (it did not
// submit and will not unless asked again).
type MCRouteReply struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	JobID   uint32 `json:"job_id,omitempty"`
	Aborted bool   `json:"aborted,omitempty"`
	Error   string `json:"error,omitempty"`
}

// MCStatus is the multi-cluster part of `rota status` and explain.
type MCStatus struct {
	Cluster string `json:"cluster"`
	// Peers are the other clusters' latest views and their age.
	Peers []MCPeer `json:"peers"`
	// Routes are the jobs sent away or taken in, newest first.
	Routes []MCRoute `json:"routes,omitempty"`
}

// MCPeer is another cluster's view as this one holds it.
type MCPeer struct {
	View       MCView  `json:"view"`
	AgeSeconds float64 `json:"age_s"`
	// Bandwidth (bytes/s) and LatencySeconds of the link to it (admin
	// config, mc_link); Bandwidth 0 means no link.
	Bandwidth      float64 `json:"bandwidth"`
	LatencySeconds float64 `json:"latency_s"`
	// The link as measured (probes and transfers, a moving average):
	// bandwidth (bytes/s) and latency, and the age of their last samples;
	// 0 and -1 when never measured.
	MeasuredBandwidth      float64 `json:"measured_bandwidth,omitempty"`
	MeasuredLatencySeconds float64 `json:"measured_latency_s,omitempty"`
	BandwidthAgeSeconds    float64 `json:"bandwidth_age_s"`
	LatencyAgeSeconds      float64 `json:"latency_age_s"`
	// Used is the figure predictions use now: "measured" (fresh enough),
	// "configured", or "none" (no transfer possible).
	Used string `json:"used,omitempty"`
	// ProbeError is the last probe's failure, "" when it answered.
	ProbeError string `json:"probe_error,omitempty"`
}

// MCRoute is one job routed between clusters.
type MCRoute struct {
	ID       string `json:"id"`
	From     string `json:"from"`
	FromJob  uint32 `json:"from_job"`
	To       string `json:"to"`
	ToJob    uint32 `json:"to_job,omitempty"`
	State    string `json:"state"`
	Why      string `json:"why"`
	At       string `json:"at"`
	Incoming bool   `json:"incoming,omitempty"`
	// A move of a running job: the predicted and measured transfer of
	// its checkpoint, the bytes the receiver holds of SizeBytes.
	Move       bool    `json:"move,omitempty"`
	PredictedS float64 `json:"predicted_s,omitempty"`
	ActualS    float64 `json:"actual_s,omitempty"`
	SentBytes  int64   `json:"sent_bytes,omitempty"`
	SizeBytes  int64   `json:"size_bytes,omitempty"`
}

// MCEstimate is one cluster x partition x type of `rota estimate`.
type MCEstimate struct {
	Cluster   string `json:"cluster"`
	Partition string `json:"partition"`
	Type      string `json:"type"`
	Fits      bool   `json:"fits"`
	Why       string `json:"why,omitempty"`
	// RunSeconds alone on the type; WaitSeconds the delay the load there
	// adds (the shared-cluster finish minus the run alone); CostGPUHours x
	// the cluster's price.
	RunSeconds  float64 `json:"run_s"`
	WaitSeconds float64 `json:"wait_s"`
	Cost        float64 `json:"cost"`
	// TransferSeconds: getting the job's data there (0 here; -1 no link).
	TransferSeconds float64 `json:"transfer_s"`
	DataGB          float64 `json:"data_gb"`
	Remote          bool    `json:"remote"`
	AgeSeconds      float64 `json:"age_s"`
}

func (m *MCChunkReply) version() int   { return m.V }
func (m *MCView) version() int         { return m.V }
func (m *MCRouteRequest) version() int { return m.V }
func (m *MCRouteReply) version() int   { return m.V }
