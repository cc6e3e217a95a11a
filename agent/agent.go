// Package agent is rota-agent, embeddable: New builds it from Options and
// the logger and registry it is given, Run samples, publishes and answers
// checkpoint commands until its context ends. It never touches process
// signals; cmd/rota-agent turns SIGTERM into a cancelled context.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/agent/checkpoint"
	"github.com/rota-hpc/rota/agent/gpu"
	"github.com/rota-hpc/rota/agent/gpu/nvmlgpu"
	"github.com/rota-hpc/rota/agent/gpu/nvmlgpu/fakenvml"
	"github.com/rota-hpc/rota/agent/gpu/simgpu"
	"github.com/rota-hpc/rota/agent/host"
	"github.com/rota-hpc/rota/agent/jobs"
	"github.com/rota-hpc/rota/agent/metrics"
	"github.com/rota-hpc/rota/agent/progress"
	"github.com/rota-hpc/rota/agent/report"
	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gputype"
)

// Deps are what the agent is given rather than makes.
type Deps struct {
	Log zerolog.Logger
	// Registry gets the agent's metrics; nil makes a private one.
	Registry *prometheus.Registry
	// GPU replaces the backend Options.Backend names (tests).
	GPU gpu.Backend
}

// Agent is one node's agent.
type Agent struct {
	opts     Options
	log      zerolog.Logger
	reg      *prometheus.Registry
	gpu      gpu.Backend
	host     host.Sampler
	proc     jobs.Proc
	tracker  *progress.Tracker
	ckpt     *checkpoint.Checkpointer
	metrics  *metrics.Collector
	pub      *report.Publisher
	pidCache map[uint32]pidEntry
	jobNode  map[uint32]string // job -> node, from environ (JobNodeFromEnviron)
	environ  *jobs.EnvironScanner
	jobScan  time.Time // when jobNode was last rebuilt
	seq      uint64
	lastErr  string

	mu          sync.Mutex
	jobProgress map[uint32]wire.JobProgress // last scan, for the sim backend
	sampleSecs  float64
}

type pidEntry struct {
	ref jobs.Ref
	ok  bool
}

// New builds an agent; it opens the GPU backend but connects nothing.
func New(o Options, d Deps) (*Agent, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("invalid options:\n%w", err)
	}
	sig, _ := checkpoint.ParseSignal(o.CheckpointSignal)
	a := &Agent{
		opts:        o,
		log:         d.Log.With().Str("node", o.Node).Logger(),
		reg:         d.Registry,
		proc:        jobs.Proc{Root: o.ProcRoot, Node: o.Node},
		tracker:     &progress.Tracker{Dir: o.ProgressDir},
		pidCache:    map[uint32]pidEntry{},
		jobProgress: map[uint32]wire.JobProgress{},
	}
	if a.reg == nil {
		a.reg = prometheus.NewRegistry()
	}
	a.ckpt = &checkpoint.Checkpointer{Proc: a.proc, Progress: a.tracker, Signal: sig, Log: a.log.With().Str("component", "checkpoint").Logger()}
	a.gpu = d.GPU
	if a.gpu == nil {
		a.gpu = a.openBackend()
	}
	a.metrics = metrics.New(o.Node, a.stats)
	if err := a.reg.Register(a.metrics); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	return a, nil
}

func (a *Agent) openBackend() gpu.Backend {
	switch a.opts.Backend {
	case "sim":
		return &simgpu.Backend{Type: a.opts.GPUType, Count: a.opts.SimGPUs, Node: a.opts.Node, Jobs: a.simJobs, Active: 3 * a.opts.Interval}
	case "nvml-mock":
		b, err := nvmlgpu.New(fakenvml.New(a.opts.SimGPUs))
		if err != nil {
			a.log.Error().Err(err).Msg("mock NVML failed")
			return gpu.None{}
		}
		return b
	}
	b, err := nvmlgpu.Open()
	if err != nil {
		if nvmlgpu.IsNoGPU(err) {
			a.log.Warn().Err(err).Msg("no GPUs can be read on this node; reporting host and job data only")
		} else {
			a.log.Error().Err(err).Msg("NVML failed to start; reporting host and job data only (check the driver with nvidia-smi)")
		}
		return gpu.None{Reason: err.Error()}
	}
	return b
}

