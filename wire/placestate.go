package wire

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Subjects of local placement: the controller pushes what its placement
// rule needs to every plugin, each plugin decides on slurmctld's thread with
// the same code, and sends the decision back to be recorded. Nothing on the
// submit path waits for the controller.
const (
	// SubjectPlaceState is publish, controller -> plugins: the placement
	// state (PlaceState), whenever it changes and at least every few
	// seconds while a controller leads.
	SubjectPlaceState = "rota.v1.place.state"
	// SubjectPlaceDecision is publish, plugin -> controller: one Decision
	// the plugin made from a PlaceState, for the controller to record.
	SubjectPlaceDecision = "rota.v1.place.decision"
	// SubjectPlaceSync is publish, plugin -> controller, empty body: "I
	// just (re)connected, publish the state now" instead of at the next
	// heartbeat.
	SubjectPlaceSync = "rota.v1.place.sync"
)

// PlaceState is everything the placement rule needs, so that a plugin can
// place a job exactly as the controller would. The controller builds one
// from its cluster snapshot, its rule's settings and its reservations.
type PlaceState struct {
	V int `json:"v"`
	// Controller identifies the publishing controller process; Gen counts
	// its states (a larger Gen from the same controller is newer).
	Controller string    `json:"controller"`
	Gen        uint64    `json:"gen"`
	At         time.Time `json:"at"`
	// Policy is the name written into annotations.
	Policy string    `json:"policy"`
	Rule   PlaceRule `json:"rule"`
	// Cluster is nil until the controller's first Slurm refresh: then the
	// rule keeps every request.
	Cluster *ClusterView `json:"cluster,omitempty"`
	// Reserved counts, per GPU type, the GPUs placements gave out since
	// the cluster view was taken (a burst spreads over the types).
	Reserved map[string]int `json:"reserved,omitempty"`
	// Slots holds, per GPU type, when each of its GPUs is free, in
	// seconds from the cluster view (sorted): 0 for a GPU free now, the
	// round loop's estimate of the remaining run time of the job on a busy
	// one, and later placements' bookings. GPUs whose end is unknown are
	// left out (JSON has no infinity).
	Slots map[string][]float64 `json:"slots,omitempty"`
	// Absorbed is, per plugin instance (Decision.Origin), the highest
	// Decision.Seq whose GPUs Reserved already counts (or the cluster view
	// already saw): the plugin stops counting its own reservations up to it.
	Absorbed map[string]uint64 `json:"absorbed,omitempty"`
	// Headroom is what the site's typed GPU limits (accounting's QOS and
	// association limits on gres/gpu:<type>) leave each user, by uid; a
	// user not listed has no typed limit (controller/limits).
	Headroom map[uint32]UserHeadroom `json:"headroom,omitempty"`
	// InteractiveHeld is, per GPU type, how many GPUs interactive jobs
	// held at the round loop's last round, and interactive placements
	// made since: what of Rule.InteractiveReserve is in use already.
	InteractiveHeld map[string]int `json:"interactive_held,omitempty"`
	// Learned is, per LearnedKey of a user and job name, the steps/s per
	// GPU type the controller measured for that user's latest job of
	// that name (or completed from jobs measured on both types; types
	// not known are left out). A request without a rate hint is placed
	// by these as if its user had given them: the same user's job of the
	// same name is most likely the same training resubmitted. Bounded by
	// the controller (the most recent first, MaxLearnedBytes).
	Learned map[string]map[string]float64 `json:"learned,omitempty"`
}

// MaxLearnedBytes bounds the encoded size of PlaceState.Learned, so that
// a site with many users and job names keeps its state well inside
// MaxMessageBytes.
const MaxLearnedBytes = 16 << 10

// LearnedKey is PlaceState.Learned's key for a user's job name: what
// the plugin knows at submission (the uid, not the user's name, which
// it would have to look up on slurmctld's thread).
func LearnedKey(uid uint32, name string) string {
	return strconv.FormatUint(uint64(uid), 10) + "/" + name
}

