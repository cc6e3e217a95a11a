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

// A manager that follows no job (a fresh one) reads the queue at its
// first tick, taking the round's read, and after that only when the round
// loop wakes it (slurm.TickQueue), taking the waking round's read even
// with the round's updates since: an idle manager costs slurmctld no
// queue read of its own.
func TestManagersTakeTheRoundsRead(t *testing.T) {
	managers := []struct {
		name string
		new  func(*slurm.CLI) (manager, error)
	}{
		{"chains", func(c *slurm.CLI) (manager, error) {
			return asManager(chains.New(chains.DefaultConfig(), zerolog.Nop(), c, nil, nil, nil))
		}},
		{"faulttol", func(c *slurm.CLI) (manager, error) {
			return asManager(faulttol.New(faulttol.DefaultConfig(), zerolog.Nop(), c, nil, nil, nil))
		}},
		{"serve", func(c *slurm.CLI) (manager, error) {
			return asManager(serve.New(serve.DefaultConfig(), zerolog.Nop(), c, nil, nil))
		}},
	}
	for _, mg := range managers {
		t.Run(mg.name, func(t *testing.T) { // not parallel: each puts its commands on PATH
			calls := slurmtest.Commands(t, "squeue", "sinfo", "scontrol")
			c := &slurm.CLI{ShareReads: time.Hour}
			ctx := context.Background()
			nice := int32(1)
			m, err := mg.new(c)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range []struct {
				round bool // a round reads the queue, updates a job and wakes the manager
				want  int  // queue reads in all after the tick
			}{{true, 1}, {false, 1}, {true, 2}, {false, 2}} {
				if step.round {
					_, at, err := c.JobsAt(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if err := c.Update(ctx, 7, slurm.JobUpdate{Nice: &nice}); err != nil {
						t.Fatal(err)
					}
					m.Wake(at)
				}
				if err := m.Tick(ctx); err != nil {
					t.Fatal(err)
				}
				if n := calls.Count("squeue"); n != step.want {
					t.Errorf("tick %d: %d queue reads in all, want %d", i+1, n, step.want)
				}
			}
		})
	}
}

// manager is what the test drives of a manager.
type manager interface {
	Tick(context.Context) error
	Wake(time.Time)
}

// asManager is a new manager, or the error that made it.
func asManager[M manager](m M, err error) (manager, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}
