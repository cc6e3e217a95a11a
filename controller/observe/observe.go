// Package observe is the controller's intake of what the node agents
// measure: it subscribes to every node's NodeReport and JobReport, checks
// them, and keeps the latest state per node and per job, plus what the
// placement policy will learn from: each job's measured steps/s per GPU
// type (smoothed) and its peak GPU memory.
//
// It is built for the firehose: at 1 Hz from 5,000 eight-GPU nodes the
// controller takes in 5,000 NodeReports and several times as many
// JobReports a second. Messages are decoded into lean views
// (wire.NodeReportView, wire.JobReportView) reused across messages, by a
// scanner that skips most of a report's bytes rather than building them
// (encoding/json's reflection cost several times more); the state is
// updated under one short lock; memory is bounded by forgetting nodes and
// jobs not heard of for a while and by caps on their number.
//
// Every controller runs an Observer, the standbys too (agent reports are
// plain publishes, not queue-group requests), so a controller that takes
// over already knows the cluster's measurements.
package observe

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/wire"
)

// Config sizes the Observer. Zero values take the defaults.
type Config struct {
	// ForgetAfter: a node or job not heard of for this long is dropped
	// (a job's node entries too). Default 5 minutes.
	ForgetAfter time.Duration
	// Smoothing is the time constant of the steps/s average per (job, GPU
	// type). Default 60 s: the agent already smooths over 30 s per node;
	// this one merges the job's nodes and rides over a missed report.
	Smoothing time.Duration
	// ProgressMaxAge: a progress reading older than this (the job has not
	// advanced its file) does not feed the steps/s average, since the
	// agent's rate is then a memory of the past. Default 10 minutes.
	ProgressMaxAge time.Duration
	// PendingMsgs and PendingBytes bound what waits in the NATS client for
	// each subscription; beyond them messages are dropped and counted as
	// slow-consumer drops rather than growing memory without end.
	// Defaults 200,000 messages and 256 MiB.
	PendingMsgs  int
	PendingBytes int
	// MaxNodes and MaxJobs cap the tables; reports about new nodes or jobs
	// beyond them are counted as invalid. Defaults 100,000 and 1,000,000.
	MaxNodes int
	MaxJobs  int
}

func (c Config) withDefaults() Config {
	if c.ForgetAfter <= 0 {
		c.ForgetAfter = 5 * time.Minute
	}
	if c.Smoothing <= 0 {
		c.Smoothing = time.Minute
	}
	if c.ProgressMaxAge <= 0 {
		c.ProgressMaxAge = 10 * time.Minute
	}
	if c.PendingMsgs <= 0 {
		c.PendingMsgs = 200_000
	}
	if c.PendingBytes <= 0 {
		c.PendingBytes = 256 << 20
	}
	if c.MaxNodes <= 0 {
		c.MaxNodes = 100_000
	}
	if c.MaxJobs <= 0 {
		c.MaxJobs = 1_000_000
	}
	return c
}

// Limits on values from the network: anything beyond is nonsense, not a
// big machine.
const (
	maxNameLen      = 256
	maxGPUsPerNode  = 256 // MIG devices count too
	maxGPUIndex     = 1023
	maxJobsPerNode  = 4096
	maxMemoryBytes  = 1 << 50 // 1 PiB
	maxStepsPerSec  = 1e9
	maxJobNodes     = 4096 // node entries kept per job
	maxSeqGapCount  = 1 << 20
	logEvery        = 10 * time.Second
	sweepMinPeriod  = time.Second
	sweepMaxPeriod  = time.Minute
	earliestAgentAt = 946684800 // 2000-01-01: a zero or absurd clock
)

// GPU is one GPU of a node as last reported; absent metrics are 0.
type GPU struct {
	Index            int
	MemoryTotalBytes uint64
	MemoryUsedBytes  uint64
	UtilGPUPercent   uint32
}

// Node is the latest report of one node.
type Node struct {
	Name    string
	GPUType string
	At      time.Time // the agent's sample time
	Seen    time.Time // when the controller received it
	Seq     uint64
	GPUs    []GPU
	Jobs    []uint32
	// Lost counts reports missing from the node's sequence numbers.
	Lost uint64
}

// TypeRate is a job's measured speed on one GPU type.
type TypeRate struct {
	GPUType     string
	StepsPerSec float64 // smoothed; 0 until a node reported a rate
	Samples     uint64
	Updated     time.Time
	// variance of the reported rates around StepsPerSec, weighted as the
	// average is (see Spread).
	variance float64
}

