package faulttol

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/checkpoint"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/internal/tick"
	"github.com/rota-hpc/rota/wire"
)

// Config is the admin's settings (controller.conf, docs/faulttolerance.md).
type Config struct {
	// Off: no periodic checkpoints; node failures are still followed.
	Off bool
	// NodeMTBF, when set, is the admin's mean time between failures of
	// one node, used instead of the learned one.
	NodeMTBF time.Duration
	// PriorMTBF is the learned MTBF's prior: what a cluster that has not
	// failed yet is assumed to have.
	PriorMTBF time.Duration
	// InitialCost is a job's checkpoint cost until one is measured.
	InitialCost time.Duration
	// MinInterval and MaxInterval bound the interval between checkpoints.
	MinInterval, MaxInterval time.Duration
	// Tick is how often the manager looks at the nodes and the queue.
	Tick time.Duration
	// Grace is how long an agent waits for a job to acknowledge.
	Grace time.Duration
}

// DefaultConfig is the production default.
func DefaultConfig() Config {
	return Config{PriorMTBF: 30 * 24 * time.Hour, InitialCost: time.Minute, MinInterval: 5 * time.Minute,
		MaxInterval: 24 * time.Hour, Tick: 10 * time.Second, Grace: time.Minute}
}

// Check refuses settings the manager cannot work with.
func (c Config) Check() error {
	switch {
	case c.Tick <= 0:
		return fmt.Errorf("faulttol_tick must be positive, got %s", c.Tick)
	case c.PriorMTBF <= 0:
		return fmt.Errorf("node_mtbf_prior must be positive, got %s", c.PriorMTBF)
	case c.InitialCost <= 0:
		return fmt.Errorf("checkpoint_cost_initial must be positive, got %s", c.InitialCost)
	case c.MinInterval <= 0 || c.MaxInterval < c.MinInterval:
		return fmt.Errorf("checkpoint_interval_min (%s) must be positive and at most checkpoint_interval_max (%s)", c.MinInterval, c.MaxInterval)
	case c.Grace <= 0:
		return fmt.Errorf("checkpoint_grace must be positive, got %s", c.Grace)
	}
	return nil
}

// Slurm is what the manager reads and changes.
type Slurm interface {
	Nodes(ctx context.Context) ([]slurm.Node, error)
	Jobs(ctx context.Context) ([]slurm.Job, error)
	Update(ctx context.Context, jobID uint32, u slurm.JobUpdate) error
}

// Info is what the round loop knows of a job.
type Info struct {
	// Checkpointable: the job declared a checkpoint signal.
	Checkpointable bool
	// Step is its latest progress step (0 unknown).
	Step uint64
}

// JobInfo answers for the jobs Rota placed (the round loop).
type JobInfo interface {
	FaultInfo(id uint32) (Info, bool)
}

const (
	stateKey     = "faulttol"
	stateVersion = 1
	// maxEvents bounds a job's event list.
	maxEvents = 32
	// keepGone: a job that left the queue is kept this long for explain.
	keepGone = 7 * 24 * time.Hour
	// attribute: a node failure seen this soon after a job running there
	// was requeued is taken as the requeue's cause.
	attribute = time.Minute
	// costWeight is the weight of a new cost measurement in the average.
	costWeight = 0.5
)

// Stats are the manager's counters.
type Stats struct {
	Checkpoints, CheckpointFailures, NodeFailures, Requeued, Resumed uint64
}

// job is what the manager keeps of one checkpointable job.
type job struct {
	ID       uint32   `json:"id"`
	Nodes    []string `json:"nodes,omitempty"`
	Restarts int      `json:"restarts"`
	Running  bool     `json:"running"`
	// Started is when this run started (Slurm's StartTime).
	Started time.Time `json:"started"`
	// Tried is the last periodic checkpoint asked; Ckpt the last one the
	// job acknowledged, at step Step.
	Tried   time.Time     `json:"tried"`
	Ckpt    time.Time     `json:"ckpt"`
	Step    uint64        `json:"step"`
	Count   int           `json:"count"`
	Cost    time.Duration `json:"cost"`
	CostSet bool          `json:"cost_set"`
	// Refused says why the job gets no periodic checkpoint.
	Refused string `json:"refused,omitempty"`
	// Failed is the node whose failure the job is being followed
	// through ("" none): set at the failure, cleared once it runs again.
	Failed   string            `json:"failed,omitempty"`
	Requeued bool              `json:"requeued,omitempty"`
	Events   []wire.FaultEvent `json:"events,omitempty"`
	Seen     time.Time         `json:"seen"`
	// MaxStep is the highest progress step seen in this run. Reached is
	// MaxStep at the failure: after the restart, the first step below it
	// is the restarted job's own (until then the agents may still report
	// the old run's), and tells where it resumed. ResumeCheck: that step
	// is still to be seen.
	MaxStep     uint64 `json:"max_step,omitempty"`
	Reached     uint64 `json:"reached,omitempty"`
	ResumeCheck bool   `json:"resume_check,omitempty"`
	// LeftAt is when the job was seen requeued without a failure Rota
	// knew of; a failure of one of its nodes seen within attribute of it
	// is taken as the cause.
	LeftAt time.Time `json:"left_at,omitempty"`
	// Candidate is a step below Reached seen after the restart; it is
	// taken once a later reading is higher (the job advancing from it):
	// a late report of the old run can be below Reached too, but the
	// restarted job's next reading is then below it.
	Candidate uint64 `json:"candidate,omitempty"`
}

