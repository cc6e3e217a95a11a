package multicluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/wire"
)

// Slurm is what the manager asks of this cluster's Slurm.
type Slurm interface {
	Jobs(ctx context.Context) ([]slurm.Job, error)
	ShowJob(ctx context.Context, id uint32) (slurm.JobSpec, bool, error)
	BatchScript(ctx context.Context, id uint32) ([]byte, error)
	Submit(ctx context.Context, s slurm.Submission) (uint32, error)
	Cancel(ctx context.Context, id uint32) error
	Hold(ctx context.Context, id uint32) error
	Unhold(ctx context.Context, id uint32) error
	FindByComment(ctx context.Context, comment string) (uint32, bool, error)
	// Signal asks a job's batch step to checkpoint (its declared signal).
	Signal(ctx context.Context, id uint32, sig string) error
}

// Local is what the manager reads of this controller.
type Local interface {
	Snapshot() *cluster.Snapshot
	// Decision is the job's placement decision (its hints), nil unknown.
	Decision(id uint32) *wire.Decision
	// StepsLeft is a running job's remaining steps as the round loop
	// measures them; false unknown.
	StepsLeft(id uint32) (float64, bool)
}

// Route states.
const (
	OutHolding       = "holding"       // deciding to send: the job is being held here
	OutAsked         = "asked"         // the other cluster was asked to submit a copy
	OutAborting      = "aborting"      // no answer in time: asking it never to
	OutSubmitted     = "submitted"     // the copy is there; the job here is to be cancelled
	OutRouted        = "routed"        // done: runs there only
	OutCheckpointing = "checkpointing" // a move: the running job was asked to checkpoint and end
	OutTransferring  = "transferring"  // a move: its checkpoint is being copied over
	OutStayed        = "stayed"        // done: runs here (not sent)
	OutResuming      = "resuming"      // a move not taken there: resubmitting it here from its checkpoint
	OutResumed       = "resumed"       // done: a move not taken there runs here again, from its checkpoint
	InSubmitting     = "submitting"
	InSubmitted      = "submitted"
	InAborted        = "aborted"
	InFailed         = "failed"
)

// Route is one job sent away (Out) or taken in (In).
type Route struct {
	ID       string               `json:"id"`
	From     string               `json:"from"`
	FromJob  uint32               `json:"from_job"`
	To       string               `json:"to"`
	ToJob    uint32               `json:"to_job,omitempty"`
	State    string               `json:"state"`
	Why      string               `json:"why"`
	At       time.Time            `json:"at"`
	AskedAt  time.Time            `json:"asked_at,omitzero"`
	Req      *wire.MCRouteRequest `json:"req,omitempty"`
	GPUs     int                  `json:"gpus,omitempty"`
	Name     string               `json:"name,omitempty"`
	Incoming bool                 `json:"incoming,omitempty"`
	// A move of a running job: its checkpoint signal and file, when it
	// was signalled, the bytes the decision counted (checkpoint and data),
	// the predicted and measured transfer seconds, where the checkpoint
	// landed on the receiver.
	Move       bool      `json:"move,omitempty"`
	Signal     string    `json:"signal,omitempty"`
	CkptFile   string    `json:"ckpt_file,omitempty"`
	SignalAt   time.Time `json:"signal_at,omitzero"`
	Bytes      float64   `json:"bytes,omitempty"`
	PredictedS float64   `json:"predicted_s,omitempty"`
	ActualS    float64   `json:"actual_s,omitempty"`
	Landed     string    `json:"landed,omitempty"`
	// Here resubmits a moved job on this cluster when its copy is not
	// taken there (resume.go); HereJob is that job.
	Here    *wire.MCRouteRequest `json:"here,omitempty"`
	HereJob uint32               `json:"here_job,omitempty"`
	// StayS: a job moved here runs at least this long before it may move
	// again (what the move cost it; In routes).
	StayS float64 `json:"stay_s,omitempty"`
	// The checkpoint's transfer (transfer.go): the file's size and
	// sha256, the bytes the receiver said it holds, the seconds spent
	// sending so far, and the link figure the prediction took.
	Size   int64   `json:"size,omitempty"`
	SHA256 string  `json:"sha256,omitempty"`
	Sent   int64   `json:"sent,omitempty"`
	XferS  float64 `json:"xfer_s,omitempty"`
	Link   string  `json:"link,omitempty"`
	// XferAt is when the transfer began or the receiver last held more
	// of it: with no progress for RouteTimeout the move is aborted.
	XferAt time.Time `json:"xfer_at,omitzero"`
}

