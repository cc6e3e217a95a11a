package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/app"
	"github.com/rota-hpc/rota/internal/tick"
	"github.com/rota-hpc/rota/wire"
)

// Options are a load run's knobs.
type Options struct {
	// NATSURL is the controller's NATS.
	NATSURL string
	Fleet   FleetConfig
	// Conns is how many NATS connections the simulated agents share (real
	// agents have one each; a few are enough to load the controller
	// without making the server juggle thousands of sockets on the
	// generator's behalf).
	Conns int
	// PlaceRate is placement requests per second (0: none).
	PlaceRate float64
	// PlaceTimeout is how long a placement request may take before it
	// counts as timed out. Default 1 s.
	PlaceTimeout time.Duration
	// Warmup runs before measuring; Duration is measured.
	Warmup   time.Duration
	Duration time.Duration
	// ControllerPID, when set, is the controller process whose CPU and
	// memory are measured (/proc/<pid>). InProcess says the controller
	// runs in this process, so the figures include the generator.
	ControllerPID int
	InProcess     bool
	Log           zerolog.Logger
}

// Result is what a run measured.
type Result struct {
	Nodes, GPUs, JobsPerNode int
	Window                   time.Duration
	// Offered is what the simulated agents published per second during
	// the window; Ingested what the controller decoded per second.
	OfferedPerSec  float64
	IngestedPerSec float64
	Published      uint64
	PublishErrors  uint64
	// Drops since the start: by the controller's counters, and messages
	// published that the controller never counted (lost on the way).
	Malformed, Invalid, SlowConsumer, NeverReceived uint64
	PendingAtEnd                                    int
	ControllerNodes, ControllerJobs                 int
	// CPU is the controller's CPU time over the window in % of one core;
	// RSS and PeakRSS its resident memory at the end and its peak (bytes).
	// Zero when no process was measured.
	ControllerPID                    int
	InProcess                        bool
	ControllerCPU                    float64
	ControllerRSS, ControllerPeakRSS uint64
	GeneratorCPU                     float64
	// Placement latency over the window.
	PlaceCount, PlaceTimeouts, PlaceErrors uint64
	PlaceP50, PlaceP99, PlaceMax           time.Duration
}

// Dropped is every message lost, whatever the cause.
func (r *Result) Dropped() uint64 {
	return r.Malformed + r.Invalid + r.SlowConsumer + r.NeverReceived
}