// Spread is how much the reported rates move around StepsPerSec (their
// exponentially weighted standard deviation, on the average's time
// constant): the measurement's uncertainty, for margins built on it.
func (r TypeRate) Spread() float64 { return math.Sqrt(r.variance) }

// Job is what the agents reported of one job.
type Job struct {
	ID    uint32
	Seen  time.Time
	Step  uint64
	Total uint64
	Rates []TypeRate
	// Nodes are the nodes that reported the job within ForgetAfter.
	Nodes               []string
	PeakGPUMemoryBytes  uint64
	PeakGPUMemoryPerGPU uint64
	// Ready: the last report said the job's ready file exists (a service
	// replica that answers; docs/serve.md).
	Ready bool
}

type nodeState struct {
	Node
}

type jobNode struct {
	name string
	seen time.Time
}

type jobState struct {
	id         uint32
	seen       time.Time
	step       uint64
	total      uint64
	rates      []TypeRate
	nodes      []jobNode
	peak       uint64
	peakPerGPU uint64
	ready      bool
}

// Observer takes in agent reports. Its methods are safe for concurrent use.
type Observer struct {
	cfg Config
	log zerolog.Logger
	now func() time.Time

	received, decoded, malformed, invalid atomic.Uint64
	lastLog                               atomic.Int64 // unix nanos of the last drop logged

	mu        sync.Mutex
	nodes     map[string]*nodeState
	jobs      map[uint32]*jobState
	forgotten uint64
	lost      uint64

	subs []*nats.Subscription
	// Scratch views, one per subscription: NATS delivers a subscription's
	// messages one at a time on its own goroutine, so each view is only
	// ever used by one goroutine and its slices are reused.
	nodeView wire.NodeReportView
	jobView  wire.JobReportView
}

// New returns an Observer that is not subscribed yet (see Start); tests
// and benchmarks feed it with Handle.
func New(cfg Config, log zerolog.Logger) *Observer {
	return &Observer{
		cfg:   cfg.withDefaults(),
		log:   log,
		now:   time.Now,
		nodes: map[string]*nodeState{},
		jobs:  map[uint32]*jobState{},
	}
}

// Start subscribes to every node's reports on nc and forgets silent nodes
// and jobs until ctx ends. The subscriptions end with Close or with nc.
func (o *Observer) Start(ctx context.Context, nc *nats.Conn) error {
	for _, s := range []struct {
		subj string
		h    nats.MsgHandler
	}{
		{wire.SubjectAgentReports, func(m *nats.Msg) { o.HandleNodeReport(m.Subject, m.Data) }},
		{wire.SubjectAgentJobs, func(m *nats.Msg) { o.HandleJobReport(m.Subject, m.Data) }},
	} {
		sub, err := nc.Subscribe(s.subj, s.h)
		if err != nil {
			o.Close()
			return fmt.Errorf("subscribing to %s: %w", s.subj, err)
		}
		if err := sub.SetPendingLimits(o.cfg.PendingMsgs, o.cfg.PendingBytes); err != nil {
			o.Close()
			return fmt.Errorf("pending limits on %s: %w", s.subj, err)
		}
		o.subs = append(o.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		o.Close()
		return fmt.Errorf("subscribing to agent reports: %w", err)
	}
	go o.sweepLoop(ctx)
	return nil
}

// Close ends the subscriptions; the state stays readable.
func (o *Observer) Close() {
	for _, s := range o.subs {
		_ = s.Unsubscribe()
	}
}

func (o *Observer) sweepLoop(ctx context.Context) {
	period := min(max(o.cfg.ForgetAfter/5, sweepMinPeriod), sweepMaxPeriod)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			o.sweep(o.now())
		}
	}
}

// sweep forgets what has not been heard of since now-ForgetAfter.
func (o *Observer) sweep(now time.Time) {
	cut := now.Add(-o.cfg.ForgetAfter)
	o.mu.Lock()
	defer o.mu.Unlock()
	var n int
	for name, s := range o.nodes {
		if s.Seen.Before(cut) {
			delete(o.nodes, name)
			n++
		}
	}
	for id, j := range o.jobs {
		if j.seen.Before(cut) {
			delete(o.jobs, id)
			n++
			continue
		}
		k := j.nodes[:0]
		for _, jn := range j.nodes {
			if !jn.seen.Before(cut) {
				k = append(k, jn)
			}
		}
		clear(j.nodes[len(k):])
		j.nodes = k
	}
	if n > 0 {
		o.forgotten += uint64(n)
		o.log.Debug().Int("forgotten", n).Int("nodes", len(o.nodes)).Int("jobs", len(o.jobs)).Msg("forgot silent nodes and jobs")
	}
}

