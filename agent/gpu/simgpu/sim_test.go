package simgpu

import (
	"context"
	"testing"
	"time"
)

func TestSimFollowsProgress(t *testing.T) {
	jobs := []Job{{ID: 7, StepsPerSec: 3, Age: time.Second}, {ID: 5, StepsPerSec: 2, Age: time.Hour}}
	b := &Backend{Type: "v100", Count: 2, Node: "n1", Jobs: func() []Job { return jobs }}
	got, err := b.Sample(context.Background())
	if err != nil || len(got) != 2 {
		t.Fatalf("Sample = %v, %v", got, err)
	}
	// Job 5 (lower ID) on GPU 0, stalled: idle but memory held.
	g0, g1 := got[0], got[1]
	if g0.Processes[0].JobID != 5 || *g0.UtilGPUPercent != 0 || *g0.MemoryUsedBytes == 0 {
		t.Errorf("GPU 0 = %+v", g0)
	}
	if g1.Processes[0].JobID != 7 || *g1.UtilGPUPercent != 95 || *g1.MemoryTotalBytes != 32<<30 {
		t.Errorf("GPU 1 = %+v", g1)
	}
	if g0.UUID == g1.UUID || g0.Name != "Tesla V100-SXM2-32GB (simulated)" {
		t.Errorf("identity %q %q %q", g0.UUID, g1.UUID, g0.Name)
	}
	jobs = nil
	got, _ = b.Sample(context.Background())
	if *got[1].UtilGPUPercent != 0 || len(got[1].Processes) != 0 {
		t.Errorf("GPU busy with no jobs: %+v", got[1])
	}
}
