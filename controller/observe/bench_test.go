package observe_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/loadgen"
	"github.com/rota-hpc/rota/controller/observe"
	"github.com/rota-hpc/rota/wire"
)

// The per-message cost of the controller's intake, on the reports the load
// generator sends (a busy 8-GPU node with 2 jobs, the h100 variant with its
// GPM metrics being the largest). Full* decode the complete wire structs as
// a receiver without views would; Handle* are the Observer's real path
// (decode into the lean view, check, update the tables).

func sample(b *testing.B, node int) []loadgen.Message {
	b.Helper()
	msgs, err := loadgen.Sample(loadgen.FleetConfig{Nodes: 5000, GPUsPerNode: 8, JobsPerNode: 2}, node, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return msgs
}

const h100Node = 4 // models cycle k80, p100, v100, a100, h100

func BenchmarkFullDecodeNodeReport(b *testing.B) {
	m := sample(b, h100Node)[0]
	b.SetBytes(int64(len(m.Data)))
	b.ReportAllocs()
	for b.Loop() {
		var r wire.NodeReport
		if err := wire.Decode(m.Data, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFullDecodeJobReport(b *testing.B) {
	m := sample(b, h100Node)[1]
	b.SetBytes(int64(len(m.Data)))
	b.ReportAllocs()
	for b.Loop() {
		var r wire.JobReport
		if err := wire.Decode(m.Data, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHandleNodeReport(b *testing.B) {
	m := sample(b, h100Node)[0]
	o := observe.New(observe.Config{}, zerolog.Nop())
	b.SetBytes(int64(len(m.Data)))
	b.ReportAllocs()
	for b.Loop() {
		o.HandleNodeReport(m.Subject, m.Data)
	}
	if st := o.Status(); st.Decoded != st.Received {
		b.Fatalf("dropped: %+v", st)
	}
}

func BenchmarkHandleJobReport(b *testing.B) {
	m := sample(b, h100Node)[1]
	o := observe.New(observe.Config{}, zerolog.Nop())
	b.SetBytes(int64(len(m.Data)))
	b.ReportAllocs()
	for b.Loop() {
		o.HandleJobReport(m.Subject, m.Data)
	}
	if st := o.Status(); st.Decoded != st.Received {
		b.Fatalf("dropped: %+v", st)
	}
}

// BenchmarkHandleFleetSecond is one second of a 5,000-node fleet's
// reports (5,000 NodeReports and 10,000 JobReports) per iteration, through
// the Observer's tables at their full size: the ns/op is the CPU time one
// second of that load costs the controller's intake.
func BenchmarkHandleFleetSecond(b *testing.B) {
	const nodes = 5000
	var all []loadgen.Message
	for i := 0; i < nodes; i++ {
		all = append(all, sample(b, i)...)
	}
	var bytes int64
	for _, m := range all {
		bytes += int64(len(m.Data))
	}
	o := observe.New(observe.Config{}, zerolog.Nop())
	b.SetBytes(bytes)
	b.ReportAllocs()
	for b.Loop() {
		for k, m := range all {
			if k%3 == 0 {
				o.HandleNodeReport(m.Subject, m.Data)
			} else {
				o.HandleJobReport(m.Subject, m.Data)
			}
		}
	}
	if st := o.Status(); st.Decoded != st.Received || st.Nodes != nodes {
		b.Fatalf("status %+v", st)
	}
}
