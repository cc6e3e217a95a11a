package serve

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/internal/tick"
	"github.com/rota-hpc/rota/wire"
)

// Slurm is what the manager drives: the queue, nodes, updates of pending
// jobs, submission and cancel.
type Slurm interface {
	slurm.Scheduler
	slurm.Submitter
}

// Jobs is what the controller knows of a job beyond Slurm.
type Jobs interface {
	// Decision is the placement decision job id carries; nil while it
	// is not bound (the round loop binds it) or the job is not Rota's.
	Decision(id uint32) *wire.Decision
	// Ready says whether the job's node agent last reported its ready
	// file ($ROTA_READY_FILE).
	Ready(id uint32) bool
}

// Replica states.
const (
	StateRunning = "running"
	StateStopped = "stopped"
)

const (
	stateKey     = "services"
	stateVersion = 1
	// keepStopped replicas stay for explain this long.
	keepStopped = 7 * 24 * time.Hour
)

// Replica is one replica of a service: a line of jobs, each rolled over
// to the next before its time limit. Its id is its first job's.
type Replica struct {
	ID      uint32 `json:"id"`
	Service string `json:"service"`
	// Named: the user named the service (--rota-service); an unnamed
	// serve job is a service of its own, "job-<id>".
	Named    bool      `json:"named,omitempty"`
	User     string    `json:"user"`
	Name     string    `json:"name"`
	Features string    `json:"features,omitempty"` // the user's own constraint
	State    string    `json:"state"`
	Why      string    `json:"why,omitempty"`
	Created  time.Time `json:"created"`
	Ended    time.Time `json:"ended,omitempty"`
	// NoRollover: --rota-chain=off; the replica ends at its limit.
	NoRollover bool `json:"no_rollover,omitempty"`
	// UserExcluded is the user's own ExcNodeList (ExclRead: known).
	UserExcluded string `json:"user_excluded,omitempty"`
	ExclRead     bool   `json:"excl_read,omitempty"`
	Jobs         []Job  `json:"jobs"`

	script []byte // the batch script, kept in memory only
}

// Job is one job of a replica.
type Job struct {
	JobID     uint32    `json:"job_id"`
	N         int       `json:"n"`
	Partition string    `json:"partition"`
	LimitMin  uint32    `json:"limit_min"`
	State     string    `json:"state"`
	Nodes     []string  `json:"nodes,omitempty"`
	Excluded  string    `json:"excluded,omitempty"`
	Submitted time.Time `json:"submitted,omitempty"`
	// Released is when the manager set its excluded nodes and let it
	// start (zero: not yet).
	Released time.Time `json:"released,omitempty"`
	Started  time.Time `json:"started,omitempty"`
	ReadyAt  time.Time `json:"ready_at,omitempty"`
	EndedAt  time.Time `json:"ended_at,omitempty"`
	Ended    bool      `json:"ended,omitempty"`
	// StoppedByRota: the manager cancelled it (its successor was ready,
	// or the replica stopped).
	StoppedByRota bool `json:"stopped_by_rota,omitempty"`
	// Tries counts its successors that ended before they were ready.
	Tries int    `json:"tries,omitempty"`
	Why   string `json:"why,omitempty"`
}

func (j *Job) running() bool { return !j.Ended && !j.Started.IsZero() }

// Stats are the manager's counters.
type Stats struct {
	Replicas, Submitted, Released, Rollovers, Gaps, Errors uint64
}

// Manager spreads services' replicas and rolls them over.
type Manager struct {
	cfg   Config
	log   zerolog.Logger
	sched Slurm
	jobs  Jobs
	store state.Store
	now   func() time.Time
	// spank: pass Rota's options to a successor's sbatch; off when the
	// submit host has no spank_rota.so.
	spank bool

	// replicas and byJob belong to the ticking goroutine.
	replicas map[uint32]*Replica // by replica id
	byJob    map[uint32]uint32   // job id -> replica id
	nodes    []slurm.Node        // this tick's, read when needed
	nodesOK  bool
	queue    slurm.TickQueue

	mu    sync.Mutex
	pub   map[string]*wire.ServiceStatus // by service
	pubOf map[uint32]string              // job id -> service
	stats Stats
}

