package slurm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// shared is what the CLI's readers share (CLI.ShareReads): the last
// queue, nodes and partitions read, and a count of the writes made
// through the CLI since, so that no reader gets, after its own write (or
// another part's), what Slurm held before it. A paced apply
// (UpdatePaced) counts as one write, marked as it starts and as it ends.
type shared struct {
	writes atomic.Uint64
	jobs   cached[Job]
	nodes  cached[Node]
	parts  cached[Partition]
}

// cached is one kind of read: its result and when it began.
type cached[T any] struct {
	mu     sync.Mutex
	at     time.Time
	writes uint64 // shared.writes when the read began
	v      []T
}

// wrote marks that something in Slurm changed through this CLI.
func (c *CLI) wrote() { c.share.writes.Add(1) }

type freshKey struct{}

// Fresh marks ctx as needing what Slurm holds now, not a shared read:
// for a reader that looks for a job submitted a moment ago.
func Fresh(ctx context.Context) context.Context { return context.WithValue(ctx, freshKey{}, true) }

type queueSinceKey struct{}

// queueSince is what a reader of the queue takes (QueueSince).
type queueSince struct {
	since  time.Time
	maxAge time.Duration
}

// QueueSince lets ctx's queue read (Jobs) take one that began after since
// and less than maxAge ago, whatever was written through the controller
// meanwhile. It is for the managers (chains, fault tolerance, services)
// and the trend sampler: they follow jobs' states and their own jobs, not
// a round's retypes, so a tick during a round takes the round's read
// instead of packing the whole queue again under slurmctld's job lock
// while submissions wait. since is the end of the reader's previous
// look, so it still sees what it wrote itself. Other reads (nodes,
// partitions) are not affected.
func QueueSince(ctx context.Context, since time.Time, maxAge time.Duration) context.Context {
	return context.WithValue(ctx, queueSinceKey{}, queueSince{since: since, maxAge: maxAge})
}

// takes says whether a read that began at "at" will do.
func (q queueSince) takes(at time.Time) bool {
	return !at.IsZero() && at.After(q.since) && time.Since(at) < q.maxAge
}

// queueSinceOf is ctx's QueueSince, if any.
func queueSinceOf(ctx context.Context) (queueSince, bool) {
	q, ok := ctx.Value(queueSinceKey{}).(queueSince)
	return q, ok && ctx.Value(freshKey{}) == nil
}

// read returns e's value when it was read less than c.ShareReads ago and
// no write has been made since its read began, unless ctx is Fresh, or
// when take accepts when it began; else it reads again.
// Concurrent readers wait for one read. Each gets its own copy of the
// slice (elements are shallow copies).
// The time returned is when the read began.
func read[T any](ctx context.Context, c *CLI, e *cached[T], take func(time.Time) bool, f func() ([]T, error)) ([]T, time.Time, error) {
	if c.ShareReads <= 0 {
		at := time.Now()
		v, err := f()
		return v, at, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	w := c.share.writes.Load()
	shared := !e.at.IsZero() && e.writes == w && time.Since(e.at) < c.ShareReads && ctx.Value(freshKey{}) == nil
	if shared || (take != nil && take(e.at)) {
		return slices.Clone(e.v), e.at, nil
	}
	at := time.Now()
	v, err := f()
	if err != nil {
		return nil, time.Time{}, err
	}
	e.v, e.at, e.writes = v, at, w
	return slices.Clone(v), at, nil
}

// Jobs implements Scheduler: pending and running jobs.
func (c *CLI) Jobs(ctx context.Context) ([]Job, error) {
	jobs, _, err := c.JobsAt(ctx)
	return jobs, err
}

// JobsAt implements JobsAter.
func (c *CLI) JobsAt(ctx context.Context) ([]Job, time.Time, error) {
	var take func(time.Time) bool
	if q, ok := queueSinceOf(ctx); ok {
		take = q.takes
	}
	return read(ctx, c, &c.share.jobs, take, func() ([]Job, error) {
		return c.squeue(ctx, "-t", "PENDING,RUNNING,CONFIGURING")
	})
}

// Nodes lists nodes with their GPUs and current GPU use.
func (c *CLI) Nodes(ctx context.Context) ([]Node, error) {
	nodes, _, err := read(ctx, c, &c.share.nodes, nil, func() ([]Node, error) {
		out, err := c.run(ctx, "sinfo", "-h", "-N", "-O", "NodeList:256,Gres:1024,GresUsed:1024,StateLong:64,Partition:256,Features:1024")
		if err != nil {
			return nil, err
		}
		nodes, err := ParseSinfoNodes(string(out))
		if err != nil {
			return nil, err
		}
		reserved, err := c.reservedNodes(ctx)
		if err != nil {
			return nil, err
		}
		return MarkReserved(nodes, reserved), nil
	})
	return nodes, err
}

// reservedNodes: the nodes of the reservations active now (scontrol show
// reservation). sinfo says "reserved" only of an idle one: once a job of
// the reservation runs there it says "mixed", as of any node.
func (c *CLI) reservedNodes(ctx context.Context) (map[string]bool, error) {
	out, err := c.run(ctx, "scontrol", "show", "reservation", "-o")
	if err != nil {
		return nil, fmt.Errorf("scontrol show reservation: %w", err)
	}
	return ParseReservedNodes(string(out))
}

// Partitions implements Client.
func (c *CLI) Partitions(ctx context.Context) ([]Partition, error) {
	parts, _, err := read(ctx, c, &c.share.parts, nil, func() ([]Partition, error) {
		out, err := c.run(ctx, "scontrol", "show", "partition", "-o")
		if err != nil {
			return nil, err
		}
		return ParsePartitions(string(out))
	})
	return parts, err
}

// writes says whether command name args changes Slurm: anything but the
// readers Rota runs (squeue, sinfo, sacctmgr show, sshare, scontrol show,
// write batch_script, --version).
func writes(name string, args []string) bool {
	switch name {
	case "squeue", "sinfo", "sacctmgr", "sshare", "sacct":
		return false
	case "scontrol":
		if len(args) > 0 && (args[0] == "show" || args[0] == "--version" || (args[0] == "write" && len(args) > 1 && args[1] == "batch_script")) {
			return false
		}
	}
	return true
}