func (r *Route) final() bool {
	return r.State == OutRouted || r.State == OutStayed || r.State == OutResumed || r.Incoming
}

// saved is the manager's durable state.
type saved struct {
	Out map[uint32]*Route `json:"out"`
	In  map[string]*Route `json:"in"`
	// Recv are the checkpoints coming in (transfer.go), by route ID.
	Recv map[string]*receipt `json:"recv,omitempty"`
}

// StateKey is the manager's key in the controller's state bucket.
const StateKey = "multicluster"

// CommentPrefix marks a copy's comment in Slurm: "rota-mc-route=<id>".
const CommentPrefix = "rota-mc-route="

// Manager runs one cluster's side while its controller leads.
type Manager struct {
	cfg   Config
	log   zerolog.Logger
	sl    Slurm
	local Local
	nc    *nats.Conn // subscriptions and views
	mc    *nats.Conn // requests over the link (replies under the mc prefix)
	store state.Store
	now   func() time.Time

	// views are the other clusters' views and this one's; inbox the
	// checkpoints coming in, send the ones going out.
	views *views
	inbox *inbox
	send  sender

	mu  sync.Mutex
	out map[uint32]*Route
	in  map[string]*Route
	// refused: running jobs whose move the transfer made not pay (why),
	// each counted once.
	refused map[uint32]string
	// links are the links to the peers as measured, xfers the
	// checkpoints sent (the last one's figures).
	links *linkBook
	xfers TransferStats
	// warned logs a failure retried every tick once per route or peer.
	warned onceLog
	// saveMu keeps saves in order: each writes the state as of its own
	// marshal, never an older one over a newer.
	saveMu sync.Mutex
}

// New makes a manager; store nil keeps its state in memory only.
func New(cfg Config, log zerolog.Logger, sl Slurm, local Local, nc, mc *nats.Conn, store state.Store) (*Manager, error) {
	if cfg.Name == "" {
		return nil, errors.New("multicluster: no cluster_name")
	}
	if nc == nil || mc == nil {
		return nil, errors.New("multicluster: no NATS connection")
	}
	if store == nil {
		store = newMemStore()
	}
	m := &Manager{cfg: cfg, log: log, sl: sl, local: local, nc: nc, mc: mc, store: store, now: time.Now,
		out: map[uint32]*Route{}, in: map[string]*Route{}, refused: map[uint32]string{}}
	m.links = newLinkBook(cfg, func() time.Time { return m.now() })
	m.views = newViews(cfg.Name, cfg.ViewMaxAge, func() time.Time { return m.now() }, log)
	m.warned.log = m.log
	m.inbox = newInbox(cfg, log, &m.warned, func() time.Time { return m.now() }, m.save)
	m.send = sender{mc: mc, timeout: cfg.AskTimeout}
	return m, nil
}

// Run restores the state, subscribes and ticks until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	m.restore(ctx)
	subs := []*nats.Subscription{}
	for subj, h := range map[string]nats.MsgHandler{wire.SubjectMCViewAll: m.views.onView, wire.SubjectMCRoute(m.cfg.Name): m.onRoute,
		wire.SubjectMCCheckpoint(m.cfg.Name): m.inbox.onCheckpoint, wire.SubjectMCProbe(m.cfg.Name): m.onProbe} {
		sub, err := m.nc.Subscribe(subj, h)
		if err != nil {
			m.log.Error().Err(err).Str("subject", subj).Msg("cannot subscribe; multi-cluster manager off")
			return
		}
		subs = append(subs, sub)
	}
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	m.log.Info().Str("cluster", m.cfg.Name).Int("links", len(m.cfg.Links)).Bool("route", !m.cfg.RouteOff).
		Str("transfer_dir", m.cfg.TransferDir).Dur("probe_interval", m.cfg.ProbeInterval).Msg("multi-cluster manager started")
	go m.probeLoop(ctx)
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		m.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// restore reads the routes and checkpoints in flight saved by the last
// manager.
func (m *Manager) restore(ctx context.Context) {
	var s saved
	found, err := state.GetJSON(ctx, m.store, StateKey, &s)
	if err != nil {
		m.log.Error().Err(err).Msg("cannot read the multi-cluster state; routes in flight are not resumed")
		return
	}
	if !found {
		return
	}
	m.mu.Lock()
	if s.Out != nil {
		m.out = s.Out
	}
	if s.In != nil {
		m.in = s.In
	}
	out, in := len(m.out), len(m.in)
	m.mu.Unlock()
	if s.Recv != nil {
		m.inbox.restore(s.Recv)
	}
	m.log.Info().Int("out", out).Int("in", in).Int("checkpoints_in", m.inbox.count()).Msg("multi-cluster routes restored")
}