func (j *job) event(now time.Time, kind, node, text string) {
	j.Events = append(j.Events, wire.FaultEvent{Time: now.UTC().Format(time.RFC3339), Kind: kind, Node: node, Text: text})
	if len(j.Events) > maxEvents {
		j.Events = j.Events[len(j.Events)-maxEvents:]
	}
}

// Manager asks periodic checkpoints and follows jobs through failures.
type Manager struct {
	cfg   Config
	log   zerolog.Logger
	sched Slurm
	info  JobInfo
	ckpt  checkpoint.KeepRunner
	store state.Store
	now   func() time.Time

	queue slurm.TickQueue

	mu    sync.Mutex
	rate  Rate
	jobs  map[uint32]*job
	busy  map[uint32]bool
	stats Stats
	wg    sync.WaitGroup
}

// New makes a manager; store may be nil (nothing saved).
func New(cfg Config, log zerolog.Logger, sched Slurm, info JobInfo, ckpt checkpoint.KeepRunner, store state.Store) (*Manager, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, log: log, sched: sched, info: info, ckpt: ckpt, store: store, now: time.Now,
		jobs: map[uint32]*job{}, busy: map[uint32]bool{}}, nil
}

// Run ticks until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	tick.Loop{Every: m.cfg.Tick, Restore: m.restore, Tick: m.Tick, Log: m.log,
		RestoreFailed: "cannot restore the saved failure rate and jobs; learning afresh",
		TickFailed:    "fault tolerance tick failed; the next one tries again"}.Run(ctx)
	m.wg.Wait()
}

// Wait waits for the checkpoints in flight (tests).
func (m *Manager) Wait() { m.wg.Wait() }

// Stats returns the counters.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// NodeMTBF is the per-node MTBF in use and where it comes from.
func (m *Manager) NodeMTBF() (time.Duration, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mtbf()
}

func (m *Manager) mtbf() (time.Duration, string) {
	if m.cfg.NodeMTBF > 0 {
		return m.cfg.NodeMTBF, "node_mtbf in controller.conf"
	}
	return m.rate.MTBF(m.cfg.PriorMTBF), fmt.Sprintf("learned: %d node failures in %s of node time, prior %s",
		m.rate.Failures, secs(m.rate.UpSeconds).Round(time.Minute), m.cfg.PriorMTBF)
}

// interval is job j's time between checkpoints and its cost.
func (m *Manager) interval(j *job) (time.Duration, time.Duration, time.Duration) {
	cost := m.cfg.InitialCost
	if j.CostSet {
		cost = j.Cost
	}
	node, _ := m.mtbf()
	// A job fails when any of its nodes does.
	jm := node / time.Duration(max(len(j.Nodes), 1))
	return Interval(cost, jm, m.cfg.MinInterval, m.cfg.MaxInterval), cost, node
}

// Wake has the next tick look at the queue, taking the read that began at
// readAt or a later one: the round loop calls it once a round has bound
// its jobs, which may include checkpointable ones.
func (m *Manager) Wake(readAt time.Time) { m.queue.Wake(readAt) }

