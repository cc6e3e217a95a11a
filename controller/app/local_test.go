package app

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/plugin/submit"
	"github.com/rota-hpc/rota/wire"
)

// TestLocalPlacementRecorded runs the whole local path against a real
// controller: the plugin gets the pushed state, places a burst itself
// (spread over the types as the controller would), sends each decision,
// and the controller records it (explain by the annotation's id) and
// counts its GPUs in the state a second plugin then receives.
func TestLocalPlacementRecorded(t *testing.T) {
	for _, sync := range []bool{true, false} {
		name := map[bool]string{true: "natsync", false: "nats.go"}[sync]
		t.Run(name, func(t *testing.T) {
			fs := &fakeSlurm{comments: map[uint32]string{}}
			url, stop := start(t, t.TempDir(), fs)
			defer stop()
			dial := func() *submit.Handler {
				c := submit.DefaultConfig()
				c.NATSURL, c.NATSSync = url, sync
				h, err := submit.Open(c, submit.Hooks{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(h.Close)
				return h
			}
			job := func(i int) *submit.Job {
				return &submit.Job{UID: 1000, Name: "j", ScriptHash: "5c71", TresPerNode: "gres/gpu:1", TimeLimit: submit.NoVal, MinNodes: submit.NoVal, NumTasks: submit.NoVal}
			}
			h := dial()
			// The plugin asks for the state when it connects.
			eventually.True(t, 5*time.Second, "the plugin's first state", func() bool {
				_, o, _ := h.Handle(context.Background(), job(0))
				return o != submit.FailOpen
			})
			// (that probe placed one job too: v100 has 4 x 3 = 12.)
			types := map[string]int{}
			var first submit.Change
			for i := range 5 {
				ch, o, err := h.Handle(context.Background(), job(i))
				if err != nil || o != submit.Rewritten {
					t.Fatalf("job %d: %v %v", i, o, err)
				}
				if i == 0 {
					first = ch
				}
				types[gpuType(ch)]++
			}
			// Counting its own GPUs, the plugin spread the burst: 3 more
			// v100 (free 3, 2, 1 x 3 = 9, 6, 3 against k80's 4), then k80.
			if types["v100"] != 3 || types["k80"] != 2 {
				t.Fatalf("burst spread %v", types)
			}
			id := wire.DecisionIDFromComment(first.AdminComment)
			fs.mu.Lock()
			fs.comments[42] = first.AdminComment
			fs.mu.Unlock()
			var ex wire.ExplainReply
			eventually.True(t, 5*time.Second, "the decision recorded", func() bool {
				ex = wire.ExplainReply{}
				request(t, url, wire.SubjectExplain, wire.ExplainRequest{V: wire.Version, JobID: 42}, &ex)
				return ex.Decision != nil
			})
			d := ex.Decision
			if d.ID != id || d.JobID != 42 || d.Given.GPUType != "v100" || d.Origin == "" || d.Reserve == nil ||
				!strings.Contains(d.Given.Reason, "v100 has the most free GPUs") || d.Numbers["speed.v100"] != 3 {
				t.Fatalf("explain %+v", d)
			}
			// Decisions are recorded as they come, apart from the one
			// explain found first: on a busy host the rest may follow it.
			var st wire.StatusReply
			eventually.True(t, 5*time.Second, "6 decisions recorded", func() bool {
				st = wire.StatusReply{}
				request(t, url, wire.SubjectStatus, wire.StatusRequest{V: wire.Version}, &st)
				return st.Decisions >= 6
			})
			if st.Decisions != 6 {
				t.Fatalf("controller recorded %d decisions, want 6", st.Decisions)
			}
			// A second plugin (slurmctld's backup) starts from the
			// controller's state, which counts the first one's 6 GPUs:
			// v100 0 free, k80 2 free.
			h2 := dial()
			eventually.True(t, 5*time.Second, "the second plugin's state with the first one's GPUs", func() bool {
				ch, o, _ := h2.Handle(context.Background(), job(0))
				return o == submit.Rewritten && gpuType(ch) == "k80"
			})
		})
	}
}

// Decisions a plugin placed itself reach the plugins again in a state
// within the placer's absorbGap, not in a state each: the plugin counts its own
// placements until then, and every state costs slurmctld's process a
// decoding. A paced burst of 40 placements (one per 10 ms, where
// placer's stateMinGap alone would let through one state each) yields a handful
// of states, the last of which counts them all.
func TestAbsorbedDecisionsBatchStates(t *testing.T) {
	fs := &fakeSlurm{comments: map[uint32]string{}}
	url, stop := start(t, t.TempDir(), fs)
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var states, absorbed atomic.Int64
	sub, err := nc.Subscribe(wire.SubjectPlaceState, func(m *nats.Msg) {
		var st wire.PlaceState
		if json.Unmarshal(m.Data, &st) != nil {
			return
		}
		states.Add(1)
		for _, n := range st.Absorbed {
			absorbed.Store(int64(n))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c := submit.DefaultConfig()
	c.NATSURL, c.NATSSync = url, true
	h, err := submit.Open(c, submit.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	job := &submit.Job{UID: 1000, Name: "j", ScriptHash: "5c71", TresPerNode: "gres/gpu:1", TimeLimit: submit.NoVal, MinNodes: submit.NoVal, NumTasks: submit.NoVal}
	eventually.True(t, 5*time.Second, "the plugin's first state", func() bool {
		_, o, _ := h.Handle(context.Background(), job)
		return o != submit.FailOpen
	})
	eventually.True(t, 5*time.Second, "the probe's decision in a state", func() bool { return absorbed.Load() >= 1 })
	base, placed := states.Load(), absorbed.Load()
	for range 40 {
		if _, o, err := h.Handle(context.Background(), job); o == submit.FailOpen {
			t.Fatalf("placement failed open: %v", err)
		}
		placed++
		time.Sleep(10 * time.Millisecond)
	}
	eventually.True(t, 5*time.Second, "a state counting the whole burst", func() bool { return absorbed.Load() == placed })
	// 400 ms of burst and up to absorbGap after it: one or two absorb
	// ticks and at most one periodic state (state_interval 2 s).
	if n := states.Load() - base; n > 5 {
		t.Errorf("%d states for 40 placed decisions, want at most 5", n)
	}
}

// gpuType is the type a Change wrote into the job's gres ("" none).
func gpuType(ch submit.Change) string {
	if ch.TresPerNode == nil {
		return ""
	}
	parts := strings.Split(*ch.TresPerNode, ":")
	if len(parts) != 3 {
		return ""
	}
	return parts[1]
}
