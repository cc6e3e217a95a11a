package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func u64p(v uint64) *uint64 { return &v }
func u32p(v uint32) *uint32 { return &v }

func sampleNodeReport() NodeReport {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000000, time.UTC)
	return NodeReport{V: Version, Node: "gpu01", GPUType: "v100", Backend: "nvml", At: at, Seq: 42,
		GPUs: []GPUSample{
			{Index: 0, UUID: "GPU-1", Name: "Tesla \"V100\" é", MemoryTotalBytes: u64p(32 << 30), MemoryUsedBytes: u64p(1 << 30),
				UtilGPUPercent: u32p(97), GPM: map[string]float64{"sm_util": 1.5e-3}, Processes: []GPUProcess{{PID: 7, JobID: 12, GPUIndex: 0}},
				Problems: []string{"power: GPU is lost\n"}},
			{Index: 1, MIG: &MIGInfo{Index: 2}}, // metrics not supported: absent
		},
		Jobs:     []JobReport{{V: Version, Node: "gpu01", JobID: 12, Progress: &JobProgress{Step: 5, StepsPerSec: 2.5}}, {V: Version, JobID: 4294967295}},
		Problems: []string{"a", "b"}}
}

// The scanner reads what encoding/json reads, on what agents send.
func TestViewDecodersAgreeWithEncodingJSON(t *testing.T) {
	nr := sampleNodeReport()
	jr := nr.Jobs[0]
	jr.GPUType, jr.At, jr.GPUs, jr.GPUMemoryBytes = "näme\u2028", nr.At, []int{0, 3}, 1<<40
	jr.Progress.Total, jr.Progress.AgeSeconds, jr.Progress.Ready = 100, 1e-7, true
	for name, msg := range map[string]any{"node": nr, "job": jr, "job without progress": JobReport{V: Version, Node: "x", JobID: 1}} {
		data, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		// Also pretty-printed: white space everywhere it may be.
		pretty, _ := json.MarshalIndent(msg, " ", "\t")
		for _, d := range [][]byte{data, pretty} {
			if _, ok := msg.(NodeReport); ok {
				var want, got NodeReportView
				if err := Decode(d, &want); err != nil {
					t.Fatal(err)
				}
				got.GPUs = make([]GPUView, 5, 10) // old contents must not leak
				got.GPUs[0].UtilGPUPercent = 55
				if err := DecodeNodeReportView(d, &got); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !reflect.DeepEqual(want, got) {
					t.Fatalf("%s:\n got %+v\nwant %+v", name, got, want)
				}
			} else {
				var want, got JobReportView
				if err := Decode(d, &want); err != nil {
					t.Fatal(err)
				}
				if err := DecodeJobReportView(d, &got); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if want.GPUs == nil {
					want.GPUs = got.GPUs[:0]
				}
				if !reflect.DeepEqual(want, got) {
					t.Fatalf("%s:\n got %+v\nwant %+v", name, got, want)
				}
			}
		}
	}
}

func TestViewDecodersRefuse(t *testing.T) {
	for name, data := range map[string]string{
		"old version":        `{"v":0,"node":"a"}`,
		"no version":         `{"node":"a"}`,
		"not json":           `{"v":1`,
		"trailing data":      `{"v":1} x`,
		"string for number":  `{"v":"1"}`,
		"fraction for int":   `{"v":1,"seq":1.5}`,
		"negative uint":      `{"v":1,"seq":-1}`,
		"uint overflow":      `{"v":1,"seq":18446744073709551616}`,
		"uint32 overflow":    `{"v":1,"gpus":[{"util_gpu_percent":4294967296}]}`,
		"leading zero":       `{"v":1,"seq":01}`,
		"bad time":           `{"v":1,"at":"yesterday"}`,
		"bad skipped value":  `{"v":1,"host":{"x":tru}}`,
		"bad escape":         `{"v":1,"node":"a\x"}`,
		"control char":       "{\"v\":1,\"node\":\"a\nb\"}",
		"array at top":       `[]`,
		"missing colon":      `{"v" 1}`,
		"trailing comma":     `{"v":1,}`,
		"deep nesting":       `{"v":1,"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		"too big":            `{"v":1,"problems":["` + strings.Repeat("x", MaxMessageBytes) + `"]}`,
		"bad number skipped": `{"v":1,"x":-}`,
	} {
		if err := DecodeNodeReportView([]byte(data), &NodeReportView{}); err == nil {
			t.Errorf("%s: node view accepted %q", name, data)
		}
		// JobReport has no seq; the same faults on gpu_memory_bytes.
		data = strings.Replace(data, `"seq"`, `"gpu_memory_bytes"`, 1)
		if err := DecodeJobReportView([]byte(data), &JobReportView{}); err == nil {
			t.Errorf("%s: job view accepted %q", name, data)
		}
	}
}

// A job's ready flag is a JSON boolean, nothing else.
func TestJobViewReady(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		data      string
		ok, ready bool
	}{
		{`{"v":1,"progress":{"ready":true}}`, true, true},
		{`{"v":1,"progress":{"ready":false}}`, true, false},
		{`{"v":1,"progress":{"step":3}}`, true, false},
		{`{"v":1,"progress":{"ready":"yes"}}`, false, false},
		{`{"v":1,"progress":{"ready":1}}`, false, false},
		{`{"v":1,"progress":{"ready":tru}}`, false, false},
	} {
		var v JobReportView
		err := DecodeJobReportView([]byte(c.data), &v)
		if (err == nil) != c.ok || v.Progress.Ready != c.ready {
			t.Errorf("%s: ready %v err %v, want ready %v ok %v", c.data, v.Progress.Ready, err, c.ready, c.ok)
		}
	}
}

// FuzzViewDecoders: whatever arrives, the scanners never panic and accept
// only valid JSON of the current version (TestViewDecodersAgreeWithEncodingJSON
// checks they read what encoding/json reads).
func FuzzViewDecoders(f *testing.F) {
	nr, _ := json.Marshal(sampleNodeReport())
	f.Add(nr)
	jr, _ := json.Marshal(sampleNodeReport().Jobs[0])
	f.Add(jr)
	f.Add([]byte(`{"v":1,"gpus":null,"jobs":[null,{}],"at":null}`))
	f.Add([]byte(`{"v":1,"progress":{"steps_per_s":1e308,"age_s":-0.0}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var n NodeReportView
		if err := DecodeNodeReportView(data, &n); err == nil {
			if n.V != Version || !json.Valid(data) {
				t.Fatalf("accepted %q", data)
			}
		}
		var j JobReportView
		if err := DecodeJobReportView(data, &j); err == nil {
			if j.V != Version || !json.Valid(data) {
				t.Fatalf("accepted %q", data)
			}
		}
	})
}