// LearnedNames are the job names of user uid that s learned speeds of,
// sorted: the names that can change a placement of that user's jobs.
func (s *PlaceState) LearnedNames(uid uint32) []string {
	if s == nil || len(s.Learned) == 0 {
		return nil
	}
	prefix := LearnedKey(uid, "")
	var out []string
	for k := range s.Learned {
		if name, ok := strings.CutPrefix(k, prefix); ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// LearnedRates is what s learned of user uid's jobs named name; nil
// when nothing, or when the job has no name to go by.
func (s *PlaceState) LearnedRates(uid uint32, name string) map[string]float64 {
	if s == nil || len(s.Learned) == 0 || name == "" {
		return nil
	}
	return s.Learned[LearnedKey(uid, name)]
}

// UserHeadroom is how many more GPUs of each type a user's jobs may hold,
// per account and QOS the user may submit with.
type UserHeadroom struct {
	// DefaultAccount stands for a request that names no account.
	DefaultAccount string `json:"default_account,omitempty"`
	// Left is keyed "account/qos" ("account/": a request naming no QOS,
	// the association's default), then by GPU type: GPUs left. A type
	// not listed is not limited.
	Left map[string]map[string]int `json:"left"`
	// Why names, for the same keys, the limit that leaves so little.
	Why map[string]map[string]string `json:"why,omitempty"`
}

// RoomKey is the key of UserHeadroom.Left for a request with account
// and qos as given ("" unset), or "" when the user has no typed limit.
func (s *PlaceState) RoomKey(uid uint32, account, qos string) string {
	h, ok := s.Headroom[uid]
	if !ok {
		return ""
	}
	if account == "" {
		account = h.DefaultAccount
	}
	return account + "/" + qos
}

// Room is the GPUs of type t left to user uid under key (RoomKey), and
// the binding limit; limited is false when no typed limit applies.
func (s *PlaceState) Room(uid uint32, key, t string) (left int, why string, limited bool) {
	if key == "" {
		return 0, "", false
	}
	h := s.Headroom[uid]
	left, limited = h.Left[key][t]
	return left, h.Why[key][t], limited
}

// PlaceRule is the placement rule's settings (see package placement and controller/placer).
type PlaceRule struct {
	// Speed is each GPU type's relative speed; a missing type counts as 1.
	Speed               map[string]float64 `json:"speed,omitempty"`
	RetypeTyped         bool               `json:"retype_typed,omitempty"`
	WalltimeMargin      float64            `json:"walltime_margin"`
	WalltimeOverheadMin uint32             `json:"walltime_overhead_min,omitempty"`
	// Kinds are the admin's rules that make a job interactive or a
	// service without the user saying so (controller.conf).
	Kinds KindRules `json:"kinds,omitzero"`
	// InteractiveReserve is, per GPU type, how many GPUs batch jobs may
	// not take: kept for interactive jobs (interactive_reserve.<type> in
	// controller.conf; docs/kinds.md).
	InteractiveReserve map[string]int `json:"interactive_reserve,omitempty"`
	// ServeHoldS holds a replica of a named service (--rota-service) this
	// many seconds after submission unless the controller releases it
	// first, having excluded its siblings' nodes (docs/serve.md); 0 never.
	ServeHoldS uint32 `json:"serve_hold_s,omitempty"`
	// ElsewhereHoldS holds a job whose allowed GPU types (--rota-types,
	// a constraint of alternatives) are on no node of this cluster this
	// many seconds, for the multi-cluster manager to send it to a cluster
	// that has them (docs/multicluster.md); 0 never.
	ElsewhereHoldS uint32 `json:"elsewhere_hold_s,omitempty"`
	// GPUMemory is the admin's memory per GPU of a type in bytes
	// (gpu_mem.<type>); a MIG slice's is read from its name
	// (wire/gputype).
	GPUMemory map[string]uint64 `json:"gpu_memory,omitempty"`
	// SliceMinMemory keeps a job whose GPU memory need is unknown off MIG
	// slices with less memory than this (slice_min_gpu_mem); 0: any.
	SliceMinMemory uint64 `json:"slice_min_gpu_mem,omitempty"`
}

// KindRules says which jobs are interactive and which are services by
// where and how they are submitted; placement.KindOf applies them.
type KindRules struct {
	Interactive KindMatch `json:"interactive,omitzero"`
	Serve       KindMatch `json:"serve,omitzero"`
}

// KindMatch matches a request by any of its partitions, QOS, account, or
// job name (shell patterns, as path.Match: "jupyter-*", "ood-*").
type KindMatch struct {
	Partitions []string `json:"partitions,omitempty"`
	QOS        []string `json:"qos,omitempty"`
	Accounts   []string `json:"accounts,omitempty"`
	Names      []string `json:"names,omitempty"`
}

// Empty reports whether m matches nothing.
func (m KindMatch) Empty() bool {
	return len(m.Partitions)+len(m.QOS)+len(m.Accounts)+len(m.Names) == 0
}

// ClusterView is the cluster's GPU capacity and partitions at one moment.
type ClusterView struct {
	At               time.Time                `json:"at"`
	Types            map[string]TypeView      `json:"types"`
	Partitions       map[string]PartitionView `json:"partitions,omitempty"`
	DefaultPartition string                   `json:"default_partition,omitempty"`
	// ByFeature: every GPU type is chosen by node constraint (see
	// controller/cluster.TypeCap.ByFeature), as a controller older than
	// TypeView.ByFeature said.
	ByFeature bool `json:"by_feature,omitempty"`
}

// TypeByFeature says whether type t is chosen by node constraint on an
// untyped GPU request rather than in the request.
func (c *ClusterView) TypeByFeature(t string) bool {
	return c != nil && (c.ByFeature || c.Types[t].ByFeature)
}

// TypeView is one GPU type's capacity on the usable nodes.
type TypeView struct {
	Nodes      int      `json:"nodes"`
	Total      int      `json:"total"`
	Used       int      `json:"used"`
	MaxPerNode int      `json:"max_per_node"`
	Partitions []string `json:"partitions,omitempty"`
	// Shapes are the usable nodes of this type per partition, alike
	// nodes grouped, most GPUs first: what the rule checks a job's node
	// count, GPUs per node and constraint against, so that it never gives
	// a job a type that cannot hold it (rule.Holds). nil from a controller
	// older than Shapes: the rule then judges by the totals above.
	Shapes map[string][]NodeGroup `json:"shapes,omitempty"`
	// ByFeature: the type is chosen by node constraint
	// (controller/cluster.TypeCap.ByFeature).
	ByFeature bool `json:"by_feature,omitempty"`
}

// NodeGroup is a number of nodes alike: as many GPUs of the type on each,
// and the same features (sorted; none listed when the controller left
// them out, see controller/cluster).
type NodeGroup struct {
	GPUs     int      `json:"gpus"`
	Nodes    int      `json:"nodes"`
	Features []string `json:"features,omitempty"`
}

// Free is Total - Used, never negative.
func (t TypeView) Free() int { return max(t.Total-t.Used, 0) }

// PartitionView is what placement needs of a partition.
type PartitionView struct {
	MaxTimeMin     uint32 `json:"max_time_min,omitempty"`
	DefaultTimeMin uint32 `json:"default_time_min,omitempty"`
}

// Reservation is what one placement took from the view: GPUs of one
// type, and, for a job placed where it finishes first, the slots it
// booked: its GPUs are taken until FinishS (seconds from the view, as
// Slots).
type Reservation struct {
	Type    string  `json:"type"`
	GPUs    int     `json:"gpus"`
	FinishS float64 `json:"finish_s,omitempty"`
	// UID and Room (a PlaceState.RoomKey), when the user has typed
	// limits: the GPUs also come off that user's headroom.
	UID  uint32 `json:"uid,omitempty"`
	Room string `json:"room,omitempty"`
	// Interactive: an interactive job's GPUs, which come out of the
	// type's interactive reserve first.
	Interactive bool `json:"interactive,omitempty"`
}

// maxSeconds bounds slot times: a century.
const maxSeconds = 100 * 365 * 24 * 3600

// Check rejects a reservation no placement makes.
func (r *Reservation) Check() error {
	if r.GPUs < 0 || r.GPUs > maxCount {
		return fmt.Errorf("%w: reservation of %d GPUs", errBadState, r.GPUs)
	}
	if r.FinishS < 0 || r.FinishS > maxSeconds || r.FinishS != r.FinishS {
		return fmt.Errorf("%w: reservation until %v s", errBadState, r.FinishS)
	}
	return nil
}

// maxCount bounds every count in a PlaceState or Reservation: far above any
// cluster, and small enough that sums cannot overflow.
const maxCount = 1 << 24

// errBadState marks a PlaceState or Decision that decodes but makes no sense.
var errBadState = errors.New("wire: implausible placement state")

// Check rejects counts no cluster has, so a corrupt or hostile state cannot
// make the rule misbehave.
func (s *PlaceState) Check() error {
	if s.Rule.WalltimeMargin < 1 || s.Rule.WalltimeMargin > 100 {
		return fmt.Errorf("%w: walltime_margin %v", errBadState, s.Rule.WalltimeMargin)
	}
	for t, v := range s.Rule.Speed {
		if !(v > 0) || v > 1e6 {
			return fmt.Errorf("%w: speed of %q is %v", errBadState, t, v)
		}
	}
	for t, n := range s.Reserved {
		if n < 0 || n > maxCount {
			return fmt.Errorf("%w: %d GPUs of %q reserved", errBadState, n, t)
		}
	}
	for t, n := range s.InteractiveHeld {
		if n < 0 || n > maxCount {
			return fmt.Errorf("%w: %d GPUs of %q held by interactive jobs", errBadState, n, t)
		}
	}
	for t, n := range s.Rule.InteractiveReserve {
		if n < 0 || n > maxCount {
			return fmt.Errorf("%w: interactive reserve of %d GPUs of %q", errBadState, n, t)
		}
	}
	for t, sl := range s.Slots {
		if len(sl) > maxCount {
			return fmt.Errorf("%w: %d slots of %q", errBadState, len(sl), t)
		}
		for i, v := range sl {
			if !(v >= 0 && v <= maxSeconds) || i > 0 && v < sl[i-1] {
				return fmt.Errorf("%w: slots of %q not sorted seconds (%v at %d)", errBadState, t, v, i)
			}
		}
	}
	if s.Cluster == nil {
		return nil
	}
	for t, tv := range s.Cluster.Types {
		for _, n := range []int{tv.Nodes, tv.Total, tv.Used, tv.MaxPerNode} {
			if n < 0 || n > maxCount {
				return fmt.Errorf("%w: type %q count %d", errBadState, t, n)
			}
		}
		for p, gs := range tv.Shapes {
			for i, g := range gs {
				// The rule stops at the first group too small: most GPUs first.
				if g.GPUs < 1 || g.GPUs > maxCount || g.Nodes < 1 || g.Nodes > maxCount || i > 0 && g.GPUs > gs[i-1].GPUs {
					return fmt.Errorf("%w: type %q partition %q node group %d: %d nodes of %d GPUs (most GPUs first)", errBadState, t, p, i, g.Nodes, g.GPUs)
				}
			}
		}
	}
	return nil
}

func (m *PlaceState) version() int { return m.V }
func (m *Decision) version() int   { return m.V }
