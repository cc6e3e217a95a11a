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
			return tickOf(chains.New(chains.DefaultConfig(), zerolog.Nop(), c, nil, nil, nil))
		}},
		{"faulttol", func(c *slurm.CLI) (func(context.Context) error, error) {
			return tickOf(faulttol.New(faulttol.DefaultConfig(), zerolog.Nop(), c, nil, nil, nil))
		}},
		{"serve", func(c *slurm.CLI) (func(context.Context) error, error) {
			return tickOf(serve.New(serve.DefaultConfig(), zerolog.Nop(), c, nil, nil))
		}},
	}
	for _, mg := range managers {
		t.Run(mg.name, func(t *testing.T) { // not parallel: each puts its commands on PATH
			calls := slurmtest.Commands(t, "squeue", "sinfo", "scontrol")
			c := &slurm.CLI{ShareReads: time.Hour}
			ctx := context.Background()
			nice := int32(1)
			if _, err := c.Jobs(ctx); err != nil { // the round's read
				t.Fatal(err)
			}
			tick, err := mg.tick(c)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range []struct {
				update bool // a round's update first: after it, plain reads are fresh
				want   int  // queue reads in all after the tick
			}{{true, 1}, {true, 2}, {false, 2}} {
				if step.update {
					if err := c.Update(ctx, 7, slurm.JobUpdate{Nice: &nice}); err != nil {
						t.Fatal(err)
					}
				}
				if err := tick(ctx); err != nil {
					t.Fatal(err)
				}
				if n := calls.Count("squeue"); n != step.want {
					t.Errorf("tick %d: %d queue reads in all, want %d", i+1, n, step.want)
				}
			}
		})
	}
}

// tickOf is a new manager's Tick, or the error that made it.
func tickOf[M interface{ Tick(context.Context) error }](m M, err error) (func(context.Context) error, error) {
	if err != nil {
		return nil, err
	}
	return m.Tick, nil
}
