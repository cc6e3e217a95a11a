package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/rota-hpc/rota/controller/decisions"
	"github.com/rota-hpc/rota/controller/metrics"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
	"github.com/rota-hpc/rota/wire/gputype"
)

// queueGroup lets several controllers share the request subjects; only one
// answers each request.
const queueGroup = "rota-controller"

// subscribe serves the request subjects; the leader calls it on taking
// the lease and drops the subscriptions when it stops leading.
func (c *Controller) subscribe() ([]*nats.Subscription, error) {
	var subs []*nats.Subscription
	for subj, h := range map[string]nats.MsgHandler{
		wire.SubjectPlace:   c.onPlace,
		wire.SubjectExplain: c.onExplain,
		wire.SubjectStatus:  c.onStatus,
		// rota estimate: off the submit path, may read squeue.
		wire.SubjectEstimate: c.onEstimate,
		// Local placement: plugins report what they decided, and ask
		// for the state when they (re)connect.
		wire.SubjectPlaceDecision: c.onDecision,
		wire.SubjectPlaceSync:     func(*nats.Msg) { c.states.Soon() },
	} {
		s, err := c.nc.QueueSubscribe(subj, queueGroup, h)
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return nil, fmt.Errorf("subscribing to %s: %w", subj, err)
		}
		subs = append(subs, s)
	}
	// Flush so the server knows the subscriptions before we call
	// ourselves ready; a failure here (server gone) is not fatal: the
	// client re-subscribes when it reconnects.
	if err := c.nc.FlushTimeout(2 * time.Second); err != nil {
		c.log.Warn().Err(err).Msg("NATS did not confirm the request subscriptions yet")
	}
	return subs, nil
}

func (c *Controller) respond(m *nats.Msg, v any) {
	// The controller may publish under rota.v1.>, so a requester that named
	// a protocol subject as its reply could make the controller publish
	// there for it (say, onto an agent's checkpoint subject). Replies go
	// to inboxes only.
	if !strings.HasPrefix(m.Reply, "_INBOX") {
		c.log.Warn().Str("subject", m.Subject).Str("reply", m.Reply).Msg("request with a reply subject that is no inbox; not answering")
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		c.log.Error().Err(err).Str("subject", m.Subject).Msg("cannot encode reply")
		return
	}
	if err := m.Respond(b); err != nil {
		c.log.Debug().Err(err).Str("subject", m.Subject).Msg("cannot send reply (requester gone)")
	}
}

// onPlace answers the job_submit plugin. It is on slurmctld's submit path:
// a lookup in the placer's precomputed view, then the reply. The embedded
// controller journals the decision to a local file and stores it in
// JetStream off this path; on an external NATS it stores it in JetStream
// first (Config.durableDecisions).
func (c *Controller) onPlace(m *nats.Msg) {
	start := time.Now()
	var req wire.PlaceRequest
	if err := wire.Decode(m.Data, &req); err != nil {
		// Still answer, so the plugin does not wait out its deadline.
		c.log.Warn().Err(err).Msg("malformed placement request dropped; the job keeps its request")
		c.respond(m, wire.PlaceReply{V: wire.Version, Policy: c.placer.Name(), Reason: "malformed request: " + err.Error()})
		return
	}
	res := c.placer.Place(&req)
	if res.Reserve != nil {
		c.states.Soon() // plugins placing locally must count these GPUs too
	}
	reply := wire.PlaceReply{
		V:            wire.Version,
		DecisionID:   nuid.Next(),
		GPUType:      res.GPUType,
		TimeLimitMin: res.TimeLimitMin,
		ByFeature:    res.ByFeature,
		Policy:       c.placer.Name(),
		Reason:       res.Reason,
		Kind:         res.Kind,
		HoldS:        res.HoldS,
	}
	d := &wire.Decision{ID: reply.DecisionID, At: time.Now().UTC(), JobID: req.JobID, Asked: req, Given: reply, Numbers: res.Numbers}
	if !c.cfg.durableDecisions() {
		// Journaled (one local write) before the answer, so an id the
		// plugin writes into a job outlives a kill -9; JetStream gets it
		// from the store's writer a few ms later.
		c.store.Record(d)
		c.respond(m, reply)
		c.inst.Placed(metrics.Remote, reply.GPUType, time.Since(start))
		c.logPlaced(&reply)
		c.kickSessions(&reply)
		return
	}
	// Store first, answer after: the plugin writes the decision id into
	// the job, so an id it was given must be in JetStream even if this
	// process dies the next instant. The write runs on its own goroutine
	// so requests keep flowing while JetStream replicates.
	c.writes <- struct{}{}
	c.durable.Add(1)
	go func() {
		defer func() { <-c.writes; c.durable.Done() }()
		ctx, cancel := context.WithTimeout(context.Background(), durableWriteTimeout)
		defer cancel()
		if err := c.store.Commit(ctx, d); err != nil {
			// The placer reserved GPUs for this answer; the next refresh
			// from Slurm clears that.
			c.log.Warn().Err(err).Msg("cannot store the decision in JetStream; the job keeps its request")
			c.respond(m, wire.PlaceReply{V: wire.Version, Policy: c.placer.Name(),
				Reason: "the controller could not record its decision, so it gave none"})
			return
		}
		c.respond(m, reply)
		c.inst.Placed(metrics.Remote, reply.GPUType, time.Since(start))
		c.logPlaced(&reply)
		c.kickSessions(&reply)
	}()
}

