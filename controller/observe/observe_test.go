package observe

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

func u64(v uint64) *uint64 { return &v }
func u32(v uint32) *uint32 { return &v }

func nodeReport(node string, seq uint64) wire.NodeReport {
	return wire.NodeReport{V: wire.Version, Node: node, GPUType: "v100", Backend: "sim", At: time.Now().UTC(), Seq: seq,
		GPUs: []wire.GPUSample{
			{Index: 0, UUID: "GPU-a", MemoryTotalBytes: u64(32 << 30), MemoryUsedBytes: u64(20 << 30), UtilGPUPercent: u32(90)},
			{Index: 1, UUID: "GPU-b"},
		},
		Jobs: []wire.JobReport{{V: wire.Version, Node: node, JobID: 7}}}
}

func jobReport(node, typ string, job uint32, rate float64, mem uint64, gpus ...int) wire.JobReport {
	return wire.JobReport{V: wire.Version, Node: node, GPUType: typ, At: time.Now().UTC(), JobID: job, GPUs: gpus,
		GPUMemoryBytes: mem, Progress: &wire.JobProgress{Step: 100, Total: 1000, StepsPerSec: rate, AgeSeconds: 1}}
}

func publish(t *testing.T, nc *nats.Conn, subj string, v any) {
	t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Publish(subj, b); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, cfg Config) (*Observer, *nats.Conn) {
	t.Helper()
	s := natstest.Start(t)
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o := New(cfg, zerolog.Nop())
	if err := o.Start(ctx, nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	pub, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	return o, pub
}

func waitReceived(t *testing.T, o *Observer, n uint64) wire.IngestStatus {
	t.Helper()
	var st wire.IngestStatus
	eventually.True(t, 10*time.Second, "messages received", func() bool { st = o.Status(); return st.Received >= n })
	return st
}

func TestIngestsReports(t *testing.T) {
	o, pub := start(t, Config{})
	publish(t, pub, wire.SubjectAgentReport("gpu01.site"), nodeReport("gpu01.site", 1))
	publish(t, pub, wire.SubjectAgentReport("gpu01.site"), nodeReport("gpu01.site", 4)) // 2 and 3 lost
	publish(t, pub, wire.SubjectAgentJob("gpu01.site", 7), jobReport("gpu01.site", "v100", 7, 10, 40<<30, 0, 1))
	st := waitReceived(t, o, 3)
	if st.Decoded != 3 || st.Nodes != 1 || st.Jobs != 1 || st.LostReports != 2 || st.Malformed+st.Invalid+st.SlowConsumer != 0 {
		t.Fatalf("status %+v", st)
	}
	n, ok := o.Node("gpu01.site")
	if !ok || n.GPUType != "v100" || n.Seq != 4 || len(n.GPUs) != 2 || n.GPUs[0].MemoryUsedBytes != 20<<30 ||
		n.GPUs[0].UtilGPUPercent != 90 || n.GPUs[1].MemoryTotalBytes != 0 || len(n.Jobs) != 1 || n.Jobs[0] != 7 || n.Lost != 2 {
		t.Fatalf("node %+v", n)
	}
	j, ok := o.Job(7)
	if !ok || j.Step != 100 || j.Total != 1000 || j.PeakGPUMemoryBytes != 40<<30 || j.PeakGPUMemoryPerGPU != 20<<30 ||
		len(j.Nodes) != 1 || j.Nodes[0] != "gpu01.site" {
		t.Fatalf("job %+v", j)
	}
	if r, ok := o.StepsPerSec(7, "v100"); !ok || r != 10 {
		t.Fatalf("steps/s %v %v", r, ok)
	}
	if _, ok := o.StepsPerSec(7, "k80"); ok {
		t.Fatal("a rate on a type never reported")
	}
	tp, trunc := o.Throughputs(10)
	if trunc || len(tp) != 1 || tp[0].JobID != 7 || tp[0].StepsPerSec != 10 || tp[0].Nodes != 1 {
		t.Fatalf("throughputs %+v %v", tp, trunc)
	}
}

// A service's readiness is what its node's last report said.
func TestJobReady(t *testing.T) {
	t.Parallel()
	o := New(Config{}, zerolog.Nop())
	feed := func(ready bool) {
		r := wire.JobReport{V: wire.Version, Node: "n1", GPUType: "v100", At: time.Now().UTC(), JobID: 9, Progress: &wire.JobProgress{Ready: ready}}
		b, _ := json.Marshal(r)
		o.HandleJobReport(wire.SubjectAgentJob("n1", 9), b)
	}
	for i, ready := range []bool{true, false, true} {
		feed(ready)
		if j, ok := o.Job(9); !ok || j.Ready != ready || j.Step != 0 {
			t.Fatalf("report %d (ready %v): %+v %v", i, ready, j, ok)
		}
	}
}

func TestDropsBadMessages(t *testing.T) {
	o, pub := start(t, Config{})
	good := nodeReport("n1", 1)
	wrongVersion := nodeReport("n1", 2)
	wrongVersion.V = 2
	badUtil := nodeReport("n1", 3)
	badUtil.GPUs[0].UtilGPUPercent = u32(250)
	noTime := nodeReport("n1", 4)
	noTime.At = time.Time{}
	badRate := jobReport("n1", "v100", 7, -3, 0)
	hugeMem := jobReport("n1", "v100", 7, 1, 1<<62)
	malformed := []any{
		[]byte("not json"),
		[]byte(`{"v":1,"node":"n1"`),
		[]byte(`{"v":1,"node":"n1","problems":["` + strings.Repeat("x", wire.MaxMessageBytes) + `"]}`),
		wrongVersion,
	}
	invalid := []struct {
		subj string
		msg  any
	}{
		{wire.SubjectAgentReport("n2"), good},                             // n1 publishing as n2
		{wire.SubjectAgentReport("n1"), badUtil},                          // util 250%
		{wire.SubjectAgentReport("n1"), noTime},                           // no sample time
		{wire.SubjectAgentJob("n1", 8), jobReport("n1", "v100", 7, 1, 0)}, // job id differs
		{wire.SubjectAgentJob("n1", 7), badRate},
		{wire.SubjectAgentJob("n1", 7), hugeMem},
		{wire.SubjectAgentJob("n1", 0), jobReport("n1", "v100", 0, 1, 0)},
	}
	for _, m := range malformed {
		publish(t, pub, wire.SubjectAgentReport("n1"), m)
	}
	for _, m := range invalid {
		publish(t, pub, m.subj, m.msg)
	}
	publish(t, pub, wire.SubjectAgentReport("n1"), good) // still works after all that
	st := waitReceived(t, o, uint64(len(malformed)+len(invalid)+1))
	if st.Malformed != uint64(len(malformed)) || st.Invalid != uint64(len(invalid)) || st.Decoded != 1 || st.Nodes != 1 || st.Jobs != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestForgetsSilentNodesAndJobs(t *testing.T) {
	o := New(Config{ForgetAfter: time.Minute}, zerolog.Nop())
	now := time.Now()
	o.now = func() time.Time { return now }
	feed := func(node string, job uint32) {
		b, _ := json.Marshal(nodeReport(node, 1))
		o.HandleNodeReport(wire.SubjectAgentReport(node), b)
		b, _ = json.Marshal(jobReport(node, "v100", job, 5, 1<<30, 0))
		o.HandleJobReport(wire.SubjectAgentJob(node, job), b)
	}
	feed("old", 1)
	feed("both", 2)
	now = now.Add(50 * time.Second)
	feed("new", 3)
	feed("both", 2) // job 2 heard from a second node
	feed("new", 2)
	if j, _ := o.Job(2); len(j.Nodes) != 2 {
		t.Fatalf("job 2 nodes %v", j.Nodes)
	}
	now = now.Add(30 * time.Second)
	o.sweep(now) // "old" and job 1 silent for 80 s; the rest for 30 s
	st := o.Status()
	if st.Nodes != 2 || st.Jobs != 2 || st.Forgotten != 2 {
		t.Fatalf("status %+v", st)
	}
	if _, ok := o.Node("old"); ok {
		t.Fatal("silent node kept")
	}
	if _, ok := o.Job(1); ok {
		t.Fatal("silent job kept")
	}
	now = now.Add(2 * time.Minute)
	o.sweep(now)
	if st := o.Status(); st.Nodes != 0 || st.Jobs != 0 || st.Forgotten != 6 {
		t.Fatalf("status %+v", st)
	}
}

func TestTableCaps(t *testing.T) {
	o := New(Config{MaxNodes: 2, MaxJobs: 1}, zerolog.Nop())
	for i, n := range []string{"a", "b", "c"} {
		b, _ := json.Marshal(nodeReport(n, 1))
		o.HandleNodeReport(wire.SubjectAgentReport(n), b)
		b, _ = json.Marshal(jobReport(n, "v100", uint32(i+1), 1, 0))
		o.HandleJobReport(wire.SubjectAgentJob(n, uint32(i+1)), b)
	}
	if st := o.Status(); st.Nodes != 2 || st.Jobs != 1 || st.Invalid != 3 {
		t.Fatalf("status %+v", st)
	}
}

func TestStepsPerSecSmoothing(t *testing.T) {
	tau := 60 * time.Second
	o := New(Config{Smoothing: tau, ProgressMaxAge: time.Minute}, zerolog.Nop())
	now := time.Now()
	o.now = func() time.Time { return now }
	feed := func(node, typ string, rate, age float64) {
		r := jobReport(node, typ, 9, rate, 0)
		r.Progress.AgeSeconds = age
		b, _ := json.Marshal(r)
		o.HandleJobReport(wire.SubjectAgentJob(node, 9), b)
	}
	feed("n1", "v100", 0, 1) // no rate measured yet: no sample
	if _, ok := o.StepsPerSec(9, "v100"); ok {
		t.Fatal("a 0 rate counted")
	}
	feed("n1", "v100", 10, 1)
	now = now.Add(30 * time.Second)
	feed("n1", "v100", 20, 1)
	want := 10 + (1-math.Exp(-0.5))*10
	if r, _ := o.StepsPerSec(9, "v100"); math.Abs(r-want) > 1e-9 {
		t.Fatalf("smoothed %v, want %v", r, want)
	}
	now = now.Add(30 * time.Second)
	feed("n1", "v100", 1000, 120) // stale progress: the agent's rate is old news
	if r, _ := o.StepsPerSec(9, "v100"); math.Abs(r-want) > 1e-9 {
		t.Fatalf("stale sample counted: %v", r)
	}
	// The same job on another type is averaged apart.
	feed("n2", "k80", 3, 1)
	if r, ok := o.StepsPerSec(9, "k80"); !ok || r != 3 {
		t.Fatalf("k80 %v %v", r, ok)
	}
	if j, _ := o.Job(9); len(j.Rates) != 2 || len(j.Nodes) != 2 {
		t.Fatalf("job %+v", j)
	}
}

// The spread of a job's rate is the weighted deviation of what the
// agents reported: none for a steady rate, about the swing for one that
// moves (the margin limits are raised with).
func TestRateSpread(t *testing.T) {
	t.Parallel()
	tau := 60 * time.Second
	a := 1 - math.Exp(-0.5) // weight of a sample 30 s after the last
	for _, c := range []struct {
		name           string
		rates          []float64
		wantLo, wantHi float64
	}{
		{"one sample: no spread yet", []float64{10}, 0, 0},
		{"steady", []float64{10, 10, 10, 10}, 0, 0},
		{"two samples: the weighted deviation", []float64{10, 20}, math.Sqrt(a * (1 - a) * 100), math.Sqrt(a * (1 - a) * 100)},
		{"swinging 8..12 settles near its 2 steps/s", []float64{8, 12, 8, 12, 8, 12, 8, 12, 8, 12, 8, 12}, 1.5, 2.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var r TypeRate
			at := time.Unix(1e9, 0)
			for _, v := range c.rates {
				r.add(v, at, tau)
				at = at.Add(30 * time.Second)
			}
			if s := r.Spread(); s < c.wantLo-1e-9 || s > c.wantHi+1e-9 {
				t.Errorf("spread %v, want %v..%v (mean %v)", s, c.wantLo, c.wantHi, r.StepsPerSec)
			}
		})
	}
}

func TestSlowConsumerDropsCounted(t *testing.T) {
	o, pub := start(t, Config{PendingMsgs: 10})
	// Hold the handler: everything beyond the pending limit is dropped by
	// the client and must show in the counters.
	o.mu.Lock()
	b, _ := json.Marshal(nodeReport("n1", 1))
	for i := 0; i < 200; i++ {
		publish(t, pub, wire.SubjectAgentReport("n1"), b)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "slow-consumer drops", func() bool {
		d, _ := o.subs[0].Dropped() // not Status: it needs the lock held here
		return d > 0
	})
	o.mu.Unlock()
	st := waitReceived(t, o, 200)
	if st.Received != 200 || st.Decoded+st.SlowConsumer != 200 {
		t.Fatalf("status %+v", st)
	}
}

func TestTokenOf(t *testing.T) {
	for _, n := range []string{"gpu01", "gpu01.site", "a*b>c d", "nœud.1"} {
		if !tokenOf(wire.AgentToken(n), n) {
			t.Errorf("%q: own token refused", n)
		}
	}
	if tokenOf("gpu02", "gpu01") || tokenOf("gpu01", "gpu01.site") {
		t.Error("foreign token accepted")
	}
}
