package app

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

// fakeSlurm stands in at the Slurm boundary: a fixed cluster and the
// admin comments the plugin would have written. It serves those reads
// only (slurm.Unserved the rest), so the tests that run a controller on it
// turn its rounds off (testConfig).
type fakeSlurm struct {
	slurm.Unserved
	mu       sync.Mutex
	comments map[uint32]string
	// commentDir, when set, holds the comments as files named by job id,
	// for a controller in another process.
	commentDir string
}

func (f *fakeSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	return []slurm.Node{
		{Name: "n1", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"v100": 4}, GPUsUsed: map[string]int{"v100": 0}},
		{Name: "n2", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"k80": 4}, GPUsUsed: map[string]int{"k80": 0}},
	}, nil
}

func (f *fakeSlurm) Partitions(context.Context) ([]slurm.Partition, error) {
	return []slurm.Partition{{Name: "gpu", Default: true, MaxTimeMin: 2880}}, nil
}

func (f *fakeSlurm) JobAdminComment(_ context.Context, id uint32) (string, error) {
	if f.commentDir != "" {
		b, err := os.ReadFile(filepath.Join(f.commentDir, strconv.FormatUint(uint64(id), 10)))
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return string(b), err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.comments[id], nil
}

// start runs a controller on stateDir and returns its URL and a stop func.
func start(t *testing.T, stateDir string, fs *fakeSlurm) (string, func()) {
	t.Helper()
	return startWith(t, testConfig(stateDir), fs)
}

func testConfig(stateDir string) Config {
	cfg := DefaultConfig()
	cfg.StateDir = stateDir
	cfg.Listen = "127.0.0.1:-1" // random port
	cfg.Placement.Speed = map[string]float64{"v100": 3, "k80": 1}
	cfg.RoundsOff = true // fakeSlurm changes no jobs
	return cfg
}

// startWith runs a controller with cfg until the returned stop is called.
func startWith(t *testing.T, cfg Config, fs slurm.Backend) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Log: zerolog.Nop(), Slurm: fs, Ready: func(u string) { urlc <- u }})
	}()
	select {
	case u := <-urlc:
		return u, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	case err := <-done:
		t.Fatalf("controller did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("controller did not start in 20 s")
	}
	return "", nil
}

func request(t *testing.T, url, subj string, req, reply any) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := json.Marshal(req)
	m, err := nc.Request(subj, b, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subj, err)
	}
	if err := json.Unmarshal(m.Data, reply); err != nil {
		t.Fatal(err)
	}
}

func TestControllerPlaceExplainStatusAndRestart(t *testing.T) {
	dir := t.TempDir()
	fs := &fakeSlurm{comments: map[uint32]string{}}
	url, stop := start(t, dir, fs)

	var rep wire.PlaceReply
	request(t, url, wire.SubjectPlace, wire.PlaceRequest{V: wire.Version, GPU: wire.GPUAsk{PerNode: 1},
		Hints: wire.Hints{Steps: 6000, Throughput: map[string]float64{"v100": 10}}}, &rep)
	if rep.GPUType != "v100" || rep.TimeLimitMin != 20 || rep.DecisionID == "" || rep.Policy != "interim" {
		t.Fatalf("reply %+v", rep)
	}

	// A malformed request still gets an answer (the plugin keeps the job).
	var bad wire.PlaceReply
	request(t, url, wire.SubjectPlace, map[string]any{"v": 99}, &bad)
	if bad.GPUType != "" || !strings.Contains(bad.Reason, "malformed") {
		t.Fatalf("malformed request reply %+v", bad)
	}

	var st wire.StatusReply
	request(t, url, wire.SubjectStatus, wire.StatusRequest{V: wire.Version}, &st)
	if len(st.Types) != 2 || st.Types[0].Type != "k80" || st.Types[1].Total != 4 || st.Decisions != 1 {
		t.Fatalf("status %+v", st)
	}

	// Slurm assigned job 42 and the plugin annotated it.
	fs.mu.Lock()
	fs.comments[42] = wire.Annotation("any", "v100", "none", "00:20:00", "interim", rep.DecisionID)
	fs.mu.Unlock()
	var ex wire.ExplainReply
	request(t, url, wire.SubjectExplain, wire.ExplainRequest{V: wire.Version, JobID: 42}, &ex)
	if ex.Error != "" || ex.Decision == nil || ex.Decision.ID != rep.DecisionID || ex.Decision.JobID != 42 ||
		!strings.Contains(ex.Decision.Given.Reason, "v100 finishes it soonest") || ex.Decision.Numbers["run_s.v100"] != 600 {
		t.Fatalf("explain %+v", ex)
	}
	var none wire.ExplainReply
	request(t, url, wire.SubjectExplain, wire.ExplainRequest{V: wire.Version, JobID: 7}, &none)
	if !strings.Contains(none.Error, "no Rota annotation") {
		t.Fatalf("explain of an unannotated job: %+v", none)
	}
	stop()

	// A restart on the same state dir still explains job 42, from
	// JetStream, without asking Slurm again.
	fs.mu.Lock()
	fs.comments = map[uint32]string{}
	fs.mu.Unlock()
	url, stop = start(t, dir, fs)
	defer stop()
	ex = wire.ExplainReply{}
	request(t, url, wire.SubjectExplain, wire.ExplainRequest{V: wire.Version, JobID: 42}, &ex)
	if ex.Decision == nil || ex.Decision.ID != rep.DecisionID {
		t.Fatalf("after restart: %+v", ex)
	}
}

