// Command bench measures rota-agent's cost: the agent sampling 8 mock GPUs
// (go-nvml's mock through the real NVML code) with 16 jobs (2 per GPU,
// mapped through a fixture /proc, each writing progress every second) at
// 1 Hz, publishing to a NATS server. The agent and the NATS server run as
// separate child processes of this one, so the figures are the agent's
// alone: CPU time from /proc/<pid>/stat, RSS and peak RSS from
// /proc/<pid>/status.
//
//	go run ./agent/cmd/rota-agent-bench -duration 60s
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/agent"
	"github.com/rota-hpc/rota/agent/gpu/nvmlgpu"
	"github.com/rota-hpc/rota/agent/gpu/nvmlgpu/fakenvml"
	"github.com/rota-hpc/rota/agent/progress"
	"github.com/rota-hpc/rota/wire"
)

const (
	gpus    = 8
	jobs    = 16
	basePID = 900000
)

func main() {
	role := flag.String("role", "", "internal: nats or agent")
	duration := flag.Duration("duration", 60*time.Second, "how long to measure")
	interval := flag.Duration("interval", time.Second, "agent sampling interval")
	natsURL := flag.String("nats", "", "internal")
	dir := flag.String("dir", "", "internal")
	flag.Parse()
	var err error
	switch *role {
	case "nats":
		err = serveNATS()
	case "agent":
		err = runAgent(*natsURL, *dir, *interval)
	default:
		err = measure(*duration, *interval)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func serveNATS() error {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return fmt.Errorf("nats not ready")
	}
	fmt.Printf("nats://127.0.0.1:%d\n", s.Addr().(*net.TCPAddr).Port)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	s.Shutdown()
	return nil
}

func runAgent(url, dir string, interval time.Duration) error {
	m := fakenvml.New(gpus)
	for g := 0; g < gpus; g++ {
		load := map[uint32][2]uint64{}
		for k := 0; k < jobs/gpus; k++ {
			load[uint32(basePID+g*(jobs/gpus)+k)] = [2]uint64{uint64(4+k) << 30, 40}
		}
		m.GPUs[g].SetLoad(85, load)
	}
	b, err := nvmlgpu.New(m)
	if err != nil {
		return err
	}
	o := agent.Defaults()
	o.Node, o.GPUType, o.NATS, o.Interval = "bench", "a100", url, interval
	o.MetricsAddr, o.ProcRoot, o.ProgressDir = "127.0.0.1:0", filepath.Join(dir, "proc"), filepath.Join(dir, "progress")
	a, err := agent.New(o, agent.Deps{Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel), GPU: b})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return a.Run(ctx)
}

func child(args ...string) (*exec.Cmd, *bufio.Reader, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	return cmd, bufio.NewReader(out), cmd.Start()
}

// cpuSeconds is utime+stime of pid.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil // USER_HZ is 100 on Linux
}

func statusKB(pid int, key string) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key+":") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return 0
}

func measure(duration, interval time.Duration) error {
	dir, err := os.MkdirTemp("", "rota-agent-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for j := 0; j < jobs; j++ {
		d := filepath.Join(dir, "proc", strconv.Itoa(basePID+j))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "cgroup"), []byte(fmt.Sprintf("0::/system.slice/slurmstepd.scope/job_%d/step_0/user/task_0\n", 1000+j)), 0o644)
		os.MkdirAll(filepath.Dir(progress.Path(filepath.Join(dir, "progress"), uint32(1000+j))), 0o755)
	}
	ns, nsOut, err := child("-role", "nats")
	if err != nil {
		return err
	}
	defer func() { ns.Process.Signal(syscall.SIGTERM); ns.Wait() }()
	url, err := nsOut.ReadString('\n')
	if err != nil {
		return fmt.Errorf("nats child: %w", err)
	}
	url = strings.TrimSpace(url)

	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	var reports, jobReports atomic.Int64
	var lastJobs atomic.Int64
	nc.Subscribe(wire.SubjectAgentReports, func(m *nats.Msg) {
		var r wire.NodeReport
		if wire.Decode(m.Data, &r) == nil {
			reports.Add(1)
			lastJobs.Store(int64(len(r.Jobs)))
		}
	})
	nc.Subscribe(wire.SubjectAgentJobs, func(*nats.Msg) { jobReports.Add(1) })
	nc.Flush()

	ag, _, err := child("-role", "agent", "-nats", url, "-dir", dir, "-interval", interval.String())
	if err != nil {
		return err
	}
	defer func() { ag.Process.Signal(syscall.SIGTERM); ag.Wait() }()

	// The jobs: each advances ~10 steps/s and rewrites its file every second.
	write := func(step int) {
		now := time.Now()
		for j := 0; j < jobs; j++ {
			p := progress.Path(filepath.Join(dir, "progress"), uint32(1000+j))
			os.WriteFile(p+".tmp", []byte(fmt.Sprintf("step=%d time=%d.%09d\n", step, now.Unix(), now.Nanosecond())), 0o644)
			os.Rename(p+".tmp", p)
		}
	}
	write(0)
	for reports.Load() == 0 { // wait for the agent to be up
		time.Sleep(50 * time.Millisecond)
	}
	cpu0, _ := cpuSeconds(ag.Process.Pid)
	r0 := reports.Load()
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	step := 0
	maxRSS := 0
	for time.Since(start) < duration {
		<-tick.C
		step += 10
		write(step)
		if r := statusKB(ag.Process.Pid, "VmRSS"); r > maxRSS {
			maxRSS = r
		}
	}
	elapsed := time.Since(start).Seconds()
	cpu1, err := cpuSeconds(ag.Process.Pid)
	if err != nil {
		return err
	}
	rss, hwm := statusKB(ag.Process.Pid, "VmRSS"), statusKB(ag.Process.Pid, "VmHWM")
	fmt.Printf("rota-agent: %d mock GPUs, %d jobs, interval %v, measured %.1f s\n", gpus, jobs, interval, elapsed)
	fmt.Printf("reports received: %d node (%d jobs in the last), %d per-job\n", reports.Load()-r0, lastJobs.Load(), jobReports.Load())
	fmt.Printf("CPU: %.3f s = %.2f %% of one core\n", cpu1-cpu0, (cpu1-cpu0)/elapsed*100)
	fmt.Printf("RSS: %.1f MB now, %.1f MB max seen, %.1f MB peak (VmHWM)\n", float64(rss)/1024, float64(maxRSS)/1024, float64(hwm)/1024)
	return nil
}