// drop counts a message not taken in and logs it, at most once per
// logEvery so a misbehaving sender cannot flood the log.
func (o *Observer) drop(counter *atomic.Uint64, subject string, err error) {
	counter.Add(1)
	now := o.now().UnixNano()
	last := o.lastLog.Load()
	if now-last < int64(logEvery) || !o.lastLog.CompareAndSwap(last, now) {
		return
	}
	o.log.Warn().Err(err).Str("subject", subject).Uint64("malformed_total", o.malformed.Load()).
		Uint64("invalid_total", o.invalid.Load()).Msg("agent report dropped (further drops are counted, logged at most every 10 s)")
}

type invalidError string

func (e invalidError) Error() string { return string(e) }

// HandleNodeReport takes in one NodeReport received on subject. It must
// not be called concurrently with itself (NATS does not).
func (o *Observer) HandleNodeReport(subject string, data []byte) {
	o.received.Add(1)
	v := &o.nodeView
	if err := wire.DecodeNodeReportView(data, v); err != nil {
		o.drop(&o.malformed, subject, err)
		return
	}
	if err := checkNodeReport(subject, v); err != nil {
		o.drop(&o.invalid, subject, err)
		return
	}
	now := o.now()
	o.mu.Lock()
	s, ok := o.nodes[v.Node]
	if !ok {
		if len(o.nodes) >= o.cfg.MaxNodes {
			o.mu.Unlock()
			o.drop(&o.invalid, subject, invalidError("node table full"))
			return
		}
		s = &nodeState{Node{Name: v.Node}}
		o.nodes[v.Node] = s
	} else if v.Seq > s.Seq+1 && s.Seq > 0 {
		gap := v.Seq - s.Seq - 1
		if gap < maxSeqGapCount { // a bigger jump is a confused agent, not loss
			s.Lost += gap
			o.lost += gap
		}
	}
	if s.GPUType != v.GPUType {
		s.GPUType = v.GPUType
	}
	s.At, s.Seen, s.Seq = v.At, now, v.Seq
	s.GPUs = s.GPUs[:0]
	for _, g := range v.GPUs {
		s.GPUs = append(s.GPUs, GPU(g))
	}
	s.Jobs = s.Jobs[:0]
	for _, j := range v.Jobs {
		s.Jobs = append(s.Jobs, j.JobID)
	}
	o.mu.Unlock()
	o.decoded.Add(1)
}

func checkNodeReport(subject string, v *wire.NodeReportView) error {
	if v.Node == "" || len(v.Node) > maxNameLen || len(v.GPUType) > maxNameLen {
		return invalidError("node or gpu_type name empty or too long")
	}
	tok, rest, ok := agentSubject(subject)
	if !ok || rest != "report" || !tokenOf(tok, v.Node) {
		return invalidError("node " + v.Node + " does not match the subject")
	}
	if v.At.Unix() < earliestAgentAt {
		return invalidError("sample time missing or before 2000")
	}
	if len(v.GPUs) > maxGPUsPerNode || len(v.Jobs) > maxJobsPerNode {
		return invalidError("too many GPUs or jobs")
	}
	for i := range v.GPUs {
		g := &v.GPUs[i]
		if g.Index < 0 || g.Index > maxGPUIndex || g.UtilGPUPercent > 100 ||
			g.MemoryTotalBytes > maxMemoryBytes || g.MemoryUsedBytes > maxMemoryBytes {
			return invalidError("GPU values out of range")
		}
	}
	return nil
}

