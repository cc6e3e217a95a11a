package rounds

import (
	"time"

	"github.com/rota-hpc/rota/internal/conf"
)

// Read sets what controller.conf says of the round loop over c (keys it does not
// name keep their values; v records bad ones).
func (c *Config) Read(v *conf.Values) {
	v.String("policy", &c.Policy)
	v.Bool("adopt_unplaced", &c.AdoptUnplaced)
	v.Duration("round", &c.Round, time.Second, 24*time.Hour)
	v.Duration("min_lease", &c.MinLease, 0, 7*24*time.Hour)
	v.Duration("move_cost", &c.MoveCost, 0, 24*time.Hour)
	v.Duration("checkpoint_grace", &c.CheckpointGrace, time.Second, time.Hour)
	v.String("order", &c.Order)
	span := int(c.OrderNiceSpan)
	v.Int("order_nice_span", &span, 2, 2_000_000)
	c.OrderNiceSpan = uint32(span)
	v.String("shares", &c.Shares)
	v.Int("round_apply_batch", &c.Pace.Batch, 1, 100_000)
	v.Float("round_apply_share", &c.Pace.Share, 0.01, 1)
	v.Bool("space_sharing", &c.SpaceSharing)
	v.Float("share_margin", &c.ShareMargin, 1, 10)
	v.String("share_default", &c.ShareDefault)
}
