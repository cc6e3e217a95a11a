package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/estimate/live"
	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/controller/site"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
)

// siteKey is the knowledge base's key in the state.Bucket.
const siteKey = "site"

// siteState is what the controller knows of the site besides the cluster
// snapshot: the knowledge base, the queue-wait model and the throughput
// table `rota estimate --model` reads.
type siteState struct {
	mu    sync.Mutex
	kb    *wire.Site
	saved []byte // last stored form, without its time
	store *state.KV

	waits *live.Waits
	table *workload.Table
	// tableErr says why there is no table.
	tableErr string
}

// loadSite loads the queue-wait model and the throughput table named in
// the config. Neither is needed to run: a missing or broken file is logged
// once and the numbers that need it are reported unknown, with the reason.
func (c *Controller) loadSite() {
	var jobs func(context.Context) ([]slurm.Job, error)
	if sched, ok := c.slurm.(slurm.Scheduler); ok {
		jobs = sched.Jobs
	}
	c.site = &siteState{waits: live.NewWaits(c.cfg.QueueWaitModel, jobs, c.log)}
	if p := c.cfg.ThroughputTable; p == "" {
		c.site.tableErr = "the controller has no throughput table (set throughput_table to Gavel's simulation_throughputs.json)"
	} else if t, err := loadThroughputTable(p); err != nil {
		c.site.tableErr = fmt.Sprintf("the controller's throughput table %s cannot be read: %v", p, err)
		c.log.Warn().Err(err).Str("throughput_table", p).Msg("cannot read the throughput table; rota estimate --model is unavailable until it is fixed and the controller restarted")
	} else {
		c.site.table = t
	}
}

// loadThroughputTable reads a Gavel-format table with every GPU type it
// holds (the *_unconsolidated duplicates aside).
func loadThroughputTable(path string) (*workload.Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	var types []string
	for t := range top {
		if !strings.HasSuffix(t, "_unconsolidated") {
			types = append(types, t)
		}
	}
	if len(types) == 0 {
		return nil, errors.New("no GPU types in it")
	}
	sort.Strings(types)
	return workload.Load(path, types)
}

// refreshSite rebuilds the knowledge base after a refresh from Slurm and
// stores it when it changed.
func (c *Controller) refreshSite(ctx context.Context, nodes []slurm.Node, parts []slurm.Partition) {
	if c.site == nil {
		return
	}
	in := site.Inputs{At: time.Now(), Partitions: parts, Nodes: nodes, Config: c.cfg.Site, Speed: c.cfg.Placement.Speed,
		AgentMemory: c.agentGPUMemory(nodes), QueueWait: c.site.waits.Status()}
	if d, ok := c.slurm.(slurm.NodeDetailer); ok {
		det, err := d.NodeDetails(ctx)
		if err != nil {
			in.Problems = append(in.Problems, "node sizes unknown: "+err.Error())
			c.log.Debug().Err(err).Msg("cannot read node sizes (scontrol show node)")
		}
		in.Details = det
	} else {
		in.Problems = append(in.Problems, "node sizes unknown: the Slurm client cannot read them")
	}
	kb := site.Build(in)
	c.site.mu.Lock()
	c.site.kb = kb
	c.site.mu.Unlock()
	c.saveSite(ctx, kb)
}

// agentGPUMemory is the smallest total memory per GPU type that the node
// agents report (a type's nodes may differ: 16 and 32 GiB V100s).
func (c *Controller) agentGPUMemory(nodes []slurm.Node) map[string]uint64 {
	out := map[string]uint64{}
	if c.obs == nil {
		return out
	}
	for _, n := range nodes {
		r, ok := c.obs.Node(n.Name)
		if !ok || r.GPUType == "" {
			continue
		}
		for _, g := range r.GPUs {
			if g.MemoryTotalBytes == 0 {
				continue
			}
			if m, ok := out[r.GPUType]; !ok || g.MemoryTotalBytes < m {
				out[r.GPUType] = g.MemoryTotalBytes
			}
		}
	}
	return out
}

