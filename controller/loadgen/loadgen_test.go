package loadgen

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A short run against an in-process controller: the pipeline works end to
// end (every report published is taken in, placements are answered, the
// script line is printed). Counts are checked, not speed.
func TestRunEndToEnd(t *testing.T) {
	ctx := context.Background()
	fleet := FleetConfig{Nodes: 20, GPUsPerNode: 8, JobsPerNode: 2, Interval: 200 * time.Millisecond}
	url, stop, err := StartController(ctx, fleet, t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	r, err := Run(ctx, Options{NATSURL: url, Fleet: fleet, Conns: 2, PlaceRate: 20, PlaceTimeout: 5 * time.Second,
		Warmup: 500 * time.Millisecond, Duration: 1500 * time.Millisecond, InProcess: true, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	// 20 nodes x (1 + 2 jobs) every 200 ms for 2 s: about 300 messages.
	if r.Published < 100 || r.Dropped() != 0 || r.ControllerNodes != 20 || r.ControllerJobs != 40 {
		t.Fatalf("result %+v", r)
	}
	if r.IngestedPerSec <= 0 || r.PlaceCount == 0 || r.PlaceP99 <= 0 || r.PlaceMax < r.PlaceP99 {
		t.Fatalf("result %+v", r)
	}
	var out bytes.Buffer
	r.Print(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "ingest_msgs_per_s=") || !strings.Contains(last, " placement_p99_ms=") || !strings.HasSuffix(last, " dropped=0") {
		t.Fatalf("last line %q", last)
	}
}

// The pre-encoded reports carry the stamped values where the sentinels
// were, and stay valid reports.
func TestSampleIsStamped(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	msgs, err := Sample(FleetConfig{Nodes: 10, JobsPerNode: 2}, 3, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[0].Subject != "rota.v1.agent.sim00003.report" || msgs[1].Subject != "rota.v1.agent.sim00003.job.1000006" {
		t.Fatalf("messages %v", msgs)
	}
	for _, m := range msgs {
		if bytes.Contains(m.Data, []byte("2001-02-03")) || bytes.Contains(m.Data, []byte("1234567890123456789")) ||
			bytes.Contains(m.Data, []byte("1234567.125")) || !bytes.Contains(m.Data, []byte("2026-01-02T03:04:05.000000006Z")) {
			t.Fatalf("not stamped: %s", m.Data)
		}
	}
}
