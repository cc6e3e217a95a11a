package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/trend"
	"github.com/rota-hpc/rota/controller/web"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gputype"
)

// serveWeb serves the web view on the configured address until ctx ends.
func (c *Controller) serveWeb(ctx context.Context) error {
	addr := c.cfg.Web.Listen
	a, err := c.cfg.Web.Authn()
	if err != nil {
		return err
	}
	h, err := web.New(webSource{c}, web.Options{Auth: a, Log: c.log.With().Str("component", "web").Logger()})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("web_listen %s: cannot listen there (another process has the port? set web_listen = \"\" to turn the web view off): %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, ErrorLog: log.New(io.Discard, "", 0)} // clients hanging up are not the admin's business
	c.serveHTTP(ctx, ln, srv, "web view")
	host, _, _ := net.SplitHostPort(addr)
	ev := c.log.Info().Str("url", "http://"+ln.Addr().String()).Str("auth", a.Mode)
	if a.Mode == web.AuthNone && !auth.IsLoopback(host) {
		ev = ev.Str("note", "read-only, open to everyone who reaches it, explain and estimate included (web_auth)")
	}
	ev.Msg("web view serving")
	return nil
}

// slurmNodes are Slurm's nodes as read at a refresh.
type slurmNodes struct {
	at    time.Time
	nodes []slurm.Node
}

// nodeTypes maps the last refresh's GPU nodes to their type.
func (c *Controller) nodeTypes() map[string]string {
	if p := c.nodes.Load(); p != nil {
		return slurm.NodeTypes(p.nodes)
	}
	return map[string]string{}
}

// gpuJob is a queue entry's GPU count and the type it runs on or is
// constrained to ("" any); ok false for a job without GPUs.
func gpuJob(j *slurm.Job, nodeType map[string]string, types []string) (gpus int, typ string, ok bool) {
	req, ok := j.GPURequest()
	if !ok {
		return 0, "", false
	}
	return j.GPUs(), j.GPUTypeOf(req, nodeType, types), true
}

func (c *Controller) typeNames() []string {
	if s := c.snap.Load(); s != nil {
		return s.TypeNames()
	}
	return nil
}

// sampleTrend takes a fairness and JCT sample every round while leading.
// A sample takes any queue read made since the last one (the round's,
// a manager's), timed when that read began, rather than packing the
// whole queue again in slurmctld, maybe in the middle of a round's
// updates.
func (c *Controller) sampleTrend(ctx context.Context) {
	every := c.cfg.Rounds.Round
	if c.cfg.RoundsOff || every <= 0 {
		every = c.cfg.Refresh
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last time.Time
	for {
		rctx, cancel := context.WithTimeout(ctx, every)
		jobs, at, err := c.queue.Jobs(slurm.QueueSince(rctx, last, every))
		cancel()
		switch {
		case err == nil && at.After(last):
			last = at
			c.trend.Observe(at, c.trendJobs(jobs))
		case err == nil:
			// The read the last sample took (shared within a second):
			// nothing new to sample.
		case ctx.Err() == nil:
			c.log.Debug().Err(err).Msg("no fairness sample this round: the queue could not be read")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// trendJobs are the queue's GPU jobs as the trend counts them.
func (c *Controller) trendJobs(jobs []slurm.Job) []trend.Job {
	nodeType, types := c.nodeTypes(), c.typeNames()
	var out []trend.Job
	for i := range jobs {
		j := &jobs[i]
		gpus, typ, ok := gpuJob(j, nodeType, types)
		if !ok {
			continue
		}
		e := j.Account
		if e == "" {
			e = j.User
		}
		tj := trend.Job{ID: j.ID, Entity: e, Submit: j.Submit, Running: j.Running()}
		if tj.Running {
			sp, _ := gputype.Speed(c.cfg.Placement.Speed, typ)
			tj.Power = float64(gpus) * sp
		}
		out = append(out, tj)
	}
	return out
}

// webSource is web.Source on the controller.
type webSource struct{ c *Controller }

var _ web.Source = webSource{}

func (s webSource) Overview(context.Context) web.Overview {
	c := s.c
	o := web.Overview{Leading: c.leading.Load(), Policy: c.placer.Name()}
	if c.lease != nil {
		o.Leader = c.lease.ID()
	}
	if c.store != nil {
		o.Decisions = c.store.Count()
	}
	if snap := c.snap.Load(); snap != nil {
		o.RefreshedAt = snap.At
		for _, t := range snap.TypeNames() {
			tc := snap.Types[t]
			sp, _ := gputype.Speed(c.cfg.Placement.Speed, t)
			o.Types = append(o.Types, wire.TypeState{Type: t, Nodes: tc.Nodes, Total: tc.Total, Used: tc.Used, Speed: sp})
		}
		for _, p := range snap.Partitions {
			o.Partitions = append(o.Partitions, wire.Partition{Name: p.Name, MaxTimeMin: p.MaxTimeMin, DefaultTimeMin: p.DefaultTimeMin, Default: p.Default, Nodes: p.Nodes})
		}
		sort.Slice(o.Partitions, func(i, j int) bool { return o.Partitions[i].Name < o.Partitions[j].Name })
	}
	if l := c.rounds.Load(); l != nil {
		o.Rounds = roundsStatus(l, false)
	}
	return o
}

// decisionBudget bounds the decision lookups of one jobs page: most come
// from memory, the rest from JetStream.
const decisionBudget = 3 * time.Second

func (s webSource) Jobs(ctx context.Context) (web.Jobs, error) {
	c := s.c
	if !c.leading.Load() {
		return web.Jobs{}, errors.New("this controller stands by: the leading controller reads the queue")
	}
	jobs, at, err := c.queue.Jobs(ctx)
	if err != nil {
		return web.Jobs{}, err
	}
	nodeType, types := c.nodeTypes(), c.typeNames()
	loop := c.rounds.Load()
	dctx, cancel := context.WithTimeout(ctx, decisionBudget)
	defer cancel()
	out := web.Jobs{At: at}
	for i := range jobs {
		j := &jobs[i]
		gpus, typ, ok := gpuJob(j, nodeType, types)
		if !ok {
			continue
		}
		row := web.Job{ID: j.ID, State: j.State, Reason: j.Reason, User: j.User, Account: j.Account, Name: j.Name,
			Partition: j.Partition, Submit: j.Submit, Start: j.Start, TimeLimitMin: j.TimeLimitMin, Nodes: strings.Join(j.Nodes, ","),
			GPUs: gpus, Request: gpuRequest(j), Type: typ, Decision: j.Decision}
		if loop != nil {
			if a, _, ok := loop.Explain(j.ID); ok {
				row.Why, row.Moves = a.Why, a.Moves
			}
		}
		if j.Decision != "" && c.store != nil && dctx.Err() == nil {
			if d, err := c.store.Get(dctx, j.Decision); err == nil {
				row.Given = given(&d.Given)
				if row.Why == "" {
					row.Why = d.Given.Reason
				}
			}
		}
		out.List = append(out.List, row)
	}
	sort.Slice(out.List, func(a, b int) bool { return out.List[a].ID < out.List[b].ID })
	return out, nil
}

// gpuRequest is a job's GPU request as Slurm holds it.
func gpuRequest(j *slurm.Job) string {
	var parts []string
	for _, f := range []struct{ name, v string }{{"job", j.TresPerJob}, {"node", j.TresPerNode}, {"socket", j.TresPerSocket}, {"task", j.TresPerTask}} {
		if f.v != "" && f.v != "N/A" && f.v != "(null)" {
			parts = append(parts, "per "+f.name+" "+f.v)
		}
	}
	return strings.Join(parts, "; ")
}

// given is what a decision gave, in words.
func given(g *wire.PlaceReply) string {
	t := g.GPUType
	if t == "" {
		t = "type kept"
	}
	if g.TimeLimitMin == 0 {
		return t + ", time kept"
	}
	return t + ", " + slurmtime.Format(g.TimeLimitMin)
}

func (s webSource) Explain(ctx context.Context, jobID uint32) wire.ExplainReply {
	if !s.c.leading.Load() {
		return wire.ExplainReply{Error: "this controller stands by: ask the leading controller's web view"}
	}
	return s.c.explainReply(ctx, jobID)
}

func (s webSource) Trend() []trend.Sample { return s.c.trend.Samples() }

func (s webSource) Moves() web.Moves {
	c := s.c
	var m web.Moves
	if l := c.rounds.Load(); l != nil {
		m.Rounds = roundsStatus(l, false)
		if p := l.Last(); p != nil {
			for _, a := range p.Actions {
				if a.Moves > 0 || a.Migrate {
					m.Moved = append(m.Moved, web.Moved{JobID: a.JobID, Type: a.Type, Moves: a.Moves, Migrating: a.Migrate, Why: a.Why})
				}
			}
		}
	}
	if cm := c.chains.Load(); cm != nil {
		m.Chains = cm.Status()
	}
	return m
}

func (s webSource) Agents() web.Agents {
	c := s.c
	var a web.Agents
	if c.obs != nil {
		st := c.obs.Status()
		a.Ingest = &st
	}
	if p := c.nodes.Load(); p != nil {
		a.SlurmAt = p.at
		for _, n := range p.nodes {
			row := web.AgentNode{Node: n.Name, SlurmState: n.State}
			for t, k := range n.GPUs {
				row.GPUs += k
				if t != "" && k > 0 {
					row.GPUType = t
				}
			}
			if row.GPUs == 0 {
				continue
			}
			if c.obs != nil {
				if r, ok := c.obs.Node(n.Name); ok {
					row.Seen, row.ReportedGPUs, row.Jobs, row.LostReports, row.ReportedType = r.Seen, len(r.GPUs), len(r.Jobs), r.Lost, r.GPUType
					var util float64
					for _, g := range r.GPUs {
						util += float64(g.UtilGPUPercent)
						row.MemUsedBytes += g.MemoryUsedBytes
						row.MemTotalBytes += g.MemoryTotalBytes
					}
					if len(r.GPUs) > 0 {
						row.UtilPercent = util / float64(len(r.GPUs))
					}
				}
			}
			a.Nodes = append(a.Nodes, row)
		}
	}
	sort.Slice(a.Nodes, func(i, j int) bool { return a.Nodes[i].Node < a.Nodes[j].Node })
	return a
}

func (s webSource) Estimate(ctx context.Context, req *wire.EstimateRequest) wire.EstimateReply {
	if !s.c.leading.Load() {
		return wire.EstimateReply{Error: "this controller stands by: ask the leading controller's web view"}
	}
	return s.c.estimateReply(ctx, req)
}

func (s webSource) Models() []string {
	if s.c.table != nil {
		return s.c.table.JobTypes
	}
	return nil
}
