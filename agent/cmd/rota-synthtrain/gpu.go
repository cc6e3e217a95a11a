package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/rota-hpc/rota/wire/gpureq"
)

// scontrolFunc runs scontrol with args and returns its standard output; a
// variable so tests can answer with recorded output.
type scontrolFunc func(ctx context.Context, args ...string) ([]byte, error)

func runScontrol(ctx context.Context, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "scontrol", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scontrol %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// detectGPUType asks Slurm which GPU type the job was given on this node.
//
// Slurm 22.05.8 prints, for `scontrol show job -d <id>`:
//
//	JOB_GRES=gpu:p100:1
//	  Nodes=node-p100 CPU_IDs=0 Mem=0 GRES=gpu:p100:1(IDX:0)
//
// The per-node line is the truth for this node (a multi-node job may hold
// different types on different nodes); JOB_GRES is the job's total; the
// node's configured Gres (`scontrol show node`) decides when the job line
// names no type, provided the node has a single GPU type.
func detectGPUType(ctx context.Context, sc scontrolFunc, job, node string) (string, error) {
	if job == "" {
		return "", errors.New("cannot detect the GPU type: SLURM_JOB_ID is not set (outside Slurm, give --gpu-type)")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := sc(ctx, "show", "job", "-d", job)
	if err != nil {
		return "", fmt.Errorf("cannot detect the GPU type: %w", err)
	}
	if t, err := gpuTypeFromJob(out, node); t != "" || err != nil {
		return t, err
	}
	if node == "" {
		return "", fmt.Errorf("cannot detect the GPU type: job %s's GRES names no GPU type and SLURMD_NODENAME is not set (give --gpu-type)", job)
	}
	nout, err := sc(ctx, "show", "node", node)
	if err != nil {
		return "", fmt.Errorf("cannot detect the GPU type: %w", err)
	}
	types := uniq(gpuTypes(field(nout, "Gres=")))
	switch len(types) {
	case 1:
		return types[0], nil
	case 0:
		return "", fmt.Errorf("cannot detect the GPU type: neither job %s nor node %s names a GPU type (give --gpu-type)", job, node)
	default:
		// Slurm 22.05 gives a job on a MIG slice no GPU at all when the
		// cluster also has gres/shard: its GRES then counts 0 of each.
		return "", fmt.Errorf("cannot detect the GPU type: job %s holds no GPU of a type (its GRES: %s) and node %s has several (%s); give --gpu-type",
			job, field(out, "JOB_GRES="), node, strings.Join(types, ", "))
	}
}

// gpuTypeFromJob reads the type from `scontrol show job -d` output: the
// per-node GRES line for node, else the one type all per-node lines agree
// on, else JOB_GRES. "" with no error means the output names no type.
func gpuTypeFromJob(out []byte, node string) (string, error) {
	var mine, all []string
	for _, line := range strings.Split(string(out), "\n") {
		fs := strings.Fields(line)
		var nodes, gres string
		for _, f := range fs {
			if v, ok := strings.CutPrefix(f, "Nodes="); ok {
				nodes = v
			} else if v, ok := strings.CutPrefix(f, "GRES="); ok {
				gres = v
			}
		}
		if nodes == "" || gres == "" {
			continue
		}
		ts := gpuTypes(gres)
		all = append(all, ts...)
		if nodes == node {
			mine = append(mine, ts...)
		}
	}
	for _, set := range [][]string{mine, all, gpuTypes(field(out, "JOB_GRES="))} {
		set = uniq(set)
		switch len(set) {
		case 0:
			continue
		case 1:
			return set[0], nil
		default:
			return "", fmt.Errorf("job holds several GPU types (%s); give --gpu-type", strings.Join(set, ", "))
		}
	}
	return "", nil
}

// field is the value of the first whitespace-separated key=value token
// starting with key, or "".
func field(out []byte, key string) string {
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, key); ok {
			return v
		}
	}
	return ""
}

// gpuTypes lists the GPU types in a Slurm GRES string such as
// "gpu:p100:1(IDX:0,2),nvme:1" or "gpu:v100:4(S:0)". Commas inside the
// parentheses do not separate entries. Untyped "gpu:2" and a type held 0
// times add nothing.
func gpuTypes(gres string) []string {
	var out []string
	entries := gpureq.SplitTop(gres)
	for _, e := range entries {
		if i := strings.IndexByte(e, '('); i >= 0 {
			e = e[:i]
		}
		parts := strings.Split(e, ":")
		// A job on a node of several types lists each, those it holds
		// none of with 0 ("gpu:a100_2g.10gb:0(IDX:)", a MIG node).
		if len(parts) == 3 && parts[0] == "gpu" && parts[1] != "" && parts[1] != "(null)" && parts[2] != "0" {
			out = append(out, strings.ToLower(parts[1]))
		}
	}
	return out
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
