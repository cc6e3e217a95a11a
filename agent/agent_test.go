package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/rota-hpc/rota/agent/gpu/nvmlgpu"
	"github.com/rota-hpc/rota/agent/gpu/nvmlgpu/fakenvml"
	"github.com/rota-hpc/rota/agent/progress"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

// End to end on one fake node: mock NVML GPUs running two jobs' processes
// (real sleeping children placed in jobs by a fixture /proc), progress
// files, an in-process NATS server. Reports arrive with the processes
// mapped to jobs and the jobs' steps/s; a checkpoint command over NATS
// reaches exactly the job's processes.
func TestAgentOverNATS(t *testing.T) {
	srv := natstest.Start(t)
	procRoot, progDir := t.TempDir(), t.TempDir()

	child := func(job uint32) int {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		cg := "0::/user.slice\n"
		if job != 0 {
			cg = fmt.Sprintf("0::/system.slice/slurmstepd.scope/job_%d/step_0/user/task_0\n", job)
		}
		d := filepath.Join(procRoot, strconv.Itoa(cmd.Process.Pid))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "cgroup"), []byte(cg), 0o644)
		return cmd.Process.Pid
	}
	p1, p2, stray := child(101), child(102), child(0)

	m := fakenvml.New(2)
	m.GPUs[0].SetLoad(90, map[uint32][2]uint64{uint32(p1): {8 << 30, 85}})
	m.GPUs[1].SetLoad(40, map[uint32][2]uint64{uint32(p2): {2 << 30, 40}, uint32(stray): {1 << 20, 1}})
	b, err := nvmlgpu.New(m)
	if err != nil {
		t.Fatal(err)
	}
	writeProgress := func(job uint32, step int, at time.Time) {
		p := progress.Path(progDir, job)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p+".tmp", []byte(fmt.Sprintf("step=%d ckpt=0 time=%d.%09d\n", step, at.Unix(), at.Nanosecond())), 0o644)
		os.Rename(p+".tmp", p)
	}
	start := time.Now()
	writeProgress(101, 0, start.Add(-10*time.Second))

	o := Defaults()
	o.Node, o.GPUType, o.NATS, o.Interval, o.MetricsAddr = "gpu01.test", "a100", srv.URL(), 100*time.Millisecond, ""
	o.ProgressDir, o.ProcRoot = progDir, procRoot
	a, err := New(o, Deps{Log: zerolog.Nop(), GPU: b})
	if err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reports := make(chan *nats.Msg, 256)
	jobReports := make(chan *nats.Msg, 256)
	results := make(chan *nats.Msg, 4)
	nc.ChanSubscribe(wire.SubjectAgentReports, reports)
	nc.ChanSubscribe(wire.SubjectAgentJob("gpu01.test", 101), jobReports)
	nc.ChanSubscribe(wire.SubjectAgentCheckpointResults, results)
	nc.Flush()

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// After a first reading (a report that has job 101), the job
	// advances 300 steps in 10 s: 30 steps/s.
	eventually.True(t, 10*time.Second, "a first report with job 101", func() bool {
		select {
		case m := <-reports:
			var r wire.NodeReport
			if err := wire.Decode(m.Data, &r); err != nil {
				t.Fatalf("decode: %v", err)
			}
			for _, j := range r.Jobs {
				if j.JobID == 101 {
					return true
				}
			}
		default:
		}
		return false
	})
	writeProgress(101, 300, start)

	var last wire.NodeReport
	eventually.True(t, 10*time.Second, "a report with job 101's rate", func() bool {
		select {
		case m := <-reports:
			if m.Subject != "rota.v1.agent.gpu01_test.report" {
				t.Fatalf("report on subject %q", m.Subject)
			}
			if err := wire.Decode(m.Data, &last); err != nil {
				t.Fatalf("decode: %v", err)
			}
			for _, j := range last.Jobs {
				if j.JobID == 101 && j.Progress != nil && j.Progress.StepsPerSec > 0 {
					return true
				}
			}
		default:
		}
		return false
	})
	if len(last.GPUs) != 2 || last.Backend != "nvml" || last.GPUType != "a100" {
		t.Errorf("report = %+v", last)
	}
	jobs := map[uint32]wire.JobReport{}
	for _, j := range last.Jobs {
		jobs[j.JobID] = j
	}
	if j := jobs[101]; j.GPUMemoryBytes != 8<<30 || len(j.GPUs) != 1 || j.GPUs[0] != 0 || j.Steps[0] != "0" || *j.SMUtilPercent != 85 || j.Progress.StepsPerSec != 30 {
		t.Errorf("job 101 = %+v progress %+v", j, j.Progress)
	}
	if j := jobs[102]; j.GPUMemoryBytes != 2<<30 || j.GPUs[0] != 1 || j.Progress != nil {
		t.Errorf("job 102 = %+v", j)
	}
	if len(last.Unmapped) != 1 || last.Unmapped[0].PID != uint32(stray) {
		t.Errorf("unmapped = %+v", last.Unmapped)
	}
	select {
	case m := <-jobReports:
		var j wire.JobReport
		if err := wire.Decode(m.Data, &j); err != nil || j.JobID != 101 {
			t.Errorf("job report %+v, %v", j, err)
		}
	case <-time.After(5 * time.Second):
		t.Error("no per-job report")
	}

	// Checkpoint job 102 over NATS: sleep dies of SIGUSR1 (default action).
	req, _ := json.Marshal(wire.CheckpointRequest{V: 1, JobID: 102, GraceSeconds: 5, ID: "c1"})
	msg, err := nc.Request(wire.SubjectAgentCheckpoint("gpu01.test"), req, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var rep wire.CheckpointReply
	if err := wire.Decode(msg.Data, &rep); err != nil || !rep.Accepted || rep.Processes != 1 || rep.Signal != "SIGUSR1" || rep.ID != "c1" {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	select {
	case m := <-results:
		var res wire.CheckpointResult
		if err := wire.Decode(m.Data, &res); err != nil || res.Outcome != wire.CheckpointExited || res.JobID != 102 || res.Node != "gpu01.test" {
			t.Errorf("result %+v, %v", res, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no checkpoint result")
	}
	for _, pid := range []int{p1, stray} {
		if err := syscallKill0(pid); err != nil {
			t.Errorf("process %d outside job 102 is gone: %v", pid, err)
		}
	}

	// Bad commands are answered, not crashed on.
	for _, body := range []string{`{"v":2,"job_id":1}`, `garbage`, `{"v":1,"job_id":0,"grace_s":1}`, `{"v":1,"job_id":999,"grace_s":1}`} {
		msg, err := nc.Request(wire.SubjectAgentCheckpoint("gpu01.test"), []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var rep wire.CheckpointReply
		json.Unmarshal(msg.Data, &rep)
		if rep.Accepted || rep.Error == "" {
			t.Errorf("%s: reply %+v", body, rep)
		}
	}
}

// TestJobOnMIGSliceReportsSliceType: a job whose processes run on a MIG
// device is reported on the slice's Slurm type (the node's gpu_type and the
// device's profile: a100_3g.20gb), so its measured speed is the slice's;
// a job on a whole GPU of the same node keeps the node's type.
func TestJobOnMIGSliceReportsSliceType(t *testing.T) {
	procRoot := t.TempDir()
	pids := map[uint32]uint32{}
	for _, job := range []uint32{201, 202} {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		d := filepath.Join(procRoot, strconv.Itoa(cmd.Process.Pid))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "cgroup"), []byte(fmt.Sprintf("0::/system.slice/slurmstepd.scope/job_%d/step_0/user/task_0\n", job)), 0o644)
		pids[job] = uint32(cmd.Process.Pid)
	}
	m := fakenvml.New(2)
	d := m.GPUs[0].Device
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	slice := fakenvml.MIGDevice("MIG-aaa", "3g.20gb", 1, 0, 20<<30, 5<<30, []nvml.ProcessInfo{{Pid: pids[201], UsedGpuMemory: 5 << 30, GpuInstanceId: 1}})
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 0 {
			return slice, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	m.GPUs[1].SetLoad(40, map[uint32][2]uint64{pids[202]: {2 << 30, 40}})
	b, err := nvmlgpu.New(m)
	if err != nil {
		t.Fatal(err)
	}
	o := Defaults()
	o.Node, o.GPUType, o.Interval, o.MetricsAddr = "gpu02.test", "a100", 100*time.Millisecond, ""
	o.ProgressDir, o.ProcRoot = t.TempDir(), procRoot
	a, err := New(o, Deps{Log: zerolog.Nop(), GPU: b})
	if err != nil {
		t.Fatal(err)
	}
	r := a.Sample(context.Background(), time.Now())
	got := map[uint32]string{}
	for _, j := range r.Jobs {
		got[j.JobID] = j.GPUType
	}
	if got[201] != "a100_3g.20gb" || got[202] != "a100" || r.GPUType != "a100" {
		t.Fatalf("job types %v (node %s), want 201 on a100_3g.20gb and 202 on a100", got, r.GPUType)
	}
}
