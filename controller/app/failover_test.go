package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/decisions"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/plugin/submit"
	"github.com/rota-hpc/rota/wire"
)

// Environment of a controller child process (see TestMain).
const (
	envChildNATS     = "ROTA_TEST_CONTROLLER_NATS"
	envChildComments = "ROTA_TEST_CONTROLLER_COMMENTS"
)

// TestMain lets the test binary run as a controller process, so the
// failover test can kill a real controller with SIGKILL: nothing it had
// in memory or in flight survives, exactly as in production.
func TestMain(m *testing.M) {
	if url := os.Getenv(envChildNATS); url != "" {
		os.Exit(runChildController(url, os.Getenv(envChildComments)))
	}
	os.Exit(m.Run())
}

func runChildController(url, comments string) int {
	cfg := DefaultConfig()
	cfg.NATSURL = url
	cfg.Replicas = 3
	cfg.LeaseTTL = time.Second
	cfg.Placement.Speed = map[string]float64{"v100": 3, "k80": 1}
	cfg.RoundsOff = true // fakeSlurm changes no jobs
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := Run(ctx, Options{Config: cfg, Log: log, Slurm: &fakeSlurm{commentDir: comments}}); err != nil {
		log.Error().Err(err).Msg("controller failed")
		return 1
	}
	return 0
}

// syncBuffer is a child's stderr, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type childController struct {
	cmd *exec.Cmd
	log *syncBuffer
}

func spawnController(t *testing.T, url, comments string) *childController {
	t.Helper()
	c := &childController{cmd: exec.Command(os.Args[0], "-test.run=^$"), log: &syncBuffer{}}
	c.cmd.Env = append(os.Environ(), envChildNATS+"="+url, envChildComments+"="+comments)
	c.cmd.Stderr = c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		if t.Failed() {
			t.Logf("controller %d log:\n%s", c.cmd.Process.Pid, c.log.String())
		}
	})
	return c
}

func (c *childController) logged(msg string) bool { return strings.Contains(c.log.String(), msg) }

// Two controller processes on a 3-node NATS cluster (replicas 3), a
// client set up like the plugin: the leader is killed with SIGKILL in
// the middle of a stream of placements, the standby takes over, the
// client finds it by itself, and every decision the client was given is
// in JetStream and explainable; then a NATS node goes and placements
// go on.
func TestFailoverKeepsEveryAcknowledgedDecision(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster and two controller processes")
	}
	cl := natstest.StartCluster(t, 3)
	comments := t.TempDir()

	a := spawnController(t, cl.URLs(), comments)
	eventually.True(t, 30*time.Second, "the first controller to lead", func() bool { return a.logged("acquired the controller lease") })
	b := spawnController(t, cl.URLs(), comments)
	eventually.True(t, 30*time.Second, "the second controller to stand by", func() bool { return b.logged("standing by") })

	asker, err := submit.Dial(submit.Config{NATSURL: cl.URLs(), Deadline: time.Second,
		BreakerFailures: 3, BreakerCooldown: 100 * time.Millisecond}, submit.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Close()
	req := &wire.PlaceRequest{V: wire.Version, GPU: wire.GPUAsk{PerNode: 1}}
	var given []string
	// place runs until n more placements were answered with a decision.
	place := func(n int, what string) {
		t.Helper()
		want := len(given) + n
		eventually.True(t, 60*time.Second, what, func() bool {
			rep, err := asker.Place(context.Background(), nil, req)
			if err != nil || rep.DecisionID == "" {
				time.Sleep(20 * time.Millisecond) // pace the retries while no leader answers
				return false
			}
			given = append(given, rep.DecisionID)
			return len(given) >= want
		})
	}

	place(30, "placements from the first leader")
	// Slurm gave the first job id 42; the plugin annotated it.
	if err := os.WriteFile(filepath.Join(comments, "42"), []byte(wire.Annotation("any", "v100", "none", "none", "interim", given[0])), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	place(30, "placements after the leader was killed")
	if !b.logged("acquired the controller lease") {
		t.Fatal("placements answered after the kill, but the standby never took the lease")
	}

	// The new leader explains a job placed by the dead one.
	nc, err := nats.Connect(cl.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	body, _ := json.Marshal(wire.ExplainRequest{V: wire.Version, JobID: 42})
	m, err := nc.Request(wire.SubjectExplain, body, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ex wire.ExplainReply
	if err := json.Unmarshal(m.Data, &ex); err != nil || ex.Decision == nil || ex.Decision.ID != given[0] || ex.Decision.JobID != 42 {
		t.Fatalf("explain after takeover: %s (%v)", m.Data, err)
	}

	// The status names the new leader.
	body, _ = json.Marshal(wire.StatusRequest{V: wire.Version})
	// With a 1 s lease on a loaded machine the new leader may miss a
	// renewal and stand by for a moment: "no responders" then, retry.
	eventually.True(t, 10*time.Second, "a status answer other than no responders", func() bool {
		m, err = nc.Request(wire.SubjectStatus, body, 5*time.Second)
		return err == nil || !errors.Is(err, nats.ErrNoResponders)
	})
	if err != nil {
		t.Fatal(err)
	}
	var st wire.StatusReply
	if err := json.Unmarshal(m.Data, &st); err != nil || !strings.Contains(st.Leader, fmt.Sprintf(":%d:", b.cmd.Process.Pid)) {
		t.Fatalf("status after takeover names leader %q, want controller pid %d (%v)", st.Leader, b.cmd.Process.Pid, err)
	}

	// Losing one of three NATS nodes loses neither quorum nor service.
	cl.StopNode(0)
	place(30, "placements with a NATS node down")

	// A fresh client: nc may have been on the stopped node.
	nc2, err := nats.Connect(cl.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	js, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(context.Background(), decisions.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, id := range given {
		if _, err := kv.Get(context.Background(), "d."+id); err != nil {
			missing = append(missing, id+": "+err.Error())
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged decisions are not in JetStream: %v", len(missing), len(given), missing)
	}
}