func TestLoadConfig(t *testing.T) {
	path := t.TempDir() + "/c.conf"
	writeFile(t, path, "state_dir = /tmp/x\nrefresh = 30s\nspeed.v100 = 3.5\nretype_typed = yes\nwalltime_margin = 2\n")
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.StateDir != "/tmp/x" || c.Refresh != 30*time.Second || c.Placement.Speed["v100"] != 3.5 || !c.Placement.RetypeTyped || c.Placement.WalltimeMargin != 2 {
		t.Fatalf("%+v", c)
	}
	if c.Replicas != 1 || c.LeaseTTL != 5*time.Second || c.AsyncDecisions || c.elected() || c.durableDecisions() {
		t.Fatalf("embedded defaults: %+v", c)
	}
	writeFile(t, path, "nats_url = nats://a:4222,nats://b:4222,nats://c:4222\nreplicas = 3\nlease_ttl = 3s\n")
	if c, err = LoadConfig(path); err != nil {
		t.Fatal(err)
	}
	if c.Replicas != 3 || c.LeaseTTL != 3*time.Second || !c.elected() || !c.durableDecisions() {
		t.Fatalf("cluster config: %+v", c)
	}
	writeFile(t, path, "slurm_backend = restd\nslurmrestd_url = http://h:1\nslurmrestd_jwt_key = /k\nweb_listen = 127.0.0.1:8080\nestimator_walltime = /usr/libexec/rota/wall\n")
	if c, err = LoadConfig(path); err != nil {
		t.Fatal(err)
	}
	if c.Slurm.Backend != "restd" || c.Slurm.RestdURL != "http://h:1" || c.Web.Listen != "127.0.0.1:8080" || c.Estimators.Walltime != "/usr/libexec/rota/wall" {
		t.Fatalf("the parts' own keys: %+v %+v %+v", c.Slurm, c.Web, c.Estimators)
	}
	for _, bad := range []string{"speed.v100 = fast\n", "refresh = 0s\n", "bogus = 1\n", "speed.a:b = 1\n",
		"replicas = 3\n", "nats_url = nats://a:4222\nreplicas = 9\n", "nats_url = nats://a:4222\nlease_ttl = 100ms\n",
		"slurm_backend = rest\n", "slurm_backend = restd\n", "web_auth = token\n"} {
		writeFile(t, path, bad)
		if _, err := LoadConfig(path); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// BenchmarkPlaceRoundTrip is the controller's share of a submission: one
// placement request over loopback NATS, answered by the real controller.
func BenchmarkPlaceRoundTrip(b *testing.B) {
	fs := &fakeSlurm{comments: map[uint32]string{}}
	cfg := DefaultConfig()
	cfg.StateDir = b.TempDir()
	cfg.Listen = "127.0.0.1:-1"
	ctx, cancel := context.WithCancel(context.Background())
	urlc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Log: zerolog.Nop(), Slurm: fs, Ready: func(u string) { urlc <- u }})
	}()
	url := <-urlc
	defer func() { cancel(); <-done }()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	req, _ := json.Marshal(wire.PlaceRequest{V: wire.Version, GPU: wire.GPUAsk{PerNode: 1},
		Hints: wire.Hints{Steps: 6000, Throughput: map[string]float64{"v100": 10}}})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := nc.Request(wire.SubjectPlace, req, time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlaceRoundTripCluster is the same round trip with the
// controller on a 3-node NATS cluster (buckets with 3 replicas): "async"
// answers first and stores after, as the embedded controller does;
// "durable" (the default on a cluster) answers only once JetStream has
// acknowledged the decision from a quorum of replicas. The difference is
// what surviving a killed leader costs each submission.
func BenchmarkPlaceRoundTripCluster(b *testing.B) {
	cl := natstest.StartCluster(b, 3)
	for _, mode := range []struct {
		name  string
		async bool
	}{{"async", true}, {"durable", false}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.NATSURL = cl.URLs()
			cfg.Replicas = 3
			cfg.AsyncDecisions = mode.async
			cfg.RoundsOff = true
			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- Run(ctx, Options{Config: cfg, Log: zerolog.Nop(), Slurm: &fakeSlurm{},
					Ready: func(string) { close(ready) }})
			}()
			select {
			case <-ready:
			case err := <-done:
				b.Fatalf("controller: %v", err)
			}
			defer func() { cancel(); <-done }()
			nc, err := nats.Connect(cl.URLs())
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			req, _ := json.Marshal(wire.PlaceRequest{V: wire.Version, GPU: wire.GPUAsk{PerNode: 1},
				Hints: wire.Hints{Steps: 6000, Throughput: map[string]float64{"v100": 10}}})
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				m, err := nc.Request(wire.SubjectPlace, req, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				var rep wire.PlaceReply
				if err := json.Unmarshal(m.Data, &rep); err != nil || rep.DecisionID == "" {
					b.Fatalf("reply %s: %v", m.Data, err)
				}
			}
			b.StopTimer()
			// The plugin's deadline is about the tail, not the mean.
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
