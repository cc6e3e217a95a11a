// Package loadgen plays a fleet of node agents against a controller and
// measures how the controller copes: the agents' reports at their real
// size and rate, a stream of placement requests whose latency it records,
// and the controller's ingest rate, drops, CPU and memory. `rota-loadgen`
// is its command; docs/operations.md ("Load and sizing") has the figures.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// gpuModel is one GPU type of the simulated cluster.
type gpuModel struct {
	typ      string
	name     string
	memBytes uint64
	speed    float64 // relative to k80, for the simulated jobs' steps/s
}

var models = []gpuModel{
	{"k80", "Tesla K80", 12 << 30, 1},
	{"p100", "Tesla P100-PCIE-16GB", 16 << 30, 2.2},
	{"v100", "Tesla V100-SXM2-32GB", 32 << 30, 3.4},
	{"a100", "NVIDIA A100-SXM4-80GB", 80 << 30, 7.5},
	{"h100", "NVIDIA H100 80GB HBM3", 80 << 30, 15},
}

// Sentinels: values json.Marshal writes with exactly the width of the slot
// they mark, so a report is encoded once and each later one only has its
// time, sequence number and progress written over in place. Leading spaces
// before a JSON number are valid, so shorter numbers are right-aligned.
var sentinelAt = time.Date(2001, 2, 3, 4, 5, 6, 123456789, time.UTC)

const (
	sentinelSeq   = uint64(1234567890123456789)
	sentinelStep  = uint64(2345678901234567890)
	sentinelRate  = 1234567.125 // "1234567.125": 11 characters
	atLayout      = "2006-01-02T15:04:05.000000000Z"
	atWidth       = len(atLayout)
	seqWidth      = 19
	rateWidth     = 11
	maxSimRate    = 999999.0
	simUnusedMem  = 512 << 20
	simJobMemFrac = 0.7
)

// message is one pre-encoded report and where its variable parts lie.
type message struct {
	subject string
	data    []byte
	at      []int // offsets of the time's first character (inside quotes)
	seq     []int
	step    []int
	rate    []int
}

// simJob is one simulated job on one node.
type simJob struct {
	id    uint32
	rate  float64 // steps/s on this node's type
	step  float64
	total uint64
	msg   message
}

// simNode is one simulated agent.
type simNode struct {
	name  string
	model gpuModel
	seq   uint64
	phase time.Duration // offset of its reports within the interval
	node  message
	jobs  []*simJob
}

// FleetConfig shapes the simulated cluster.
type FleetConfig struct {
	Nodes       int
	GPUsPerNode int
	JobsPerNode int
	Interval    time.Duration
	// FirstJobID numbers the simulated jobs from here, so that several
	// load generators do not share ids.
	FirstJobID uint32
}