// GPU is the backend in use, for tests that drive a mock.
func (a *Agent) GPU() gpu.Backend { return a.gpu }

func (a *Agent) simJobs() []simgpu.Job {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]simgpu.Job, 0, len(a.jobProgress))
	for id, p := range a.jobProgress {
		out = append(out, simgpu.Job{ID: id, StepsPerSec: p.StepsPerSec, Age: time.Duration(p.AgeSeconds * float64(time.Second))})
	}
	return out
}

func (a *Agent) stats() metrics.Stats {
	a.mu.Lock()
	s := metrics.Stats{SampleSeconds: a.sampleSecs}
	a.mu.Unlock()
	if a.pub != nil {
		ps := a.pub.Stats()
		s.Reports, s.Dropped, s.Backlog = ps.Sent, ps.Dropped, ps.Queued
	}
	return s
}

// Run works until ctx ends. It returns an error only for what stops it
// from starting (metrics address taken, bad NATS URL).
func (a *Agent) Run(ctx context.Context) error {
	defer a.gpu.Close()
	creds, err := auth.ClientOptions(a.opts.NATSNkeySeedFile, a.opts.NATSTLSCA)
	if err != nil {
		return fmt.Errorf("NATS credentials: %w", err)
	}
	pub, err := report.Connect(report.Options{URL: a.opts.NATS, Name: "rota-agent " + a.opts.Node, Backlog: a.opts.Backlog,
		Log: a.log.With().Str("component", "nats").Logger(), Auth: creds})
	if err != nil {
		return err
	}
	a.pub = pub
	defer pub.Close()

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	sub, err := pub.Conn().Subscribe(wire.SubjectAgentCheckpoint(a.opts.Node), func(m *nats.Msg) {
		a.onCheckpoint(ctx, &wg, m)
	})
	if err != nil {
		return fmt.Errorf("subscribing to checkpoint commands: %w", err)
	}
	defer sub.Unsubscribe()

	if a.opts.MetricsAddr != "" {
		ln, err := net.Listen("tcp", a.opts.MetricsAddr)
		if err != nil {
			return fmt.Errorf("serving metrics on %s (set metrics_addr to a free address, or \"\" to turn metrics off): %w", a.opts.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		wg.Add(1)
		go func() { defer wg.Done(); _ = srv.Serve(ln) }()
		defer srv.Close()
		a.log.Info().Str("addr", ln.Addr().String()).Msg("serving /metrics")
	}

	a.log.Info().Str("backend", a.gpu.Name()).Str("gpu_type", a.opts.GPUType).Dur("interval", a.opts.Interval).Msg("agent started")
	t := time.NewTicker(a.opts.Interval)
	defer t.Stop()
	for {
		a.Tick(ctx, time.Now())
		select {
		case <-ctx.Done():
			a.log.Info().Msg("agent stopping")
			return nil
		case <-t.C:
		}
	}
}

// Tick samples once and publishes the reports.
func (a *Agent) Tick(ctx context.Context, now time.Time) *wire.NodeReport {
	start := time.Now()
	r := a.Sample(ctx, now)
	if data, err := json.Marshal(r); err == nil {
		a.pub.Publish(wire.SubjectAgentReport(a.opts.Node), data)
	}
	for i := range r.Jobs {
		if data, err := json.Marshal(&r.Jobs[i]); err == nil {
			a.pub.Publish(wire.SubjectAgentJob(a.opts.Node, r.Jobs[i].JobID), data)
		}
	}
	a.metrics.Update(r)
	a.mu.Lock()
	a.sampleSecs = time.Since(start).Seconds()
	a.mu.Unlock()
	return r
}

// Sample builds one NodeReport: progress first (the sim backend follows
// it), then GPUs, host, and the mapping of GPU processes to jobs.
func (a *Agent) Sample(ctx context.Context, now time.Time) *wire.NodeReport {
	a.seq++
	r := &wire.NodeReport{V: wire.Version, Node: a.opts.Node, GPUType: a.opts.GPUType, Backend: a.gpu.Name(), At: now.UTC(), Seq: a.seq}

	prog, err := a.tracker.Scan(now)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		a.logOnce("progress", err, "cannot read job progress; check progress_dir exists and is readable")
	}
	if a.opts.JobNodeFromEnviron {
		prog = a.onThisNode(prog)
	}
	a.mu.Lock()
	a.jobProgress = prog
	a.mu.Unlock()

	gpus, err := a.gpu.Sample(ctx)
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
		a.logOnce("gpu", err, "sampling GPUs failed; reporting what could be read")
	} else {
		a.logOnce("gpu", nil, "")
	}
	host, probs := a.host.Sample(ctx)
	r.Host = host
	r.Problems = append(r.Problems, probs...)

	jobsByID := map[uint32]*wire.JobReport{}
	job := func(id uint32) *wire.JobReport {
		j := jobsByID[id]
		if j == nil {
			j = &wire.JobReport{V: wire.Version, Node: a.opts.Node, GPUType: a.opts.GPUType, At: r.At, JobID: id}
			jobsByID[id] = j
		}
		return j
	}
	seen := map[uint32]bool{}
	for gi := range gpus {
		g := &gpus[gi]
		for pi := range g.Processes {
			p := &g.Processes[pi]
			if p.JobID == 0 && p.PID != 0 {
				seen[p.PID] = true
				if e := a.lookup(p.PID); e.ok {
					p.JobID, p.Step = e.ref.JobID, e.ref.Step
				}
			}
			if p.JobID == 0 {
				r.Unmapped = append(r.Unmapped, *p)
				continue
			}
			j := job(p.JobID)
			if g.MIG != nil && g.MIG.Profile != "" {
				// On a MIG slice the job runs on the slice's type, not the
				// whole GPU's: its measured speed is the slice's.
				if t := gputype.SliceType(a.opts.GPUType, g.MIG.Profile); t != "" {
					j.GPUType = t
				}
			}
			j.Processes++
			if p.UsedMemoryBytes != nil {
				j.GPUMemoryBytes += *p.UsedMemoryBytes
			}
			if p.SMUtilPercent != nil {
				v := *p.SMUtilPercent
				if j.SMUtilPercent != nil {
					v += *j.SMUtilPercent
				}
				j.SMUtilPercent = &v
			}
			if !slices.Contains(j.GPUs, g.Index) {
				j.GPUs = append(j.GPUs, g.Index)
			}
			if p.Step != "" && !slices.Contains(j.Steps, p.Step) {
				j.Steps = append(j.Steps, p.Step)
			}
		}
	}
	for pid := range a.pidCache {
		if !seen[pid] {
			delete(a.pidCache, pid)
		}
	}
	for id, p := range prog {
		p := p
		job(id).Progress = &p
	}
	r.GPUs = gpus
	for _, j := range jobsByID {
		sort.Ints(j.GPUs)
		sort.Strings(j.Steps)
		r.Jobs = append(r.Jobs, *j)
	}
	sort.Slice(r.Jobs, func(i, k int) bool { return r.Jobs[i].JobID < r.Jobs[k].JobID })
	return r
}

