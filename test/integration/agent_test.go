//go:build integration

package integration

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/internal/auth"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/wire"
)

// A job that writes progress (5 steps every 0.5 s, so ~10 steps/s) is seen
// by the sim agent of the node it runs on: its JobReport carries the
// measured steps/s, the node's GPU type and the simulated GPU memory.
func TestAgentSeesJobProgress(t *testing.T) {
	// Only the controller's identity may read agents' reports; the test
	// stands in for the controller's subscription.
	creds, err := auth.ClientOptions(filepath.Join(devDir, "creds", "controller.nk"), "")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natsURL, append(creds, nats.Timeout(5*time.Second))...)
	if err != nil {
		t.Fatalf("connecting to the controller's NATS: %v", err)
	}
	defer nc.Close()
	script := `for i in $(seq 1 120); do ` +
		`echo "step=$((i*5)) time=$(date +%s.%N)" > "$ROTA_PROGRESS_FILE.tmp" && mv "$ROTA_PROGRESS_FILE.tmp" "$ROTA_PROGRESS_FILE"; ` +
		`sleep 0.5; done`
	out, err := run("sbatch", "--parsable", "-o", "/dev/null", "-p", "gpu", "--gres=gpu:1", "-t", "5", "--wrap", script)
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	id64, err := strconv.ParseUint(strings.TrimSpace(strings.Split(out, ";")[0]), 10, 32)
	if err != nil {
		t.Fatalf("sbatch printed %q", out)
	}
	id := uint32(id64)
	t.Cleanup(func() { run("scancel", strconv.FormatUint(id64, 10)) })

	reports := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe("rota.v1.agent.*.job."+strconv.FormatUint(id64, 10), reports)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	var got wire.JobReport
	eventually.True(t, 60*time.Second, "the agent to report the job's steps/s", func() bool {
		for {
			select {
			case m := <-reports:
				var r wire.JobReport
				if err := wire.Decode(m.Data, &r); err != nil {
					t.Fatalf("bad job report: %v", err)
				}
				if r.JobID == id && r.Progress != nil && r.Progress.StepsPerSec > 0 && r.Progress.Step >= 50 {
					got = r
					return true
				}
			default:
				return false
			}
		}
	})
	if rate := got.Progress.StepsPerSec; rate < 5 || rate > 20 {
		t.Errorf("steps/s = %v, want about 10", rate)
	}
	if got.GPUMemoryBytes == 0 || len(got.GPUs) == 0 {
		t.Errorf("no simulated GPU use: %+v", got)
	}
	if !strings.HasPrefix(got.Node, nodePrefix+"-") || !strings.HasSuffix(got.Node, got.GPUType) {
		t.Errorf("node %q type %q", got.Node, got.GPUType)
	}
	t.Logf("job %d on %s (%s): step %d, %.2f steps/s, GPU memory %d MiB", id, got.Node, got.GPUType, got.Progress.Step, got.Progress.StepsPerSec, got.GPUMemoryBytes>>20)

	// The controller learned the same: `rota status --jobs` lists the job
	// with its measured steps/s on that GPU type.
	eventually.True(t, 30*time.Second, "the controller's view of the job", func() bool {
		st := status(t)
		for _, j := range st.Jobs {
			if j.JobID == id && j.GPUType == got.GPUType && j.StepsPerSec > 5 && j.StepsPerSec < 20 && j.PeakGPUMemoryBytes > 0 {
				return true
			}
		}
		return false
	})
}

// The dev cluster runs with credentials: a client without one is refused.
func TestNATSRefusesAnonymous(t *testing.T) {
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	if err == nil {
		nc.Close()
		t.Fatal("connected to the controller's NATS without credentials")
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("want an authorization error, got %v", err)
	}
}