func (c *FleetConfig) defaults() {
	if c.GPUsPerNode <= 0 {
		c.GPUsPerNode = 8
	}
	if c.JobsPerNode < 0 {
		c.JobsPerNode = 0
	}
	if c.JobsPerNode > c.GPUsPerNode {
		c.JobsPerNode = c.GPUsPerNode
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.FirstJobID == 0 {
		c.FirstJobID = 1_000_000
	}
}

// NodeName is the name of simulated node i.
func NodeName(i int) string { return fmt.Sprintf("sim%05d", i) }

// newFleet builds every node's reports once.
func newFleet(c FleetConfig) ([]*simNode, error) {
	c.defaults()
	nodes := make([]*simNode, c.Nodes)
	for i := range nodes {
		var err error
		if nodes[i], err = newNode(c, i); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// newNode builds node i's reports.
func newNode(c FleetConfig, i int) (*simNode, error) {
	n := &simNode{name: NodeName(i), model: models[i%len(models)],
		phase: time.Duration(int64(c.Interval) * int64(i) / int64(max(c.Nodes, 1)))}
	r := nodeReport(n.name, n.model, c, uint32(i))
	var err error
	if n.node, err = encode(wire.SubjectAgentReport(n.name), r); err != nil {
		return nil, err
	}
	for k := range r.Jobs {
		jr := r.Jobs[k]
		j := &simJob{id: jr.JobID, rate: jobRate(n.model, jr.JobID), total: 1_000_000}
		if j.msg, err = encode(wire.SubjectAgentJob(n.name, jr.JobID), &jr); err != nil {
			return nil, err
		}
		n.jobs = append(n.jobs, j)
	}
	return n, nil
}

// jobRate: each job has its own base speed, scaled by the node's type.
func jobRate(m gpuModel, id uint32) float64 {
	return m.speed * (1 + float64(id%7)/2)
}

func u64(v uint64) *uint64    { return &v }
func u32(v uint32) *uint32    { return &v }
func f64(v float64) *float64  { return &v }
func steps(n int) []string    { return []string{"batch", strconv.Itoa(n)} }
func gpuUUID(i, g int) string { return fmt.Sprintf("GPU-%08x-%04x-4000-8000-%012x", i, g, i*64+g) }

// nodeReport is what a busy 8-GPU node's agent sends: every metric NVML
// gives on a recent GPU, one process per job per GPU, and the jobs.
func nodeReport(name string, m gpuModel, c FleetConfig, idx uint32) *wire.NodeReport {
	r := &wire.NodeReport{V: wire.Version, Node: name, GPUType: m.typ, Backend: "nvml", At: sentinelAt, Seq: sentinelSeq,
		Host: wire.HostSample{CPUPercent: f64(37.5), Cores: 64, MemTotalBytes: 512 << 30, MemUsedBytes: 211 << 30,
			MemAvailBytes: 290 << 30, Load1: f64(21.3), Load5: f64(20.9), Load15: f64(20.1), UptimeSeconds: 1_234_567, ProcessesTotal: 812}}
	perJob := 0
	if c.JobsPerNode > 0 {
		perJob = c.GPUsPerNode / c.JobsPerNode
	}
	jobOf := func(g int) int { // -1: idle GPU
		if perJob == 0 || g/perJob >= c.JobsPerNode {
			return -1
		}
		return g / perJob
	}
	for k := 0; k < c.JobsPerNode; k++ {
		id := c.FirstJobID + idx*uint32(c.JobsPerNode) + uint32(k)
		var gpus []int
		for g := k * perJob; g < (k+1)*perJob; g++ {
			gpus = append(gpus, g)
		}
		mem := uint64(float64(m.memBytes)*simJobMemFrac) * uint64(len(gpus))
		r.Jobs = append(r.Jobs, wire.JobReport{V: wire.Version, Node: name, GPUType: m.typ, At: sentinelAt, JobID: id,
			Steps: steps(0), GPUs: gpus, GPUMemoryBytes: mem, SMUtilPercent: u32(uint32(80 * len(gpus))), Processes: len(gpus),
			Progress: &wire.JobProgress{Step: sentinelStep, Total: 1_000_000, Ckpt: 5000, StepsPerSec: sentinelRate, AgeSeconds: 0.4}})
	}
	for g := 0; g < c.GPUsPerNode; g++ {
		s := wire.GPUSample{Index: g, UUID: gpuUUID(int(idx), g), Name: m.name, MemoryTotalBytes: u64(m.memBytes),
			MemoryUsedBytes: u64(simUnusedMem), UtilGPUPercent: u32(0), UtilMemPercent: u32(0), SMClockMHz: u32(1410),
			PowerWatts: f64(61.2), TemperatureC: u32(34), PCIeTxBytesPerS: u64(1 << 20), PCIeRxBytesPerS: u64(2 << 20)}
		if m.typ == "h100" {
			s.GPM = map[string]float64{"sm_util": 91.5, "sm_occupancy": 48.25, "tensor_util": 63.5, "dram_bw_util": 71.75, "graphics_util": 93}
		}
		if j := jobOf(g); j >= 0 {
			id := r.Jobs[j].JobID
			used := uint64(float64(m.memBytes) * simJobMemFrac)
			s.MemoryUsedBytes, s.UtilGPUPercent, s.UtilMemPercent, s.PowerWatts = u64(used), u32(97), u32(58), f64(287.4)
			s.Processes = []wire.GPUProcess{{PID: 100_000 + uint32(g), UsedMemoryBytes: u64(used), SMUtilPercent: u32(95),
				JobID: id, Step: "0", GPUIndex: g}}
		}
		r.GPUs = append(r.GPUs, s)
	}
	return r
}

// encode marshals v and finds its slots.
func encode(subject string, v any) (message, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return message{}, err
	}
	m := message{subject: subject, data: b}
	m.at = find(b, []byte(`"`+sentinelAt.Format(time.RFC3339Nano)+`"`), 1)
	m.seq = find(b, []byte(strconv.FormatUint(sentinelSeq, 10)), 0)
	m.step = find(b, []byte(strconv.FormatUint(sentinelStep, 10)), 0)
	m.rate = find(b, []byte(strconv.FormatFloat(sentinelRate, 'f', -1, 64)), 0)
	if len(m.at) == 0 {
		return m, fmt.Errorf("loadgen: no time slot in %s", subject)
	}
	return m, nil
}

func find(b, pat []byte, skip int) []int {
	var at []int
	for off := 0; ; {
		i := bytes.Index(b[off:], pat)
		if i < 0 {
			return at
		}
		at = append(at, off+i+skip)
		off += i + len(pat)
	}
}

// stamp writes the variable parts into a message, in place.
func (m *message) stamp(now time.Time, seq, step uint64, rate float64) {
	var tmp [32]byte
	at := now.UTC().AppendFormat(tmp[:0], atLayout)
	for _, o := range m.at {
		copy(m.data[o:o+atWidth], at)
	}
	for _, o := range m.seq {
		putRight(m.data[o:o+seqWidth], strconv.AppendUint(tmp[:0], seq, 10))
	}
	for _, o := range m.step {
		putRight(m.data[o:o+seqWidth], strconv.AppendUint(tmp[:0], step, 10))
	}
	rate = min(max(rate, 0), maxSimRate)
	for _, o := range m.rate {
		putRight(m.data[o:o+rateWidth], strconv.AppendFloat(tmp[:0], rate, 'f', 3, 64))
	}
}

// putRight writes v right-aligned in slot, spaces before.
func putRight(slot, v []byte) {
	p := len(slot) - len(v)
	for i := 0; i < p; i++ {
		slot[i] = ' '
	}
	copy(slot[p:], v)
}

// tick advances a node by one interval and stamps its reports.
func (n *simNode) tick(now time.Time, interval time.Duration) {
	n.seq++
	// A little wobble so the controller's averages have something to do.
	wobble := 1 + 0.05*math.Sin(float64(now.UnixNano())/float64(20*time.Second)+float64(n.seq%13))
	for _, j := range n.jobs {
		r := j.rate * wobble
		j.step += r * interval.Seconds()
		if uint64(j.step) >= j.total {
			j.step = 0
		}
		j.msg.stamp(now, 0, uint64(j.step), r)
	}
	n.node.stamp(now, n.seq, 0, 0)
	// The node report embeds its jobs: stamp their progress too.
	var tmp [32]byte
	for k, j := range n.jobs {
		if k < len(n.node.step) {
			putRight(n.node.data[n.node.step[k]:n.node.step[k]+seqWidth], strconv.AppendUint(tmp[:0], uint64(j.step), 10))
		}
		if k < len(n.node.rate) {
			putRight(n.node.data[n.node.rate[k]:n.node.rate[k]+rateWidth], strconv.AppendFloat(tmp[:0], min(j.rate*wobble, maxSimRate), 'f', 3, 64))
		}
	}
}

// FakeSlurm is the simulated fleet as Slurm would describe it, so a
// controller run for the load test places on the same cluster the agents
// report from: a partition "gpu" with every node, about half its GPUs in
// use. It serves the cluster's reads only (slurm.Unserved the rest): the
// load test's controller places at submission and drives no rounds.
type FakeSlurm struct {
	slurm.Unserved
	nodes []slurm.Node
}

// NewFakeSlurm describes a fleet of c.
func NewFakeSlurm(c FleetConfig) *FakeSlurm {
	c.defaults()
	f := &FakeSlurm{}
	for i := 0; i < c.Nodes; i++ {
		m := models[i%len(models)]
		used := (i * 3) % (c.GPUsPerNode + 1)
		f.nodes = append(f.nodes, slurm.Node{Name: NodeName(i), State: "mixed", Partitions: []string{"gpu"},
			GPUs: map[string]int{m.typ: c.GPUsPerNode}, GPUsUsed: map[string]int{m.typ: used}})
	}
	return f
}

// Nodes implements slurm.Client.
func (f *FakeSlurm) Nodes(context.Context) ([]slurm.Node, error) { return f.nodes, nil }

// Partitions implements slurm.Client.
func (f *FakeSlurm) Partitions(context.Context) ([]slurm.Partition, error) {
	return []slurm.Partition{{Name: "gpu", Default: true, MaxTimeMin: 2880, Nodes: "sim[00000-99999]"}}, nil
}

// JobAdminComment implements slurm.Client: the simulated jobs were not
// placed by Rota.
func (f *FakeSlurm) JobAdminComment(context.Context, uint32) (string, error) { return "", nil }

// Speeds is the relative-speed table that matches the simulated types.
func Speeds() map[string]float64 {
	s := map[string]float64{}
	for _, m := range models {
		s[m.typ] = m.speed
	}
	return s
}

// Message is one report as a simulated agent publishes it.
type Message struct {
	Subject string
	Data    []byte
}

// Sample is simulated node i's reports (its NodeReport, then one
// JobReport per job) stamped at now: the very bytes the load generator
// sends, for benchmarks and tests of the controller's intake.
func Sample(c FleetConfig, i int, now time.Time) ([]Message, error) {
	c.defaults()
	n, err := newNode(c, i)
	if err != nil {
		return nil, err
	}
	n.tick(now, c.Interval)
	out := []Message{{n.node.subject, n.node.data}}
	for _, j := range n.jobs {
		out = append(out, Message{j.msg.subject, j.msg.data})
	}
	return out, nil
}