// save writes the routes and receipts to the state store. It logs every
// failure itself, so a caller that goes on either way (the next save
// writes the same and more) may drop the error; one that must not act on
// unsaved state checks it.
func (m *Manager) save(ctx context.Context) error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	recv := m.inbox.snapshot()
	m.mu.Lock()
	b, err := json.Marshal(saved{Out: m.out, In: m.in, Recv: recv})
	m.mu.Unlock()
	if err != nil {
		m.log.Error().Err(err).Msg("cannot encode the multi-cluster state to save it")
		return err
	}
	if err := m.store.Put(ctx, StateKey, b); err != nil {
		m.log.Error().Err(err).Msg("cannot save the multi-cluster state")
		return err
	}
	return nil
}

// tick publishes the view, moves routes in flight on, and starts new ones.
func (m *Manager) tick(ctx context.Context) {
	jobs, err := m.sl.Jobs(ctx)
	if err != nil {
		m.log.Warn().Err(err).Msg("cannot read the queue; no view published this tick")
		return
	}
	v := m.buildView(jobs)
	if b, err := json.Marshal(v); err == nil {
		_ = m.nc.Publish(wire.SubjectMCView(m.cfg.Name), b)
	}
	m.views.setHome(v)
	m.mu.Lock()
	var open []*Route
	for _, r := range m.out {
		if !r.final() {
			open = append(open, r)
		}
	}
	m.mu.Unlock()
	sort.Slice(open, func(i, j int) bool { return open[i].ID < open[j].ID })
	for _, r := range open {
		m.advance(ctx, r)
	}
	if !m.cfg.RouteOff {
		m.route(ctx, jobs, v)
	}
	if m.cfg.Moves {
		m.moves(ctx, jobs, v)
	}
	m.prune()
}

// buildView is this cluster as the others should see it.
func (m *Manager) buildView(jobs []slurm.Job) *wire.MCView {
	v := &wire.MCView{V: wire.Version, Cluster: m.cfg.Name, At: m.now().UTC().Format(time.RFC3339Nano),
		Types: map[string]wire.MCType{}, Partitions: map[string]uint32{}, Speed: m.cfg.Speed, Price: m.cfg.Price}
	if s := m.local.Snapshot(); s != nil {
		for t, tc := range s.Types {
			v.Types[t] = wire.MCType{GPUs: tc.Total, Used: tc.Used, MaxPerNode: tc.MaxPerNode}
		}
		for n, p := range s.Partitions {
			v.Partitions[n] = p.MaxTimeMin
		}
		v.DefaultPartition = s.DefaultPartition
	}
	m.mu.Lock()
	leaving := map[uint32]bool{}
	for id, r := range m.out {
		if r.State != OutStayed {
			leaving[id] = true
		}
		if r.State == OutRouted {
			v.Routed++
			if r.Move {
				v.Moved++
			}
		}
	}
	for _, r := range m.in {
		if r.State == InSubmitted {
			v.Received++
		}
	}
	v.RefusedSlow = len(m.refused)
	m.mu.Unlock()
	if m.cfg.TransferDir != "" {
		v.CheckpointMaxGB = m.cfg.TransferMaxGB
	}
	for i := range jobs {
		j := &jobs[i]
		g := j.GPUs()
		if g == 0 || leaving[j.ID] {
			continue
		}
		switch {
		case j.Running():
			v.Running++
		case j.Pending():
			v.Pending++
		default:
			continue
		}
		v.DemandGPUs += float64(g)
	}
	return v
}