// Tick reads the nodes and the queue once and acts.
func (m *Manager) Tick(ctx context.Context) error {
	now := m.now()
	defer m.queue.Ticked()
	// The queue first: Slurm marks a node down before it requeues its
	// jobs, so a job seen requeued here has its node seen down below
	// (a queue read shared with another part is older still). With no
	// job followed and no round since the last look there is none to
	// read: the nodes are still read, for the failure rate.
	m.mu.Lock()
	following := len(m.jobs) > 0
	m.mu.Unlock()
	jobs, _, err := m.queue.Read(ctx, m.sched, m.cfg.Tick, following)
	if err != nil {
		return fmt.Errorf("reading the queue: %w", err)
	}
	nodes, err := m.sched.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("reading the nodes: %w", err)
	}
	nodeType := slurm.NodeTypes(nodes)
	m.mu.Lock()
	failed := m.rate.Observe(nodes, now)
	for _, n := range failed {
		m.stats.NodeFailures++
		m.log.Warn().Str("node", n).Msg("node failed; following the jobs that ran on it")
		for _, j := range m.jobs {
			// Running there at the last look, or requeued since without
			// a cause Rota saw (the failure showed in the queue first).
			if (j.Running || now.Sub(j.LeftAt) <= attribute) && j.Failed == "" && slices.Contains(j.Nodes, n) {
				m.failed(j, n, now)
			}
		}
	}
	byID := make(map[uint32]*slurm.Job, len(jobs))
	for i := range jobs {
		byID[jobs[i].ID] = &jobs[i]
	}
	var due []*job
	for i := range jobs {
		sj := &jobs[i]
		j := m.jobs[sj.ID]
		if j == nil {
			if m.info == nil {
				continue
			}
			in, ok := m.info.FaultInfo(sj.ID)
			if !ok || !in.Checkpointable {
				continue
			}
			j = &job{ID: sj.ID, Restarts: sj.Restarts}
			m.jobs[sj.ID] = j
		}
		j.Seen = now
		m.follow(ctx, j, sj, nodeType, now)
		if m.periodicDue(j, sj, now) {
			due = append(due, j)
		}
	}
	for id, j := range m.jobs {
		if byID[id] != nil {
			continue
		}
		if j.Failed != "" && !j.Requeued {
			j.event(now, "not_requeued", j.Failed, "the job left the queue with its failed node instead of being requeued (it was submitted with --no-requeue, or JobRequeue=0); what it checkpointed is in its checkpoint files")
			j.Failed = ""
		}
		j.Running = false
		if now.Sub(j.Seen) > keepGone {
			delete(m.jobs, id)
		}
	}
	m.mu.Unlock()
	for _, j := range due {
		m.checkpoint(ctx, j)
	}
	return m.save(ctx)
}

// failed records that node n failed under job j.
func (m *Manager) failed(j *job, n string, now time.Time) {
	j.Failed, j.Requeued, j.Reached = n, false, j.MaxStep
	what := "no checkpoint yet: it restarts from the beginning (or from a checkpoint of its own)"
	if !j.Ckpt.IsZero() {
		what = fmt.Sprintf("its latest checkpoint is step %d, taken %s before the failure", j.Step, now.Sub(j.Ckpt).Round(time.Second))
	}
	j.event(now, "node_failed", n, fmt.Sprintf("node %s failed while the job ran on it (since %s); %s",
		n, j.Started.UTC().Format(time.RFC3339), what))
}

