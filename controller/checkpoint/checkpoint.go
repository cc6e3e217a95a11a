// Package checkpoint is how the controller has a running job checkpointed:
// it asks the node agents of the job (agent/checkpoint signals the job's
// processes there) and waits for their outcome. The round loop's
// migrations and the chain manager's segment ends both use it.
package checkpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rota-hpc/rota/wire"
)

// Checkpointer asks a job's node agents to checkpoint it and says how it
// went (wire.Checkpoint* outcomes).
type Checkpointer interface {
	Checkpoint(ctx context.Context, nodes []string, jobID uint32, grace time.Duration) (string, error)
}

// NATS sends checkpoint commands to node agents over NATS.
type NATS struct {
	NC *nats.Conn
	// Timeout bounds the agent's immediate answer.
	Timeout time.Duration
	seq     atomic.Uint64
}

// Checkpoint implements Checkpointer: every node of the job gets the
// command; the outcome is "acknowledged" only when all acknowledged (or
// exited), the worst outcome otherwise.
func (c *NATS) Checkpoint(ctx context.Context, nodes []string, jobID uint32, grace time.Duration) (string, error) {
	if len(nodes) == 0 {
		return "", fmt.Errorf("job %d has no nodes", jobID)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	id := "mig-" + strconv.FormatUint(uint64(jobID), 10) + "-" + strconv.FormatUint(c.seq.Add(1), 10)
	results := make(chan *nats.Msg, len(nodes)*2)
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, n := range nodes {
		s, err := c.NC.ChanSubscribe(wire.SubjectAgentCheckpointResult(n), results)
		if err != nil {
			return "", fmt.Errorf("subscribing to %s's checkpoint results: %w", n, err)
		}
		subs = append(subs, s)
	}
	req, _ := json.Marshal(wire.CheckpointRequest{V: wire.Version, JobID: jobID, GraceSeconds: grace.Seconds(), ID: id})
	accepted := 0
	for _, n := range nodes {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		msg, err := c.NC.RequestWithContext(rctx, wire.SubjectAgentCheckpoint(n), req)
		cancel()
		if err != nil {
			return "", fmt.Errorf("node %s's agent did not answer the checkpoint command: %w", n, err)
		}
		var rep wire.CheckpointReply
		if err := wire.Decode(msg.Data, &rep); err != nil {
			return "", fmt.Errorf("node %s's agent: %w", n, err)
		}
		if !rep.Accepted {
			if rep.Processes == 0 && len(nodes) == 1 {
				return wire.CheckpointNoProcesses, nil
			}
			return "", fmt.Errorf("node %s's agent refused the checkpoint: %s", n, rep.Error)
		}
		accepted++
	}
	worst := wire.CheckpointAcknowledged
	deadline := time.NewTimer(grace + timeout)
	defer deadline.Stop()
	for got := 0; got < accepted; {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-deadline.C:
			return "", fmt.Errorf("no checkpoint result from %d of %d nodes within %s", accepted-got, accepted, grace+timeout)
		case m := <-results:
			var r wire.CheckpointResult
			if err := json.Unmarshal(m.Data, &r); err != nil || r.ID != id || r.JobID != jobID {
				continue // another command's result
			}
			got++
			if rank(r.Outcome) > rank(worst) {
				worst = r.Outcome
			}
		}
	}
	return worst, nil
}

// rank orders outcomes from best to worst.
func rank(outcome string) int {
	switch outcome {
	case wire.CheckpointAcknowledged:
		return 0
	case wire.CheckpointExited:
		return 1
	case wire.CheckpointNoProcesses:
		return 2
	default:
		return 3
	}
}
