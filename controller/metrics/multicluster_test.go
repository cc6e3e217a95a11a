package metrics

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/multicluster"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/natstest"
	"github.com/rota-hpc/rota/wire"
)

// noSlurm is an empty cluster.
type noSlurm struct{}

func (noSlurm) Jobs(context.Context) ([]slurm.Job, error) { return nil, nil }
func (noSlurm) ShowJob(context.Context, uint32) (slurm.JobSpec, bool, error) {
	return slurm.JobSpec{}, false, nil
}
func (noSlurm) BatchScript(context.Context, uint32) ([]byte, error)         { return nil, nil }
func (noSlurm) Submit(context.Context, slurm.Submission) (uint32, error)    { return 0, nil }
func (noSlurm) Cancel(context.Context, uint32) error                        { return nil }
func (noSlurm) Hold(context.Context, uint32) error                          { return nil }
func (noSlurm) Unhold(context.Context, uint32) error                        { return nil }
func (noSlurm) FindByComment(context.Context, string) (uint32, bool, error) { return 0, false, nil }
func (noSlurm) Signal(context.Context, uint32, string) error                { return nil }

type noLocal struct{}

func (noLocal) Snapshot() *cluster.Snapshot      { return nil }
func (noLocal) Decision(uint32) *wire.Decision   { return nil }
func (noLocal) StepsLeft(uint32) (float64, bool) { return 0, false }

// The link to a peer, configured and once probed, per peer; the
// transfers' counters from 0; nothing on a standby controller.
func TestMultiClusterCollector(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).URL()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	mc, err := nats.Connect(url, nats.CustomInboxPrefix(wire.SubjectMCReplyPrefix("a")))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	cfg := multicluster.DefaultConfig()
	cfg.Name, cfg.Tick, cfg.ProbeInterval = "a", 50*time.Millisecond, time.Hour
	cfg.Links = []xcluster.Link{{A: "a", B: "b", Bandwidth: 1e8, Latency: 0.02}}
	m, err := multicluster.New(cfg, zerolog.Nop(), noSlurm{}, noLocal{}, nc, mc, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Peer b: answers probes as a 100 MB/s link would, publishes its view.
	if _, err := nc.Subscribe(wire.SubjectMCProbe("b"), func(msg *nats.Msg) {
		time.Sleep(time.Duration(len(msg.Data)) * 10 * time.Nanosecond)
		_ = msg.Respond([]byte("ok"))
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	eventually.True(t, 10*time.Second, "b probed", func() bool {
		v, _ := json.Marshal(wire.MCView{V: wire.Version, Cluster: "b", At: time.Now().UTC().Format(time.RFC3339Nano)})
		_ = nc.Publish(wire.SubjectMCView("b"), v)
		ls := m.Links()
		return len(ls) == 1 && ls[0].BandwidthAgeSeconds >= 0
	})
	for _, c := range []struct {
		name string
		m    *multicluster.Manager
		want map[string]int // series per family
	}{
		{"leading", m, map[string]int{
			"rota_controller_mc_link_configured_bandwidth_bytes_per_second": 1,
			"rota_controller_mc_link_bandwidth_bytes_per_second":            1,
			"rota_controller_mc_link_measured_age_seconds":                  1,
			"rota_controller_mc_link_latency_seconds":                       1,
			"rota_controller_mc_transfers_total":                            1,
			"rota_controller_mc_transfer_bytes_total":                       1,
		}},
		{"standby", nil, map[string]int{}},
	} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(MultiCluster{Manager: func() *multicluster.Manager { return c.m }})
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, f := range fams {
			got[f.GetName()] = len(f.GetMetric())
			if f.GetName() == "rota_controller_mc_link_bandwidth_bytes_per_second" && f.GetMetric()[0].GetGauge().GetValue() <= 0 {
				t.Errorf("%s: measured bandwidth %v", c.name, f.GetMetric()[0])
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: families %v, want %v", c.name, got, c.want)
		}
		for n, k := range c.want {
			if got[n] != k {
				t.Errorf("%s: %s has %d series, want %d", c.name, n, got[n], k)
			}
		}
	}
}
