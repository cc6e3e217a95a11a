package live

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/estimate/queuewait"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Waits answers "how long would this job wait now" from the queue-wait
// model (package queuewait), or an external estimator in front of it, and
// the queue as squeue shows it. Without either every wait is unknown, with
// the reason.
type Waits struct {
	model *queuewait.Model
	// ext is an external queue-wait estimator (estimator_queuewait) in
	// front of the model; nil: the model answers alone.
	ext    estimate.QueueWait
	status string
	jobs   func(ctx context.Context) ([]slurm.Job, error) // nil: the client cannot read the queue

	mu     sync.Mutex
	read   []slurm.Job
	readAt time.Time
	// started remembers jobs seen running, and those slurmdbd recorded
	// as started (seed), so that the model's recent waits outlive the
	// jobs themselves and a restart (bounded by maxStarted).
	started map[uint32]startedJob
	// history says where the started jobs came from; unread, why
	// slurmdbd was not read ("" while it was, or is being, read).
	history wire.QueueWaitHistory
	unread  string
	window  string
}

// startedJob is a job that started, and whether slurmdbd told of it.
type startedJob struct {
	job      slurm.Job
	fromAcct bool
}

// queueTTL is how long one squeue read serves estimates: a burst of
// `rota estimate` calls costs Slurm one squeue.
const queueTTL = 10 * time.Second

// maxStarted bounds the remembered starts (RecentWindow per partition
// and type is all the model reads).
const maxStarted = 5000

const trainHint = "train one with `rota queuewait train --trace sacct.tsv --out /var/lib/rota/queuewait.json` and set queuewait_model in the controller's config"

// NewWaits loads the model at path and reads the queue with jobs (nil:
// the queue cannot be read). A missing or broken file is logged once,
// here, and leaves the predictor answering "unknown".
func NewWaits(path string, jobs func(ctx context.Context) ([]slurm.Job, error), log zerolog.Logger) *Waits {
	w := &Waits{jobs: jobs, started: map[uint32]startedJob{}, unread: "slurmdbd not read yet"}
	if path == "" {
		w.status = "no model: " + trainHint
		log.Info().Msg("no queue-wait model configured (queuewait_model); rota estimate reports queue waits as unknown")
		return w
	}
	m, err := queuewait.LoadFile(path)
	if err != nil {
		w.status = fmt.Sprintf("no model: %s cannot be used (%v); %s", path, err, trainHint)
		log.Warn().Err(err).Str("queuewait_model", path).Msg("cannot load the queue-wait model; queue waits are unknown until it is retrained and the controller restarted")
		return w
	}
	w.model = m
	w.status = fmt.Sprintf("model %s: %d trees, trained on %d jobs submitted %s to %s (capacity %d nodes)", path, len(m.Trees),
		m.Trained.Jobs, m.Trained.From.Format(time.DateOnly), m.Trained.To.Format(time.DateOnly), m.Capacity)
	log.Info().Str("queuewait_model", path).Int("trees", len(m.Trees)).Int("trained_jobs", m.Trained.Jobs).Msg("queue-wait model loaded")
	return w
}