// onDecision records a placement a plugin made itself from the pushed
// state (placement = local), so `rota explain` and the round loop find it
// by the id in the job's annotation, and counts its GPUs in the shared
// view so the next state tells every plugin. Only the plugin identity may
// publish here (controller/creds).
func (c *Controller) onDecision(m *nats.Msg) {
	var d wire.Decision
	if err := wire.Decode(m.Data, &d); err != nil {
		c.log.Warn().Err(err).Msg("malformed decision record from a plugin dropped")
		return
	}
	noTime := d.At.IsZero()
	if err := checkDecision(&d); err != nil {
		c.log.Warn().Err(err).Str("decision", d.ID).Msg("decision record from a plugin refused")
		return
	}
	c.placer.Absorb(&d)
	c.states.Absorbed()
	if noTime { // checkDecision gave it a time: m.Data lacks it
		c.store.Record(&d)
	} else {
		c.store.RecordEncoded(&d, m.Data) // as the plugin encoded it: not encoded again
	}
	c.inst.Placed(metrics.Local, d.Given.GPUType, time.Duration(d.DecideNs))
	c.logPlaced(&d.Given)
	c.kickSessions(&d.Given)
}

// kickSessions has the round loop put a just-placed interactive job
// first without waiting for its next round (rounds.Loop.Kick).
func (c *Controller) kickSessions(g *wire.PlaceReply) {
	if g.Kind != wire.KindInteractive {
		return
	}
	if l := c.rounds.Load(); l != nil {
		l.Kick()
	}
}

// checkDecision refuses records that could break the store (the id is a
// KV key) or the reservations.
func checkDecision(d *wire.Decision) error {
	if d.ID == "" || len(d.ID) > 64 {
		return fmt.Errorf("decision id of %d bytes", len(d.ID))
	}
	for _, r := range d.ID {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("decision id %q: letters and digits only", d.ID)
		}
	}
	if d.Given.DecisionID != d.ID {
		return fmt.Errorf("decision %q answers as %q", d.ID, d.Given.DecisionID)
	}
	if r := d.Reserve; r != nil {
		if err := gpureq.CheckTypeName(r.Type); err != nil {
			return fmt.Errorf("reservation: %w", err)
		}
		if err := r.Check(); err != nil {
			return err
		}
	}
	if d.At.IsZero() {
		d.At = time.Now().UTC()
	}
	return nil
}

// durableWriteTimeout bounds storing a decision before its reply; the
// plugin stops waiting long before (its deadline_ms), so this only keeps
// a stalled JetStream from holding a write slot for long.
const durableWriteTimeout = 2 * time.Second

func (c *Controller) logPlaced(r *wire.PlaceReply) {
	c.log.Debug().Str("decision", r.DecisionID).Str("gpu_type", r.GPUType).Uint32("time_min", r.TimeLimitMin).
		Str("reason", r.Reason).Msg("placed")
}

