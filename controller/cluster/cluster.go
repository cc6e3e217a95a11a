// Package cluster is the controller's picture of the Slurm cluster: GPU
// capacity and use per type, and partitions with their time limits. A
// Snapshot is immutable once built; the controller swaps in a new one each
// refresh, so readers on the request path never take a lock.
package cluster

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// Snapshot is the cluster at one moment.
type Snapshot struct {
	At         time.Time
	Types      map[string]*TypeCap // by GPU type
	Partitions map[string]slurm.Partition
	// DefaultPartition is the partition a job that names none goes to.
	DefaultPartition string
	// ByFeature is true when every GPU type is chosen by feature
	// (TypeCap.ByFeature): what a plugin older than the per-type rule
	// reads.
	ByFeature bool
}

// TypeByFeature says whether Rota writes type t as a node constraint on
// an untyped GPU request (TypeCap.ByFeature), rather than in the request.
func (s *Snapshot) TypeByFeature(t string) bool {
	tc := s.Types[t]
	return tc != nil && tc.ByFeature
}

// GresOnly makes every type go in the GPU request (typed limits count
// it there, rounds.Loop.TypeByGres).
func (s *Snapshot) GresOnly() {
	s.ByFeature = false
	for _, tc := range s.Types {
		tc.ByFeature = false
	}
}

// TypeCap is one GPU type's capacity.
type TypeCap struct {
	Type       string
	Nodes      int // nodes with this type that can take jobs
	Total      int // GPUs on those nodes
	Used       int // GPUs allocated now
	MaxPerNode int // most GPUs of this type on one node
	// Partitions that contain nodes of this type.
	Partitions map[string]bool
	// Shapes are its nodes per partition, alike ones grouped, most GPUs
	// first: what the placement rule checks a job's node count, GPUs per
	// node and constraint against (rule.Holds), on the plugin's side too.
	Shapes map[string][]wire.NodeGroup
	// ByFeature: every node with GPUs of this type carries it as a node
	// feature (Feature=v100 in slurm.conf), and every node with that
	// feature has GPUs of this type only. Rota then chooses the type with
	// a constraint on an untyped GPU request, which it can change while
	// the job is pending (Slurm 22.05 cannot retype a pending job's GPU
	// gres); otherwise the type goes into the gres at submission. A MIG
	// slice type is never a feature (its node carries its model, a100),
	// so on a cluster with MIG nodes the slices go in the gres and whole
	// GPUs in the constraint.
	ByFeature bool
	// ShardsPerGPU is how many shards each GPU of this type is offered
	// as (gres/shard), when every usable node of the type offers the same
	// number per GPU and holds GPUs of this type only; 0 otherwise. Rota
	// pairs jobs on one GPU only where it is at least 2 (rounds/share.go).
	ShardsPerGPU int
}

// maxGroups bounds a type's node groups in one partition: the state sent
// to the plugins is at most 64 KiB. Past it (nodes whose features all
// differ) nodes are grouped by GPU count alone and their features left
// out: a job with a constraint then fits no type and is left as asked,
// never given a type that cannot run it.
const maxGroups = 32

// Free is Total - Used, never negative.
func (t *TypeCap) Free() int {
	if t.Used > t.Total {
		return 0
	}
	return t.Total - t.Used
}

// unusable node states: their GPUs cannot take a new job now.
var unusable = map[string]bool{
	"down": true, "drain": true, "drained": true, "draining": true, "fail": true, "failing": true,
	"future": true, "inval": true, "invalid": true, "maint": true, "powered_down": true,
	"powering_down": true, "unknown": true, "not_responding": true, "reboot_issued": true,
	// In an active reservation: only jobs that ask for it run there, and
	// Rota places none of those (slurm.MarkReserved).
	"reserved": true,
}

// Usable reports whether a node in state s can be given jobs. sinfo's long
// state may carry flags ("idle+drain", "mixed*"): any unusable part rules
// the node out.
func Usable(s string) bool {
	cur := ""
	flush := func() bool {
		ok := !unusable[cur]
		cur = ""
		return ok
	}
	for _, r := range s {
		switch r {
		case '+', '*', '~', '#', '!', '%', '$', '@', '^', '-':
			if !flush() {
				return false
			}
		default:
			cur += string(r)
		}
	}
	return flush()
}