// ReadHistory seeds the queue-wait history from slurmdbd (sacct, through
// acct; nil: the Slurm client cannot read accounting) over the last
// window, which window prints as the config says it. slurmdbd being
// down, or no accounting at all, costs only the history: the controller
// runs on and says why, once.
func (w *Waits) ReadHistory(ctx context.Context, acct slurm.AccountingReader, last time.Duration, window string, log zerolog.Logger) {
	if last <= 0 {
		w.HistoryUnread("history_window = 0: slurmdbd not read")
		log.Info().Msg("history_window = 0: queue-wait history starts from the jobs the controller sees")
		return
	}
	if acct == nil {
		w.HistoryUnread("slurmdbd not read: the controller's Slurm client cannot read accounting")
		return
	}
	since := time.Now().Add(-last)
	start := time.Now()
	jobs, st, err := acct.Accounting(ctx, since, time.Time{})
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		w.HistoryUnread(fmt.Sprintf("slurmdbd not read at start (%v)", lastLine(err.Error())))
		log.Warn().Err(err).Str("history_window", window).Msg("cannot read job history from slurmdbd (sacct); " +
			"the controller runs on, and queue-wait history starts from the jobs it sees from now on. " +
			"Check that slurmdbd runs and answers (sacctmgr show cluster), then restart the controller; or set history_window = 0 to not read it")
		return
	}
	n := w.Seed(jobs, since, window)
	log.Info().Int("jobs", st.Jobs).Int("started", n).Int("bad_lines", st.Bad).Str("history_window", window).
		Dur("took", time.Since(start)).Msg("queue-wait history read from slurmdbd")
	if st.Bad > 0 {
		log.Warn().Int("bad_lines", st.Bad).Strs("examples", st.BadExamples).Msg("sacct lines skipped: they could not be read")
	}
}

// lastLine is s's last line: sacct's last error line is the one that
// says what went wrong ("Problem talking to the database: ...").
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// Status says which model is used, or why none.
func (w *Waits) Status() string { return w.status }

// Loaded says whether a model is in use.
func (w *Waits) Loaded() bool { return w.model != nil }

// Predicts says whether a model or an external estimator may answer.
func (w *Waits) Predicts() bool { return w.model != nil || w.ext != nil }

// SetExternal puts an external queue-wait estimator in front of the
// model (StartPlugin; a test's fake).
func (w *Waits) SetExternal(ext estimate.QueueWait) { w.ext = ext }

// queue returns the pending and running jobs, read at most every queueTTL.
func (w *Waits) queue(ctx context.Context, now time.Time) ([]slurm.Job, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.read != nil && now.Sub(w.readAt) < queueTTL {
		return w.read, nil
	}
	jobs, err := w.jobs(ctx)
	if err != nil {
		return nil, err
	}
	w.read, w.readAt = jobs, now
	for _, j := range jobs {
		if j.Running() && !j.Start.IsZero() {
			w.started[j.ID] = startedJob{job: j}
		}
	}
	w.trimLocked()
	return jobs, nil
}

// trimLocked keeps the latest maxStarted starts.
func (w *Waits) trimLocked() {
	if len(w.started) <= maxStarted {
		return
	}
	all := make([]slurm.Job, 0, len(w.started))
	for _, j := range w.started {
		all = append(all, j.job)
	}
	sort.Slice(all, func(a, b int) bool { return all[a].Start.After(all[b].Start) })
	for _, j := range all[maxStarted:] {
		delete(w.started, j.ID)
	}
}

// Seed adds the jobs slurmdbd recorded as started in [since, now) to
// the history, so a restarted controller predicts from the site's own
// recent waits at once. A job the queue has shown since is kept as
// seen. It returns how many jobs it added.
func (w *Waits) Seed(jobs []slurm.AcctJob, since time.Time, window string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for i := range jobs {
		a := &jobs[i]
		if !a.Started() {
			continue
		}
		if _, ok := w.started[a.ID]; ok {
			continue
		}
		w.started[a.ID] = startedJob{job: AcctAsJob(a), fromAcct: true}
		n++
	}
	w.trimLocked()
	w.history.Since, w.window, w.unread = since, window, ""
	return n
}

// HistoryUnread records why slurmdbd's history was not read.
func (w *Waits) HistoryUnread(why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unread = why
}

// AcctAsJob is a job slurmdbd recorded, as the queue would show it once
// started: its wait runs from when it became eligible, and its GPUs
// are those it was given (AllocTRES) as a per-job request.
func AcctAsJob(a *slurm.AcctJob) slurm.Job {
	j := slurm.Job{ID: a.ID, State: a.State, User: a.User, Account: a.Account, Name: a.Name, Partition: a.Partition,
		Submit: a.QueuedFrom(), Start: a.Start, TimeLimitMin: a.TimeLimitMin, Nodes: a.Nodes, NumNodes: a.NumNodes}
	if a.GPUs > 0 {
		if t := a.GPUType(); t != "" {
			j.TresPerJob = fmt.Sprintf("gres:gpu:%s:%d", t, a.GPUs)
		} else {
			j.TresPerJob = fmt.Sprintf("gres:gpu:%d", a.GPUs)
		}
	}
	return j
}