// follow brings j up to date with Slurm's view sj.
func (m *Manager) follow(ctx context.Context, j *job, sj *slurm.Job, nodeType map[string]string, now time.Time) {
	if sj.Restarts > j.Restarts && !j.Requeued && j.Failed == "" && j.Running {
		// Requeued without a failure Rota saw (a migration, an admin,
		// or a node failure it has not seen yet: LeftAt lets one seen
		// shortly after claim it).
		j.Running, j.LeftAt = false, now
	}
	if j.Failed != "" && !j.Requeued && (sj.Pending() || sj.Restarts > j.Restarts) {
		j.Requeued = true
		m.stats.Requeued++
		j.event(now, "requeued", j.Failed, fmt.Sprintf("Slurm requeued the job (restart %d); Rota clears the begin time Slurm holds it to, so it may start at once wherever the policy places it", sj.Restarts))
		if sj.Pending() {
			// Slurm holds a requeued job until now + the credential
			// lifetime (121 s by default, docs/chains.md); the work lost
			// to the failure should not wait on that.
			if err := m.sched.Update(ctx, sj.ID, slurm.JobUpdate{StartNow: true}); err != nil {
				m.log.Info().Err(err).Uint32("job", sj.ID).Msg("cannot clear the requeued job's begin time; it starts when Slurm's hold ends")
			}
		}
		m.log.Info().Uint32("job", sj.ID).Str("node", j.Failed).Int("restarts", sj.Restarts).Msg("job requeued after its node failed")
	}
	j.Restarts = sj.Restarts
	if !sj.Running() {
		j.Running = false
		return
	}
	start := sj.Start
	if start.IsZero() {
		start = now
	}
	if !j.Running || !start.Equal(j.Started) {
		j.Running, j.Started, j.Tried = true, start, time.Time{}
		j.Nodes = append([]string(nil), sj.Nodes...)
		if j.Failed != "" {
			var types []string
			for _, n := range j.Nodes {
				if t := nodeType[n]; t != "" && !slices.Contains(types, t) {
					types = append(types, t)
				}
			}
			from := "the beginning (no checkpoint was taken before the failure)"
			if !j.Ckpt.IsZero() {
				from = fmt.Sprintf("its latest checkpoint, step %d", j.Step)
			}
			j.event(now, "restarted", sliceStr(j.Nodes), fmt.Sprintf("restarted on %s (%s), %s after the failure of %s; it resumes from %s",
				sliceStr(j.Nodes), sliceStr(types), now.Sub(failedAt(j)).Round(time.Second), j.Failed, from))
			m.stats.Resumed++
			m.log.Info().Uint32("job", j.ID).Strs("nodes", j.Nodes).Str("failed", j.Failed).Uint64("checkpoint_step", j.Step).Msg("job restarted after its node failed")
			j.Failed, j.Requeued, j.ResumeCheck, j.MaxStep, j.Candidate = "", false, j.Reached > 0, 0, 0
		}
	}
	if m.info == nil {
		return
	}
	in, ok := m.info.FaultInfo(j.ID)
	if !ok || in.Step == 0 {
		return
	}
	if j.ResumeCheck && in.Step < j.Reached {
		switch {
		case j.Candidate == 0 || in.Step < j.Candidate:
			j.Candidate = in.Step
		case in.Step > j.Candidate:
			j.ResumeCheck = false
			m.resumed(j, j.Candidate, now)
		}
	}
	j.MaxStep = max(j.MaxStep, in.Step)
}

// resumed records the step the restarted job j resumed at.
func (m *Manager) resumed(j *job, step uint64, now time.Time) {
	switch {
	case j.Ckpt.IsZero():
		j.event(now, "resumed", "", fmt.Sprintf("progress after the restart: step %d (step %d was reached before the failure)", step, j.Reached))
	case step >= j.Step:
		j.event(now, "resumed", "", fmt.Sprintf("progress after the restart: step %d, at or past the checkpoint at step %d: nothing checkpointed was lost (%d steps of the failed run were)",
			step, j.Step, j.Reached-j.Step))
	default:
		j.event(now, "resumed", "", fmt.Sprintf("progress after the restart: step %d, below the checkpoint at step %d: the job did not resume from it (does it read its checkpoint by $SLURM_JOB_ID?)", step, j.Step))
	}
}

