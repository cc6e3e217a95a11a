package app

import (
	"context"
	"fmt"
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

// loadSite loads the queue-wait model and the throughput table named in
// the config, and makes the knowledge base's book. Neither file is needed
// to run: a missing or broken one is logged once and the numbers that need
// it are reported unknown, with the reason.
func (c *Controller) loadSite() {
	c.waits = live.NewWaits(c.cfg.QueueWaitModel, c.slurm.Jobs, c.log)
	c.book = &site.Book{Log: c.log, Open: func(ctx context.Context) (state.Store, error) {
		js, err := jetstream.New(c.nc)
		if err != nil {
			return nil, err
		}
		return state.Open(ctx, js, c.cfg.Replicas)
	}}
	if p := c.cfg.ThroughputTable; p == "" {
		c.tableErr = "the controller has no throughput table (set throughput_table to Gavel's simulation_throughputs.json)"
	} else if t, err := workload.LoadAll(p); err != nil {
		c.tableErr = fmt.Sprintf("the controller's throughput table %s cannot be read: %v", p, err)
		c.log.Warn().Err(err).Str("throughput_table", p).Msg("cannot read the throughput table; rota estimate --model is unavailable until it is fixed and the controller restarted")
	} else {
		c.table = t
	}
}

// refreshSite rebuilds the knowledge base after a refresh from Slurm.
func (c *Controller) refreshSite(ctx context.Context, nodes []slurm.Node, parts []slurm.Partition) {
	if c.book == nil {
		return
	}
	in := site.Inputs{At: time.Now(), Partitions: parts, Nodes: nodes, Config: c.cfg.Site, Speed: c.cfg.Placement.Speed,
		QueueWait: c.waits.Status(), AgentMemory: map[string]uint64{}}
	if c.obs != nil {
		names := make([]string, len(nodes))
		for i, n := range nodes {
			names[i] = n.Name
		}
		in.AgentMemory = c.obs.GPUMemory(names)
	}
	det, err := c.slurm.NodeDetails(ctx)
	if err != nil {
		in.Problems = append(in.Problems, "node sizes unknown: "+err.Error())
		c.log.Debug().Err(err).Msg("cannot read node sizes (scontrol show node)")
	}
	in.Details = det
	c.book.Set(ctx, site.Build(in))
}

// siteKB is the latest knowledge base with the queue-wait model's status,
// nil before any.
func (c *Controller) siteKB() *wire.Site {
	if c.book == nil {
		return nil
	}
	kb := c.book.Current()
	if kb != nil {
		kb.QueueWait = c.waits.Status()
	}
	return kb
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
	src, notes, err := live.NewSources(ctx, req, live.Parts{Estimator: est, Waits: c.waits,
		Table: c.table, TableErr: c.tableErr, Site: kb})
	if err != nil {
		return wire.EstimateReply{V: wire.Version, Error: err.Error()}
	}
	rep := forecast.Estimate(kb, req, src)
	rep.Notes = append(notes, rep.Notes...)
	c.mcEstimate(req, rep)
	if st := c.waits.Status(); !c.waits.Loaded() {
		rep.Notes = append(rep.Notes, "queue wait unknown: "+st)
	}
	return *rep
}
