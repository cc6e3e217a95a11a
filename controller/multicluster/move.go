package multicluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/wire"
)

// moves sends running checkpointable jobs to another cluster when the
// planned rule (xcluster.Rule.MoveScore, the simulator's) says the gain
// beats the move's whole cost: checkpoint, the transfer of checkpoint and
// data at the link's speed (measured, else configured: probe.go),
// restart, and a margin; and only after the job has run MinStay here. A
// job with a checkpoint file goes only where it may land (the view's
// CheckpointMaxGB). A move the transfer alone makes not pay is counted as
// refused (slow link).
func (m *Manager) moves(ctx context.Context, jobs []slurm.Job, home *wire.MCView) {
	peers, extra, _ := m.views.fresh()
	if len(peers) == 0 {
		return
	}
	rule := xcluster.Rule{Planned: true, MoveCost: m.cfg.MoveCost.Seconds(), Margin: m.cfg.Margin.Seconds(), MarginFraction: m.cfg.MarginFraction}
	type cand struct {
		j      *slurm.Job
		job    Job
		left   float64
		to     *wire.MCView
		score  float64
		xfer   float64
		there  float64
		script []byte
	}
	var cands []cand
	hereDemand := home.DemandGPUs
	for i := range jobs {
		j := &jobs[i]
		d := m.local.Decision(j.ID)
		if !j.Running() || d == nil || d.Asked.Hints.CheckpointSignal == "" || j.RunSeconds < m.minStay(j.ID) {
			continue
		}
		if d.Given.Kind != "" && d.Given.Kind != wire.KindBatch {
			continue
		}
		m.mu.Lock()
		_, known := m.out[j.ID]
		_, refused := m.refused[j.ID]
		m.mu.Unlock()
		if known || refused {
			continue
		}
		left, ok := m.local.StepsLeft(j.ID)
		if !ok || left <= 0 {
			continue
		}
		script, err := m.sl.BatchScript(ctx, j.ID)
		if err != nil {
			continue
		}
		job := m.jobOf(j, d, script)
		ck := m.cfg.CheckpointGB
		if gb, ok := xcluster.DeclaredGB(script, "checkpoint-gb"); ok {
			ck = gb
		}
		bytes := ck*1e9 + job.DataBytes
		_, hasFile := declaredString(script, "checkpoint-file")
		c := cand{j: j, job: job, left: left, script: script, score: math.Inf(-1)}
		here := finish(job, home, left, hereDemand-float64(job.GPUs), m.cfg.Speed)
		for _, p := range peers {
			if hasFile && (p.CheckpointMaxGB <= 0 || ck > p.CheckpointMaxGB) {
				continue // it cannot take this checkpoint file
			}
			th := finish(job, p, left, p.DemandGPUs+extra[p.Cluster], m.cfg.Speed)
			x := m.link(p.Cluster).Transfer(bytes)
			if s := rule.MoveScore(here, th, x); s > c.score {
				c.to, c.score, c.xfer, c.there = p, s, x, th
			}
		}
		if c.to == nil {
			continue
		}
		if c.score <= 0 {
			// Would it pay but for the copy? Then the link is too slow.
			if rule.MoveScore(here, c.there, 0) > 0 {
				why := fmt.Sprintf("move to %s refused: it would finish in %s there against %s here, but copying %.3g GB takes %s over the link (%s), so the move does not pay",
					c.to.Cluster, dur(c.there), dur(here), bytes/1e9, dur(c.xfer), m.link(c.to.Cluster).words())
				m.mu.Lock()
				m.refused[j.ID] = why
				m.mu.Unlock()
				m.log.Info().Uint32("job", j.ID).Str("why", why).Msg("move refused: slow link")
			}
			continue
		}
		c.job.DataBytes = bytes
		cands = append(cands, c)
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
	for _, c := range cands {
		// Again against the loads the moves before it left.
		th := finish(c.job, c.to, c.left, c.to.DemandGPUs+extra[c.to.Cluster], m.cfg.Speed)
		here := finish(c.job, home, c.left, hereDemand-float64(c.job.GPUs), m.cfg.Speed)
		score := rule.MoveScore(here, th, c.xfer)
		if score <= 0 {
			continue
		}
		d := m.local.Decision(c.j.ID)
		why := fmt.Sprintf("running job moved: %.0f steps left finish in %s here, %s on %s; the move costs checkpoint+restart %s + transfer %s (%.3g GB over %s) + margin %s + %.0f%% of the time here: gains %s",
			c.left, dur(here), dur(th), c.to.Cluster, m.cfg.MoveCost, dur(c.xfer), c.job.DataBytes/1e9,
			m.link(c.to.Cluster).words(), m.cfg.Margin, 100*m.cfg.MarginFraction, dur(score))
		r := &Route{ID: fmt.Sprintf("%s.%d", m.cfg.Name, c.j.ID), From: m.cfg.Name, FromJob: c.j.ID, To: c.to.Cluster,
			State: OutCheckpointing, Why: why, At: m.now(), GPUs: c.job.GPUs, Name: c.j.Name, Move: true,
			Signal: d.Asked.Hints.CheckpointSignal, Bytes: c.job.DataBytes, PredictedS: c.xfer}
		if f, ok := declaredString(c.script, "checkpoint-file"); ok {
			r.CkptFile = f
		}
		m.mu.Lock()
		m.out[c.j.ID] = r
		m.mu.Unlock()
		m.views.sentTo(c.to.Cluster, float64(c.job.GPUs))
		hereDemand -= float64(c.job.GPUs)
		extra[c.to.Cluster] += float64(c.job.GPUs)
		m.log.Info().Uint32("job", c.j.ID).Str("to", c.to.Cluster).Str("why", why).Msg("moving a running job to another cluster")
		if m.save(ctx) != nil {
			m.mu.Lock()
			delete(m.out, c.j.ID)
			m.mu.Unlock()
			continue
		}
		m.advance(ctx, r)
	}
}

// checkpointed asks the job to checkpoint (once) and waits for it to end:
// ended after its checkpoint, it goes on to the transfer; a job that does
// not end in CheckpointWait, or ends otherwise, stays.
func (m *Manager) checkpointed(ctx context.Context, r *Route) {
	if r.SignalAt.IsZero() {
		if err := m.keepJob(ctx, r); err != nil {
			m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot read the job to move; trying again")
			return
		}
		if err := m.sl.Signal(ctx, r.FromJob, r.Signal); err != nil {
			m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot signal the job to checkpoint; it stays")
			m.set(r, OutStayed, r.Why+"; not moved: the checkpoint signal failed: "+err.Error())
			return
		}
		m.mu.Lock()
		r.SignalAt = m.now()
		m.mu.Unlock()
		_ = m.save(ctx)
	}
	spec, known, err := m.sl.ShowJob(ctx, r.FromJob)
	if err != nil {
		return
	}
	switch {
	case known && !spec.Ended():
		if m.now().Sub(r.SignalAt) > m.cfg.CheckpointWait {
			m.set(r, OutStayed, r.Why+"; not moved: it did not end within "+m.cfg.CheckpointWait.String()+" of its checkpoint signal")
		}
		return
	case known && spec.State != "COMPLETED":
		m.set(r, OutStayed, r.Why+"; not moved: it ended "+strings.ToLower(spec.State)+" after its checkpoint signal")
		return
	}
	m.set(r, OutTransferring, "")
}

// transfer sends the checkpoint file to the other cluster over the link
// (transfer.go), a slice of time per tick, going on from what the
// receiver holds; once it landed there whole, it builds the copy's
// request, which resumes from it (ROTA_MC_RESUME, the receiver's path).
// A job that declared no checkpoint file has nothing to send.
func (m *Manager) transfer(ctx context.Context, r *Route) {
	m.mu.Lock()
	landed := r.Landed
	if r.XferAt.IsZero() {
		r.XferAt = m.now() // the transfer begins: progress is counted from here
	}
	m.mu.Unlock()
	if r.CkptFile != "" && landed == "" {
		path, err := m.sendCheckpoint(ctx, r, m.transferSlice())
		if err != nil {
			m.mu.Lock()
			stuck := m.now().Sub(r.XferAt) > m.cfg.RouteTimeout
			m.mu.Unlock()
			if errors.As(err, &refusedError{}) || stuck {
				// As a route with no answer: the other side confirms the
				// abort, then the job resumes here from its checkpoint.
				m.log.Warn().Err(err).Str("route", r.ID).Str("to", r.To).
					Msg("the moved job's checkpoint cannot cross (refused there, or no progress for mc_route_timeout); aborting the move: the job resumes here from its checkpoint once the other cluster confirms")
				m.set(r, OutAborting, r.Why+"; its checkpoint did not cross: "+err.Error())
				m.warned.clear("route", r.ID)
				return
			}
			m.warned.warn("route", r.ID, err, "cannot send the moved job's checkpoint to cluster "+r.To+
				" (the job has ended here at its checkpoint and waits); trying again every tick, the move is aborted after mc_route_timeout without progress: see the error, and `rota status` for the link")
			return
		}
		if path == "" {
			return // more next tick
		}
		m.warned.clear("route", r.ID)
		landed = path
		m.mu.Lock()
		r.Landed = landed
		m.mu.Unlock()
	}
	if err := m.keepJob(ctx, r); err != nil { // a route saved before it was kept
		m.log.Warn().Err(err).Uint32("job", r.FromJob).Msg("cannot read the moved job to ask for its copy; trying again")
		return
	}
	m.mu.Lock()
	req := *r.Req
	req.Resume = landed
	req.MoveCostS = m.cfg.MoveCost.Seconds() + r.ActualS
	req.Why = r.Why // with the transfer's note
	r.Req = &req
	r.State, r.AskedAt = OutAsked, m.now()
	m.mu.Unlock()
}

// declaredString reads "#ROTA --<key>=VALUE" from a batch script.
func declaredString(script []byte, key string) (string, bool) {
	for _, line := range strings.Split(string(script), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#ROTA")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if v, ok := strings.CutPrefix(f, "--"+key+"="); ok && v != "" {
				return v, true
			}
		}
	}
	return "", false
}

// minStay is how long job id must run here before it may move: MinStay,
// or, for a job moved here, what that move cost it if longer, so that a
// job uses a cluster long enough to pay for coming (xcluster's rule).
func (m *Manager) minStay(id uint32) float64 {
	stay := m.cfg.MinStay.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.in {
		if r.ToJob == id && r.StayS > stay {
			stay = r.StayS
		}
	}
	return stay
}
