package app

import (
	"context"

	"github.com/rota-hpc/rota/internal/conf"
)

// readHistory seeds the queue-wait history from slurmdbd over the
// configured window.
func (c *Controller) readHistory(ctx context.Context) {
	c.waits.ReadHistory(ctx, c.slurm, c.cfg.HistoryWindow, conf.FormatWindow(c.cfg.HistoryWindow), c.log)
}
