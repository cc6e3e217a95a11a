package app

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/multicluster"
	"github.com/rota-hpc/rota/controller/rounds"
	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/internal/conf"
	"github.com/rota-hpc/rota/wire"
)

var mcName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// loadMC reads the multi-cluster keys (docs/multicluster.md).
func loadMC(v *conf.Values, c *Config) error {
	m := &c.MC
	v.String("cluster_name", &m.Name)
	if m.Name != "" && !mcName.MatchString(m.Name) {
		return fmt.Errorf("cluster_name %q: letters, digits and _ only (it is part of NATS subjects)", m.Name)
	}
	var links []string
	v.List("mc_link", &links)
	for _, s := range links {
		l, err := xcluster.ParseLink(s)
		if err != nil {
			return fmt.Errorf("mc_link: %w", err)
		}
		m.Links = append(m.Links, l)
	}
	v.String("mc_leaf_listen", &c.MCLeafListen)
	v.List("mc_leaf_remote", &c.MCLeafRemotes)
	v.String("mc_link_secret_file", &c.MCLinkSecretFile)
	v.Duration("mc_tick", &m.Tick, 100*time.Millisecond, time.Hour)
	v.Duration("mc_view_max_age", &m.ViewMaxAge, time.Second, 24*time.Hour)
	route := !m.RouteOff
	v.Bool("mc_route", &route)
	m.RouteOff = !route
	v.Duration("mc_margin", &m.Margin, 0, 7*24*time.Hour)
	v.Duration("mc_min_pending", &m.MinPending, 0, 24*time.Hour)
	v.Duration("mc_ask_timeout", &m.AskTimeout, 100*time.Millisecond, time.Minute)
	v.Duration("mc_route_timeout", &m.RouteTimeout, time.Second, 24*time.Hour)
	v.Float("mc_price", &m.Price, 0, 1e9)
	v.Float("mc_data_gb", &m.DataGB, 0, 1e9)
	v.Duration("mc_hold", &c.MCHold, 0, 10*time.Minute)
	v.Bool("mc_moves", &m.Moves)
	v.Duration("mc_move_cost", &m.MoveCost, 0, 24*time.Hour)
	v.Float("mc_move_margin_fraction", &m.MarginFraction, 0, 10)
	v.Duration("mc_min_stay", &m.MinStay, 0, 30*24*time.Hour)
	v.Float("mc_checkpoint_gb", &m.CheckpointGB, 0, 1e9)
	v.String("mc_transfer_dir", &m.TransferDir)
	v.Float("mc_transfer_max_gb", &m.TransferMaxGB, 0.001, 1e6)
	v.Duration("mc_checkpoint_wait", &m.CheckpointWait, time.Second, 24*time.Hour)
	v.Duration("mc_probe_interval", &m.ProbeInterval, 0, 24*time.Hour)
	v.Duration("mc_link_max_age", &m.LinkMaxAge, 0, 7*24*time.Hour)
	if m.ProbeInterval > 0 && m.ProbeInterval < time.Second {
		return fmt.Errorf("mc_probe_interval %v: 0 (off) or 1s and more (each probe sends 512 KiB)", m.ProbeInterval)
	}
	if m.Name == "" && (len(m.Links) > 0 || c.MCLeafListen != "" || len(c.MCLeafRemotes) > 0) {
		return fmt.Errorf("mc_link and mc_leaf_* need cluster_name")
	}
	if m.Name != "" && !c.RoundsOff && !m.RouteOff {
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
