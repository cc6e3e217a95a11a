package app

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/chains"
	"github.com/rota-hpc/rota/controller/faulttol"
	"github.com/rota-hpc/rota/controller/serve"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/controller/slurm/slurmtest"
)

// A manager's tick takes a queue read that began after its previous
// tick, even with a round's updates since (slurm.QueueSince): during a
// round, the round's own read. A read from before its last tick it does
// not take.
func TestManagersTakeTheRoundsRead(t *testing.T) {
	managers := []struct {
		name string
		tick func(*slurm.CLI) (func(context.Context) error, error)
	}{
		{"chains", func(c *slurm.CLI) (func(context.Context) error, error) {
			m, err := chains.New(chains.DefaultConfig(), zerolog.Nop(), c, nil, nil, nil)
			if err != nil {
				return nil, err
			}
			return m.Tick, nil
		}},
		{"faulttol", func(c *slurm.CLI) (func(context.Context) error, error) {
			m, err := faulttol.New(faulttol.DefaultConfig(), zerolog.Nop(), c, nil, nil, nil)
			if err != nil {
				return nil, err
			}
			return m.Tick, nil
		}},
		{"serve", func(c *slurm.CLI) (func(context.Context) error, error) {
			m, err := serve.New(serve.DefaultConfig(), zerolog.Nop(), c, nil, nil)
			if err != nil {
				return nil, err
			}
			return m.Tick, nil
		}},
	}
	for _, mg := range managers {
		t.Run(mg.name, func(t *testing.T) { // not parallel: each puts its commands on PATH
			calls := slurmtest.Commands(t, "squeue", "sinfo", "scontrol")
			c := &slurm.CLI{ShareReads: time.Hour}
			ctx := context.Background()
			nice := int32(1)
			update := func() { // a round's update: after it, plain reads are fresh
				t.Helper()
				if err := c.Update(ctx, 7, slurm.JobUpdate{Nice: &nice}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.Jobs(ctx); err != nil { // the round's read
				t.Fatal(err)
			}
			tick, err := mg.tick(c)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []int{1, 2} {
				update()
				if err := tick(ctx); err != nil {
					t.Fatal(err)
				}
				if n := calls.Count("squeue"); n != want {
					t.Errorf("tick %d: %d queue reads in all, want %d", i+1, n, want)
				}
			}
		})
	}
}
