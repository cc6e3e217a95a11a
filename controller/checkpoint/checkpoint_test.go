package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"fmt"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
	"strconv"
	"strings"
	"sync"
)

// agent answers checkpoint commands on node's subject as a node agent
// does: the reply at once, then the result (none when refused).
type agent struct {
	node    string
	refuse  string        // reply error; nothing signalled
	mute    bool          // takes the command, never sends the result
	late    time.Duration // answers the command this late
	others  int           // results of other commands sent before this one's
	resultV int           // the result's wire version (0: wire.Version)
	outcome string
	step    uint64
	elapsed float64
}

// connect is a client of the test's NATS server, closed when the test ends.
func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func (a agent) serve(t *testing.T, nc *nats.Conn, seen chan<- wire.CheckpointRequest) {
	t.Helper()
	_, err := nc.Subscribe(wire.SubjectAgentCheckpoint(a.node), func(m *nats.Msg) {
		var req wire.CheckpointRequest
		if err := wire.Decode(m.Data, &req); err != nil {
			t.Error(err)
			return
		}
		seen <- req
		rep := wire.CheckpointReply{V: wire.Version, ID: req.ID, JobID: req.JobID, Accepted: a.refuse == "", Error: a.refuse}
		if a.refuse == "" {
			rep.Processes, rep.Signal = 1, "SIGUSR2"
		}
		b, _ := json.Marshal(rep)
		time.Sleep(a.late)
		m.Respond(b)
		if a.refuse != "" || a.mute {
			return
		}
		for i := 0; i < a.others; i++ {
			o, _ := json.Marshal(wire.CheckpointResult{V: wire.Version, ID: "other-" + strconv.Itoa(i), Node: a.node, JobID: req.JobID + 1000, Outcome: wire.CheckpointAcknowledged})
			nc.Publish(wire.SubjectAgentCheckpointResult(a.node), o)
		}
		v := wire.Version
		if a.resultV != 0 {
			v = a.resultV
		}
		res, _ := json.Marshal(wire.CheckpointResult{V: v, ID: req.ID, Node: a.node, JobID: req.JobID,
			Outcome: a.outcome, CkptStep: a.step, ElapsedSeconds: a.elapsed})
		nc.Publish(wire.SubjectAgentCheckpointResult(a.node), res)
	})
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
}

// CheckpointKeep asks every node for a checkpoint the job survives and
// sums their results up: the worst outcome, the longest time, the least
// step; an agent's refusal for want of a periodic signal is a refusal, not
// an error.
func TestCheckpointKeep(t *testing.T) {
	srv := natstest.Start(t)
	for _, tc := range []struct {
		name    string
		agents  []agent
		want    Result
		wantErr bool
	}{
		{"two nodes acknowledge", []agent{
			{node: "a", outcome: wire.CheckpointAcknowledged, step: 120, elapsed: 1.5},
			{node: "b", outcome: wire.CheckpointAcknowledged, step: 118, elapsed: 2.5}},
			Result{Outcome: wire.CheckpointAcknowledged, Elapsed: 2500 * time.Millisecond, Step: 118}, false},
		{"one times out", []agent{
			{node: "a", outcome: wire.CheckpointAcknowledged, step: 120, elapsed: 1},
			{node: "b", outcome: wire.CheckpointTimedOut, elapsed: 10}},
			Result{Outcome: wire.CheckpointTimedOut, Elapsed: 10 * time.Second, Step: 120}, false},
		{"no periodic signal", []agent{
			{node: "a", refuse: "the job declares no periodic checkpoint signal (ROTA_CHECKPOINT_PERIODIC_SIGNAL in its environment), and its checkpoint signal stops it"}},
			Result{Refused: "the job declares no periodic checkpoint signal (ROTA_CHECKPOINT_PERIODIC_SIGNAL in its environment), and its checkpoint signal stops it"}, false},
		{"another refusal is an error", []agent{{node: "a", refuse: "finding the processes of job 7: permission denied"}, {node: "b"}}, Result{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agentConn := connect(t, srv.URL())
			seen := make(chan wire.CheckpointRequest, 4)
			var nodes []string
			for _, a := range tc.agents {
				a.serve(t, agentConn, seen)
				nodes = append(nodes, a.node)
			}
			nc := connect(t, srv.URL())
			c := &NATS{NC: nc, Timeout: 2 * time.Second}
			got, err := c.CheckpointKeep(context.Background(), nodes, 7, 10*time.Second)
			if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
				t.Fatalf("CheckpointKeep = %+v, %v; want %+v (error %v)", got, err, tc.want, tc.wantErr)
			}
			req := <-seen
			if !req.KeepRunning || req.JobID != 7 || req.GraceSeconds != 10 {
				t.Errorf("request %+v, want keep_running for job 7 with a 10 s grace", req)
			}
		})
	}
}

