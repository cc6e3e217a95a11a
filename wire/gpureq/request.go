package gpureq

import (
	"fmt"
	"slices"

	"github.com/rota-hpc/rota/wire"
)

// Request is a job's whole GPU request: the four TRES strings Slurm keeps.
type Request struct {
	PerJob, PerNode, PerSocket, PerTask Spec
}

// ParseRequest parses the four TRES strings of a job.
func ParseRequest(perJob, perNode, perSocket, perTask string) (Request, error) {
	var r Request
	var err error
	for _, f := range []struct {
		dst  *Spec
		src  string
		name string
	}{
		{&r.PerJob, perJob, "tres_per_job"},
		{&r.PerNode, perNode, "tres_per_node"},
		{&r.PerSocket, perSocket, "tres_per_socket"},
		{&r.PerTask, perTask, "tres_per_task"},
	} {
		if *f.dst, err = Parse(f.src); err != nil {
			return Request{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return r, nil
}

func (r *Request) specs() [4]*Spec {
	return [4]*Spec{&r.PerJob, &r.PerNode, &r.PerSocket, &r.PerTask}
}

// HasGPU reports whether any field asks for GPUs.
func (r Request) HasGPU() bool {
	for _, s := range r.specs() {
		if _, _, has := s.GPUs(); has {
			return true
		}
	}
	return false
}

// HasShard reports whether any field asks for shards of a GPU
// (gres/shard).
func (r Request) HasShard() bool {
	_, has := r.Shards()
	return has
}

// Shards sums the shard counts of every field; has is false when none
// asks for shards.
func (r Request) Shards() (count uint64, has bool) {
	for _, s := range r.specs() {
		c, h := s.Shards()
		count, has = count+c, has || h
	}
	return count, has
}

// ShardTypes lists the distinct GPU types its shard entries name.
func (r Request) ShardTypes() []string {
	var types []string
	for _, s := range r.specs() {
		for _, e := range s.Entries {
			if t := e.ShardType(); e.Shard && t != "" && !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	return types
}

// Types lists the distinct GPU types named anywhere in the request.
func (r Request) Types() []string {
	var types []string
	for _, s := range r.specs() {
		_, ts, _ := s.GPUs()
		for _, t := range ts {
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	return types
}

// Untyped reports whether some GPU entry names no type.
func (r Request) Untyped() bool {
	for _, s := range r.specs() {
		if s.HasUntyped() {
			return true
		}
	}
	return false
}

// SetType writes t as the type of every GPU entry in every field.
func (r *Request) SetType(t string) {
	for _, s := range r.specs() {
		s.SetType(t)
	}
}

// Ask summarises the request for the controller. nodes and tasks are the
// job's minimum node and task counts (0 when unset).
func (r Request) Ask(nodes, tasks uint32) wire.GPUAsk {
	count := func(s Spec) uint32 {
		n, _, _ := s.GPUs()
		return uint32(n) // bounded by maxCount per entry and MaxLen entries
	}
	a := wire.GPUAsk{
		PerJob:    count(r.PerJob),
		PerNode:   count(r.PerNode),
		PerSocket: count(r.PerSocket),
		PerTask:   count(r.PerTask),
		Nodes:     nodes,
		Tasks:     tasks,
	}
	switch ts := r.Types(); {
	case len(ts) == 1:
		// One type named (perhaps in one field only): the user chose it.
		a.Type = ts[0]
	case len(ts) > 1:
		a.Types = ts
	}
	return a
}