// Build assembles a Snapshot from what Slurm reported.
func Build(at time.Time, nodes []slurm.Node, parts []slurm.Partition) *Snapshot {
	s := &Snapshot{At: at, Types: map[string]*TypeCap{}, Partitions: map[string]slurm.Partition{}}
	for _, p := range parts {
		s.Partitions[p.Name] = p
		if p.Default && s.DefaultPartition == "" {
			s.DefaultPartition = p.Name
		}
	}
	// notByFeature: the types some node keeps from being chosen by
	// feature (TypeCap.ByFeature), down nodes included.
	notByFeature, anyNode := map[string]bool{}, map[string]bool{}
	// shards: per type, the shards per GPU its usable nodes offer (-1
	// when they differ or a node holds other types too).
	shards := map[string]int{}
	type shapeKey struct{ typ, part string }
	groups := map[shapeKey]map[string]*wire.NodeGroup{}
	for _, n := range nodes {
		var held []string // the GPU types (and "" untyped) n has
		for typ, count := range n.GPUs {
			if count > 0 {
				held = append(held, typ)
			}
		}
		for _, typ := range held {
			if typ != "" {
				anyNode[typ] = true
				if !slices.Contains(n.Features, typ) {
					notByFeature[typ] = true
				}
			}
		}
		for _, f := range n.Features {
			if len(held) > 0 && (len(held) > 1 || held[0] != f) {
				notByFeature[f] = true // a constraint f would reach other GPUs
			}
		}
		if !Usable(n.State) {
			continue
		}
		for typ, count := range n.GPUs {
			if typ == "" || count <= 0 {
				continue // untyped GPUs cannot be chosen by type
			}
			tc := s.Types[typ]
			if tc == nil {
				tc = &TypeCap{Type: typ, Partitions: map[string]bool{}}
				s.Types[typ] = tc
			}
			per := -1
			if p, _, ok := n.ShardsPerGPU(); ok {
				per = p
			}
			if old, seen := shards[typ]; seen && old != per {
				per = -1
			}
			shards[typ] = per
			tc.Nodes++
			tc.Total += count
			tc.Used += n.GPUsUsed[typ]
			if count > tc.MaxPerNode {
				tc.MaxPerNode = count
			}
			feats := slices.Compact(slices.Sorted(slices.Values(n.Features)))
			key := strconv.Itoa(count) + "\x00" + strings.Join(feats, ",")
			for _, p := range n.Partitions {
				tc.Partitions[p] = true
				k := shapeKey{typ, p}
				if groups[k] == nil {
					groups[k] = map[string]*wire.NodeGroup{}
				}
				if g := groups[k][key]; g != nil {
					g.Nodes++
				} else {
					groups[k][key] = &wire.NodeGroup{GPUs: count, Nodes: 1, Features: feats}
				}
			}
		}
	}
	for k, m := range groups {
		tc := s.Types[k.typ]
		if tc.Shapes == nil {
			tc.Shapes = map[string][]wire.NodeGroup{}
		}
		tc.Shapes[k.part] = nodeGroups(m)
	}
	for t, tc := range s.Types {
		tc.ByFeature = !notByFeature[t]
		tc.ShardsPerGPU = max(shards[t], 0)
	}
	s.ByFeature = len(s.Types) > 0
	for t := range anyNode { // a down node's types too
		s.ByFeature = s.ByFeature && !notByFeature[t]
	}
	return s
}

// nodeGroups lists m's groups most GPUs first (then by features, so the
// state is the same for the same nodes), merged by GPU count alone past
// maxGroups.
func nodeGroups(m map[string]*wire.NodeGroup) []wire.NodeGroup {
	gs := make([]wire.NodeGroup, 0, len(m))
	for _, g := range m {
		gs = append(gs, *g)
	}
	if len(gs) > maxGroups {
		byGPUs := map[int]int{}
		for _, g := range gs {
			byGPUs[g.GPUs] += g.Nodes
		}
		gs = gs[:0]
		for c, n := range byGPUs {
			gs = append(gs, wire.NodeGroup{GPUs: c, Nodes: n})
		}
	}
	slices.SortFunc(gs, func(a, b wire.NodeGroup) int {
		if a.GPUs != b.GPUs {
			return cmp.Compare(b.GPUs, a.GPUs)
		}
		return slices.Compare(a.Features, b.Features)
	})
	return gs
}

// TypeNames lists the GPU types in name order.
func (s *Snapshot) TypeNames() []string {
	names := make([]string, 0, len(s.Types))
	for t := range s.Types {
		names = append(names, t)
	}
	sort.Strings(names)
	return names
}

// View is s in the wire form the placement rule reads.
func (s *Snapshot) View() *wire.ClusterView {
	if s == nil {
		return nil
	}
	v := &wire.ClusterView{At: s.At, Types: make(map[string]wire.TypeView, len(s.Types)),
		Partitions: make(map[string]wire.PartitionView, len(s.Partitions)), DefaultPartition: s.DefaultPartition, ByFeature: s.ByFeature}
	for t, tc := range s.Types {
		parts := make([]string, 0, len(tc.Partitions))
		for p, ok := range tc.Partitions {
			if ok {
				parts = append(parts, p)
			}
		}
		sort.Strings(parts)
		// Shapes are shared, never changed: the snapshot is immutable.
		v.Types[t] = wire.TypeView{Nodes: tc.Nodes, Total: tc.Total, Used: tc.Used, MaxPerNode: tc.MaxPerNode, Partitions: parts, Shapes: tc.Shapes, ByFeature: tc.ByFeature}
	}
	for n, p := range s.Partitions {
		v.Partitions[n] = wire.PartitionView{MaxTimeMin: p.MaxTimeMin, DefaultTimeMin: p.DefaultTimeMin}
	}
	return v
}