// Run plays the fleet against the controller at o.NATSURL.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Conns <= 0 {
		o.Conns = 4
	}
	if o.PlaceTimeout <= 0 {
		o.PlaceTimeout = time.Second
	}
	o.Fleet.defaults()
	interval := o.Fleet.Interval
	fleet, err := newFleet(o.Fleet)
	if err != nil {
		return nil, err
	}
	ctl, err := nats.Connect(o.NATSURL, nats.Name("rota-loadgen-control"))
	if err != nil {
		return nil, fmt.Errorf("cannot reach the controller's NATS at %s: %w", o.NATSURL, err)
	}
	defer ctl.Close()
	s0, err := ingestStatus(ctx, ctl)
	if err != nil {
		return nil, err
	}

	var published, pubErrors atomic.Uint64
	runCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	for c := 0; c < o.Conns; c++ {
		nc, err := nats.Connect(o.NATSURL, nats.Name(fmt.Sprintf("rota-loadgen-agents-%d", c)),
			// A publisher that outruns the socket queues here, not in errors.
			nats.ReconnectBufSize(64<<20))
		if err != nil {
			return nil, fmt.Errorf("agent connection: %w", err)
		}
		defer nc.Close()
		var mine []*simNode
		for i := c; i < len(fleet); i += o.Conns {
			mine = append(mine, fleet[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			publishLoop(runCtx, nc, mine, interval, &published, &pubErrors)
			_ = nc.Flush()
		}()
	}

	lat := &latencies{}
	if o.PlaceRate > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); placeLoop(runCtx, ctl, o.PlaceRate, o.PlaceTimeout, lat) }()
	}

	if !tick.Sleep(ctx, o.Warmup) {
		return nil, ctx.Err()
	}
	// Window start.
	sa, err := ingestStatus(ctx, ctl)
	if err != nil {
		return nil, err
	}
	ta, pa := time.Now(), published.Load()
	cpuA, _ := cpuTicks(o.ControllerPID)
	selfA, _ := cpuTicks(os.Getpid())
	lat.start()
	tick.Sleep(ctx, o.Duration)
	// Window end.
	lat.stop()
	tb, pb := time.Now(), published.Load()
	cpuB, _ := cpuTicks(o.ControllerPID)
	selfB, _ := cpuTicks(os.Getpid())
	sb, err := ingestStatus(context.WithoutCancel(ctx), ctl)
	stopLoad()
	wg.Wait()
	if err != nil {
		return nil, err
	}

	// Let the controller read what is still on its way, then count.
	total := published.Load()
	var sf wire.IngestStatus
	for deadline := time.Now().Add(5 * time.Second); ; {
		sf, err = ingestStatus(context.WithoutCancel(ctx), ctl)
		if err != nil {
			return nil, err
		}
		if sf.Received-s0.Received >= total && sf.Pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	win := tb.Sub(ta)
	r := &Result{Nodes: o.Fleet.Nodes, GPUs: o.Fleet.Nodes * o.Fleet.GPUsPerNode, JobsPerNode: o.Fleet.JobsPerNode,
		Window: win, Published: total, PublishErrors: pubErrors.Load(),
		OfferedPerSec:  float64(pb-pa) / win.Seconds(),
		IngestedPerSec: float64(sb.Decoded-sa.Decoded) / win.Seconds(),
		Malformed:      sf.Malformed - s0.Malformed, Invalid: sf.Invalid - s0.Invalid,
		SlowConsumer: sf.SlowConsumer - s0.SlowConsumer, PendingAtEnd: sf.Pending,
		ControllerNodes: sf.Nodes, ControllerJobs: sf.Jobs,
		ControllerPID: o.ControllerPID, InProcess: o.InProcess}
	if got := sf.Received - s0.Received; got < total {
		r.NeverReceived = total - got
	}
	r.NeverReceived += r.PublishErrors
	if o.ControllerPID > 0 {
		r.ControllerCPU = percentOfCore(cpuB-cpuA, win)
		r.ControllerRSS, r.ControllerPeakRSS = memory(o.ControllerPID)
	}
	if !o.InProcess {
		r.GeneratorCPU = percentOfCore(selfB-selfA, win)
	}
	r.PlaceCount, r.PlaceTimeouts, r.PlaceErrors = uint64(len(lat.d)), lat.timeouts.Load(), lat.errors.Load()
	r.PlaceP50, r.PlaceP99, r.PlaceMax = lat.quantiles()
	return r, nil
}

func ingestStatus(ctx context.Context, nc *nats.Conn) (wire.IngestStatus, error) {
	b, _ := json.Marshal(wire.StatusRequest{V: wire.Version})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, wire.SubjectStatus, b)
	if err != nil {
		return wire.IngestStatus{}, fmt.Errorf("controller status: %w", err)
	}
	var rep wire.StatusReply
	if err := wire.Decode(m.Data, &rep); err != nil {
		return wire.IngestStatus{}, fmt.Errorf("controller status: %w", err)
	}
	if rep.Ingest == nil {
		return wire.IngestStatus{}, errors.New("the controller reports no ingest counters (a build older than the load generator?)")
	}
	return *rep.Ingest, nil
}