// TestCheckpointNoResult: an agent that took the command (the job is
// signalled, and stopped when its grace ends) but whose result does not
// come in time gives ErrNoResult, which the round loop takes as "stopped,
// requeue it"; an agent that answers nothing is another error.
func TestCheckpointNoResult(t *testing.T) {
	srv := natstest.Start(t)
	agentConn := connect(t, srv.URL())
	seen := make(chan wire.CheckpointRequest, 16)
	agent{node: "a", mute: true}.serve(t, agentConn, seen)
	nc := connect(t, srv.URL())
	c := &NATS{NC: nc, Timeout: 500 * time.Millisecond, ResultSlack: 100 * time.Millisecond}
	if _, err := c.Checkpoint(context.Background(), []string{"a"}, 7, 200*time.Millisecond); !errors.Is(err, ErrNoResult) {
		t.Fatalf("a mute agent: %v, want ErrNoResult", err)
	}
	if _, err := c.Checkpoint(context.Background(), []string{"nobody"}, 7, 200*time.Millisecond); err == nil || errors.Is(err, ErrNoResult) {
		t.Fatalf("no agent at all: %v, want an error other than ErrNoResult (nothing was signalled)", err)
	}
	// A busy agent that answers after the command's timeout still signals
	// the job: the job may stop, so it is ErrNoResult, not "keeps running".
	agent{node: "slow", late: time.Second, outcome: wire.CheckpointAcknowledged}.serve(t, agentConn, seen)
	if _, err := c.Checkpoint(context.Background(), []string{"slow"}, 7, 200*time.Millisecond); !errors.Is(err, ErrNoResult) {
		t.Fatalf("an agent that answers late: %v, want ErrNoResult (it signals the job all the same)", err)
	}
	// A result of another wire version is not taken for this one's, and
	// the error says why none came.
	agent{node: "other-version", outcome: wire.CheckpointAcknowledged, resultV: wire.Version + 1}.serve(t, agentConn, seen)
	if _, err := c.Checkpoint(context.Background(), []string{"other-version"}, 7, 200*time.Millisecond); !errors.Is(err, ErrNoResult) ||
		!strings.Contains(err.Error(), "cannot be read") {
		t.Fatalf("a result of another version: %v, want ErrNoResult saying it cannot be read", err)
	}
	// One node signalled it, the next refused: the job is signalled.
	agent{node: "ok", outcome: wire.CheckpointAcknowledged}.serve(t, agentConn, seen)
	agent{node: "no", refuse: "no such job here"}.serve(t, agentConn, seen)
	if _, err := c.Checkpoint(context.Background(), []string{"ok", "no"}, 7, 200*time.Millisecond); !errors.Is(err, ErrNoResult) {
		t.Fatalf("signalled on one node, refused on the other: %v, want ErrNoResult", err)
	}
	if _, err := c.Checkpoint(context.Background(), []string{"no", "ok"}, 7, 200*time.Millisecond); err == nil || errors.Is(err, ErrNoResult) {
		t.Fatalf("refused on the first node (nothing signalled): %v, want another error", err)
	}
}

// TestCheckpointResultAmongOthers: a node's results subject carries every
// job's results there; with many jobs of one node checkpointing at once,
// each command still gets its own (a channel subscription of a few
// messages overflowed and dropped it, seen at 1,200 jobs on 66 nodes).
func TestCheckpointResultAmongOthers(t *testing.T) {
	srv := natstest.Start(t)
	agentConn := connect(t, srv.URL())
	seen := make(chan wire.CheckpointRequest, 64)
	agent{node: "busy", others: 500, outcome: wire.CheckpointAcknowledged, step: 3}.serve(t, agentConn, seen)
	nc := connect(t, srv.URL())
	c := &NATS{NC: nc, Timeout: 2 * time.Second, ResultSlack: time.Second}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for j := uint32(1); j <= 8; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o, err := c.Checkpoint(context.Background(), []string{"busy"}, j, 100*time.Millisecond); err != nil || o != wire.CheckpointAcknowledged {
				errs <- fmt.Errorf("job %d: %q, %v", j, o, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
