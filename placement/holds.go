package placement

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
	"github.com/rota-hpc/rota/wire/gputype"
)

// Holds reports whether the usable nodes of GPU type t can take the whole
// job as asked in one of the partitions parts names ("a,b"; "" any):
// n.Nodes nodes with n.PerNode GPUs of t each and the features the job's
// constraint asks for, and n.Total GPUs on at most n.MaxNodes of them.
// A job given a type that cannot hold it never runs: Slurm refuses it
// at submission or leaves it pending for good (BadConstraints).
func Holds(cv *wire.ClusterView, t string, n gpureq.Need, parts, constraint string) bool {
	if cv == nil {
		return false
	}
	tc, ok := cv.Types[t]
	return ok && holds(&tc, n, parts, readConstraint(constraint))
}

// FitsMemory says whether a job needing need bytes of GPU memory per GPU
// (0: unknown) may be given type t under rule r, and why not
// (gputype.Fits: a known need must fit the type's memory; an unknown one
// keeps off MIG slices under r.SliceMinMemory). measured is what the node
// agents found per type (nil at submission: the plugin has only the
// admin's figures and the slices' names).
func FitsMemory(r *wire.PlaceRule, t string, need uint64, measured map[string]uint64) (bool, string) {
	mem, _ := gputype.Memory(t, r.GPUMemory, measured)
	return gputype.Fits(t, mem, need, r.SliceMinMemory)
}

func holds(tc *wire.TypeView, n gpureq.Need, parts string, c constraint) bool {
	if !c.ok {
		return false
	}
	if tc.Shapes == nil {
		// A controller older than Shapes: its totals over all partitions
		// (node features unseen), as the rule judged before.
		return (parts == "" || inAny(tc.Partitions, parts)) && tc.Nodes >= n.Nodes && tc.MaxPerNode >= n.PerNode && tc.Total >= n.Total
	}
	if parts == "" {
		for _, gs := range tc.Shapes {
			if fits(gs, n, c) {
				return true
			}
		}
		return false
	}
	for rest, more := parts, true; more; {
		var p string
		p, rest, more = strings.Cut(rest, ",")
		if fits(tc.Shapes[p], n, c) {
			return true
		}
	}
	return false
}

// fits: whether node groups gs (most GPUs first) have n.Nodes nodes with
// n.PerNode GPUs each that meet c, and n.Total GPUs in whole units on at
// most n.MaxNodes of them (the largest).
func fits(gs []wire.NodeGroup, n gpureq.Need, c constraint) bool {
	nodes, used, gpus, unit := 0, 0, 0, max(n.Unit, 1)
	for _, g := range gs {
		if g.GPUs < n.PerNode {
			break // the rest are smaller still
		}
		if !c.metBy(g.Features) {
			continue
		}
		nodes += g.Nodes
		take := g.Nodes
		if n.MaxNodes > 0 {
			take = max(min(take, n.MaxNodes-used), 0)
		}
		used += take
		gpus += take * (g.GPUs - g.GPUs%unit) // a task's GPUs share a node
		if nodes >= n.Nodes && gpus >= n.Total {
			return true
		}
	}
	return false
}

func inAny(have []string, parts string) bool {
	for rest, more := parts, true; more; {
		var p string
		p, rest, more = strings.Cut(rest, ",")
		if slices.Contains(have, p) {
			return true
		}
	}
	return false
}

// constraint is a job's --constraint as far as the fit check reads it:
// features all required (a&b) or any one of them (a|b). Anything more
// (brackets, counts, parentheses, both operators) cannot be judged per
// node group: ok is false, and no type is judged to hold the job, so it
// is left as asked rather than risk a type that cannot run it.
type constraint struct {
	s   string
	any bool
	ok  bool
}

func readConstraint(s string) constraint {
	c := constraint{s: s, ok: true}
	and, or := strings.IndexByte(s, '&') >= 0, strings.IndexByte(s, '|') >= 0
	c.any = or
	if and && or || strings.ContainsAny(s, "[]()*!,:= \t") {
		c.ok = false
	}
	return c
}

// metBy says whether a node with features fs meets c. It allocates
// nothing: it runs per type on slurmctld's thread.
func (c constraint) metBy(fs []string) bool {
	if c.s == "" {
		return true
	}
	sep := "&"
	if c.any {
		sep = "|"
	}
	for rest, more := c.s, true; more; {
		var f string
		f, rest, more = strings.Cut(rest, sep)
		has := f != "" && slices.Contains(fs, f)
		if has == c.any {
			return has // any: one is enough; all: one missing fails
		}
	}
	return !c.any
}

// NoTypeReason says why no single GPU type can hold a job that needs n
// in partitions parts with the user's constraint: the reason `rota
// explain` shows for a job left as asked.
func NoTypeReason(n gpureq.Need, parts, constraint string) string {
	if !readConstraint(constraint).ok {
		return fmt.Sprintf("constraint %q is more than Rota checks nodes against; left as asked", constraint)
	}
	var b strings.Builder
	b.WriteString("no single GPU type has ")
	switch {
	case n.Nodes > 1 && n.PerNode*n.Nodes >= n.Total:
		fmt.Fprintf(&b, "%d nodes with %s each", n.Nodes, gpus(n.PerNode))
	case n.Nodes > 1 && n.PerNode <= 1:
		fmt.Fprintf(&b, "%d nodes with %s in all", n.Nodes, gpus(n.Total))
	case n.Nodes > 1:
		fmt.Fprintf(&b, "%d nodes with %s each and %d in all", n.Nodes, gpus(n.PerNode), n.Total)
	case n.PerNode >= n.Total:
		fmt.Fprintf(&b, "a node with %s", gpus(n.PerNode))
	case n.PerNode <= 1:
		fmt.Fprintf(&b, "%s in all", gpus(n.Total))
	default:
		fmt.Fprintf(&b, "%s in all, %d on a node", gpus(n.Total), n.PerNode)
	}
	if n.MaxNodes > n.Nodes {
		fmt.Fprintf(&b, " on at most %d nodes", n.MaxNodes)
	}
	if constraint != "" {
		fmt.Fprintf(&b, " with features %s", constraint)
	}
	switch {
	case strings.IndexByte(parts, ',') >= 0:
		fmt.Fprintf(&b, " in partitions %s", parts)
	case parts != "":
		fmt.Fprintf(&b, " in partition %s", parts)
	}
	b.WriteString("; left as asked")
	return b.String()
}

func gpus(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}
