package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// acctSlurm answers sacct with jobs, or err.
type acctSlurm struct {
	fakeSlurm
	jobs  []slurm.AcctJob
	err   error
	since time.Time
}

func (a *acctSlurm) Accounting(_ context.Context, since, _ time.Time) ([]slurm.AcctJob, slurm.SacctStats, error) {
	a.since = since
	return a.jobs, slurm.SacctStats{Jobs: len(a.jobs)}, a.err
}

func historyKB() *wire.Site {
	return &wire.Site{Nodes: []wire.SiteNode{{Name: "v1", GPUs: map[string]int{"v100": 4}}, {Name: "k1", GPUs: map[string]int{"k80": 4}}}}
}

func TestReadHistory(t *testing.T) {
	now := time.Now()
	min := func(m int) time.Time { return now.Add(time.Duration(m) * time.Minute) }
	jobs := []slurm.AcctJob{
		// Waited 10 min on a v100 (typed by AllocTRES).
		{ID: 1, State: "COMPLETED", Partition: "gpu", Submit: min(-60), Eligible: min(-60), Start: min(-50), End: min(-40),
			NumNodes: 1, Nodes: []string{"v1"}, GPUs: 1, GPUTypes: map[string]int{"v100": 1}},
		// Held by --begin for 30 min, then waited 2: its wait is 2 min.
		{ID: 2, State: "RUNNING", Partition: "gpu", Submit: min(-40), Eligible: min(-10), Start: min(-8),
			NumNodes: 1, Nodes: []string{"v1"}, GPUs: 2, GPUTypes: map[string]int{"v100": 2}},
		// Untyped in AllocTRES: typed by its node.
		{ID: 3, State: "FAILED", Partition: "gpu", Submit: min(-20), Start: min(-20), End: min(-19), NumNodes: 1, Nodes: []string{"k1"}, GPUs: 1},
		// Never started: no wait to learn.
		{ID: 4, State: "CANCELLED", Partition: "gpu", Submit: min(-20), End: min(-19)},
	}
	cases := []struct {
		name    string
		window  time.Duration
		client  slurm.Backend
		source  string
		fromAcc int
		groups  int
	}{
		{"read", 7 * 24 * time.Hour, &acctSlurm{jobs: jobs}, "3 jobs from slurmdbd since ", 3, 2},
		{"slurmdbd down", 7 * 24 * time.Hour, &acctSlurm{err: errors.New("sacct ...: exit status 1: sacct: error: x\nsacct: error: Problem talking to the database: Connection refused")},
			"slurmdbd not read at start (sacct: error: Problem talking to the database: Connection refused)", 0, 0},
		{"off", 0, &acctSlurm{jobs: jobs}, "history_window = 0: slurmdbd not read", 0, 0},
		{"no accounting served", 7 * 24 * time.Hour, &fakeSlurm{}, "slurmdbd not read at start (" + slurm.ErrUnserved.Error() + ")", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.HistoryWindow = c.window
			ctl := &Controller{cfg: cfg, log: zerolog.Nop(), slurm: c.client}
			ctl.loadSite()
			ctl.readHistory(context.Background())
			h := ctl.waits.History(historyKB())
			if !strings.Contains(h.Source, c.source) || h.FromAccounting != c.fromAcc || len(h.Groups) != c.groups {
				t.Fatalf("history %+v; want source with %q, %d from slurmdbd, %d groups", h, c.source, c.fromAcc, c.groups)
			}
			if c.groups == 0 {
				return
			}
			if a := c.client.(*acctSlurm); now.Sub(a.since) < c.window-time.Minute {
				t.Errorf("read since %v, want %v ago", a.since, c.window)
			}
			k, v := h.Groups[0], h.Groups[1]
			if k.GPUType != "k80" || k.Jobs != 1 || k.MeanWaitSec != 0 {
				t.Errorf("k80 group %+v", k)
			}
			if v.GPUType != "v100" || v.Jobs != 2 || v.MeanWaitSec != 360 || v.MaxWaitSec != 600 || !v.LastStart.Equal(min(-8)) {
				t.Errorf("v100 group %+v; want 2 jobs, mean 6 min, max 10 min", v)
			}
		})
	}
}
