package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// PlaceRequest is what the job_submit plugin asks the controller for every
// submission (or user update) that asks for GPUs.
type PlaceRequest struct {
	V int `json:"v"`
	// Modify is true for job_modify (an update of an existing job).
	Modify bool   `json:"modify,omitempty"`
	JobID  uint32 `json:"job_id,omitempty"` // known only for Modify
	UID    uint32 `json:"uid"`
	// Account, QOS, Partition and Name as the user gave them; empty when
	// unset (the user's default account, the association's default QOS).
	Account   string `json:"account,omitempty"`
	QOS       string `json:"qos,omitempty"`
	Partition string `json:"partition,omitempty"`
	Name      string `json:"name,omitempty"`
	GPU       GPUAsk `json:"gpu"`
	// TimeLimitMin is the user's --time in minutes, 0 when not given.
	TimeLimitMin uint32 `json:"time_limit_min,omitempty"`
	Hints        Hints  `json:"hints,omitempty"`
	// Features is the job's constraint as the user gave it ("" none).
	Features string `json:"features,omitempty"`
	// ScriptHash identifies the batch script (hex SHA-256, first 16
	// bytes), so a resubmitted job finds its history; "" for job_modify.
	ScriptHash string `json:"script_hash,omitempty"`
	// NoScript is true for a submission without a batch script: an
	// allocation by salloc or srun, which a person is waiting on
	// (placement.KindOf). Never set for job_modify.
	NoScript bool `json:"no_script,omitempty"`
}

// GPUAsk summarises a job's GPU request as the controller needs it: how
// many GPUs, counted how, and whether the user named a type.
type GPUAsk struct {
	PerJob    uint32 `json:"per_job,omitempty"`
	PerNode   uint32 `json:"per_node,omitempty"`
	PerSocket uint32 `json:"per_socket,omitempty"`
	PerTask   uint32 `json:"per_task,omitempty"`
	// Type is the single type the user asked for; empty when untyped.
	// Types lists every type named when the request mixes several.
	Type  string   `json:"type,omitempty"`
	Types []string `json:"types,omitempty"`
	// Nodes and Tasks are the job's minimum node and task counts (0 unset),
	// needed to turn per-node/per-task counts into a total.
	Nodes uint32 `json:"nodes,omitempty"`
	Tasks uint32 `json:"tasks,omitempty"`
	// MaxNodes (-N min-max), TasksPerNode (--ntasks-per-node) and
	// SocketsPerNode (--sockets-per-node), 0 unset: with them the rule
	// knows how many GPUs each node must have and on how many nodes the
	// total must fit (gpureq.NeedOf).
	MaxNodes       uint32 `json:"max_nodes,omitempty"`
	TasksPerNode   uint32 `json:"tasks_per_node,omitempty"`
	SocketsPerNode uint32 `json:"sockets_per_node,omitempty"`
}

// Hints are the optional facts a user gave through the SPANK options.
type Hints struct {
	// Steps is the job's total number of training steps (--rota-steps).
	Steps uint64 `json:"steps,omitempty"`
	// Throughput is steps/s per GPU type (--rota-throughput).
	Throughput map[string]float64 `json:"throughput,omitempty"`
	// Types are the only GPU types Rota may give the job (--rota-types;
	// empty: any). A constraint such as "v100|p100" limits it the same way.
	Types []string `json:"types,omitempty"`
	// CheckpointSignal is the signal the job saves a checkpoint on
	// (--rota-checkpoint-signal, e.g. "USR1"); set means the job declared
	// it can be checkpointed, so Rota may move it.
	CheckpointSignal string `json:"checkpoint_signal,omitempty"`
	// Chain is --rota-chain: "on" runs the job as a chain of segments
	// past its time limit (docs/chains.md), "off" never; "" lets the
	// controller decide from its estimate.
	Chain string `json:"chain,omitempty"`
	// Kind is --rota-kind: KindBatch, KindInteractive or KindServe; ""
	// leaves it to the admin's rules and the request (placement.KindOf).
	Kind string `json:"kind,omitempty"`
	// Service is --rota-service: the service a serve job is a replica
	// of, so that its replicas are spread over nodes ("" none).
	Service string `json:"service,omitempty"`
	// GPUMemBytes is --rota-gpu-mem: the GPU memory the job needs on
	// each GPU (0: not given); it never goes on a type with less.
	GPUMemBytes uint64 `json:"gpu_mem_bytes,omitempty"`
	// Share is --rota-share: ShareYes lets Rota run the job on a GPU it
	// shares with another job (gres/shard) where the pair gets more done
	// together, ShareNo never; "" leaves it to the site's share_default.
	Share string `json:"share,omitempty"`
	// Model is --rota-model: what the job trains, as a job type of the
	// controller's throughput table ("" unknown); the table's pair rows
	// say what sharing a GPU with another job does to it.
	Model string `json:"model,omitempty"`
}