// New makes a manager; store may be nil (nothing saved).
func New(cfg Config, log zerolog.Logger, sched Slurm, jobs Jobs, store state.Store) (*Manager, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, log: log, sched: sched, jobs: jobs, store: store, now: time.Now, spank: true,
		replicas: map[uint32]*Replica{}, byJob: map[uint32]uint32{}, pub: map[string]*wire.ServiceStatus{}, pubOf: map[uint32]string{}}, nil
}

// Run ticks until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	tick.Loop{Every: m.cfg.Tick, Restore: m.restore, Tick: m.Tick, Log: m.log,
		RestoreFailed: "could not restore saved services; their replicas are followed again from the queue, without their history",
		TickFailed:    "service tick failed; the next one tries again"}.Run(ctx)
}

// Wake has the next tick look at the queue, taking the read that began at
// readAt or a later one: the round loop calls it once a round has bound
// its jobs, which may include replicas to adopt.
func (m *Manager) Wake(readAt time.Time) { m.queue.Wake(readAt) }

// Tick reads the queue once and acts.
func (m *Manager) Tick(ctx context.Context) error {
	if m.cfg.Off {
		return nil
	}
	now := m.now()
	defer m.queue.Ticked()
	queue, read, err := m.queue.Read(ctx, m.sched, m.cfg.Tick, len(m.replicas) > 0)
	if err != nil {
		return fmt.Errorf("reading the queue: %w", err)
	}
	if !read {
		return nil // no replica followed, no round since the last look
	}
	m.nodes, m.nodesOK = nil, false
	byID := make(map[uint32]*slurm.Job, len(queue))
	for i := range queue {
		byID[queue[i].ID] = &queue[i]
	}
	for i := range queue {
		m.adopt(&queue[i], now)
	}
	for _, r := range m.sorted() {
		if r.State == StateRunning {
			m.follow(ctx, r, byID, now)
		}
	}
	m.spread(ctx, now)
	m.forget(now)
	m.publish()
	return m.save(ctx)
}

