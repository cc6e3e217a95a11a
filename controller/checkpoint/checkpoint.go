// Package checkpoint is how the controller has a running job checkpointed:
// it asks the node agents of the job (agent/checkpoint signals the job's
// processes there) and waits for their outcome. The round loop's
// migrations and the chain manager's segment ends both use it.
package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// ErrNoResult says the command reached an agent, or may have (its answer
// was late), so the job was or may yet be signalled and, unless it keeps
// running, stopped when its grace ends; but not every result came back in
// time: the job must not be counted on to go on running where it was.
var ErrNoResult = errors.New("no checkpoint result")

// DefaultResultSlack is how much longer than the grace and the command's
// timeout the results are awaited: an agent on a loaded node sends its
// result late (seen at 1,200 jobs on 66 nodes of a 2-core host: none
// within grace + 5 s).
const DefaultResultSlack = 15 * time.Second

// Result is how a checkpoint the job survives went (KeepRunner).
type Result struct {
	// Outcome is the worst of the nodes' wire.Checkpoint* outcomes.
	Outcome string
	// Elapsed is the longest signal-to-acknowledgement time of the
	// nodes, as their agents measured it: the checkpoint's cost.
	Elapsed time.Duration
	// Step is the checkpoint step the job reported (the least of its
	// nodes'; 0 when it reported none).
	Step uint64
	// Refused is why an agent would not signal the job (it declares no
	// periodic signal); "" when every agent did.
	Refused string
}

// KeepRunner asks a job's node agents for a checkpoint the job survives:
// its periodic signal, no SIGTERM (wire.CheckpointRequest.KeepRunning).
type KeepRunner interface {
	CheckpointKeep(ctx context.Context, nodes []string, jobID uint32, grace time.Duration) (Result, error)
}

// NATS sends checkpoint commands to node agents over NATS.
type NATS struct {
	NC *nats.Conn
	// Timeout bounds the agent's immediate answer.
	Timeout time.Duration
	// ResultSlack is how long past grace + Timeout the results are
	// awaited (0: DefaultResultSlack).
	ResultSlack time.Duration
	seq         atomic.Uint64
}

// Checkpoint implements Checkpointer: every node of the job gets the
// command; the outcome is "acknowledged" only when all acknowledged (or
// exited), the worst outcome otherwise.
func (c *NATS) Checkpoint(ctx context.Context, nodes []string, jobID uint32, grace time.Duration) (string, error) {
	r, err := c.run(ctx, nodes, jobID, grace, false)
	return r.Outcome, err
}

// CheckpointKeep implements KeepRunner.
func (c *NATS) CheckpointKeep(ctx context.Context, nodes []string, jobID uint32, grace time.Duration) (Result, error) {
	return c.run(ctx, nodes, jobID, grace, true)
}

func (c *NATS) run(ctx context.Context, nodes []string, jobID uint32, grace time.Duration, keep bool) (Result, error) {
	var res Result
	if len(nodes) == 0 {
		return res, fmt.Errorf("job %d has no nodes", jobID)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	kind := "mig-"
	if keep {
		kind = "keep-"
	}
	id := kind + strconv.FormatUint(uint64(jobID), 10) + "-" + strconv.FormatUint(c.seq.Add(1), 10)
	// A node's results subject carries every job's there: with eight
	// jobs of a node migrating at once, a channel subscription's buffer
	// overflowed (the client's "slow consumer") and dropped this job's own
	// result. Each node's handler passes on only this command's result,
	// once (a subscription's handler runs one message at a time).
	results := make(chan wire.CheckpointResult, len(nodes))
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	// unreadable keeps the last result that could not be decoded (an
	// agent of another version), to say why no result came.
	var unreadable atomic.Value
	for _, n := range nodes {
		passed := false
		s, err := c.NC.Subscribe(wire.SubjectAgentCheckpointResult(n), func(m *nats.Msg) {
			var r wire.CheckpointResult
			if err := wire.Decode(m.Data, &r); err != nil {
				unreadable.Store(fmt.Errorf("node %s's agent sent a checkpoint result that cannot be read: %w", n, err))
				return
			}
			if passed || r.ID != id || r.JobID != jobID {
				return // another command's result, or this node's again
			}
			passed = true
			results <- r
		})
		if err != nil {
			return res, fmt.Errorf("subscribing to %s's checkpoint results: %w", n, err)
		}
		subs = append(subs, s)
	}
	req, _ := json.Marshal(wire.CheckpointRequest{V: wire.Version, JobID: jobID, GraceSeconds: grace.Seconds(), ID: id, KeepRunning: keep})
	accepted := 0
	for _, n := range nodes {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		msg, err := c.NC.RequestWithContext(rctx, wire.SubjectAgentCheckpoint(n), req)
		cancel()
		if err != nil {
			if accepted > 0 || mayHaveArrived(err) {
				// The command went out: a busy agent reads it late and
				// signals the job all the same (seen at 1,200 jobs on a
				// 2-core host), and other nodes' agents already did.
				return res, fmt.Errorf("%w: node %s's agent did not answer the checkpoint command, and may still act on it: %v", ErrNoResult, n, err)
			}
			return res, fmt.Errorf("node %s's agent did not answer the checkpoint command: %w", n, err)
		}
		var rep wire.CheckpointReply
		if err := wire.Decode(msg.Data, &rep); err != nil {
			return res, fmt.Errorf("node %s's agent: %w", n, err)
		}
		if !rep.Accepted {
			if keep && accepted == 0 && strings.Contains(rep.Error, "no periodic checkpoint signal") {
				// Nothing was signalled anywhere: the job cannot take a
				// checkpoint it survives (agent/checkpoint's
				// ErrNoPeriodicSignal; the agent is another binary, so its
				// text is what tells).
				res.Refused = rep.Error
				return res, nil
			}
			if rep.Processes == 0 && len(nodes) == 1 {
				res.Outcome = wire.CheckpointNoProcesses
				return res, nil
			}
			if accepted > 0 {
				return res, fmt.Errorf("%w: node %s's agent refused the checkpoint (%s), but %d other node(s) signalled the job", ErrNoResult, n, rep.Error, accepted)
			}
			return res, fmt.Errorf("node %s's agent refused the checkpoint: %s", n, rep.Error)
		}
		accepted++
	}
	worst := wire.CheckpointAcknowledged
	slack := c.ResultSlack
	if slack <= 0 {
		slack = DefaultResultSlack
	}
	wait := grace + timeout + slack
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for got := 0; got < accepted; {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-deadline.C:
			err := fmt.Errorf("%w from %d of %d nodes within %s", ErrNoResult, accepted-got, accepted, wait)
			if u, ok := unreadable.Load().(error); ok {
				err = fmt.Errorf("%w (%v)", err, u)
			}
			return res, err
		case r := <-results:
			got++
			if rank(r.Outcome) > rank(worst) {
				worst = r.Outcome
			}
			res.Elapsed = max(res.Elapsed, time.Duration(r.ElapsedSeconds*float64(time.Second)))
			if r.CkptStep > 0 && (res.Step == 0 || r.CkptStep < res.Step) {
				res.Step = r.CkptStep
			}
		}
	}
	res.Outcome = worst
	return res, nil
}

// mayHaveArrived says whether a request that got no answer may still have
// reached an agent: it was sent and the answer is late, unlike a request
// no agent listens for or one that was never sent.
func mayHaveArrived(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
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
