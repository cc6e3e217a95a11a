//go:build realgpu

package agent

// The agent on a real GPU (test/realgpu/run builds and runs this on a GPU
// machine; it is not part of make test, which has none): NVML through
// go-nvml, a real training-like process (test/realgpu/workload.py) mapped
// to a Slurm job by a fixture /proc cgroup file, its progress file, NATS
// reports, and a checkpoint command that signals that process.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"context"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/agent/gpu/nvmlgpu"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

const realJob = 4242

func TestAgentOnRealGPU(t *testing.T) {
	pid, err := strconv.Atoi(os.Getenv("ROTA_REALGPU_PID"))
	if err != nil {
		t.Fatal("ROTA_REALGPU_PID: the workload's pid")
	}
	progDir, out := os.Getenv("ROTA_REALGPU_PROGRESS_DIR"), os.Getenv("ROTA_REALGPU_OUT")
	save := func(name string, v any) {
		b, _ := json.MarshalIndent(v, "", "  ")
		if out != "" {
			os.WriteFile(filepath.Join(out, name), b, 0o644)
		}
		t.Logf("%s:\n%s", name, b)
	}

	b, err := nvmlgpu.Open()
	if err != nil {
		t.Fatalf("NVML: %v", err)
	}
	samples, err := b.Sample(context.Background())
	if err != nil || len(samples) == 0 {
		t.Fatalf("NVML sample: %d GPUs, %v", len(samples), err)
	}
	save("nvml-sample.json", samples)

	// The workload's process is job 4242's, as slurmstepd's cgroup says.
	procRoot := t.TempDir()
	d := filepath.Join(procRoot, strconv.Itoa(pid))
	os.MkdirAll(d, 0o755)
	os.WriteFile(filepath.Join(d, "cgroup"), []byte("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"), 0o644)

	srv := natstest.Start(t)
	o := Defaults()
	o.Node, o.GPUType, o.NATS, o.Interval, o.MetricsAddr = "gpunode", "h200", srv.URL(), time.Second, ""
	o.ProgressDir, o.ProcRoot = progDir, procRoot
	a, err := New(o, Deps{Log: zerolog.New(os.Stderr).Level(zerolog.InfoLevel), GPU: b})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reports := make(chan *nats.Msg, 64)
	results := make(chan *nats.Msg, 4)
	nc.ChanSubscribe(wire.SubjectAgentReports, reports)
	nc.ChanSubscribe(wire.SubjectAgentCheckpointResults, results)
	nc.Flush()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- a.Run(ctx) }()
	defer func() { cancel(); <-stopped }()

	var last wire.NodeReport
	var job wire.JobReport
	eventually.True(t, 30*time.Second, "a report with the workload's GPU memory and steps/s", func() bool {
		select {
		case m := <-reports:
			if err := wire.Decode(m.Data, &last); err != nil {
				t.Fatalf("decode: %v", err)
			}
			for _, j := range last.Jobs {
				if j.JobID == realJob && j.GPUMemoryBytes > 0 && j.Progress != nil && j.Progress.StepsPerSec > 0 {
					job = j
					return true
				}
			}
		case <-time.After(100 * time.Millisecond):
		}
		return false
	})
	save("node-report.json", last)
	if last.Backend != "nvml" || len(last.GPUs) == 0 || len(job.GPUs) == 0 {
		t.Errorf("report: backend %q, %d GPUs, job on GPUs %v", last.Backend, len(last.GPUs), job.GPUs)
	}

	// Checkpoint job 4242: the workload saves and records ckpt=<step>.
	req, _ := json.Marshal(wire.CheckpointRequest{V: wire.Version, JobID: realJob, GraceSeconds: 20, ID: "real-1"})
	msg, err := nc.Request(wire.SubjectAgentCheckpoint("gpunode"), req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var rep wire.CheckpointReply
	if err := wire.Decode(msg.Data, &rep); err != nil || !rep.Accepted || rep.Processes != 1 {
		t.Fatalf("checkpoint reply %+v, %v", rep, err)
	}
	select {
	case m := <-results:
		var res wire.CheckpointResult
		if err := wire.Decode(m.Data, &res); err != nil || res.Outcome != wire.CheckpointAcknowledged || res.JobID != realJob {
			t.Errorf("checkpoint result %+v, %v", res, err)
		}
		save("checkpoint-result.json", res)
	case <-time.After(30 * time.Second):
		t.Fatal("no checkpoint result")
	}
}