// jobOf is what the estimate reads of a queued job.
func (m *Manager) jobOf(j *slurm.Job, d *wire.Decision, script []byte) Job {
	out := Job{GPUs: j.GPUs(), LimitS: float64(j.TimeLimitMin) * 60, DataBytes: m.cfg.DataGB * 1e9}
	if d != nil {
		out.Hints = d.Asked.Hints
	}
	// A type the user named in the request itself (--gres=gpu:p100:1)
	// binds like --rota-types: a cluster without it cannot run the job.
	if r, ok := j.GPURequest(); ok && len(out.Hints.Types) == 0 && (d == nil || d.Asked.GPU.Type != "" || len(d.Asked.GPU.Types) > 0) {
		if ts := r.Types(); len(ts) > 0 {
			out.Hints.Types = ts
		}
	}
	if gb, ok := xcluster.DeclaredGB(script, "data-gb"); ok {
		out.DataBytes = gb * 1e9
	}
	return out
}

// routable says whether a pending job may be sent away, and why not.
func (m *Manager) routable(j *slurm.Job, d *wire.Decision) bool {
	if !j.Pending() || j.GPUs() == 0 || m.now().Sub(j.Submit) < m.cfg.MinPending {
		return false
	}
	switch j.Reason {
	case "JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied":
		return false
	}
	if d == nil {
		// Not Rota's (--rota=off, a plugin that failed open), or its
		// decision not bound by a round yet: what the user asked cannot
		// be told from what Rota set here (type, constraint), which the
		// other cluster may not have.
		return false
	}
	if d.Given.Kind != "" && d.Given.Kind != wire.KindBatch {
		return false // sessions and services stay where their user is
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.out[j.ID]; ok {
		return false
	}
	for _, r := range m.in {
		if r.ToJob == j.ID {
			return false // came from another cluster: it stays
		}
	}
	return true
}

// route sends the pending jobs that gain most elsewhere, largest gain
// first, each checked again against the loads the ones before it left.
func (m *Manager) route(ctx context.Context, jobs []slurm.Job, home *wire.MCView) {
	peers, extra, _ := m.views.fresh()
	if len(peers) == 0 {
		return
	}
	type cand struct {
		j    *slurm.Job
		job  Job
		gain float64
	}
	var cands []cand
	hereDemand := home.DemandGPUs
	best := func(c *cand) (*wire.MCView, float64, float64, float64) {
		w := work(c.job, home, m.cfg.Speed)
		here := finish(c.job, home, w, hereDemand-float64(c.job.GPUs), m.cfg.Speed)
		var to *wire.MCView
		gain, there, xfer := math.Inf(-1), 0.0, 0.0
		for _, p := range peers {
			l := m.link(p.Cluster)
			th := finish(c.job, p, w, p.DemandGPUs+extra[p.Cluster], m.cfg.Speed)
			x := l.Transfer(c.job.DataBytes)
			if g := xcluster.PlaceGain(here, th, x); g > gain {
				to, gain, there, xfer = p, g, th, x
			}
		}
		_ = here
		return to, gain, there, xfer
	}
	for i := range jobs {
		j := &jobs[i]
		d := m.local.Decision(j.ID)
		if !m.routable(j, d) {
			continue
		}
		c := cand{j: j, job: m.jobOf(j, d, nil)}
		if _, g, _, _ := best(&c); g > m.cfg.Margin.Seconds() {
			c.gain = g
			cands = append(cands, c)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].gain > cands[b].gain })
	for i := range cands {
		c := &cands[i]
		// The script may declare the data to copy: read it now.
		if script, err := m.sl.BatchScript(ctx, c.j.ID); err == nil {
			c.job = m.jobOf(c.j, m.local.Decision(c.j.ID), script)
		}
		to, g, there, xfer := best(c)
		if to == nil || g <= m.cfg.Margin.Seconds() {
			continue
		}
		w := work(c.job, home, m.cfg.Speed)
		here := finish(c.job, home, w, hereDemand-float64(c.job.GPUs), m.cfg.Speed)
		why := fmt.Sprintf("estimated finish here %s, on %s %s + transfer %s (%.3g GB over %s): gains %s (margin %s)",
			dur(here), to.Cluster, dur(there), dur(xfer), c.job.DataBytes/1e9, m.link(to.Cluster).words(),
			dur(g), m.cfg.Margin)
		if math.IsInf(here, 1) {
			why = fmt.Sprintf("cannot run here (no GPU type it allows has %d GPUs); on %s %s + transfer %s", c.job.GPUs, to.Cluster, dur(there), dur(xfer))
		}
		r := &Route{ID: fmt.Sprintf("%s.%d", m.cfg.Name, c.j.ID), From: m.cfg.Name, FromJob: c.j.ID, To: to.Cluster,
			State: OutHolding, Why: why, At: m.now(), GPUs: c.job.GPUs, Name: c.j.Name}
		m.mu.Lock()
		m.out[c.j.ID] = r
		m.mu.Unlock()
		m.views.sentTo(to.Cluster, float64(c.job.GPUs))
		hereDemand -= float64(c.job.GPUs)
		extra[to.Cluster] += float64(c.job.GPUs)
		m.log.Info().Uint32("job", c.j.ID).Str("to", to.Cluster).Str("why", why).Msg("sending a pending job to another cluster")
		if m.save(ctx) != nil {
			// Not recorded: neither hold nor send.
			m.mu.Lock()
			delete(m.out, c.j.ID)
			m.mu.Unlock()
			continue
		}
		m.advance(ctx, r)
	}
}

