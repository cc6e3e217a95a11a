package chains

import (
	"time"

	"github.com/rota-hpc/rota/internal/conf"
)

// Read sets what controller.conf says of the chain manager over c (keys it does not
// name keep their values; v records bad ones).
func (c *Config) Read(v *conf.Values) {
	v.Bool("chains_off", &c.Off)
	v.Bool("chain_auto", &c.Auto)
	v.String("chain_mode", &c.Mode)
	v.Duration("chain_checkpoint_lead", &c.CheckpointLead, time.Second, 24*time.Hour)
	v.Duration("chain_margin", &c.Margin, 0, 24*time.Hour)
	v.Duration("chain_tick", &c.Tick, 100*time.Millisecond, time.Hour)
	v.Int("chain_max_segments", &c.MaxSegments, 2, 10000)
	v.List("chain_dev_partitions", &c.DevPartitions)
	chainPrio := int(c.Priority)
	v.Int("chain_priority", &chainPrio, 1, 4294967293)
	c.Priority = uint32(chainPrio)
}
