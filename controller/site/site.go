package site

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// Inputs are what Build reads.
type Inputs struct {
	At         time.Time
	Partitions []slurm.Partition
	// Nodes are sinfo's GPU view (GPUs, use, state, partitions).
	Nodes []slurm.Node
	// Details are node sizes (CPUs, memory); nil when they cannot be
	// read, and sizes are then unknown.
	Details []slurm.NodeDetail
	Config  Config
	// Speed is the admin's relative speed table (speed.<type>).
	Speed map[string]float64
	// AgentMemory is the smallest total GPU memory the node agents
	// reported per GPU type.
	AgentMemory map[string]uint64
	QueueWait   string
	Problems    []string
}

// Build assembles the knowledge base.
func Build(in Inputs) *wire.Site {
	s := &wire.Site{V: wire.Version, At: in.At.UTC(), QueueWait: in.QueueWait, Problems: in.Problems,
		Charging: wire.Charging{Unit: in.Config.Unit, Rates: append([]wire.Rate(nil), in.Config.Rates...)}}
	details := map[string]slurm.NodeDetail{}
	for _, d := range in.Details {
		details[d.Name] = d
	}
	types := map[string]bool{}
	perPart := map[string]map[string]*wire.SitePartitionType{}
	for _, n := range in.Nodes {
		usable := cluster.Usable(n.State)
		sn := wire.SiteNode{Name: n.Name, State: n.State, Usable: usable, GPUs: map[string]int{}, Partitions: n.Partitions}
		d, sized := details[n.Name]
		if sized {
			sn.CPUs, sn.RealMemoryMB = d.CPUs, d.RealMemoryMB
		}
		for t, c := range n.GPUs {
			if c > 0 {
				sn.GPUs[t] = c
			}
		}
		s.Nodes = append(s.Nodes, sn)
		if !usable {
			continue
		}
		for t, c := range n.GPUs {
			if t == "" || c <= 0 {
				continue // untyped GPUs cannot be chosen by type
			}
			types[t] = true
			for _, p := range n.Partitions {
				if perPart[p] == nil {
					perPart[p] = map[string]*wire.SitePartitionType{}
				}
				pt := perPart[p][t]
				if pt == nil {
					pt = &wire.SitePartitionType{Type: t}
					perPart[p][t] = pt
				}
				pt.Nodes++
				pt.GPUs += c
				pt.Used += n.GPUsUsed[t]
				pt.MaxPerNode = max(pt.MaxPerNode, c)
				// Smallest node: a job sized for it fits on any. One
				// node of unknown size makes the minimum unknown.
				if !sized || d.CPUs == 0 {
					pt.MinCPUsPerNode = -1
				} else if pt.MinCPUsPerNode == 0 || (pt.MinCPUsPerNode > 0 && d.CPUs < pt.MinCPUsPerNode) {
					pt.MinCPUsPerNode = d.CPUs
				}
				if !sized || d.RealMemoryMB == 0 {
					pt.MinMemPerNodeMB = math.MaxUint64
				} else if pt.MinMemPerNodeMB == 0 || (pt.MinMemPerNodeMB != math.MaxUint64 && d.RealMemoryMB < pt.MinMemPerNodeMB) {
					pt.MinMemPerNodeMB = d.RealMemoryMB
				}
			}
		}
	}
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Name < s.Nodes[j].Name })
	for _, p := range in.Partitions {
		sp := wire.SitePartition{Name: p.Name, Default: p.Default, Debug: in.Config.IsDebug(p.Name), State: p.State,
			MaxTimeMin: p.MaxTimeMin, DefaultTimeMin: p.DefaultTimeMin, MaxNodes: p.MaxNodes, MinNodes: p.MinNodes,
			MaxCPUsPerNode: p.MaxCPUsPerNode, MaxMemPerNodeMB: p.MaxMemPerNodeMB, MaxMemPerCPUMB: p.MaxMemPerCPUMB,
			TotalNodes: p.TotalNodes, TotalCPUs: p.TotalCPUs, Nodes: p.Nodes}
		for _, t := range slices.Sorted(maps.Keys(perPart[p.Name])) {
			pt := *perPart[p.Name][t]
			if pt.MinCPUsPerNode < 0 {
				pt.MinCPUsPerNode = 0
			}
			if pt.MinMemPerNodeMB == math.MaxUint64 {
				pt.MinMemPerNodeMB = 0
			}
			sp.Types = append(sp.Types, pt)
		}
		s.Partitions = append(s.Partitions, sp)
	}
	sort.Slice(s.Partitions, func(i, j int) bool { return s.Partitions[i].Name < s.Partitions[j].Name })
	for t := range in.Config.GPUMemory {
		types[t] = true
	}
	for _, t := range slices.Sorted(maps.Keys(types)) {
		gt := wire.SiteGPUType{Type: t, MemorySource: "unknown", Speed: in.Speed[t]}
		if b, ok := in.Config.GPUMemory[strings.ToLower(t)]; ok {
			gt.MemoryBytes, gt.MemorySource = b, "config"
		} else if b, ok := in.AgentMemory[t]; ok && b > 0 {
			gt.MemoryBytes, gt.MemorySource = b, "agents"
		}
		s.GPUTypes = append(s.GPUTypes, gt)
	}
	return s
}