// onThisNode keeps the jobs whose processes say they run on this node,
// scanning the process table when a job is not known yet, and at least
// every jobRescan: a requeued job keeps its id (and its progress file) but
// may restart on another node, and a stale entry would have the old
// node's agent report its progress (as measured on the wrong GPU type)
// while the new node's ignores it.
func (a *Agent) onThisNode(prog map[uint32]wire.JobProgress) map[uint32]wire.JobProgress {
	if a.jobNode == nil {
		a.jobNode = map[uint32]string{}
	}
	rescan := time.Since(a.jobScan) > jobRescan
	for id := range prog {
		if _, ok := a.jobNode[id]; !ok {
			rescan = true
			break
		}
	}
	before := a.jobNode
	if rescan {
		a.jobScan = time.Now()
		fresh := map[uint32]string{}
		if a.environ == nil {
			a.environ = &jobs.EnvironScanner{Proc: a.proc}
		}
		for j, n := range a.environ.Scan() {
			fresh[j] = n
		}
		// A job with no process anywhere right now (between a requeue
		// and its restart) keeps its last node until it shows up again.
		for j, n := range a.jobNode {
			if _, ok := fresh[j]; !ok {
				fresh[j] = n
			}
		}
		a.jobNode = fresh
	}
	out := map[uint32]wire.JobProgress{}
	for id, p := range prog {
		if a.jobNode[id] != a.opts.Node {
			continue
		}
		if was, ok := before[id]; ok && was != a.opts.Node {
			// It moved here: the rate so far was measured on another
			// node's GPU type.
			if a.tracker != nil {
				a.tracker.Reset(id)
			}
			p.StepsPerSec = 0
		}
		out[id] = p
	}
	for id := range a.jobNode {
		if _, ok := prog[id]; !ok {
			delete(a.jobNode, id)
		}
	}
	return out
}

