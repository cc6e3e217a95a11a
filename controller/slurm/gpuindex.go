package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/wire/gpureq"
)

// GPUIndexer says which of its node's GPUs a running one-node job holds:
// what tells the jobs sharing one GPU (gres/shard) apart from those on
// its other GPUs, which squeue does not print.
type GPUIndexer interface {
	// JobGPUs returns the job's node and the indices of the GPUs it holds
	// or has shards of there (none for a job without GPUs).
	JobGPUs(ctx context.Context, jobID uint32) (node string, gpus []int, err error)
}

// ParseGRESDetail reads the GPUs of one node's allocation detail, as
// `scontrol show job -d` (GRES=) and slurmrestd (gres_detail) print it:
// "gpu:v100:1(IDX:2)", "gpu:2(IDX:0-1)", "gpu:3(IDX:0,2-3)", and shards
// per GPU on 23.02 and later, "shard:v100:1(0/2,1/2,0/2,0/2)" (allocated
// over offered, in index order) or "shard:1(IDX:0)" on 22.05. Several
// GRES are comma-separated outside the parentheses.
func ParseGRESDetail(s string) ([]int, error) {
	var out []int
	for _, item := range gpureq.SplitTop(s) {
		name, _, _ := strings.Cut(item, ":")
		if name != "gpu" && name != "shard" {
			continue
		}
		open, end := strings.IndexByte(item, '('), strings.LastIndexByte(item, ')')
		if open < 0 || end < open {
			return nil, fmt.Errorf("GRES detail %q: no (...) after %s", s, name)
		}
		in := item[open+1 : end]
		if rest, ok := strings.CutPrefix(in, "IDX:"); ok {
			if rest == "" {
				continue // 22.05's slice-beside-shards case: no GPU at all
			}
			for _, part := range strings.Split(rest, ",") {
				lo, hi, isRange := strings.Cut(part, "-")
				a, err := strconv.Atoi(lo)
				b := a
				if err == nil && isRange {
					b, err = strconv.Atoi(hi)
				}
				if err != nil || a < 0 || b < a || b-a > 1024 {
					return nil, fmt.Errorf("GRES detail %q: index %q", s, part)
				}
				for i := a; i <= b; i++ {
					if !slices.Contains(out, i) {
						out = append(out, i)
					}
				}
			}
			continue
		}
		for i, part := range strings.Split(in, ",") {
			used, _, ok := strings.Cut(part, "/")
			n, err := strconv.Atoi(used)
			if !ok || err != nil || n < 0 {
				return nil, fmt.Errorf("GRES detail %q: %q is not allocated/offered", s, part)
			}
			if n > 0 && !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
	}
	return out, nil
}

// JobGPUs implements GPUIndexer: `scontrol show job -d -o`, whose
// per-node detail is "Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:v100:1(IDX:2)".
func (c *CLI) JobGPUs(ctx context.Context, jobID uint32) (string, []int, error) {
	out, err := c.run(ctx, "scontrol", "show", "job", "-d", "-o", strconv.FormatUint(uint64(jobID), 10))
	if err != nil {
		return "", nil, err
	}
	return ParseJobGPUs(string(out))
}

// ParseJobGPUs reads a one-node job's node and GPU indices from `scontrol
// show job -d -o` (the first node's detail of a job on several).
func ParseJobGPUs(out string) (string, []int, error) {
	node := ""
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "Nodes="); ok && node == "" {
			node = v // the detail's Nodes= comes after the job's NodeList=
		}
		if v, ok := strings.CutPrefix(f, "GRES="); ok && node != "" {
			idx, err := ParseGRESDetail(v)
			return node, idx, err
		}
	}
	return node, nil, nil
}

// JobGPUs implements GPUIndexer: the job's gres_detail, one per node in
// the order of its nodes.
func (r *Restd) JobGPUs(ctx context.Context, jobID uint32) (string, []int, error) {
	body, err := r.get(ctx, "/job/"+strconv.FormatUint(uint64(jobID), 10))
	if err != nil {
		return "", nil, err
	}
	recs, err := decodeJobs(body)
	if err != nil {
		return "", nil, err
	}
	for _, j := range recs {
		if !j.JobID.Set || j.JobID.N != int64(jobID) {
			continue
		}
		nodes, err := ExpandHostlist(string(j.Nodes))
		if err != nil || len(nodes) == 0 {
			return "", nil, err
		}
		var detail []string
		if len(j.GresDetail) > 0 {
			if err := json.Unmarshal(j.GresDetail, &detail); err != nil {
				return nodes[0], nil, fmt.Errorf("slurmrestd: job %d: gres_detail: %w", jobID, err)
			}
		}
		if len(detail) == 0 {
			return nodes[0], nil, nil
		}
		idx, err := ParseGRESDetail(detail[0])
		return nodes[0], idx, err
	}
	return "", nil, fmt.Errorf("slurmrestd: job %d not in its own answer", jobID)
}
