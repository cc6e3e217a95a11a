package serve

import (
	"time"

	"github.com/rota-hpc/rota/internal/conf"
)

// Read sets what controller.conf says of the service manager over c (keys it does not
// name keep their values; v records bad ones).
func (c *Config) Read(v *conf.Values) {
	v.Bool("serve_off", &c.Off)
	v.Duration("serve_tick", &c.Tick, 100*time.Millisecond, time.Hour)
	v.Duration("serve_rollover_lead", &c.Lead, time.Second, 24*time.Hour)
	v.String("serve_spread", &c.Spread)
	v.Duration("serve_hold", &c.Hold, 0, 10*time.Minute)
	v.Int("serve_max_tries", &c.MaxTries, 1, 100)
}