// History is the queue-wait history by partition and GPU type. A job's
// type is the one it asked for or, failing that, its first node's.
func (w *Waits) History(kb *wire.Site) *wire.QueueWaitHistory {
	nodeType := map[string]string{}
	var types []string
	if kb != nil {
		for _, n := range kb.Nodes {
			if t := slurm.NodeType(n.GPUs); t != "" {
				nodeType[n.Name] = t
			}
		}
		for _, t := range kb.GPUTypes {
			types = append(types, t.Type)
		}
	}
	type key struct{ p, t string }
	waits := map[key][]float64{}
	last := map[key]time.Time{}
	w.mu.Lock()
	h := w.history
	for _, s := range w.started {
		j := s.job
		if s.fromAcct {
			h.FromAccounting++
		} else {
			h.Seen++
		}
		k := key{p: j.Partition, t: j.GPUType(nodeType, types)}
		waits[k] = append(waits[k], max(j.Start.Sub(j.Submit).Seconds(), 0))
		if j.Start.After(last[k]) {
			last[k] = j.Start
		}
	}
	unread, window := w.unread, w.window
	w.mu.Unlock()
	seen := fmt.Sprintf("%d seen starting since the controller started", h.Seen)
	if unread == "" {
		h.Source = fmt.Sprintf("%d jobs from slurmdbd since %s (history_window %s), %s", h.FromAccounting,
			h.Since.Format("2006-01-02 15:04"), window, seen)
	} else {
		h.Source = seen + "; " + unread
	}
	for k, ws := range waits {
		sort.Float64s(ws)
		sum := 0.0
		for _, v := range ws {
			sum += v
		}
		med := ws[len(ws)/2]
		if len(ws)%2 == 0 {
			med = (ws[len(ws)/2-1] + ws[len(ws)/2]) / 2
		}
		h.Groups = append(h.Groups, wire.QueueWaitGroup{Partition: k.p, GPUType: k.t, Jobs: len(ws), MeanWaitSec: sum / float64(len(ws)),
			MedianWaitSec: med, MaxWaitSec: ws[len(ws)-1], LastStart: last[k]})
	}
	sort.Slice(h.Groups, func(a, b int) bool {
		x, y := h.Groups[a], h.Groups[b]
		if x.Partition != y.Partition {
			return x.Partition < y.Partition
		}
		return x.GPUType < y.GPUType
	})
	return &h
}

// Predict is the model's wait for one job shape on one partition and
// GPU type, given the queue now.
func (w *Waits) Predict(ctx context.Context, kb *wire.Site, q forecast.WaitQuery, user string, now time.Time) forecast.Wait {
	if w.model == nil && w.ext == nil {
		return forecast.Wait{Basis: "queue wait unknown (" + w.status + ")"}
	}
	if w.jobs == nil {
		return forecast.Wait{Basis: "queue wait unknown: the controller's Slurm client cannot read the queue"}
	}
	jobs, err := w.queue(ctx, now)
	if err != nil {
		return forecast.Wait{Basis: "queue wait unknown: cannot read the queue: " + err.Error()}
	}
	w.mu.Lock()
	started := make([]slurm.Job, 0, len(w.started))
	for _, j := range w.started {
		started = append(started, j.job)
	}
	w.mu.Unlock()
	st := QueueStateFor(kb, jobs, started, q.Partition, q.GPUType, now)
	req := queuewait.Request{User: user, Partition: q.Partition, Nodes: q.Nodes, GPUs: q.GPUs,
		TimeLimit: time.Duration(q.LimitMin) * time.Minute}
	if w.ext != nil {
		a, err := w.ext.QueueWait(ctx, estimate.QueueWaitQuery{Request: req, State: st})
		if err != nil || a.Source == estimate.SourceUnknown {
			why := a.Basis
			if err != nil {
				why = err.Error()
			}
			return forecast.Wait{Basis: "queue wait unknown: " + why}
		}
		return forecast.Wait{Minutes: a.Wait.Minutes(), Known: true,
			Basis: fmt.Sprintf("%s (%s) on %s/%s: %d pending, %d running on %d nodes", a.Source, a.Basis, q.Partition, q.GPUType,
				len(st.Pending), len(st.Running), st.TotalNodes)}
	}
	d, ok := w.model.Predict(st, req)
	if !ok {
		return forecast.Wait{Basis: "queue wait unknown: the model cannot read this queue state"}
	}
	return forecast.Wait{Minutes: d.Minutes(), Known: true,
		Basis: fmt.Sprintf("queue-wait model on %s/%s: %d pending, %d running on %d nodes", q.Partition, q.GPUType,
			len(st.Pending), len(st.Running), st.TotalNodes)}
}

