package app

import (
	"context"
	"errors"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
)

// checkRestd negotiates slurmrestd's API version at start. No version in
// common stops the controller (a configuration to fix); slurmrestd not
// answering yet is logged, and every read tries again.
func (c *Controller) checkRestd(ctx context.Context) error {
	r, ok := c.slurm.(*slurm.Restd)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := r.APIVersion(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, slurm.ErrNoCommonAPIVersion):
		return err
	default:
		c.log.Error().Err(err).Str("url", r.URL).
			Msg("slurmrestd does not answer; the controller will keep trying at each read of Slurm (is slurmrestd running, and slurmrestd_url right?)")
		return nil
	}
}