// --rota-share's values.
const (
	ShareYes = "yes"
	ShareNo  = "no"
)

// StepsPerSecond is the job's speed on GPU type t from its hints: the
// steps/s given for t; for a type not given, the fastest given type's
// (by name when even) scaled by speed(t)/speed(that type), speed being
// the types' relative speeds (a table's, a cluster's); 0 when no
// throughput was given or a speed is unknown. The one scaling of a hint:
// the submit-time rule and the multi-cluster estimate both use it.
func (h Hints) StepsPerSecond(t string, speed func(string) float64) float64 {
	if v := h.Throughput[t]; v > 0 {
		return v
	}
	ref, rate := "", 0.0
	for ty, v := range h.Throughput {
		if v > rate || v == rate && v > 0 && ty < ref {
			ref, rate = ty, v
		}
	}
	if ref == "" {
		return 0
	}
	st, sr := speed(t), speed(ref)
	if !(st > 0) || !(sr > 0) || math.IsInf(st, 0) || math.IsInf(sr, 0) {
		return 0
	}
	return rate * st / sr
}

// The kinds of job Rota tells apart (docs/kinds.md). A batch job is
// placed, retyped, ordered and moved by the policy; an interactive one
// (a person waits for it) is placed where it starts soonest and never
// moved; a serve job (an inference service's replica) must stay up.
const (
	KindBatch       = "batch"
	KindInteractive = "interactive"
	KindServe       = "serve"
)

// PlaceReply is the controller's answer. Empty fields mean "keep what the
// user asked".
type PlaceReply struct {
	V          int    `json:"v"`
	DecisionID string `json:"decision_id"`
	// GPUType is the type to write into the request; "" keeps the request.
	GPUType string `json:"gpu_type,omitempty"`
	// TimeLimitMin is the walltime to set in minutes; 0 keeps the user's.
	TimeLimitMin uint32 `json:"time_limit_min,omitempty"`
	// ByFeature asks the plugin to express GPUType as a node constraint on
	// an untyped GPU request rather than in the gres, so the controller
	// can retype the job while it is pending (see cluster.Snapshot).
	ByFeature bool   `json:"by_feature,omitempty"`
	Policy    string `json:"policy"`
	Reason    string `json:"reason"`
	// Kind is the job's kind as the rule saw it (KindInteractive,
	// KindServe; "" a batch job), so that the round loop, the chain
	// manager and explain treat it as such.
	Kind string `json:"kind,omitempty"`
	// HoldS asks the plugin to let the job start no sooner than this many
	// seconds after submission (its begin time): a service replica waits
	// for the controller to spread it (PlaceRule.ServeHoldS); 0 none.
	HoldS uint32 `json:"hold_s,omitempty"`
}

// Decision is the controller's record of one placement, kept so that
// `rota explain` can show it later.
type Decision struct {
	// V is set on decisions a plugin sends for recording
	// (SubjectPlaceDecision); stored records may leave it 0.
	V     int          `json:"v,omitempty"`
	ID    string       `json:"id"`
	At    time.Time    `json:"at"`
	JobID uint32       `json:"job_id,omitempty"` // bound once Slurm has assigned it
	Asked PlaceRequest `json:"asked"`
	Given PlaceReply   `json:"given"`
	// Numbers is what the rule looked at, for explain: e.g. free GPUs and
	// relative speed per type, the estimate's inputs.
	Numbers Numbers `json:"numbers,omitempty"`
	// Made locally by a plugin (placement = local): Origin is the plugin
	// instance, Seq its count of decisions, StateGen the PlaceState.Gen it
	// decided from, and Reserve the GPUs it took from that state's view,
	// which the controller adds to its reservations.
	Origin   string       `json:"origin,omitempty"`
	Seq      uint64       `json:"seq,omitempty"`
	StateGen uint64       `json:"state_gen,omitempty"`
	Reserve  *Reservation `json:"reserve,omitempty"`
	// DecideNs is how long the plugin took to decide, on slurmctld's
	// thread (the controller's placement latency histogram); 0 for
	// decisions made ahead (the shelf) and from older plugins.
	DecideNs int64 `json:"decide_ns,omitempty"`
	// Limits are the changes the controller made to the job's time limit
	// while it ran, oldest first (docs/rounds.md, "Limits follow
	// progress"); kept with the decision so explain shows them after the
	// job ended.
	Limits []LimitChange `json:"limits,omitempty"`
}