// jobRescan bounds how long a job -> node entry from environ is trusted.
const jobRescan = 3 * time.Second

// lookup maps a GPU process to its job, caching while the PID stays on a
// GPU from one sample to the next.
func (a *Agent) lookup(pid uint32) pidEntry {
	if e, ok := a.pidCache[pid]; ok {
		return e
	}
	ref, err := a.proc.JobOf(pid)
	e := pidEntry{ref: ref, ok: err == nil}
	if err != nil && !errors.Is(err, jobs.ErrNoJob) && !errors.Is(err, fs.ErrNotExist) {
		a.log.Debug().Err(err).Uint32("pid", pid).Msg("cannot read the cgroup of a GPU process")
	}
	a.pidCache[pid] = e
	return e
}

// logOnce logs an error when it first appears or changes, and its end.
func (a *Agent) logOnce(what string, err error, advice string) {
	msg := ""
	if err != nil {
		msg = what + ": " + err.Error()
	}
	if msg == a.lastErr || (err == nil && a.lastErr == "") {
		return
	}
	if err == nil {
		if len(a.lastErr) > len(what) && a.lastErr[:len(what)] == what {
			a.log.Info().Str("source", what).Msg("sampling works again")
			a.lastErr = ""
		}
		return
	}
	a.lastErr = msg
	a.log.Error().Err(err).Str("source", what).Msg(advice)
}

func (a *Agent) onCheckpoint(ctx context.Context, wg *sync.WaitGroup, m *nats.Msg) {
	var req wire.CheckpointRequest
	reply := wire.CheckpointReply{V: wire.Version}
	respond := func() {
		if m.Reply != "" {
			data, _ := json.Marshal(&reply)
			_ = m.Respond(data)
		}
	}
	if err := wire.Decode(m.Data, &req); err != nil {
		reply.Error = err.Error()
		a.log.Warn().Err(err).Msg("ignoring a malformed checkpoint command")
		respond()
		return
	}
	reply.ID, reply.JobID = req.ID, req.JobID
	grace := time.Duration(req.GraceSeconds * float64(time.Second))
	if req.JobID == 0 || grace <= 0 || grace > 24*time.Hour {
		reply.Error = fmt.Sprintf("checkpoint needs a job ID and a grace period between 0 and 24h (got job %d, grace %gs)", req.JobID, req.GraceSeconds)
		respond()
		return
	}
	start := a.ckpt.Start
	if req.KeepRunning {
		start = a.ckpt.StartKeep
	}
	att, err := start(req.JobID)
	if err != nil {
		reply.Error = err.Error()
		respond()
		if errors.Is(err, checkpoint.ErrNoPeriodicSignal) {
			return // refused in the reply: nothing was signalled, no result follows
		}
		res := wire.CheckpointResult{V: wire.Version, ID: req.ID, Node: a.opts.Node, JobID: req.JobID, Outcome: wire.CheckpointNoProcesses}
		if !errors.Is(err, checkpoint.ErrNoProcesses) {
			res.Error = err.Error()
		}
		a.publishResult(&res)
		return
	}
	reply.Accepted, reply.Signal, reply.Processes = true, checkpoint.SignalName(att.Signal), len(att.Signalled)
	respond()
	wg.Add(1)
	go func() {
		defer wg.Done()
		res := a.ckpt.Wait(ctx, att, grace)
		res.ID, res.Node = req.ID, a.opts.Node
		a.metrics.ObserveCheckpoint(res.Outcome, res.ElapsedSeconds)
		a.log.Info().Uint32("job", req.JobID).Str("outcome", res.Outcome).Msg("checkpoint done")
		a.publishResult(&res)
	}()
}

func (a *Agent) publishResult(res *wire.CheckpointResult) {
	if data, err := json.Marshal(res); err == nil {
		a.pub.Publish(wire.SubjectAgentCheckpointResult(a.opts.Node), data)
	}
}