// failedAt is when j's node failure was recorded.
func failedAt(j *job) time.Time {
	for i := len(j.Events) - 1; i >= 0; i-- {
		if j.Events[i].Kind == "node_failed" {
			if t, err := time.Parse(time.RFC3339, j.Events[i].Time); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// periodicDue says whether j should be asked for a checkpoint now.
func (m *Manager) periodicDue(j *job, sj *slurm.Job, now time.Time) bool {
	if m.cfg.Off || m.ckpt == nil || !j.Running || j.Refused != "" || m.busy[j.ID] || len(sj.Nodes) == 0 {
		return false
	}
	iv, _, _ := m.interval(j)
	last := j.Started
	if j.Ckpt.After(last) {
		last = j.Ckpt
	}
	if j.Tried.After(last) {
		last = j.Tried // a failed attempt waits an interval too
	}
	return !now.Before(last.Add(iv))
}

// checkpoint asks j's agents for a checkpoint it survives, in the
// background.
func (m *Manager) checkpoint(ctx context.Context, j *job) {
	m.mu.Lock()
	id, nodes := j.ID, append([]string(nil), j.Nodes...)
	j.Tried = m.now()
	m.busy[id] = true
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r, err := m.ckpt.CheckpointKeep(ctx, nodes, id, m.cfg.Grace)
		now := m.now()
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.busy, id)
		j := m.jobs[id]
		if j == nil {
			return
		}
		log := m.log.With().Uint32("job", id).Logger()
		switch {
		case err != nil:
			m.stats.CheckpointFailures++
			log.Info().Err(err).Msg("periodic checkpoint failed; tried again after an interval")
		case r.Refused != "":
			j.Refused = r.Refused
			log.Info().Str("why", r.Refused).Msg("the job cannot take periodic checkpoints")
		case r.Outcome == wire.CheckpointAcknowledged:
			m.stats.Checkpoints++
			j.Ckpt, j.Step, j.Count = now, r.Step, j.Count+1
			if j.CostSet {
				j.Cost = time.Duration(costWeight*float64(r.Elapsed) + (1-costWeight)*float64(j.Cost))
			} else {
				j.Cost, j.CostSet = r.Elapsed, true
			}
			iv, cost, node := m.interval(j)
			log.Info().Uint64("step", r.Step).Dur("cost", r.Elapsed).Dur("next_in", iv).Dur("avg_cost", cost).Dur("node_mtbf", node).Msg("periodic checkpoint")
		default:
			m.stats.CheckpointFailures++
			log.Info().Str("outcome", r.Outcome).Msg("periodic checkpoint not acknowledged; tried again after an interval")
		}
	}()
}

// Explain is what Rota did to protect job id from node failures; nil
// when it does not follow the job.
func (m *Manager) Explain(id uint32) *wire.FaultStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[id]
	if j == nil {
		return nil
	}
	iv, cost, node := m.interval(j)
	_, src := m.mtbf()
	st := &wire.FaultStatus{Periodic: !m.cfg.Off && j.Refused == "" && m.ckpt != nil, CostSeconds: cost.Seconds(), CostMeasured: j.CostSet,
		NodeMTBFSeconds: node.Seconds(), MTBFSource: src, Checkpoints: j.Count, LastStep: j.Step,
		Events: append([]wire.FaultEvent(nil), j.Events...)}
	if !j.Ckpt.IsZero() {
		st.LastCheckpoint = j.Ckpt.UTC().Format(time.RFC3339)
	}
	switch {
	case m.cfg.Off:
		st.Why = "periodic checkpoints are off on this cluster (checkpoint_periodic = false)"
	case j.Refused != "":
		st.Why = "no periodic checkpoints: " + j.Refused
	default:
		st.IntervalSeconds = iv.Seconds()
		costWhat := "measured"
		if !j.CostSet {
			costWhat = "checkpoint_cost_initial, until measured"
		}
		st.Why = fmt.Sprintf("a checkpoint every %s: sqrt(2 x cost %s (%s) x MTBF %s (node MTBF %s / %d node(s))) - cost, within [%s, %s]",
			iv.Round(time.Second), cost.Round(100*time.Millisecond), costWhat, (node / time.Duration(max(len(j.Nodes), 1))).Round(time.Second),
			node.Round(time.Second), max(len(j.Nodes), 1), m.cfg.MinInterval, m.cfg.MaxInterval)
	}
	return st
}

type saved struct {
	V     int    `json:"v"`
	Rate  Rate   `json:"rate"`
	Jobs  []*job `json:"jobs"`
	Stats Stats  `json:"stats"`
}

func (m *Manager) save(ctx context.Context) error {
	if m.store == nil {
		return nil
	}
	m.mu.Lock()
	st := saved{V: stateVersion, Rate: m.rate, Stats: m.stats}
	st.Rate.Up = make(map[string]bool, len(m.rate.Up))
	for k, v := range m.rate.Up {
		st.Rate.Up[k] = v
	}
	for _, j := range m.jobs {
		c := *j
		c.Events = append([]wire.FaultEvent(nil), j.Events...)
		st.Jobs = append(st.Jobs, &c)
	}
	m.mu.Unlock()
	sort.Slice(st.Jobs, func(a, b int) bool { return st.Jobs[a].ID < st.Jobs[b].ID })
	if err := state.PutJSON(ctx, m.store, stateKey, st); err != nil {
		return fmt.Errorf("saving the fault tolerance state: %w", err)
	}
	return nil
}

func (m *Manager) restore(ctx context.Context) error {
	if m.store == nil {
		return nil
	}
	var st saved
	if found, err := state.GetJSON(ctx, m.store, stateKey, &st); err != nil || !found {
		return err
	}
	if st.V != stateVersion {
		return fmt.Errorf("saved fault tolerance state has version %d; this controller reads %d", st.V, stateVersion)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rate, m.stats = st.Rate, st.Stats
	// The time the controller was away is not counted (maxGap bounds it).
	for _, j := range st.Jobs {
		m.jobs[j.ID] = j
	}
	return nil
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func sliceStr(s []string) string {
	if len(s) == 0 {
		return "?"
	}
	return strings.Join(s, ",")
}