// LimitChange is one change of a running job's time limit and why.
type LimitChange struct {
	At time.Time `json:"at"`
	// FromMin and ToMin are the limits in minutes (ToMin
	// slurmtime.Unlimited: no limit).
	FromMin uint32 `json:"from_min"`
	ToMin   uint32 `json:"to_min"`
	// RanSeconds is how long the job had run.
	RanSeconds float64 `json:"ran_s"`
	// Measured: ToMin comes from the job's measured progress; otherwise
	// its own limit (or MaxTime) was given back for want of one.
	Measured bool   `json:"measured,omitempty"`
	Why      string `json:"why"`
}

// Numbers are named figures shown to people (explain). JSON has no
// infinity or NaN, and encoding/json refuses the whole message for one
// (a job whose type never frees has an infinite start time): that once
// made a decision unstorable and its job unexplainable. So a non-finite
// value is left out of the encoding: absent reads as "no such figure".
type Numbers map[string]float64

// MarshalJSON encodes the finite values, keys sorted, as encoding/json
// would. Rota's own keys ("free.v100": a prefix and a GPU type name) are
// written directly: the plugin encodes a decision record per job in
// slurmctld's process, and reflecting over the map was most of that work.
// A key that would need escaping sends the map through encoding/json.
func (n Numbers) MarshalJSON() ([]byte, error) {
	if n == nil {
		return []byte("null"), nil
	}
	if b, ok := n.appendPlain(make([]byte, 0, 24*len(n)+2)); ok {
		return b, nil
	}
	allFinite := true
	for _, v := range n {
		allFinite = allFinite && !nonFinite(v)
	}
	if allFinite { // the usual case: no copy
		return json.Marshal(map[string]float64(n))
	}
	finite := make(map[string]float64, len(n))
	for k, v := range n {
		if !nonFinite(v) {
			finite[k] = v
		}
	}
	return json.Marshal(finite)
}

// appendPlain appends n's JSON encoding to b, or says it cannot because a
// key needs escaping.
func (n Numbers) appendPlain(b []byte) ([]byte, bool) {
	var buf [32]string // no allocation for the usual couple of dozen keys
	keys := buf[:0]
	for k, v := range n {
		if !plainKey(k) {
			return nil, false
		}
		if !nonFinite(v) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"', ':')
		b = appendFloat(b, n[k])
	}
	return append(b, '}'), true
}

// plainKey: k encodes as itself between quotes (printable ASCII other
// than the characters encoding/json escapes).
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendFloat writes f as encoding/json writes a float64: shortest
// round-trip digits, exponent form outside [1e-6, 1e21), "e-07" as "e-7".
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// checkSize refuses a message over MaxMessageBytes before any decoding.
func checkSize(data []byte) error {
	if len(data) > MaxMessageBytes {
		return fmt.Errorf("wire: message of %d bytes exceeds the %d byte limit", len(data), MaxMessageBytes)
	}
	return nil
}

// ErrVersion is returned when a message carries a schema version this build
// does not speak.
var ErrVersion = errors.New("wire: unsupported message version")

// MaxMessageBytes bounds every message Rota accepts from the network but
// the two below.
const MaxMessageBytes = 64 << 10

// MaxRouteBytes bounds a route request between clusters: Slurm's
// max_script_size is 4 MB by default, base64 in JSON a third more.
const MaxRouteBytes = 8 << 20

// MaxReplyBytes bounds a controller's reply to the CLI (rota status of a
// site's whole queue): NATS's own ceiling on a message.
const MaxReplyBytes = 64 << 20

// Decode parses a JSON message into v (a pointer to a message struct with a
// V field), refusing oversized bodies and unknown versions.
func Decode(data []byte, v Message) error {
	return DecodeLimit(data, v, MaxMessageBytes)
}

// Message is any versioned message of this package (what Decode takes).
type Message interface{ version() int }

// DecodeLimit is Decode with a size limit of its own, for the messages
// that carry more than a request: a route request between clusters holds
// the job's batch script (MaxRouteBytes), a reply to the CLI a whole
// queue (MaxReplyBytes).
func DecodeLimit(data []byte, v Message, limit int) error {
	if len(data) > limit {
		return fmt.Errorf("wire: message of %d bytes exceeds the %d byte limit", len(data), limit)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("wire: decoding %T: %w", v, err)
	}
	if got := v.version(); got != Version {
		return fmt.Errorf("%w: got v=%d, want v=%d", ErrVersion, got, Version)
	}
	return nil
}

func (m *PlaceRequest) version() int { return m.V }
func (m *PlaceReply) version() int   { return m.V }

func nonFinite(v float64) bool { return math.IsInf(v, 0) || math.IsNaN(v) }
