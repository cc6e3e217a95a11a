package app

import (
	"context"
	"fmt"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/multicluster"
	"github.com/rota-hpc/rota/controller/rounds"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/internal/conf"
	"github.com/rota-hpc/rota/wire"
)

// loadMC reads the multi-cluster keys (docs/multicluster.md): the
// manager's (multicluster.Config.Read), the link between sites (the
// bus's) and the plugins' hold.
func loadMC(v *conf.Values, c *Config) error {
	if err := c.MC.Read(v); err != nil {
		return err
	}
	v.String("mc_leaf_listen", &c.MCLeafListen)
	v.List("mc_leaf_remote", &c.MCLeafRemotes)
	v.String("mc_link_secret_file", &c.MCLinkSecretFile)
	v.Duration("mc_hold", &c.MCHold, 0, 10*time.Minute)
	if c.MC.Name == "" && (c.MCLeafListen != "" || len(c.MCLeafRemotes) > 0) {
		return fmt.Errorf("mc_leaf_* need cluster_name")
	}
	if c.MC.Name != "" && !c.RoundsOff && !c.MC.RouteOff {
		c.Placement.ElsewhereHoldS = uint32(c.MCHold / time.Second)
	}
	return nil
}

// startMC runs the multi-cluster manager beside the round loop while
// leading (docs/multicluster.md), when a cluster name is set.
func (c *Controller) startMC(ctx context.Context, ms multicluster.Slurm, loop *rounds.Loop, st *state.KV) {
	if c.cfg.MC.Name == "" {
		return
	}
	if c.bus == nil || c.bus.MC == nil {
		c.log.Warn().Msg("the multi-cluster manager needs the bus's cluster link; it does not run")
		return
	}
	var store state.Store
	if st != nil {
		store = st
	}
	cfg := c.cfg.MC
	cfg.Speed = c.cfg.Placement.Speed
	m, err := multicluster.New(cfg, c.log.With().Str("component", "multicluster").Logger(), ms, mcLocal{c: c, loop: loop},
		c.nc, c.bus.MC, store)
	if err != nil {
		c.log.Error().Err(err).Msg("cannot start the multi-cluster manager")
		return
	}
	c.mc.Store(m)
	go m.Run(ctx)
}

// mcLocal is the controller as the manager reads it.
type mcLocal struct {
	c    *Controller
	loop *rounds.Loop
}

func (l mcLocal) Snapshot() *cluster.Snapshot { return l.c.snap.Load() }

func (l mcLocal) Decision(id uint32) *wire.Decision { return l.loop.Decision(id) }

// mcEstimate is `rota estimate`'s rows for every cluster.
func (c *Controller) mcEstimate(req *wire.EstimateRequest, rep *wire.EstimateReply) {
	m := c.mc.Load()
	if m == nil {
		return
	}
	gpus := rep.GPUs
	if gpus == 0 {
		gpus = 1
	}
	j := multicluster.Job{GPUs: gpus, LimitS: float64(req.TimeLimitMin) * 60, DataBytes: req.DataGB * 1e9,
		Hints: wire.Hints{Steps: req.Steps, Throughput: req.Throughput}}
	if req.GPUType != "" {
		j.Hints.Types = []string{req.GPUType}
	}
	rep.Clusters = m.Estimate(j)
}

// StepsLeft is the round loop's measure of a running job's remaining
// steps.
func (l mcLocal) StepsLeft(id uint32) (float64, bool) {
	in, ok := l.loop.ChainInfo(id)
	if !ok || in.StepsLeft <= 0 {
		return 0, false
	}
	return in.StepsLeft, true
}