func (m *Manager) sorted() []*Replica {
	out := make([]*Replica, 0, len(m.replicas))
	for _, r := range m.replicas {
		out = append(out, r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// adopt starts following a serve job the manager did not submit.
func (m *Manager) adopt(j *slurm.Job, now time.Time) {
	if _, ok := m.byJob[j.ID]; ok || (!j.Pending() && !j.Running()) {
		return
	}
	d := m.jobs.Decision(j.ID)
	if d == nil || d.Given.Kind != wire.KindServe {
		return
	}
	h := d.Asked.Hints
	r := &Replica{ID: j.ID, Service: h.Service, Named: h.Service != "", User: j.User, Name: j.Name, Features: d.Asked.Features,
		State: StateRunning, Created: now, NoRollover: h.Chain == "off",
		Jobs: []Job{{JobID: j.ID, N: 1, Partition: j.Partition, LimitMin: j.TimeLimitMin, State: j.State, Submitted: j.Submit}}}
	if !r.Named {
		r.Service = "job-" + strconv.FormatUint(uint64(j.ID), 10)
	}
	m.replicas[r.ID] = r
	m.byJob[j.ID] = r.ID
	m.count(func(s *Stats) { s.Replicas++ })
	m.log.Info().Str("inference_service", r.Service).Uint32("job", j.ID).Msg("following a service replica: kept off its siblings' nodes, rolled over before its time limit")
}

// follow updates one replica from the queue and acts on it.
func (m *Manager) follow(ctx context.Context, r *Replica, byID map[uint32]*slurm.Job, now time.Time) {
	for i := range r.Jobs {
		g := &r.Jobs[i]
		if g.Ended {
			continue
		}
		if j, ok := byID[g.JobID]; ok && j.State != "COMPLETING" {
			m.observe(r, g, j, now)
			continue
		}
		m.ended(ctx, r, i, now)
		if r.State != StateRunning {
			return
		}
	}
	var live []int
	for i := range r.Jobs {
		if !r.Jobs[i].Ended {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		m.stopReplica(ctx, r, "its last job ended", now)
		return
	}
	cur := &r.Jobs[live[0]]
	var next *Job
	if len(live) > 1 {
		next = &r.Jobs[live[1]]
	}
	if !cur.running() {
		return // a replica's first job still pending
	}
	if next != nil && next.running() && !next.ReadyAt.IsZero() && !cur.StoppedByRota {
		m.stopPredecessor(ctx, r, cur, next)
		return
	}
	if next == nil && !r.NoRollover && cur.LimitMin > 0 && !cur.StoppedByRota {
		due := cur.Started.Add(time.Duration(cur.LimitMin)*time.Minute - m.cfg.Lead)
		if now.Before(due) {
			return
		}
		if cur.Tries >= m.cfg.MaxTries {
			if !strings.Contains(cur.Why, "no further successor") {
				cur.Why = fmt.Sprintf("%d successors ended before they were ready: no further successor; it runs to its limit", cur.Tries)
				m.log.Warn().Str("inference_service", r.Service).Uint32("job", cur.JobID).Msg("the service replica's " + cur.Why + " (see the successors' output files)")
			}
			return
		}
		if w := m.rollingSibling(r); w != 0 && now.Before(due.Add(m.cfg.Lead/2)) {
			// One replica of a service rolls over at a time, while half
			// the lead is left: two at once need two spare nodes, and with
			// one the second successor would share a node with a sibling.
			return
		}
		m.submit(ctx, r, cur, now)
	}
}

// rollingSibling is the successor (job id) of another replica of r's
// service that is running or pending and not yet ready, 0 when none.
func (m *Manager) rollingSibling(r *Replica) uint32 {
	for _, o := range m.replicas {
		if o.ID == r.ID || o.Service != r.Service || o.State != StateRunning {
			continue
		}
		for i := 1; i < len(o.Jobs); i++ {
			if g := &o.Jobs[i]; !g.Ended && g.ReadyAt.IsZero() && !o.Jobs[i-1].Ended {
				return g.JobID
			}
		}
	}
	return 0
}

// observe records what the queue says of a live job.
func (m *Manager) observe(r *Replica, g *Job, j *slurm.Job, now time.Time) {
	g.State = j.State
	if j.TimeLimitMin != 0 {
		g.LimitMin = j.TimeLimitMin
	}
	if !j.Running() {
		return
	}
	if g.Started.IsZero() {
		g.Started = j.Start
		if g.Started.IsZero() {
			g.Started = now
		}
	}
	if len(j.Nodes) > 0 {
		g.Nodes = j.Nodes
	}
	if g.ReadyAt.IsZero() && m.jobs.Ready(g.JobID) {
		g.ReadyAt = now
		m.log.Info().Str("inference_service", r.Service).Uint32("replica", r.ID).Uint32("job", g.JobID).Strs("nodes", g.Nodes).Msg("service replica is ready")
	}
}

// ended handles a job that left the queue.
func (m *Manager) ended(ctx context.Context, r *Replica, i int, now time.Time) {
	g := &r.Jobs[i]
	spec, known, err := m.sched.ShowJob(ctx, g.JobID)
	if err != nil {
		m.log.Info().Err(err).Uint32("job", g.JobID).Msg("cannot read how a service job ended; tried again next tick")
		return
	}
	if known && !spec.Ended() {
		return // COMPLETING, or between squeue and scontrol
	}
	g.Ended, g.EndedAt, g.State = true, now, "GONE"
	if known {
		g.State = spec.State
		if !spec.End.IsZero() {
			g.EndedAt = spec.End
		}
	}
	if g.StoppedByRota {
		return
	}
	var pred, succ *Job
	for k := range r.Jobs {
		if r.Jobs[k].Ended {
			continue
		}
		if k < i {
			pred = &r.Jobs[k]
		} else if k > i && succ == nil {
			succ = &r.Jobs[k]
		}
	}
	switch {
	case g.State == "CANCELLED":
		g.Why = "cancelled (not by Rota)"
		m.stopReplica(ctx, r, fmt.Sprintf("job %d was cancelled by its user or an admin", g.JobID), now)
	case pred != nil:
		pred.Tries++
		g.Why = fmt.Sprintf("ended (%s) before it was ready", g.State)
		m.log.Warn().Str("inference_service", r.Service).Uint32("job", g.JobID).Uint32("serving", pred.JobID).Str("state", g.State).
			Msg("a service replica's successor ended before it was ready; its predecessor keeps serving and another successor is submitted (see the job's output file)")
	case succ != nil && succ.ReadyAt.IsZero():
		g.Why = fmt.Sprintf("ended (%s) before its successor was ready", g.State)
		m.count(func(s *Stats) { s.Gaps++ })
		m.log.Warn().Str("inference_service", r.Service).Uint32("job", g.JobID).Uint32("successor", succ.JobID).Str("state", g.State).
			Msg("a service replica ended before its successor was ready: the replica serves nothing until the successor is; raise serve_rollover_lead if successors start too late")
	case succ != nil:
		g.Why = fmt.Sprintf("ended (%s) with its successor ready", g.State)
	default:
		g.Why = "ended (" + g.State + ")"
		m.stopReplica(ctx, r, fmt.Sprintf("job %d ended (%s) with no successor", g.JobID, g.State), now)
	}
}

// stopPredecessor cancels cur, whose successor next is ready: Slurm sends
// it SIGTERM, then SIGKILL after KillWait.
func (m *Manager) stopPredecessor(ctx context.Context, r *Replica, cur, next *Job) {
	if err := m.sched.Cancel(ctx, cur.JobID); err != nil {
		m.count(func(s *Stats) { s.Errors++ })
		m.log.Warn().Err(err).Uint32("job", cur.JobID).Msg("cannot stop the service job its ready successor replaces; tried again next tick, else it runs to its limit")
		return
	}
	cur.StoppedByRota = true
	cur.Why = fmt.Sprintf("stopped by Rota: job %d is ready in its place", next.JobID)
	m.count(func(s *Stats) { s.Rollovers++ })
	m.log.Info().Str("inference_service", r.Service).Uint32("replica", r.ID).Uint32("job", cur.JobID).Uint32("successor", next.JobID).
		Strs("successor_nodes", next.Nodes).Msg("service replica rolled over: its successor is ready, the old job is stopped (SIGTERM)")
}

// stopReplica ends a replica, cancelling what it had pending or starting.
func (m *Manager) stopReplica(ctx context.Context, r *Replica, why string, now time.Time) {
	for i := range r.Jobs {
		g := &r.Jobs[i]
		if g.Ended || g.StoppedByRota {
			continue
		}
		if err := m.sched.Cancel(ctx, g.JobID); err != nil {
			m.log.Warn().Err(err).Uint32("job", g.JobID).Msg("cannot cancel the stopped replica's other job; cancel it by hand (scancel)")
			continue
		}
		g.StoppedByRota, g.Why = true, "cancelled by Rota: the replica stopped"
	}
	r.State, r.Why, r.Ended = StateStopped, why, now
	m.log.Info().Str("inference_service", r.Service).Uint32("replica", r.ID).Str("why", why).Msg("service replica stopped")
}

// submit submits cur's successor: a copy of it, kept off cur's nodes and
// (as Spread says) its siblings', started at once (no dependency).
func (m *Manager) submit(ctx context.Context, r *Replica, cur *Job, now time.Time) {
	spec, ok, err := m.sched.ShowJob(ctx, cur.JobID)
	if err != nil || !ok {
		m.errorf(r, err, "cannot read job %d to copy it", cur.JobID)
		return
	}
	if r.script == nil {
		b, err := m.sched.BatchScript(ctx, cur.JobID)
		if err != nil {
			m.errorf(r, err, "cannot read the batch script of job %d", cur.JobID)
			return
		}
		r.script = b
	}
	excl, note := m.exclusion(ctx, r, nil, cur.Partition, userExcluded(r, cur, &spec))
	args, _ := chains.SuccessorArgs(&spec, chains.Successor{Chain: r.ID, N: cur.N + 1, Name: r.Name, Partition: cur.Partition,
		LimitMin: cur.LimitMin, Features: r.Features}, false)
	if excl != "" {
		args = append(args, "--exclude="+excl)
	}
	env := []string{"ROTA_SERVICE=" + r.Service, "ROTA_SERVICE_REPLICA=" + strconv.FormatUint(uint64(r.ID), 10),
		"ROTA_SERVICE_GENERATION=" + strconv.Itoa(cur.N+1)}
	sub := slurm.Submission{User: spec.User, Script: r.script, Args: append(args, m.spankArgs(r)...), Env: env}
	id, err := m.sched.Submit(ctx, sub)
	if err != nil && m.spank && strings.Contains(err.Error(), "--rota") {
		m.spank = false
		m.log.Warn().Err(err).Msg("sbatch here does not know Rota's options (spank_rota.so not in plugstack.conf on the controller host); service successors are submitted without them")
		sub.Args = args
		id, err = m.sched.Submit(ctx, sub)
	}
	if err != nil {
		m.errorf(r, err, "cannot submit the successor of job %d", cur.JobID)
		return
	}
	g := Job{JobID: id, N: cur.N + 1, Partition: cur.Partition, LimitMin: cur.LimitMin, State: "PENDING", Submitted: now, Excluded: excl}
	if m.cfg.Hold == 0 || !m.spank {
		g.Released = now // not held by the plugin: nothing to release
	}
	r.Jobs = append(r.Jobs, g)
	m.byJob[id] = r.ID
	m.count(func(s *Stats) { s.Submitted++ })
	p := m.cfg.Priority
	if err := m.sched.Update(ctx, id, slurm.JobUpdate{Priority: &p}); err != nil {
		m.log.Info().Err(err).Uint32("job", id).Msg("cannot raise the service successor's priority; it queues as a new job")
	}
	ev := m.log.Info().Str("inference_service", r.Service).Uint32("replica", r.ID).Uint32("job", cur.JobID).Uint32("successor", id).Str("excluded", excl)
	if note != "" {
		ev = ev.Str("note", note)
	}
	ev.Msg("submitted the service replica's successor ahead of its time limit; the old job stops once the successor is ready")
}

func (m *Manager) spankArgs(r *Replica) []string {
	if !m.spank {
		return nil
	}
	a := []string{"--rota-kind=" + wire.KindServe}
	if r.Named {
		a = append(a, "--rota-service="+r.Service)
	}
	return a
}

// spread releases pending replicas, one per service at a time, each with
// its siblings' nodes excluded: two released together could start on the
// same node before either is seen running.
func (m *Manager) spread(ctx context.Context, now time.Time) {
	type pend struct {
		r *Replica
		g *Job
	}
	by := map[string][]pend{}
	busy := map[string]bool{}
	for _, r := range m.sorted() {
		if r.State != StateRunning {
			continue
		}
		for i := range r.Jobs {
			g := &r.Jobs[i]
			if g.Ended || !g.Started.IsZero() {
				continue
			}
			if !g.Released.IsZero() {
				if now.Sub(g.Released) < m.cfg.Hold {
					busy[r.Service] = true
				}
				continue
			}
			by[r.Service] = append(by[r.Service], pend{r, g})
		}
	}
	services := make([]string, 0, len(by))
	for s := range by {
		services = append(services, s)
	}
	sort.Strings(services)
	for _, s := range services {
		if busy[s] {
			continue
		}
		p := by[s][0]
		spec, ok, err := m.sched.ShowJob(ctx, p.g.JobID)
		if err != nil || !ok {
			continue // gone or unreadable: the next tick sees
		}
		excl, note := m.exclusion(ctx, p.r, p.g, p.g.Partition, userExcluded(p.r, p.g, &spec))
		// Released early from the plugin's hold only: a later --begin of
		// the user's own stands.
		ours := spec.Eligible.IsZero() || !spec.Eligible.After(p.g.Submitted.Add(m.cfg.Hold+5*time.Second))
		u := slurm.JobUpdate{ExcNodes: &excl, StartNow: ours}
		if p.g.N > 1 {
			pr := m.cfg.Priority
			u.Priority = &pr
		}
		if err := m.sched.Update(ctx, p.g.JobID, u); err != nil {
			m.count(func(s *Stats) { s.Errors++ })
			m.log.Warn().Err(err).Uint32("job", p.g.JobID).Msg("cannot set a service replica's excluded nodes; it starts when its hold ends, maybe beside a sibling")
			p.g.Released = now
			continue
		}
		p.g.Released, p.g.Excluded = now, excl
		m.count(func(s *Stats) { s.Released++ })
		ev := m.log.Info().Str("inference_service", s).Uint32("job", p.g.JobID).Str("excluded", excl)
		if note != "" {
			ev = ev.Str("note", note)
		}
		ev.Msg("released a service replica, kept off its siblings' nodes")
	}
}

// userExcluded is the ExcNodeList r's user gave, read from its first
// job before Rota changed it (Slurm prints it as a host list, which
// --exclude and ExcNodeList take back as is).
func userExcluded(r *Replica, g *Job, spec *slurm.JobSpec) string {
	if !r.ExclRead && g.N == 1 && g.Released.IsZero() {
		r.UserExcluded, r.ExclRead = spec.ExcNodes, true
	}
	return r.UserExcluded
}

// exclusion is the ExcNodeList for a job of r (g: nil for one about to be
// submitted): the user's own, the nodes r's other running jobs hold (a
// rollover starts elsewhere), and its siblings' nodes, or all nodes of
// their types with Spread = types. Where that would leave the job no
// node in its partition, less is excluded and note says so.
func (m *Manager) exclusion(ctx context.Context, r *Replica, g *Job, partition, user string) (string, string) {
	var own, sib []string
	for _, o := range m.replicas {
		if o.State != StateRunning || (o.Service != r.Service && o.ID != r.ID) {
			continue
		}
		// A sibling counts by its newest running job: one it is rolling
		// over from frees its node within seconds.
		var newest []string
		for i := range o.Jobs {
			h := &o.Jobs[i]
			if h == g || !h.running() || h.StoppedByRota {
				continue
			}
			if o.ID == r.ID {
				own = append(own, h.Nodes...)
			} else {
				newest = h.Nodes
			}
		}
		sib = append(sib, newest...)
	}
	nodes := m.readNodes(ctx)
	userSet := splitList(user)
	typeOf := map[string]string{}
	for _, n := range nodes {
		for t, c := range n.GPUs {
			if c > 0 {
				typeOf[n.Name] = t
			}
		}
	}
	var options [][]string
	var notes []string
	if m.cfg.Spread == SpreadTypes && len(sib) > 0 {
		types := map[string]bool{}
		for _, n := range sib {
			types[typeOf[n]] = true
		}
		var all []string
		for _, n := range nodes {
			if types[typeOf[n.Name]] {
				all = append(all, n.Name)
			}
		}
		options = append(options, union(userSet, own, all))
		notes = append(notes, "")
	}
	options = append(options, union(userSet, own, sib), union(userSet, own), userSet)
	if m.cfg.Spread == SpreadTypes && len(sib) > 0 {
		notes = append(notes, "no GPU type without a sibling left: kept off its siblings' nodes only")
	} else {
		notes = append(notes, "")
	}
	notes = append(notes, "no node left in its partition without a sibling: it may share one", "no other node in its partition: it may start beside its predecessor")
	for k, ex := range options {
		if !m.nodesOK || usable(nodes, partition, ex) {
			return strings.Join(ex, ","), notes[k]
		}
	}
	return strings.Join(userSet, ","), "no node in its partition outside its own exclusions"
}

// usable says whether some node of partition with GPUs is outside ex and
// not down or drained.
func usable(nodes []slurm.Node, partition string, ex []string) bool {
	parts := splitList(partition)
	for _, n := range nodes {
		if slices.Contains(ex, n.Name) || !gpus(n) || unusable(n.State) {
			continue
		}
		if len(parts) == 0 || slices.ContainsFunc(parts, func(p string) bool { return slices.Contains(n.Partitions, p) }) {
			return true
		}
	}
	return false
}

func gpus(n slurm.Node) bool {
	for _, c := range n.GPUs {
		if c > 0 {
			return true
		}
	}
	return false
}

func unusable(state string) bool {
	s := strings.ToLower(state)
	return strings.Contains(s, "down") || strings.Contains(s, "drain") || strings.Contains(s, "fail") || strings.Contains(s, "maint")
}

func (m *Manager) readNodes(ctx context.Context) []slurm.Node {
	if !m.nodesOK {
		ns, err := m.sched.Nodes(ctx)
		if err != nil {
			m.log.Info().Err(err).Msg("cannot read the nodes; replicas are kept off their siblings' nodes without checking that a node is left")
			return nil
		}
		m.nodes, m.nodesOK = ns, true
	}
	return m.nodes
}

// union is the sorted set of the names in lists.
func union(lists ...[]string) []string {
	set := map[string]bool{}
	for _, l := range lists {
		for _, n := range l {
			if n != "" {
				set[n] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (m *Manager) count(f func(*Stats)) {
	m.mu.Lock()
	f(&m.stats)
	m.mu.Unlock()
}

func (m *Manager) errorf(r *Replica, err error, format string, a ...any) {
	m.count(func(s *Stats) { s.Errors++ })
	m.log.Warn().Err(err).Str("inference_service", r.Service).Uint32("replica", r.ID).Msg(fmt.Sprintf(format, a...) + "; tried again next tick")
}

// forget drops replicas stopped long ago.
func (m *Manager) forget(now time.Time) {
	for id, r := range m.replicas {
		if r.State != StateRunning && now.Sub(r.Ended) > keepStopped {
			for _, g := range r.Jobs {
				delete(m.byJob, g.JobID)
			}
			delete(m.replicas, id)
		}
	}
}

// Stats returns the counters.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}