// advance moves one route on as far as it can this tick. Every step is
// saved before the next, and each is safe to repeat after a restart: a
// hold of a held job, a request the other side has answered (it answers
// the same ID with the same job), a cancel of a cancelled job.
func (m *Manager) advance(ctx context.Context, r *Route) {
	for i := 0; i < 4 && !r.final(); i++ {
		before := r.State
		switch r.State {
		case OutHolding:
			m.hold(ctx, r)
		case OutAsked:
			m.ask(ctx, r, false)
		case OutAborting:
			m.ask(ctx, r, true)
		case OutCheckpointing:
			m.checkpointed(ctx, r)
		case OutTransferring:
			m.transfer(ctx, r)
		case OutResuming:
			m.resume(ctx, r)
		case OutSubmitted:
			if err := m.sl.Cancel(ctx, r.FromJob); err != nil {
				if spec, known, e := m.sl.ShowJob(ctx, r.FromJob); e != nil || (known && !spec.Ended()) {
					m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot withdraw the job sent away; trying again")
					return
				}
			}
			m.set(r, OutRouted, "")
		}
		if m.save(ctx) != nil || r.State == before {
			return
		}
	}
}

func (m *Manager) set(r *Route, st, why string) {
	m.mu.Lock()
	r.State = st
	if why != "" {
		r.Why = why
	}
	m.mu.Unlock()
}

// hold keeps the job here from starting, then builds the copy's request.
func (m *Manager) hold(ctx context.Context, r *Route) {
	if err := m.sl.Hold(ctx, r.FromJob); err != nil {
		spec, known, e := m.sl.ShowJob(ctx, r.FromJob)
		if e == nil && (!known || spec.State != "PENDING") {
			m.set(r, OutStayed, r.Why+"; but it started (or ended) here before it could be held: it stays")
			m.log.Info().Uint32("job", r.FromJob).Msg("job started before it could be sent; it stays")
			return
		}
		m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot hold the job to send it; trying again")
		return
	}
	spec, known, err := m.sl.ShowJob(ctx, r.FromJob)
	if err != nil || !known {
		m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot read the job to send it")
		if err == nil {
			m.set(r, OutStayed, r.Why+"; but Slurm no longer knows it")
		}
		return
	}
	if spec.State != "PENDING" {
		// Slurm takes a hold on a job it has just started (22.05 sets its
		// priority to 0 and says nothing): only a job still pending after
		// the hold cannot start here any more.
		if err := m.sl.Unhold(ctx, r.FromJob); err != nil {
			m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot release the hold of a job that started here")
		}
		m.set(r, OutStayed, r.Why+"; but it started here as it was being held: it stays")
		m.log.Info().Uint32("job", r.FromJob).Str("state", spec.State).Msg("job started as it was being held; it stays")
		return
	}
	script, err := m.sl.BatchScript(ctx, r.FromJob)
	if err != nil {
		m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot read the job's script to send it")
		return
	}
	req := m.copyRequest(r, &spec, script)
	m.mu.Lock()
	r.Req = req
	r.State, r.AskedAt = OutAsked, m.now()
	m.mu.Unlock()
}

