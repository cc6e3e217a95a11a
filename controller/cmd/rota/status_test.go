package main

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/rota-hpc/rota/wire"
)

func TestPrintChains(t *testing.T) {
	gap := 3.0
	var b bytes.Buffer
	err := printChains(&b, []wire.ChainStatus{{ID: 41, State: "running", Planned: 3, Step: 5000, Total: 9000, Why: "asked with --rota-chain",
		Segments: []wire.ChainSegment{
			{JobID: 41, N: 1, Partition: "gpu", Type: "v100", State: "COMPLETED", FirstStep: 10, LastStep: 4200, Why: "the segment checkpointed and exited"},
			{JobID: 57, N: 2, Partition: "gpu", Type: "v100", State: "RUNNING", FirstStep: 4190, LastStep: 5000, GapSeconds: &gap},
			{JobID: 58, N: 3, Partition: "gpu", State: "PENDING"},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^41\s+running\s+3 of ~3\s+5000/9000\s+asked with --rota-chain$`,
		`(?m)^\s+1\s+41\s+gpu\s+v100\s+COMPLETED\s+10-4200\s+-\s+the segment checkpointed and exited$`,
		`(?m)^\s+2\s+57\s+gpu\s+v100\s+RUNNING\s+4190-5000\s+3s\s*$`,
		`(?m)^\s+3\s+58\s+gpu\s+PENDING\s+-\s+-\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(b.String()) {
			t.Errorf("no line matching %s in\n%s", re, b.String())
		}
	}
}

func TestPrintQueueWaits(t *testing.T) {
	var b bytes.Buffer
	last := time.Date(2026, 11, 25, 21, 42, 40, 0, time.UTC)
	err := printQueueWaits(&b, &wire.QueueWaitHistory{Source: "3 jobs from slurmdbd since 2026-11-18 21:40 (history_window 7d), 1 seen starting since the controller started",
		FromAccounting: 3, Seen: 1, Groups: []wire.QueueWaitGroup{
			{Partition: "gpu", GPUType: "v100", Jobs: 3, MeanWaitSec: 65.4, MedianWaitSec: 60, MaxWaitSec: 3600, LastStart: last},
			{Partition: "gpu", Jobs: 1, LastStart: last}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^queue waits: 3 jobs from slurmdbd since 2026-11-18 21:40 \(history_window 7d\), 1 seen starting since the controller started$`,
		`(?m)^gpu\s+v100\s+3\s+1m5s\s+1m0s\s+1h0m0s\s+2026-11-25 21:42:40$`,
		`(?m)^gpu\s+-\s+1\s+0s\s+0s\s+0s\s+2026-11-25 21:42:40$`,
	} {
		if !regexp.MustCompile(re).MatchString(b.String()) {
			t.Errorf("no line matching %s in\n%s", re, b.String())
		}
	}
}