// publishLoop sends each node's reports once per interval at the node's
// phase, so the fleet's reports spread over the interval as real agents'
// do. It wakes every few milliseconds and sends whatever has come due.
func publishLoop(ctx context.Context, nc *nats.Conn, nodes []*simNode, interval time.Duration, published, pubErrors *atomic.Uint64) {
	if len(nodes) == 0 {
		return
	}
	sort.Slice(nodes, func(a, b int) bool { return nodes[a].phase < nodes[b].phase })
	const wake = 5 * time.Millisecond
	start := time.Now()
	next := 0
	cycle := start
	t := time.NewTicker(wake)
	defer t.Stop()
	for {
		now := time.Now()
		for next < len(nodes) && !cycle.Add(nodes[next].phase).After(now) {
			n := nodes[next]
			n.tick(now, interval)
			send(nc, &n.node, published, pubErrors)
			for _, j := range n.jobs {
				send(nc, &j.msg, published, pubErrors)
			}
			next++
			if next == len(nodes) {
				next, cycle = 0, cycle.Add(interval)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func send(nc *nats.Conn, m *message, published, pubErrors *atomic.Uint64) {
	if err := nc.Publish(m.subject, m.data); err != nil {
		pubErrors.Add(1)
		return
	}
	published.Add(1)
}

// placeRequests are the bodies sent in turn: the shapes the plugin sends
// most (one GPU, a full node, a typed request, with and without hints).
var placeRequests = func() [][]byte {
	var out [][]byte
	for _, r := range []wire.PlaceRequest{
		{V: wire.Version, UID: 1000, Account: "ml", Partition: "gpu", Name: "train", GPU: wire.GPUAsk{PerNode: 1}},
		{V: wire.Version, UID: 1001, Account: "ml", Partition: "gpu", Name: "big", GPU: wire.GPUAsk{PerNode: 8},
			Hints: wire.Hints{Steps: 360000, Throughput: map[string]float64{"v100": 10}}},
		{V: wire.Version, UID: 1002, Account: "cv", GPU: wire.GPUAsk{PerNode: 2, Type: "a100"}, TimeLimitMin: 600},
		{V: wire.Version, UID: 1003, Account: "cv", GPU: wire.GPUAsk{PerJob: 4, Nodes: 1},
			Hints: wire.Hints{Steps: 50000, Throughput: map[string]float64{"k80": 2, "h100": 30}}},
	} {
		b, _ := json.Marshal(r)
		out = append(out, b)
	}
	return out
}()

// placeLoop sends placement requests at a steady rate, whether or not
// earlier ones have been answered (the plugin does not wait for others).
func placeLoop(ctx context.Context, nc *nats.Conn, rate float64, timeout time.Duration, lat *latencies) {
	period := time.Duration(float64(time.Second) / rate)
	t := time.NewTicker(period)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		body := placeRequests[i%len(placeRequests)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			m, err := nc.Request(wire.SubjectPlace, body, timeout)
			d := time.Since(start)
			switch {
			case errors.Is(err, nats.ErrTimeout):
				lat.timeout()
			case err != nil:
				lat.error()
			case len(m.Data) == 0:
				lat.error()
			default:
				lat.add(d)
			}
		}()
	}
}

// latencies records placement round trips inside the window.
type latencies struct {
	on               atomic.Bool
	mu               sync.Mutex
	d                []time.Duration
	timeouts, errors atomic.Uint64
}

func (l *latencies) start() { l.on.Store(true) }
func (l *latencies) stop()  { l.on.Store(false) }
func (l *latencies) add(d time.Duration) {
	if !l.on.Load() {
		return
	}
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}
func (l *latencies) timeout() {
	if l.on.Load() {
		l.timeouts.Add(1)
	}
}
func (l *latencies) error() {
	if l.on.Load() {
		l.errors.Add(1)
	}
}

func (l *latencies) quantiles() (p50, p99, maxd time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	sort.Slice(l.d, func(a, b int) bool { return l.d[a] < l.d[b] })
	q := func(p float64) time.Duration {
		i := int(p*float64(len(l.d))+0.5) - 1
		return l.d[min(max(i, 0), len(l.d)-1)]
	}
	return q(0.50), q(0.99), l.d[len(l.d)-1]
}

// clockTicks is USER_HZ, 100 on every Linux Rota runs on.
const clockTicks = 100

// cpuTicks is utime+stime of pid from /proc/<pid>/stat.
func cpuTicks(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which may hold spaces and ends at
	// the last ')'; utime and stime are fields 14 and 15 of the line.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unreadable stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unreadable stat times")
	}
	return u + st, nil
}

func percentOfCore(ticks uint64, win time.Duration) float64 {
	return float64(ticks) / clockTicks / win.Seconds() * 100
}

// memory is VmRSS and VmHWM of pid, in bytes.
func memory(pid int) (rss, peak uint64) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			peak = n << 10
		}
	}
	return rss, peak
}

