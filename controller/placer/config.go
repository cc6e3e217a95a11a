package placer

import (
	"fmt"
	"strings"

	"github.com/rota-hpc/rota/internal/conf"
	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Read takes the submit-time rule's keys of the controller's config over
// c: retype_typed, walltime_margin, walltime_overhead_min, the
// interactive_* and serve_* rules (docs/kinds.md), speed.<type>,
// interactive_reserve.<type> and slice_min_gpu_mem (docs/fractions.md).
// A bad value is reported by v.Err; a rule or type name that cannot be,
// by the error.
func (c *Config) Read(v *conf.Values) error {
	overheadMin := int(c.WalltimeOverheadMin)
	v.Bool("retype_typed", &c.RetypeTyped)
	v.Float("walltime_margin", &c.WalltimeMargin, 1, 100)
	v.Int("walltime_overhead_min", &overheadMin, 0, 24*60)
	c.WalltimeOverheadMin = uint32(overheadMin)
	// Which jobs are interactive or services without saying so.
	for _, k := range []struct {
		prefix string
		m      *wire.KindMatch
	}{{"interactive_", &c.Kinds.Interactive}, {"serve_", &c.Kinds.Serve}} {
		v.List(k.prefix+"partitions", &k.m.Partitions)
		v.List(k.prefix+"qos", &k.m.QOS)
		v.List(k.prefix+"accounts", &k.m.Accounts)
		v.List(k.prefix+"names", &k.m.Names)
	}
	if err := placement.CheckKindRules(c.Kinds); err != nil {
		return err
	}
	v.Bytes("slice_min_gpu_mem", &c.SliceMinMemory)
	for _, k := range v.Keys() {
		switch {
		case strings.HasPrefix(k, "speed."):
			// speed.<type> = relative speed, one line per GPU type.
			t := strings.TrimPrefix(k, "speed.")
			var s float64
			v.Float(k, &s, 1e-6, 1e6)
			if err := gpureq.CheckTypeName(t); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if c.Speed == nil {
				c.Speed = map[string]float64{}
			}
			c.Speed[t] = s
		case strings.HasPrefix(k, "interactive_reserve."):
			// GPUs of the type batch jobs may not take (docs/kinds.md):
			// the rule and the round loop honour it.
			t := strings.TrimPrefix(k, "interactive_reserve.")
			var n int
			v.Int(k, &n, 0, 1<<20)
			if err := gpureq.CheckTypeName(t); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if c.InteractiveReserve == nil {
				c.InteractiveReserve = map[string]int{}
			}
			c.InteractiveReserve[t] = n
		}
	}
	return nil
}
