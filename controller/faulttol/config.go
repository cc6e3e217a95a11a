package faulttol

import (
	"time"

	"github.com/rota-hpc/rota/internal/conf"
)

// Read sets what controller.conf says of fault tolerance over c (keys it does not
// name keep their values; v records bad ones).
func (c *Config) Read(v *conf.Values) {
	periodic := !c.Off
	v.Bool("checkpoint_periodic", &periodic)
	c.Off = !periodic
	v.Duration("node_mtbf", &c.NodeMTBF, 0, 100*365*24*time.Hour)
	v.Duration("node_mtbf_prior", &c.PriorMTBF, time.Second, 100*365*24*time.Hour)
	v.Duration("checkpoint_cost_initial", &c.InitialCost, 100*time.Millisecond, 24*time.Hour)
	v.Duration("checkpoint_interval_min", &c.MinInterval, time.Second, 7*24*time.Hour)
	v.Duration("checkpoint_interval_max", &c.MaxInterval, time.Second, 365*24*time.Hour)
	v.Duration("faulttol_tick", &c.Tick, 100*time.Millisecond, time.Hour)
}
