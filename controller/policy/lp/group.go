package lp

import (
	"encoding/binary"
	"math"
)

// Identical jobs are merged before solving. The agnostic baselines make
// every job with the same usable types and scale factor identical (all
// throughputs 1), and then the structured solvers' prices cannot tell them
// apart: every job is tied, none can be fixed, and the "small" LP is the
// whole LP (las --agnostic at 2,048 jobs ran for minutes in SolveDense).
//
// Merging is exact. For c identical blocks (A, S, C, D, V) let xi be the
// members' mean allocation. Summing the members' rows shows xi satisfies
// one block with the same A, C, D and time limit 1 whose capacity use is
// c*S*xi and objective c*V*xi; conversely giving every member xi is
// feasible for the original rows and has the same objective. So the merged
// LP has the same optimum, and its optimum expanded (every member on its
// group's row) is an optimum of the original. Duals carry over as well:
// the capacity prices are unchanged and each member's requirement dual is
// the group's divided by c (A_k y/c - u/c <= S p_k is the group's
// constraint divided by c, and the members' D y/c sum to the group's D y).

// groupKey is the bit pattern of everything the LP sees of a job.
func groupKey(buf []byte, b *BlockJob) []byte {
	buf = buf[:0]
	put := func(v float64) { buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v)) }
	put(b.S)
	put(b.C)
	put(b.D)
	for _, a := range b.A {
		put(a)
	}
	for _, v := range b.V {
		put(v)
	}
	return buf
}

// groupJobs returns the merged jobs, the group of every original job and
// the size of every group; merged is nil when all jobs are distinct, so
// the common case costs one map pass and no copies.
func groupJobs(jobs []BlockJob) (merged []BlockJob, of []int, size []float64) {
	seen := make(map[string]int, len(jobs))
	of = make([]int, len(jobs))
	var buf []byte
	for j := range jobs {
		buf = groupKey(buf, &jobs[j])
		g, ok := seen[string(buf)]
		if !ok {
			g = len(size)
			seen[string(buf)] = g
			size = append(size, 0)
		}
		of[j] = g
		size[g]++
	}
	if len(size) == len(jobs) {
		return nil, nil, nil
	}
	merged = make([]BlockJob, len(size))
	done := make([]bool, len(size))
	for j := range jobs {
		g := of[j]
		if done[g] {
			continue
		}
		done[g] = true
		b := jobs[j]
		b.S *= size[g]
		if b.V != nil {
			b.V = make([]float64, len(jobs[j].V))
			for k, v := range jobs[j].V {
				b.V[k] = v * size[g]
			}
		}
		merged[g] = b
	}
	return merged, of, size
}

// expandRows gives every original job a copy of its group's row.
func expandRows(X [][]float64, of []int) [][]float64 {
	out := make([][]float64, len(of))
	for j, g := range of {
		out[j] = append([]float64(nil), X[g]...)
	}
	return out
}