// copyRequest asks r.To for a copy of local job r.FromJob (spec, script):
// the hints and arguments of its decision, in the peer's default
// partition. A route and a move send the same.
func (m *Manager) copyRequest(r *Route, spec *slurm.JobSpec, script []byte) *wire.MCRouteRequest {
	d := m.local.Decision(r.FromJob)
	var h wire.Hints
	if d != nil {
		h = d.Asked.Hints
	}
	part := m.views.defaultPartition(r.To)
	m.mu.Lock()
	why := r.Why // a move's transfer note is written under the lock
	m.mu.Unlock()
	return &wire.MCRouteRequest{V: wire.Version, ID: r.ID, From: r.From, FromJob: r.FromJob, User: spec.User,
		Name: r.Name, Script: script, Args: CopyArgs(spec, r.Name, d, part, h), Hints: h, Why: why}
}

// ask sends the route's request (or its abort) and acts on the answer.
func (m *Manager) ask(ctx context.Context, r *Route, abort bool) {
	// An abort needs no request built (a move aborted in its transfer has
	// none).
	var req wire.MCRouteRequest
	if abort {
		req = wire.MCRouteRequest{V: wire.Version, ID: r.ID, From: r.From, FromJob: r.FromJob, Abort: true}
	} else {
		req = *r.Req
	}
	b, _ := json.Marshal(req)
	msg, err := m.mc.Request(wire.SubjectMCRoute(r.To), b, m.cfg.AskTimeout)
	var rep wire.MCRouteReply
	if err == nil {
		err = wire.Decode(msg.Data, &rep)
	}
	if err != nil {
		if !abort && m.now().Sub(r.AskedAt) > m.cfg.RouteTimeout {
			m.log.Warn().Err(err).Str("route", r.ID).Msg("no answer from the other cluster in time; aborting the route (the job stays held until it answers)")
			m.set(r, OutAborting, "")
		}
		return
	}
	switch {
	case rep.JobID != 0:
		m.mu.Lock()
		r.ToJob = rep.JobID
		m.mu.Unlock()
		m.set(r, OutSubmitted, "")
		m.log.Info().Str("route", r.ID).Str("to", r.To).Uint32("job_there", rep.JobID).Msg("copy submitted on the other cluster; withdrawing the job here")
	case (rep.Aborted || rep.Error != "") && r.Move:
		// The job here ended at its checkpoint: it resumes here.
		why := r.Why + "; not taken by " + r.To + ": "
		if rep.Error != "" {
			why += rep.Error
		} else {
			why += "no answer in time, move aborted"
		}
		m.set(r, OutResuming, why)
		m.log.Info().Str("route", r.ID).Str("why", why).Msg("move not taken; resubmitting the job here from its checkpoint")
	case rep.Aborted || rep.Error != "":
		if err := m.sl.Unhold(ctx, r.FromJob); err != nil {
			m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot release the job that stays; trying again")
			return
		}
		why := r.Why + "; not sent: "
		if rep.Error != "" {
			why += r.To + " refused: " + rep.Error
		} else {
			why += "no answer from " + r.To + " in time, route aborted"
		}
		m.set(r, OutStayed, why)
		m.log.Info().Str("route", r.ID).Str("why", why).Msg("job stays here")
	}
}

// onRoute is another cluster asking this one to submit a copy of a job.
func (m *Manager) onRoute(msg *nats.Msg) {
	var req wire.MCRouteRequest
	rep := wire.MCRouteReply{V: wire.Version}
	if err := wire.DecodeLimit(msg.Data, &req, wire.MaxRouteBytes); err != nil || req.ID == "" {
		rep.Error = "bad request"
		m.reply(msg, rep)
		return
	}
	rep.ID = req.ID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.reply(msg, m.take(ctx, &req))
}

func (m *Manager) reply(msg *nats.Msg, rep wire.MCRouteReply) {
	b, _ := json.Marshal(rep)
	if err := msg.Respond(b); err != nil {
		m.log.Warn().Err(err).Msg("cannot answer a route request")
	}
}

var takeMu sync.Mutex