// HandleJobReport takes in one JobReport received on subject. It must not
// be called concurrently with itself (NATS does not).
func (o *Observer) HandleJobReport(subject string, data []byte) {
	o.received.Add(1)
	v := &o.jobView
	if err := wire.DecodeJobReportView(data, v); err != nil {
		o.drop(&o.malformed, subject, err)
		return
	}
	if err := checkJobReport(subject, v); err != nil {
		o.drop(&o.invalid, subject, err)
		return
	}
	now := o.now()
	p := &v.Progress
	o.mu.Lock()
	j, ok := o.jobs[v.JobID]
	if !ok {
		if len(o.jobs) >= o.cfg.MaxJobs {
			o.mu.Unlock()
			o.drop(&o.invalid, subject, invalidError("job table full"))
			return
		}
		j = &jobState{id: v.JobID}
		o.jobs[v.JobID] = j
	}
	j.seen = now
	j.ready = p.Ready
	if p.Step > 0 || p.Total > 0 {
		j.step, j.total = p.Step, p.Total
	}
	j.peak = max(j.peak, v.GPUMemoryBytes)
	if len(v.GPUs) > 0 {
		j.peakPerGPU = max(j.peakPerGPU, v.GPUMemoryBytes/uint64(len(v.GPUs)))
	}
	j.touchNode(v.Node, now)
	if p.StepsPerSec > 0 && p.AgeSeconds <= o.cfg.ProgressMaxAge.Seconds() {
		j.rate(v.GPUType).add(p.StepsPerSec, now, o.cfg.Smoothing)
	}
	o.mu.Unlock()
	o.decoded.Add(1)
}

func (j *jobState) touchNode(name string, now time.Time) {
	for i := range j.nodes {
		if j.nodes[i].name == name {
			j.nodes[i].seen = now
			return
		}
	}
	if len(j.nodes) < maxJobNodes {
		j.nodes = append(j.nodes, jobNode{name: name, seen: now})
	}
}

func (j *jobState) rate(gpuType string) *TypeRate {
	for i := range j.rates {
		if j.rates[i].GPUType == gpuType {
			return &j.rates[i]
		}
	}
	j.rates = append(j.rates, TypeRate{GPUType: gpuType})
	return &j.rates[len(j.rates)-1]
}

// add folds one measured rate into the average: the first is taken as is,
// each later one weighs 1-exp(-dt/tau), dt being the time since the last,
// so the average forgets at the same pace however often nodes report. The
// variance follows with the same weight (Finch, "Incremental calculation
// of weighted mean and variance", 2009).
func (r *TypeRate) add(v float64, now time.Time, tau time.Duration) {
	if r.Samples == 0 {
		r.StepsPerSec, r.variance = v, 0
	} else {
		dt := now.Sub(r.Updated)
		if dt < 0 {
			dt = 0
		}
		a := 1 - math.Exp(-dt.Seconds()/tau.Seconds())
		d := v - r.StepsPerSec
		r.StepsPerSec += a * d
		r.variance = (1 - a) * (r.variance + a*d*d)
	}
	r.Samples++
	r.Updated = now
}

func checkJobReport(subject string, v *wire.JobReportView) error {
	if v.Node == "" || len(v.Node) > maxNameLen || len(v.GPUType) > maxNameLen {
		return invalidError("node or gpu_type name empty or too long")
	}
	tok, rest, ok := agentSubject(subject)
	if !ok || !tokenOf(tok, v.Node) {
		return invalidError("node " + v.Node + " does not match the subject")
	}
	id, ok := jobIDOf(rest)
	if !ok || id != v.JobID || id == 0 {
		return invalidError("job id missing or not matching the subject")
	}
	if v.At.Unix() < earliestAgentAt {
		return invalidError("sample time missing or before 2000")
	}
	p := &v.Progress
	if len(v.GPUs) > maxGPUsPerNode || v.GPUMemoryBytes > maxMemoryBytes ||
		p.StepsPerSec < 0 || p.StepsPerSec > maxStepsPerSec || p.AgeSeconds < 0 {
		return invalidError("job values out of range")
	}
	for _, g := range v.GPUs {
		if g < 0 || g > maxGPUIndex {
			return invalidError("GPU index out of range")
		}
	}
	return nil
}

// agentSubject splits "rota.v1.agent.<tok>.<rest>".
func agentSubject(s string) (tok, rest string, ok bool) {
	const prefix = "rota.v1.agent."
	if len(s) <= len(prefix) || s[:len(prefix)] != prefix {
		return "", "", false
	}
	s = s[len(prefix):]
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:], i > 0
		}
	}
	return "", "", false
}