// onExplain finds the decision behind a job: from the job index, or else
// from the decision id the plugin wrote into the job's AdminComment (the
// plugin runs before Slurm assigns the id, so the binding happens here).
func (c *Controller) onExplain(m *nats.Msg) {
	var req wire.ExplainRequest
	if err := wire.Decode(m.Data, &req); err != nil {
		c.respond(m, wire.ExplainReply{V: wire.Version, Error: err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.respond(m, c.explainReply(ctx, req.JobID))
}

// explainReply is what `rota explain` and the web view show of a job:
// its decision, the last round's plan for it, its chain.
func (c *Controller) explainReply(ctx context.Context, jobID uint32) wire.ExplainReply {
	var route *wire.MCRoute
	if m := c.mc.Load(); m != nil {
		route = m.Explain(jobID)
	}
	d, err := c.explain(ctx, jobID)
	if err != nil {
		return wire.ExplainReply{V: wire.Version, Error: err.Error(), MultiCluster: route}
	}
	rep := wire.ExplainReply{V: wire.Version, Decision: d, MultiCluster: route}
	if l := c.rounds.Load(); l != nil {
		if a, types, ok := l.Explain(jobID); ok {
			rj := roundJob(a, types)
			rep.Round = &rj
		}
	}
	if cm := c.chains.Load(); cm != nil {
		rep.Chain, rep.ChainNote = cm.Explain(jobID)
	}
	if fm := c.faulttol.Load(); fm != nil {
		rep.Fault = fm.Explain(jobID)
	}
	if sm := c.services.Load(); sm != nil {
		rep.Service = sm.Explain(jobID)
	}
	return rep
}

func (c *Controller) explain(ctx context.Context, jobID uint32) (*wire.Decision, error) {
	if d, err := c.store.ByJob(ctx, jobID); err == nil {
		return d, nil
	} else if !errors.Is(err, decisions.ErrNotFound) {
		return nil, err
	}
	comment, err := c.slurm.JobAdminComment(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("job %d: asking Slurm for its annotation: %w", jobID, err)
	}
	id := wire.DecisionIDFromComment(comment)
	if id == "" {
		return nil, fmt.Errorf("job %d has no Rota annotation: it asked for no GPUs, opted out, or was submitted while the controller was unreachable", jobID)
	}
	return c.store.Bind(ctx, id, jobID)
}

func (c *Controller) onStatus(m *nats.Msg) {
	var req wire.StatusRequest
	if err := wire.Decode(m.Data, &req); err != nil {
		c.respond(m, wire.StatusReply{V: wire.Version})
		return
	}
	rep := wire.StatusReply{V: wire.Version, Policy: c.placer.Name(), Decisions: c.store.Count()}
	if c.lease != nil {
		rep.Leader = c.lease.ID()
	}
	if c.obs != nil {
		st := c.obs.Status()
		rep.Ingest = &st
		if req.Jobs {
			rep.Jobs, rep.JobsTruncated = c.obs.Throughputs(wire.MaxStatusJobs)
		}
	}
	if s := c.snap.Load(); s != nil {
		rep.RefreshedAt = s.At.UTC().Format(time.RFC3339)
		for _, t := range s.TypeNames() {
			tc := s.Types[t]
			sp, _ := gputype.Speed(c.cfg.Placement.Speed, t)
			rep.Types = append(rep.Types, wire.TypeState{Type: t, Nodes: tc.Nodes, Total: tc.Total, Used: tc.Used, Speed: sp})
		}
		for _, p := range s.Partitions {
			rep.Partitions = append(rep.Partitions, wire.Partition{Name: p.Name, MaxTimeMin: p.MaxTimeMin, DefaultTimeMin: p.DefaultTimeMin, Default: p.Default, Nodes: p.Nodes})
		}
		sort.Slice(rep.Partitions, func(i, j int) bool { return rep.Partitions[i].Name < rep.Partitions[j].Name })
	}
	if l := c.rounds.Load(); l != nil {
		rep.Rounds = roundsStatus(l, req.Jobs)
	}
	if c.waits != nil {
		rep.QueueWaits = c.waits.History(c.siteKB())
	}
	if req.Site {
		rep.Site = c.siteKB()
	}
	if cm := c.chains.Load(); cm != nil && req.Jobs {
		rep.Chains = cm.Status()
	}
	if sm := c.services.Load(); sm != nil && req.Jobs {
		rep.Services = sm.Status()
	}
	if mm := c.mc.Load(); mm != nil {
		rep.MultiCluster = mm.Status()
	}
	c.respond(m, rep)
}