// Print writes the report; its last line is the one scripts read.
func (r *Result) Print(w io.Writer) {
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Fprintf(w, "fleet       %d nodes x %d GPUs = %d GPUs, %d jobs per node, window %.1f s\n",
		r.Nodes, r.GPUs/max(r.Nodes, 1), r.GPUs, r.JobsPerNode, r.Window.Seconds())
	fmt.Fprintf(w, "offered     %.1f msgs/s (%d published in all, %d publish errors)\n", r.OfferedPerSec, r.Published, r.PublishErrors)
	fmt.Fprintf(w, "ingested    %.1f msgs/s; controller knows %d nodes, %d jobs; %d pending at the end\n",
		r.IngestedPerSec, r.ControllerNodes, r.ControllerJobs, r.PendingAtEnd)
	fmt.Fprintf(w, "dropped     %d (malformed %d, invalid %d, slow consumer %d, never received %d)\n",
		r.Dropped(), r.Malformed, r.Invalid, r.SlowConsumer, r.NeverReceived)
	switch {
	case r.ControllerPID > 0 && r.InProcess:
		fmt.Fprintf(w, "process     (controller and generator together, pid %d) CPU %.1f%% of a core, RSS %.0f MiB, peak %.0f MiB\n",
			r.ControllerPID, r.ControllerCPU, mib(r.ControllerRSS), mib(r.ControllerPeakRSS))
	case r.ControllerPID > 0:
		fmt.Fprintf(w, "controller  pid %d: CPU %.1f%% of a core, RSS %.0f MiB, peak %.0f MiB; generator CPU %.1f%%\n",
			r.ControllerPID, r.ControllerCPU, mib(r.ControllerRSS), mib(r.ControllerPeakRSS), r.GeneratorCPU)
	default:
		fmt.Fprintf(w, "controller  CPU and memory not measured (give --controller-pid)\n")
	}
	fmt.Fprintf(w, "placement   %d answered: p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d timed out, %d failed\n",
		r.PlaceCount, ms(r.PlaceP50), ms(r.PlaceP99), ms(r.PlaceMax), r.PlaceTimeouts, r.PlaceErrors)
	fmt.Fprintf(w, "ingest_msgs_per_s=%.1f placement_p99_ms=%.2f dropped=%d\n", r.IngestedPerSec, ms(r.PlaceP99), r.Dropped())
}

// StartController runs a controller in this process on a random port,
// reading the simulated fleet as its Slurm cluster, with its state in
// stateDir. It returns the NATS URL and a function that stops it.
func StartController(ctx context.Context, fleet FleetConfig, stateDir string, log zerolog.Logger) (string, func() error, error) {
	cfg := app.DefaultConfig()
	cfg.StateDir = stateDir
	cfg.Listen = "127.0.0.1:-1"
	cfg.Placement.Speed = Speeds()
	// The simulated fleet changes no jobs: placement at submission only.
	cfg.RoundsOff = true
	ctx, cancel := context.WithCancel(ctx)
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{Config: cfg, Log: log, Slurm: NewFakeSlurm(fleet), Ready: func(u string) { urlc <- u }})
	}()
	select {
	case u := <-urlc:
		return u, func() error { cancel(); return <-done }, nil
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("controller stopped at once")
		}
		return "", nil, err
	case <-time.After(30 * time.Second):
		cancel()
		return "", nil, errors.New("controller did not start in 30 s")
	}
}