// saveSite stores the knowledge base in the controller's KV state when it
// differs from the last stored one (its time aside), so a controller that
// starts or takes over shows the site before Slurm answers.
func (c *Controller) saveSite(ctx context.Context, kb *wire.Site) {
	cp := *kb
	cp.At = time.Time{}
	body, err := json.Marshal(cp)
	if err != nil {
		return
	}
	s := c.site
	// Only refresh (the leader's loop) saves, so the check and the write
	// need no lock held across the JetStream call; requests reading the
	// knowledge base never wait for it.
	s.mu.Lock()
	same, store := bytes.Equal(body, s.saved), s.store
	s.mu.Unlock()
	if same {
		return
	}
	if store == nil {
		js, err := jetstream.New(c.nc)
		if err != nil {
			return
		}
		if store, err = state.Open(ctx, js, c.cfg.Replicas); err != nil {
			c.log.Warn().Err(err).Msg("cannot store the site knowledge base; it is rebuilt from Slurm at every refresh")
			return
		}
	}
	full, err := json.Marshal(kb)
	if err != nil {
		return
	}
	if err := store.Put(ctx, siteKey, full); err != nil {
		c.log.Warn().Err(err).Msg("cannot store the site knowledge base")
		return
	}
	s.mu.Lock()
	s.store, s.saved = store, body
	s.mu.Unlock()
}

// restoreSite reads the stored knowledge base, for the time before the
// first refresh succeeds.
func (c *Controller) restoreSite(ctx context.Context) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return
	}
	st, err := state.Open(ctx, js, c.cfg.Replicas)
	if err != nil {
		return
	}
	b, err := st.Get(ctx, siteKey)
	if err != nil {
		return
	}
	var kb wire.Site
	if err := json.Unmarshal(b, &kb); err != nil || kb.V != wire.Version {
		c.log.Warn().Msg("stored site knowledge base unreadable; it is rebuilt from Slurm")
		return
	}
	c.site.mu.Lock()
	if c.site.kb == nil {
		c.site.kb = &kb
		c.site.store = st
	}
	c.site.mu.Unlock()
}

// siteKB is the latest knowledge base, nil before any.
func (c *Controller) siteKB() *wire.Site {
	if c.site == nil {
		return nil
	}
	c.site.mu.Lock()
	defer c.site.mu.Unlock()
	if c.site.kb == nil {
		return nil
	}
	kb := *c.site.kb
	kb.QueueWait = c.site.waits.Status()
	return &kb
}

// onEstimate answers `rota estimate`.
func (c *Controller) onEstimate(m *nats.Msg) {
	var req wire.EstimateRequest
	if err := wire.Decode(m.Data, &req); err != nil {
		c.respond(m, wire.EstimateReply{V: wire.Version, Error: "malformed request: " + err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.respond(m, c.estimateReply(ctx, &req))
}

// estimateReply is the estimate for req, for `rota estimate` and the web
// view's form alike.
func (c *Controller) estimateReply(ctx context.Context, req *wire.EstimateRequest) wire.EstimateReply {
	kb := c.siteKB()
	if kb == nil {
		return wire.EstimateReply{V: wire.Version, Error: "the controller has not read the cluster from Slurm yet; try again after its next refresh"}
	}
	est, _ := c.estimator.(*live.Estimator)
	src, notes, err := live.NewSources(ctx, req, live.Parts{Estimator: est, Waits: c.site.waits,
		Table: c.site.table, TableErr: c.site.tableErr, Site: kb})
	if err != nil {
		return wire.EstimateReply{V: wire.Version, Error: err.Error()}
	}
	rep := forecast.Estimate(kb, req, src)
	rep.Notes = append(notes, rep.Notes...)
	if st := c.site.waits.Status(); !c.site.waits.Loaded() {
		rep.Notes = append(rep.Notes, "queue wait unknown: "+st)
	}
	return *rep
}
