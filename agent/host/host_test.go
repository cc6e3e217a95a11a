package host

import (
	"context"
	"testing"

	"github.com/shirou/gopsutil/v3/cpu"
)

func TestSample(t *testing.T) {
	var s Sampler
	first, problems := s.Sample(context.Background())
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	if first.CPUPercent != nil {
		t.Errorf("first sample has a CPU percent")
	}
	if first.MemTotalBytes == 0 || first.Load1 == nil || first.Cores == 0 {
		t.Errorf("sample = %+v", first)
	}
	for i := 0; i < 1e6; i++ { // a little work so CPU time advances
		_ = i * i
	}
	second, _ := s.Sample(context.Background())
	if second.CPUPercent != nil && (*second.CPUPercent < 0 || *second.CPUPercent > 100) {
		t.Errorf("cpu = %v", *second.CPUPercent)
	}
}

func TestBusyPercent(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b cpu.TimesStat
		want float64
		ok   bool
	}{
		{"half busy", cpu.TimesStat{User: 10, Idle: 10}, cpu.TimesStat{User: 15, Idle: 15}, 50, true},
		{"idle", cpu.TimesStat{Idle: 10}, cpu.TimesStat{Idle: 20}, 0, true},
		{"iowait is not busy", cpu.TimesStat{}, cpu.TimesStat{System: 1, Iowait: 3}, 25, true},
		{"no time passed", cpu.TimesStat{User: 1}, cpu.TimesStat{User: 1}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := busyPercent(tc.a, tc.b)
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %v,%v want %v,%v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