// QueueStateFor is the queue as the jobs of one partition and GPU type
// see it: the type's nodes in the partition are its capacity; running
// jobs count where they hold one of those nodes; pending jobs of the
// partition count unless they name another GPU type (by gres or by
// constraint), since an untyped job competes for every type; the jobs
// seen running (started) give the recent waits. The model was trained
// on whole partitions; a (partition, type) pair is treated as one.
func QueueStateFor(kb *wire.Site, jobs, started []slurm.Job, partition, gpuType string, now time.Time) queuewait.QueueState {
	st := queuewait.QueueState{Now: now}
	onType := map[string]bool{}
	for _, n := range kb.Nodes {
		if n.GPUs[gpuType] > 0 && slices.Contains(n.Partitions, partition) {
			onType[n.Name] = true
		}
	}
	for _, p := range kb.Partitions {
		if p.Name != partition {
			continue
		}
		for _, pt := range p.Types {
			if pt.Type == gpuType {
				st.TotalNodes = pt.Nodes
			}
		}
	}
	holds := func(j *slurm.Job) bool {
		for _, n := range j.Nodes {
			if onType[n] {
				return true
			}
		}
		return false
	}
	qj := func(j *slurm.Job) queuewait.QueueJob {
		return queuewait.QueueJob{ID: fmt.Sprint(j.ID), User: j.User, Partition: partition, Nodes: j.NumNodes, GPUs: j.GPUs(),
			TimeLimit: time.Duration(j.TimeLimitMin) * time.Minute, Submit: j.Submit, Start: j.Start}
	}
	types := map[string]bool{}
	for _, g := range kb.GPUTypes {
		types[g.Type] = true
	}
	isType := func(s string) bool { return types[s] }
	seen := map[uint32]bool{}
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.Running() && holds(j):
			st.Running = append(st.Running, qj(j))
			st.Recent = append(st.Recent, qj(j))
			seen[j.ID] = true
		case j.Pending() && slices.Contains(strings.Split(j.Partition, ","), partition) && !namesOther(j, gpuType, isType):
			st.Pending = append(st.Pending, qj(j))
		}
	}
	for i := range started {
		j := &started[i]
		if !seen[j.ID] && holds(j) && !j.Start.After(now) {
			st.Recent = append(st.Recent, qj(j))
		}
	}
	// squeue lists pending jobs in no particular order; the model reads
	// them in priority order.
	sort.SliceStable(st.Pending, func(a, b int) bool { return st.Pending[a].Submit.Before(st.Pending[b].Submit) })
	return st
}

// namesOther says whether a job asks for a GPU type other than t.
func namesOther(j *slurm.Job, t string, isType func(string) bool) bool {
	if r, ok := j.GPURequest(); ok {
		for _, ty := range r.Types() {
			if ty != t {
				return true
			}
		}
	}
	if f := gpureq.FeatureType(j.Features, isType); f != "" && f != t {
		return true
	}
	return false
}
