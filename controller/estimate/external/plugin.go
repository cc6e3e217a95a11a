// Package external runs an admin's estimator as a separate executable: a
// hashicorp/go-plugin plugin speaking gRPC (estimatorpb/estimator.proto).
// The host side (NewThroughput, NewWalltime, NewQueueWait) launches it,
// gives every call a deadline, and answers with the built-in estimator
// whenever the plugin is down, slow, failing or answering nonsense; the
// plugin side (Serve) is what an estimator executable calls from main.
package external

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/rota-hpc/rota/controller/estimate"
	pb "github.com/rota-hpc/rota/controller/estimate/external/estimatorpb"
	"github.com/rota-hpc/rota/controller/estimate/queuewait"
)

// Handshake is what the controller and an estimator executable check of
// each other before talking. The cookie is no secret: it keeps an
// executable that is not a Rota estimator (or one run by hand) from
// being mistaken for one. ProtocolVersion changes only with an
// incompatible estimator.proto.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "ROTA_ESTIMATOR_PLUGIN",
	MagicCookieValue: "f3b0c8e2-rota-estimator",
}

// The plugin names in go-plugin's plugin set, one per estimator.
const (
	KindThroughput = "throughput"
	KindWalltime   = "walltime"
	KindQueueWait  = "queuewait"
)

// Estimators are what an executable serves; nil ones are left out.
type Estimators struct {
	Throughput estimate.Throughput
	Walltime   estimate.Walltime
	QueueWait  estimate.QueueWait
}

// Serve serves e to the controller that launched this executable, until
// the controller goes away. Call it from main; run by hand, it says that
// it is a plugin and exits.
func Serve(e Estimators) {
	set := plugin.PluginSet{}
	if e.Throughput != nil {
		set[KindThroughput] = &throughputPlugin{impl: e.Throughput}
	}
	if e.Walltime != nil {
		set[KindWalltime] = &walltimePlugin{impl: e.Walltime}
	}
	if e.QueueWait != nil {
		set[KindQueueWait] = &queueWaitPlugin{impl: e.QueueWait}
	}
	plugin.Serve(&plugin.ServeConfig{HandshakeConfig: Handshake, Plugins: set, GRPCServer: plugin.DefaultGRPCServer})
}

// pluginSet is the host's view: every kind, with no implementation.
func pluginSet() plugin.PluginSet {
	return plugin.PluginSet{
		KindThroughput: &throughputPlugin{},
		KindWalltime:   &walltimePlugin{},
		KindQueueWait:  &queueWaitPlugin{},
	}
}

// --- throughput ---

type throughputPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl estimate.Throughput
}

func (p *throughputPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterThroughputServer(s, throughputServer{impl: p.impl})
	return nil
}

func (p *throughputPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewThroughputClient(c), nil
}

type throughputServer struct {
	pb.UnimplementedThroughputServer
	impl estimate.Throughput
}

func (s throughputServer) Estimate(ctx context.Context, r *pb.ThroughputRequest) (*pb.ThroughputReply, error) {
	q := estimate.ThroughputQuery{Types: r.GetGpuTypes(), Hints: r.GetHints()}
	q.Key, q.Job = jobFromPB(r.GetJob())
	if len(r.GetMeasured()) > 0 {
		q.Measured = make(map[string]estimate.Measured, len(r.GetMeasured()))
		for _, m := range r.GetMeasured() {
			q.Measured[m.GetGpuType()] = estimate.Measured{StepsPerSec: m.GetStepsPerSec(), Samples: m.GetSamples()}
		}
	}
	a, err := s.impl.Throughput(ctx, q)
	if err != nil {
		return nil, err
	}
	out := &pb.ThroughputReply{Rates: make([]*pb.Rate, len(a.Rates))}
	for i, x := range a.Rates {
		out.Rates[i] = &pb.Rate{GpuType: x.GPUType, StepsPerSec: x.StepsPerSec, Source: x.Source, Basis: x.Basis}
	}
	return out, nil
}

func throughputRequest(q estimate.ThroughputQuery) *pb.ThroughputRequest {
	r := &pb.ThroughputRequest{Job: jobToPB(q.Key, q.Job), GpuTypes: q.Types, Hints: q.Hints}
	for _, ty := range slices.Sorted(maps.Keys(q.Measured)) {
		m := q.Measured[ty]
		r.Measured = append(r.Measured, &pb.Measurement{GpuType: ty, StepsPerSec: m.StepsPerSec, Samples: m.Samples})
	}
	return r
}

// --- walltime ---

type walltimePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl estimate.Walltime
}

func (p *walltimePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterWalltimeServer(s, walltimeServer{impl: p.impl})
	return nil
}

func (p *walltimePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewWalltimeClient(c), nil
}

type walltimeServer struct {
	pb.UnimplementedWalltimeServer
	impl estimate.Walltime
}

