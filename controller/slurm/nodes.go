package slurm

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/internal/slurmsize"
)

// NodeDetail is a node's size as `scontrol show node -o` prints it: what
// sinfo's GPU view (Node) lacks for the site's knowledge base.
type NodeDetail struct {
	Name  string
	State string
	// CPUs is CPUEfctv where Slurm prints it (CPUs jobs may use, after
	// CoreSpecCount), else CPUTot.
	CPUs         int
	RealMemoryMB uint64
	GPUs         map[string]int // type -> count ("" untyped)
	Partitions   []string
	Features     []string
}

// NodeDetailer is a Slurm client that can read node sizes. It is apart
// from Client so that test doubles and other clients need not implement
// it; the controller treats sizes as unknown without it.
type NodeDetailer interface {
	NodeDetails(ctx context.Context) ([]NodeDetail, error)
}

// NodeDetails implements NodeDetailer.
func (c *CLI) NodeDetails(ctx context.Context) ([]NodeDetail, error) {
	out, err := c.run(ctx, "scontrol", "show", "node", "-o")
	if err != nil {
		return nil, err
	}
	return ParseNodeDetails(string(out))
}

// ParseNodeDetails reads `scontrol show node -o`, one node per line. Free
// text fields (OS=..., Reason=...) hold blanks; their extra words carry no
// '=' and are skipped, so they cannot shift the fields Rota reads.
func ParseNodeDetails(out string) ([]NodeDetail, error) {
	var nodes []NodeDetail
	for i, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		kv := fields(line)
		n := NodeDetail{Name: kv["NodeName"], State: strings.ToLower(kv["State"])}
		if n.Name == "" {
			return nil, fmt.Errorf("scontrol show node line %d: no NodeName: %q", i+1, trunc(line))
		}
		cpus := kv["CPUEfctv"]
		if cpus == "" {
			cpus = kv["CPUTot"]
		}
		var err error
		if n.CPUs, err = count(cpus); err != nil {
			return nil, fmt.Errorf("node %s: CPUs: %w", n.Name, err)
		}
		if n.RealMemoryMB, err = megabytes(kv["RealMemory"]); err != nil {
			return nil, fmt.Errorf("node %s: RealMemory: %w", n.Name, err)
		}
		if n.GPUs, err = ParseGres(kv["Gres"]); err != nil {
			return nil, fmt.Errorf("node %s: Gres: %w", n.Name, err)
		}
		n.Partitions = list(kv["Partitions"])
		n.Features = list(kv["AvailableFeatures"])
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// partitionLimits reads the limits of a `scontrol show partition -o` line.
func partitionLimits(p *Partition, kv map[string]string) error {
	p.State = kv["State"]
	for _, f := range []struct {
		key string
		dst *uint32
	}{
		{"MaxNodes", &p.MaxNodes}, {"MinNodes", &p.MinNodes}, {"MaxCPUsPerNode", &p.MaxCPUsPerNode},
		{"TotalNodes", &p.TotalNodes}, {"TotalCPUs", &p.TotalCPUs},
	} {
		n, err := count(kv[f.key])
		if err != nil {
			return fmt.Errorf("partition %s %s: %w", p.Name, f.key, err)
		}
		*f.dst = uint32(n)
	}
	var err error
	if p.MaxMemPerNodeMB, err = megabytes(kv["MaxMemPerNode"]); err != nil {
		return fmt.Errorf("partition %s MaxMemPerNode: %w", p.Name, err)
	}
	if p.MaxMemPerCPUMB, err = megabytes(kv["MaxMemPerCPU"]); err != nil {
		return fmt.Errorf("partition %s MaxMemPerCPU: %w", p.Name, err)
	}
	return nil
}

// fields splits a one-line scontrol record into key=value pairs.
func fields(line string) map[string]string {
	kv := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok && k != "" {
			kv[k] = v
		}
	}
	return kv
}

func unlimited(s string) bool {
	switch strings.ToUpper(s) {
	case "", "UNLIMITED", "INFINITE", "NONE", "N/A", "(NULL)":
		return true
	}
	return false
}

// count reads a whole number; unlimited or absent is 0.
func count(s string) (int, error) {
	if unlimited(s) {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return 0, fmt.Errorf("want a whole number or UNLIMITED, got %q", s)
	}
	return int(n), nil
}

// megabytes reads a memory size in MB as scontrol prints it ("16000",
// "16000M", "16G"); unlimited or absent is 0.
func megabytes(s string) (uint64, error) {
	if unlimited(s) {
		return 0, nil
	}
	mb, err := slurmsize.MB(s)
	if err != nil {
		return 0, fmt.Errorf("want megabytes or UNLIMITED, got %q", s)
	}
	return mb, nil
}

func list(s string) []string {
	if unlimited(s) {
		return nil
	}
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func trunc(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// NodeType is the GPU type of a node with gpus (type -> count): its one
// typed GPU type; "" for a node without typed GPUs, and for a node of
// several types (an A100 cut into MIG slices of different sizes: a
// job's type there is the one its request names, not the node's).
func NodeType(gpus map[string]int) string {
	one := ""
	for t, c := range gpus {
		if t == "" || c <= 0 {
			continue
		}
		if one != "" {
			return ""
		}
		one = t
	}
	return one
}

// NodeTypes maps each node with typed GPUs to its type (NodeType).
func NodeTypes(nodes []Node) map[string]string {
	out := make(map[string]string, len(nodes))
	for i := range nodes {
		if t := NodeType(nodes[i].GPUs); t != "" {
			out[nodes[i].Name] = t
		}
	}
	return out
}