// Partition finds a partition by name.
func Partition(s *wire.Site, name string) (*wire.SitePartition, bool) {
	for i := range s.Partitions {
		if s.Partitions[i].Name == name {
			return &s.Partitions[i], true
		}
	}
	return nil, false
}

// GPUType finds what is known of a GPU type.
func GPUType(s *wire.Site, t string) (wire.SiteGPUType, bool) {
	for _, g := range s.GPUTypes {
		if g.Type == t {
			return g, true
		}
	}
	return wire.SiteGPUType{Type: t, MemorySource: "unknown"}, false
}

// RateFor finds the rate of resource on gpuType in partition: the most
// specific configured rate wins (partition and type, then type, then
// partition, then site-wide). ok is false when none applies; charged
// says whether the site configured any rate for the resource at all.
func RateFor(c wire.Charging, resource, partition, gpuType string) (rate float64, scope string, ok, charged bool) {
	best := -1
	for _, r := range c.Rates {
		if r.Resource != resource {
			continue
		}
		charged = true
		// Config keys are lower case (internal/conf), Slurm's names may not be.
		if (r.Partition != "" && !strings.EqualFold(r.Partition, partition)) || (r.GPUType != "" && !strings.EqualFold(r.GPUType, gpuType)) {
			continue
		}
		// partition+type 3 > type 2 > partition 1 > site-wide 0.
		rank := 0
		if r.GPUType != "" {
			rank += 2
		}
		if r.Partition != "" {
			rank++
		}
		if rank > best {
			best, rate = rank, r.PerHour
		}
	}
	scope = [...]string{"site-wide", "partition " + partition, "type " + gpuType, partition + "/" + gpuType}[max(best, 0)]
	return rate, scope, best >= 0, charged
}

// Cost prices hours of gpus GPUs and cores cores on gpuType in
// partition: hours x (gpus x GPU rate + cores x core rate). A resource
// the site charges nowhere (no rate for it in the config) is free; one
// it charges elsewhere but not here makes the cost unknown, as does a
// site with no rates at all. ok false comes with the reason in basis.
func Cost(c wire.Charging, partition, gpuType string, gpus, cores int, hours float64) (cost float64, basis string, ok bool) {
	if !(hours >= 0) || math.IsInf(hours, 0) || gpus < 0 || cores < 0 {
		return 0, "no run time to price", false
	}
	gr, gscope, gok, gcharged := RateFor(c, GPU, partition, gpuType)
	cr, cscope, cok, ccharged := RateFor(c, Core, partition, gpuType)
	if !gcharged && !ccharged {
		return 0, "no charging rates configured (charge.gpu_hour, charge.core_hour)", false
	}
	var missing []string
	if gcharged && !gok {
		missing = append(missing, fmt.Sprintf("no GPU-hour rate for %s/%s", partition, gpuType))
	}
	if ccharged && !cok {
		missing = append(missing, fmt.Sprintf("no core-hour rate for %s/%s", partition, gpuType))
	}
	if len(missing) > 0 {
		return 0, strings.Join(missing, "; "), false
	}
	var parts []string
	if gok {
		cost += float64(gpus) * gr
		parts = append(parts, fmt.Sprintf("%d GPU x %.4g (%s)", gpus, gr, gscope))
	}
	if cok {
		cost += float64(cores) * cr
		parts = append(parts, fmt.Sprintf("%d cores x %.4g (%s)", cores, cr, cscope))
	}
	cost *= hours
	return cost, fmt.Sprintf("%.3g h x (%s)", hours, strings.Join(parts, " + ")), true
}