// take submits the copy once per route ID, whatever the retries: the
// record is saved before sbatch, and after a crash between the two the
// copy is found again by its comment.
func (m *Manager) take(ctx context.Context, req *wire.MCRouteRequest) wire.MCRouteReply {
	takeMu.Lock()
	defer takeMu.Unlock()
	rep := wire.MCRouteReply{V: wire.Version, ID: req.ID}
	comment := CommentPrefix + req.ID
	m.mu.Lock()
	r := m.in[req.ID]
	m.mu.Unlock()
	if r != nil {
		switch r.State {
		case InSubmitted:
			rep.JobID = r.ToJob
			return rep
		case InAborted:
			rep.Aborted = true
			return rep
		case InFailed:
			if req.Abort {
				rep.Aborted = true
			} else {
				rep.Error = r.Why
			}
			return rep
		case InSubmitting:
			id, found, err := m.sl.FindByComment(ctx, comment)
			if err != nil {
				rep.Error = "cannot tell whether the copy was submitted: " + err.Error()
				return rep
			}
			if found {
				m.setIn(r, InSubmitted, id, "")
				_ = m.save(ctx)
				rep.JobID = id
				return rep
			}
		}
	}
	if req.Abort {
		r = &Route{ID: req.ID, From: req.From, FromJob: req.FromJob, To: m.cfg.Name, State: InAborted, At: m.now(), Incoming: true,
			Why: "aborted by " + req.From + " before a copy was submitted"}
		m.mu.Lock()
		m.in[req.ID] = r
		m.mu.Unlock()
		if err := m.save(ctx); err != nil {
			rep.Error = "cannot record the abort: " + err.Error()
			return rep
		}
		rep.Aborted = true
		return rep
	}
	r = &Route{ID: req.ID, From: req.From, FromJob: req.FromJob, To: m.cfg.Name, State: InSubmitting, At: m.now(), Incoming: true, StayS: req.MoveCostS,
		Why: req.Why}
	m.mu.Lock()
	m.in[req.ID] = r
	m.mu.Unlock()
	if err := m.save(ctx); err != nil {
		rep.Error = "cannot record the route: " + err.Error()
		return rep
	}
	args := append(append([]string{}, req.Args...), "--comment="+comment)
	env := []string{"ROTA_MC_FROM=" + fmt.Sprintf("%s:%d", req.From, req.FromJob)}
	if req.Resume != "" {
		env = append(env, "ROTA_MC_RESUME="+req.Resume)
	}
	id, err := m.sl.Submit(ctx, slurm.Submission{User: req.User, Script: req.Script, Args: args, Env: env})
	if err != nil && strings.Contains(err.Error(), "rota") {
		// sbatch on this host without spank_rota.so: without the hints.
		id, err = m.sl.Submit(ctx, slurm.Submission{User: req.User, Script: req.Script, Args: withoutRota(args), Env: env})
	}
	if err != nil {
		m.setIn(r, InFailed, 0, "sbatch failed: "+err.Error())
		_ = m.save(ctx)
		rep.Error = r.Why
		m.log.Warn().Err(err).Str("route", req.ID).Msg("cannot submit the copy of a job from another cluster")
		return rep
	}
	m.setIn(r, InSubmitted, id, "")
	if err := m.save(ctx); err != nil {
		m.log.Error().Err(err).Str("route", req.ID).Uint32("job", id).Msg("copy submitted but not recorded; a retry finds it by its comment")
	}
	m.log.Info().Str("route", req.ID).Str("from", req.From).Uint32("job", id).Str("user", req.User).Msg("took a job from another cluster")
	rep.JobID = id
	return rep
}

func (m *Manager) setIn(r *Route, st string, id uint32, why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.State = st
	if id != 0 {
		r.ToJob = id
	}
	if why != "" {
		r.Why = why
	}
}

// prune forgets ended routes and checkpoints coming in after a week (the
// part of a checkpoint that never landed is deleted; a landed one is the
// job's), and sends older than a minute.
func (m *Manager) prune() {
	now := m.now()
	m.inbox.prune(now.Add(-7 * 24 * time.Hour))
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, r := range m.out {
		if r.final() && now.Sub(r.At) > 7*24*time.Hour {
			delete(m.out, id)
		}
	}
	for id, r := range m.in {
		if now.Sub(r.At) > 7*24*time.Hour {
			delete(m.in, id)
		}
	}
	m.views.prune()
}

// Status is the manager's part of `rota status`.
func (m *Manager) Status() *wire.MCStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := &wire.MCStatus{Cluster: m.cfg.Name, Peers: m.views.list(m.links)}
	var rs []*Route
	for _, r := range m.out {
		rs = append(rs, r)
	}
	for _, r := range m.in {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].At.After(rs[j].At) })
	for i, r := range rs {
		if i >= wire.MaxStatusJobs {
			break
		}
		st.Routes = append(st.Routes, wireRoute(r))
	}
	return st
}

