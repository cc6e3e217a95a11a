package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/policy/workload"
)

// coRunners finds the jobs that share this job's GPU (--share-dir), so
// that a job on shards trains at the speed Gavel's table measured for its
// model beside the other's, and at its full speed once alone: each job on
// shards keeps a file <node>.gpu<index>.<job> holding its model in the
// directory, rewritten while it trains and removed when it stops; a file
// not rewritten for staleAfter belongs to a job that died.
type coRunners struct {
	dir, prefix, self string
	model, gpuType    string
	tab               *workload.Table
	staleAfter        time.Duration
}

// newCoRunners joins the GPU's sharers: node and gpus ($SLURMD_NODENAME,
// $CUDA_VISIBLE_DEVICES) name the GPU, tablePath is Gavel's table with
// its pairs.
func newCoRunners(dir, node, gpus, job, model, gpuType, tablePath string, every time.Duration) (*coRunners, error) {
	if node == "" || gpus == "" || strings.ContainsAny(node+gpus, "/") {
		return nil, fmt.Errorf("--share-dir: node %q and GPU %q ($SLURMD_NODENAME, $CUDA_VISIBLE_DEVICES) must name the GPU", node, gpus)
	}
	tab, err := workload.LoadAll(tablePath)
	if err != nil {
		return nil, fmt.Errorf("--pair-throughputs %s: %w", tablePath, err)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("--share-dir: %w", err)
	}
	prefix := node + ".gpu" + gpus + "."
	return &coRunners{dir: dir, prefix: prefix, self: prefix + job, model: model, gpuType: gpuType, tab: tab,
		staleAfter: max(4*every, 2*time.Second)}, nil
}

// beat says this job trains on the GPU now.
func (c *coRunners) beat() error {
	p := filepath.Join(c.dir, c.self)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(c.model), 0o666); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// leave says it no longer does.
func (c *coRunners) leave() { _ = os.Remove(filepath.Join(c.dir, c.self)) }

// others are the live sharers of the GPU but this one: file name -> model.
func (c *coRunners) others(now time.Time) (map[string]string, error) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range ents {
		n := e.Name()
		if n == c.self || !strings.HasPrefix(n, c.prefix) || strings.HasSuffix(n, ".tmp") {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) > c.staleAfter {
			continue // gone meanwhile, or its job died without removing it
		}
		b, err := os.ReadFile(filepath.Join(c.dir, n))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(n, c.prefix)] = strings.TrimSpace(string(b))
	}
	return out, nil
}

// factor is the fraction of its speed alone the job keeps beside the
// GPU's other sharers, and why: Gavel's pair measurement of the two
// models on this type (with more than one other, the product of each
// pair's, as time-slicing compounds); a pair the table cannot run
// together (their memory does not fit one GPU) time-slices, half each.
func (c *coRunners) factor(others map[string]string) (float64, string) {
	if len(others) == 0 {
		return 1, "alone on its GPU's shards"
	}
	jobs := make([]string, 0, len(others))
	for j := range others {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	f, words := 1.0, make([]string, 0, len(jobs))
	for _, j := range jobs {
		ra, _, sa, _, ok := c.tab.Shared(c.model, others[j], c.gpuType)
		k := 0.5
		src := "the table has no such pair: time-sliced"
		if ok {
			k, src = ra/sa, "Gavel's pair measurement"
		}
		f *= k
		words = append(words, fmt.Sprintf("job %s (%s): x %.3g, %s", j, others[j], k, src))
	}
	return f, sharingWords + strings.Join(words, "; ")
}

// sharingWords begin what a job says of its GPU's other sharers (summarize
// counts the jobs that shared by them).
const sharingWords = "sharing its GPU with "
