// Package site is the controller's knowledge base of the cluster: the
// partitions with their limits and the nodes with their sizes (from
// Slurm), and what the admin adds in the config (charging rates, short
// debug partitions, GPU memory per type). Build makes a wire.Site from
// them; Cost prices a job on a partition and GPU type.
package site

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rota-hpc/rota/internal/conf"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Config is the admin's part of the knowledge base.
type Config struct {
	// Unit names the currency of the rates ("SU", "USD", "credits").
	Unit string
	// Rates per GPU-hour and per core-hour (see Rate lookup in Cost).
	Rates []wire.Rate
	// Debug lists the short debug/development partitions.
	Debug []string
	// GPUMemory is bytes per GPU by type, where the admin set it.
	GPUMemory map[string]uint64
}

// Resources a rate can charge.
const (
	GPU  = "gpu"
	Core = "core"
)

// ReadConfig reads the site keys of the controller's config:
//
//	charge.unit = SU
//	charge.gpu_hour = 1                            every GPU, site-wide
//	charge.gpu_hour.type.v100 = 2                  a GPU type
//	charge.gpu_hour.partition.gpu = 1.5            a partition
//	charge.gpu_hour.partition.gpu.type.v100 = 2.5  a type in a partition
//	charge.core_hour... = 0.05                     the same for cores
//	debug_partitions = debug,dev
//	gpu_mem.v100 = 32GiB
//
// Keys it does not know are left for the caller's unknown-key check.
func ReadConfig(v *conf.Values) (Config, error) {
	c := Config{GPUMemory: map[string]uint64{}}
	v.String("charge.unit", &c.Unit)
	v.List("debug_partitions", &c.Debug)
	var errs []string
	for _, k := range v.Keys() {
		switch {
		case strings.HasPrefix(k, "charge.gpu_hour") || strings.HasPrefix(k, "charge.core_hour"):
			r, err := parseRateKey(k)
			if err != nil {
				errs = append(errs, err.Error())
				v.String(k, new(string)) // reported here, not as unknown
				continue
			}
			v.Float(k, &r.PerHour, 0, 1e9)
			c.Rates = append(c.Rates, r)
		case strings.HasPrefix(k, "gpu_mem."):
			t := strings.TrimPrefix(k, "gpu_mem.")
			var s string
			v.String(k, &s)
			if err := gpureq.CheckTypeName(t); err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", k, err))
				continue
			}
			b, err := conf.ParseBytes(s)
			if err != nil || b == 0 {
				errs = append(errs, fmt.Sprintf("%s = %q: want a size such as 16GiB or 40G", k, s))
				continue
			}
			c.GPUMemory[t] = b
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return c, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	sort.Slice(c.Rates, func(i, j int) bool {
		a, b := c.Rates[i], c.Rates[j]
		if a.Resource != b.Resource {
			return a.Resource > b.Resource // gpu before core
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.GPUType < b.GPUType
	})
	return c, nil
}

// parseRateKey reads the resource, partition and type of a rate key.
func parseRateKey(k string) (wire.Rate, error) {
	var r wire.Rate
	rest, ok := strings.CutPrefix(k, "charge.gpu_hour")
	r.Resource = GPU
	if !ok {
		rest, _ = strings.CutPrefix(k, "charge.core_hour")
		r.Resource = Core
	}
	bad := fmt.Errorf("%s: want charge.%s_hour[.partition.NAME][.type.TYPE]", k, r.Resource)
	if rest == "" {
		return r, nil
	}
	rest, ok = strings.CutPrefix(rest, ".")
	if !ok {
		return r, bad
	}
	if p, ok := strings.CutPrefix(rest, "partition."); ok {
		// A partition name may not hold ".type." (Slurm's rarely hold a
		// dot at all); the last one starts the type.
		if i := strings.LastIndex(p, ".type."); i >= 0 {
			r.Partition, rest = p[:i], p[i+1:]
		} else {
			r.Partition, rest = p, ""
		}
		if r.Partition == "" {
			return r, bad
		}
		if rest == "" {
			return r, nil
		}
	}
	t, ok := strings.CutPrefix(rest, "type.")
	if !ok {
		return r, bad
	}
	if err := gpureq.CheckTypeName(t); err != nil {
		return r, fmt.Errorf("%s: %w", k, err)
	}
	r.GPUType = t
	return r, nil
}

// IsDebug says whether p is a debug/development partition.
func (c Config) IsDebug(p string) bool {
	for _, d := range c.Debug {
		if d == p {
			return true
		}
	}
	return false
}