// jobIDOf reads "job.<id>".
func jobIDOf(rest string) (uint32, bool) {
	const p = "job."
	if len(rest) <= len(p) || rest[:len(p)] != p || len(rest) > len(p)+10 {
		return 0, false
	}
	var n uint64
	for i := len(p); i < len(rest); i++ {
		c := rest[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > math.MaxUint32 {
		return 0, false
	}
	return uint32(n), true
}

// tokenOf reports whether tok == wire.AgentToken(node), without building
// the token: an agent must publish under its own node's name.
func tokenOf(tok, node string) bool {
	if len(tok) != len(node) {
		return false
	}
	for i := 0; i < len(node); i++ {
		c := node[i]
		switch c {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			c = '_'
		}
		if c >= 0x80 { // AgentToken works on runes; leave those to it
			return wire.AgentToken(node) == tok
		}
		if tok[i] != c {
			return false
		}
	}
	return true
}

// Node returns a copy of the latest report of node.
func (o *Observer) Node(name string) (Node, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.nodes[name]
	if !ok {
		return Node{}, false
	}
	n := s.Node
	n.GPUs = append([]GPU(nil), s.GPUs...)
	n.Jobs = append([]uint32(nil), s.Jobs...)
	return n, true
}

// Job returns a copy of what is known of job id.
func (o *Observer) Job(id uint32) (Job, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	j, ok := o.jobs[id]
	if !ok {
		return Job{}, false
	}
	return j.copy(), true
}

func (j *jobState) copy() Job {
	out := Job{ID: j.id, Seen: j.seen, Step: j.step, Total: j.total,
		Rates:              append([]TypeRate(nil), j.rates...),
		PeakGPUMemoryBytes: j.peak, PeakGPUMemoryPerGPU: j.peakPerGPU, Ready: j.ready}
	for _, n := range j.nodes {
		out.Nodes = append(out.Nodes, n.name)
	}
	return out
}

// StepsPerSec is job's smoothed measured rate on gpuType, if any node of
// that type has reported one.
func (o *Observer) StepsPerSec(job uint32, gpuType string) (float64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	j, ok := o.jobs[job]
	if !ok {
		return 0, false
	}
	for _, r := range j.rates {
		if r.GPUType == gpuType && r.Samples > 0 {
			return r.StepsPerSec, true
		}
	}
	return 0, false
}

// Status is the counters and table sizes, for `rota status`.
func (o *Observer) Status() wire.IngestStatus {
	st := wire.IngestStatus{
		Received:  o.received.Load(),
		Decoded:   o.decoded.Load(),
		Malformed: o.malformed.Load(),
		Invalid:   o.invalid.Load(),
	}
	for _, s := range o.subs {
		// Messages the client discarded never reached the handler, so
		// they count as received too.
		if d, err := s.Dropped(); err == nil {
			st.SlowConsumer += uint64(d)
			st.Received += uint64(d)
		}
		if p, _, err := s.Pending(); err == nil {
			st.Pending += p
		}
	}
	o.mu.Lock()
	st.Nodes, st.Jobs, st.Forgotten, st.LostReports = len(o.nodes), len(o.jobs), o.forgotten, o.lost
	o.mu.Unlock()
	return st
}

// Throughputs lists jobs' measured rates, one entry per (job, GPU type),
// by job id, at most limit entries; truncated says some were left out.
func (o *Observer) Throughputs(limit int) (out []wire.JobThroughput, truncated bool) {
	o.mu.Lock()
	ids := make([]uint32, 0, len(o.jobs))
	for id := range o.jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		j := o.jobs[id]
		rates := j.rates
		if len(rates) == 0 {
			rates = []TypeRate{{}} // still show the job and its memory
		}
		for _, r := range rates {
			if len(out) >= limit {
				o.mu.Unlock()
				return out, true
			}
			out = append(out, wire.JobThroughput{JobID: id, GPUType: r.GPUType, StepsPerSec: r.StepsPerSec,
				Step: j.step, Total: j.total, PeakGPUMemoryBytes: j.peak, PeakGPUMemoryPerGPU: j.peakPerGPU,
				Nodes: len(j.nodes), LastSeen: j.seen.UTC().Format(time.RFC3339)})
		}
	}
	o.mu.Unlock()
	return out, false
}

// GPUMemory is the smallest total memory per GPU type that the agents of
// nodes report (a type's nodes may differ: 16 and 32 GiB V100s).
func (o *Observer) GPUMemory(nodes []string) map[string]uint64 {
	out := map[string]uint64{}
	for _, name := range nodes {
		r, ok := o.Node(name)
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
