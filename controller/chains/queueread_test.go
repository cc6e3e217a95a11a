package chains

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/slurm/slurmtest"
)

// A tick takes a queue read that began after its previous tick, even
// with a round's updates since (slurm.QueueSince): during a round, the
// round's own read. A read from before its last tick it does not take.
func TestTickTakesARecentQueueRead(t *testing.T) {
	calls := slurmtest.Commands(t, "squeue", "sinfo", "scontrol")
	c := &slurm.CLI{ShareReads: time.Hour}
	ctx := context.Background()
	nice := int32(1)
	update := func() { // a round's update: a write, after which plain reads are fresh
		t.Helper()
		if err := c.Update(ctx, 7, slurm.JobUpdate{Nice: &nice}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Jobs(ctx); err != nil { // the round's read
		t.Fatal(err)
	}
	m, err := New(DefaultConfig(), zerolog.Nop(), c, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 2, 2} {
		if i < 2 {
			update()
		}
		if err := m.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		if n := calls.Count("squeue"); n != want {
			t.Errorf("tick %d: %d queue reads in all, want %d", i+1, n, want)
		}
	}
}