func wireRoute(r *Route) wire.MCRoute {
	return wire.MCRoute{ID: r.ID, From: r.From, FromJob: r.FromJob, To: r.To, ToJob: r.ToJob, State: r.State, Why: r.Why,
		At: r.At.UTC().Format(time.RFC3339), Incoming: r.Incoming, Move: r.Move, PredictedS: r.PredictedS, ActualS: r.ActualS,
		SentBytes: r.Sent, SizeBytes: r.Size}
}

// Explain is the route of a job of this cluster (sent away or taken in).
func (m *Manager) Explain(id uint32) *wire.MCRoute {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.out[id]; r != nil {
		w := wireRoute(r)
		return &w
	}
	for _, r := range m.in {
		if r.ToJob == id {
			w := wireRoute(r)
			return &w
		}
	}
	for _, r := range m.out {
		if r.HereJob == id {
			w := wireRoute(r)
			return &w
		}
	}
	if why := m.refused[id]; why != "" {
		return &wire.MCRoute{ID: fmt.Sprintf("%s.%d", m.cfg.Name, id), From: m.cfg.Name, FromJob: id, State: "refused_slow", Why: why, Move: true}
	}
	return nil
}

// Estimate is `rota estimate`'s rows for every cluster: this one first.
func (m *Manager) Estimate(j Job) []wire.MCEstimate {
	home := m.views.homeView()
	if home == nil {
		return nil
	}
	peers, extra, ages := m.views.fresh()
	// Stale peers too, marked by their age: the user sees what is known.
	peers = append(peers, m.views.stale()...)
	if j.DataBytes == 0 {
		j.DataBytes = m.cfg.DataGB * 1e9
	}
	links := map[string]xcluster.Link{}
	for _, p := range peers {
		links[p.Cluster] = m.link(p.Cluster).Link
	}
	return Rows(j, home, peers, ages, links, extra, m.cfg.Speed)
}

// CopyArgs are the sbatch options of a copy of the job on another
// cluster: the chain successor's copy of its spec (chains.SuccessorArgs),
// in the other cluster's default partition, without the GPU type or
// constraint Rota gave it here (the other cluster's Rota places it), and
// with its Rota hints.
func CopyArgs(spec *slurm.JobSpec, name string, d *wire.Decision, partition string, h wire.Hints) []string {
	s := *spec
	features := s.Features
	if d != nil {
		features = d.Asked.Features
		if d.Asked.GPU.Type == "" && len(d.Asked.GPU.Types) == 0 {
			s.TresPerJob, s.TresPerNode, s.TresPerSocket, s.TresPerTask = untype(s.TresPerJob), untype(s.TresPerNode), untype(s.TresPerSocket), untype(s.TresPerTask)
		}
	}
	if partition == "" {
		partition = s.Partition
	}
	args, _ := chains.SuccessorArgs(&s, chains.Successor{Name: name, Partition: partition, LimitMin: s.TimeLimitMin, Features: features}, false)
	args = append(args, chains.HintArgs(h)...)
	if len(h.Types) > 0 {
		args = append(args, "--rota-types="+strings.Join(h.Types, ","))
	}
	return args
}

// untype drops the GPU type from TRES strings ("gres:gpu:v100:1" ->
// "gres:gpu:1").
func untype(tres string) string {
	if tres == "" {
		return ""
	}
	var out []string
	for _, item := range strings.Split(tres, ",") {
		p := strings.Split(item, ":")
		// gres:gpu:TYPE:N or gres/gpu:TYPE:N or gpu:TYPE:N
		switch {
		case len(p) == 4 && p[1] == "gpu":
			item = p[0] + ":" + p[1] + ":" + p[3]
		case len(p) == 3 && (p[0] == "gpu" || p[0] == "gres/gpu"):
			item = p[0] + ":" + p[2]
		}
		out = append(out, item)
	}
	return strings.Join(out, ",")
}

func withoutRota(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--rota-") {
			out = append(out, a)
		}
	}
	return out
}

func dur(s float64) string {
	if math.IsInf(s, 1) {
		return "never"
	}
	return (time.Duration(s) * time.Second).Round(time.Second).String()
}

// memStore keeps the state in memory (no JetStream); safe for the
// route handler and the tick loop at once.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newMemStore() *memStore { return &memStore{m: map[string][]byte{}} }

func (s *memStore) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		return nil, state.ErrNotFound
	}
	return b, nil
}

func (s *memStore) Put(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = append([]byte(nil), data...)
	return nil
}