func (s walltimeServer) Estimate(ctx context.Context, r *pb.WalltimeRequest) (*pb.WalltimeReply, error) {
	q := estimate.WalltimeQuery{WalltimeInput: estimate.WalltimeInput{RemainingSteps: r.GetRemainingSteps(),
		StepsPerSec: r.GetStepsPerSec(), UserLimitMin: r.GetUserLimitMin(), MaxTimeMin: r.GetMaxTimeMin()},
		PastRunSec: r.GetPastRunSec()}
	q.Key, q.Job = jobFromPB(r.GetJob())
	a, err := s.impl.Walltime(ctx, q)
	if err != nil {
		return nil, err
	}
	// The time needed travels uncapped; the controller caps it. An
	// implementation that set only Minutes sends those.
	min := a.UncappedMin
	if min <= 0 {
		min = float64(a.Minutes)
	}
	return &pb.WalltimeReply{Minutes: min, Source: a.Source, Basis: a.Basis}, nil
}

func walltimeRequest(q estimate.WalltimeQuery) *pb.WalltimeRequest {
	return &pb.WalltimeRequest{Job: jobToPB(q.Key, q.Job), RemainingSteps: q.RemainingSteps, StepsPerSec: q.StepsPerSec,
		UserLimitMin: q.UserLimitMin, MaxTimeMin: q.MaxTimeMin, PastRunSec: q.PastRunSec}
}

// --- queue wait ---

type queueWaitPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl estimate.QueueWait
}

func (p *queueWaitPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterQueueWaitServer(s, queueWaitServer{impl: p.impl})
	return nil
}

func (p *queueWaitPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewQueueWaitClient(c), nil
}

type queueWaitServer struct {
	pb.UnimplementedQueueWaitServer
	impl estimate.QueueWait
}

func (s queueWaitServer) Estimate(ctx context.Context, r *pb.QueueWaitRequest) (*pb.QueueWaitReply, error) {
	q := estimate.QueueWaitQuery{
		Request: queuewait.Request{User: r.GetUser(), Partition: r.GetPartition(), Nodes: int(r.GetNodes()),
			GPUs: int(r.GetGpus()), TimeLimit: time.Duration(r.GetTimeLimitSec()) * time.Second},
		State: queuewait.QueueState{Now: fromUnixMS(r.GetNowUnixMs()), TotalNodes: int(r.GetTotalNodes()),
			Pending: queueJobsFromPB(r.GetPending()), Running: queueJobsFromPB(r.GetRunning()),
			Recent: queueJobsFromPB(r.GetRecent())},
	}
	a, err := s.impl.QueueWait(ctx, q)
	if err != nil {
		return nil, err
	}
	return &pb.QueueWaitReply{WaitSec: a.Wait.Seconds(), Source: a.Source, Basis: a.Basis}, nil
}

func queueWaitRequest(q estimate.QueueWaitQuery) *pb.QueueWaitRequest {
	return &pb.QueueWaitRequest{User: q.Request.User, Partition: q.Request.Partition, Nodes: int64(q.Request.Nodes),
		Gpus: int64(q.Request.GPUs), TimeLimitSec: int64(q.Request.TimeLimit / time.Second),
		NowUnixMs: unixMS(q.State.Now), TotalNodes: int64(q.State.TotalNodes),
		Pending: queueJobsToPB(q.State.Pending), Running: queueJobsToPB(q.State.Running), Recent: queueJobsToPB(q.State.Recent)}
}

// --- shared conversions ---

func jobToPB(key string, id estimate.Identity) *pb.Job {
	return &pb.Job{Key: key, User: id.User, Name: id.Name, ScriptHash: id.ScriptHash}
}

func jobFromPB(j *pb.Job) (string, estimate.Identity) {
	return j.GetKey(), estimate.Identity{User: j.GetUser(), Name: j.GetName(), ScriptHash: j.GetScriptHash()}
}

func unixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMS(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func queueJobsToPB(js []queuewait.QueueJob) []*pb.QueueJob {
	out := make([]*pb.QueueJob, len(js))
	for i, j := range js {
		out[i] = &pb.QueueJob{Id: j.ID, User: j.User, Partition: j.Partition, Nodes: int64(j.Nodes), Gpus: int64(j.GPUs),
			TimeLimitSec: int64(j.TimeLimit / time.Second), SubmitUnixMs: unixMS(j.Submit), StartUnixMs: unixMS(j.Start)}
	}
	return out
}

func queueJobsFromPB(js []*pb.QueueJob) []queuewait.QueueJob {
	if len(js) == 0 {
		return nil
	}
	out := make([]queuewait.QueueJob, len(js))
	for i, j := range js {
		out[i] = queuewait.QueueJob{ID: j.GetId(), User: j.GetUser(), Partition: j.GetPartition(), Nodes: int(j.GetNodes()),
			GPUs: int(j.GetGpus()), TimeLimit: time.Duration(j.GetTimeLimitSec()) * time.Second,
			Submit: fromUnixMS(j.GetSubmitUnixMs()), Start: fromUnixMS(j.GetStartUnixMs())}
	}
	return out
}
