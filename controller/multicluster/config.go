package multicluster

import (
	"fmt"
	"regexp"
	"time"

	"github.com/rota-hpc/rota/controller/xcluster"
	"github.com/rota-hpc/rota/internal/conf"
)

// Config is the manager's part of controller.conf (mc_* keys).
type Config struct {
	// Name is this cluster's name among the others (cluster_name); ""
	// turns the manager off.
	Name string
	// Links are the admin's transfer paths between clusters (mc_link, as
	// `rota sim --link` takes them).
	Links []xcluster.Link
	// Tick is how often the manager publishes its view and routes.
	Tick time.Duration
	// ViewMaxAge: a peer whose latest view is older is not routed to
	// (the link or its controller is down).
	ViewMaxAge time.Duration
	// RouteOff keeps every job where it was submitted (views only).
	RouteOff bool
	// Margin is what a route must gain beyond the transfer.
	Margin time.Duration
	// MinPending: a job is considered after it has been pending this long
	// (Slurm may start it here meanwhile).
	MinPending time.Duration
	// AskTimeout bounds one request to a peer; RouteTimeout is how long a
	// route waits for an answer before it is aborted.
	AskTimeout, RouteTimeout time.Duration
	// Price per GPU-hour here (mc_price); DataGB a job's data when its
	// script declares none (#ROTA --data-gb=N).
	Price  float64
	DataGB float64
	// Speed is the relative speed per GPU type (speed.*).
	Speed map[string]float64
	// Moves of running jobs that declared a checkpoint signal (mc_moves):
	// only when xcluster's planned rule says the gain beats checkpoint +
	// restart (MoveCost), the transfer of checkpoint and data, Margin and
	// MarginFraction of the time left here, and not before the job has
	// run MinStay where it is.
	Moves          bool
	MoveCost       time.Duration
	MarginFraction float64
	MinStay        time.Duration
	// CheckpointGB is a job's checkpoint when its script declares none
	// (#ROTA --checkpoint-gb=N).
	CheckpointGB float64
	// TransferDir is where the checkpoint files of jobs moved here from
	// other clusters land (<route id>.ckpt), sent over the link by the
	// sending controller (transfer.go); "" takes none, and no job with a
	// checkpoint file (#ROTA --checkpoint-file=PATH) is moved here.
	TransferDir string
	// TransferMaxGB is the largest checkpoint file taken here
	// (mc_transfer_max_gb).
	TransferMaxGB float64
	// CheckpointWait bounds how long a job signalled to checkpoint may
	// take to end.
	CheckpointWait time.Duration
	// ProbeInterval is how often the link to each peer is timed
	// (probe.go); 0: only checkpoint transfers measure it.
	ProbeInterval time.Duration
	// LinkMaxAge: a measured figure older than this gives way to the
	// configured one (Links); 0: 3 x ProbeInterval (15 min with probes
	// off).
	LinkMaxAge time.Duration
}

// DefaultConfig is the manager's defaults (off until Name is set).
func DefaultConfig() Config {
	return Config{Tick: 2 * time.Second, ViewMaxAge: 20 * time.Second, Margin: time.Minute, MinPending: 5 * time.Second,
		AskTimeout: 5 * time.Second, RouteTimeout: 30 * time.Second, Price: 1,
		MoveCost: 2 * time.Minute, MarginFraction: 0.1, MinStay: 2 * time.Hour, CheckpointWait: 5 * time.Minute,
		TransferMaxGB: 100, ProbeInterval: 5 * time.Minute}
}

var clusterName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Read reads the manager's keys over c (docs/multicluster.md); the link
// between sites (mc_leaf_*, mc_link_secret_file) is the bus's, and
// mc_hold the plugins': the controller's config reads those.
func (c *Config) Read(v *conf.Values) error {
	v.String("cluster_name", &c.Name)
	if c.Name != "" && !clusterName.MatchString(c.Name) {
		return fmt.Errorf("cluster_name %q: letters, digits and _ only (it is part of NATS subjects)", c.Name)
	}
	var links []string
	v.List("mc_link", &links)
	for _, s := range links {
		l, err := xcluster.ParseLink(s)
		if err != nil {
			return fmt.Errorf("mc_link: %w", err)
		}
		c.Links = append(c.Links, l)
	}
	v.Duration("mc_tick", &c.Tick, 100*time.Millisecond, time.Hour)
	v.Duration("mc_view_max_age", &c.ViewMaxAge, time.Second, 24*time.Hour)
	route := !c.RouteOff
	v.Bool("mc_route", &route)
	c.RouteOff = !route
	v.Duration("mc_margin", &c.Margin, 0, 7*24*time.Hour)
	v.Duration("mc_min_pending", &c.MinPending, 0, 24*time.Hour)
	v.Duration("mc_ask_timeout", &c.AskTimeout, 100*time.Millisecond, time.Minute)
	v.Duration("mc_route_timeout", &c.RouteTimeout, time.Second, 24*time.Hour)
	v.Float("mc_price", &c.Price, 0, 1e9)
	v.Float("mc_data_gb", &c.DataGB, 0, 1e9)
	v.Bool("mc_moves", &c.Moves)
	v.Duration("mc_move_cost", &c.MoveCost, 0, 24*time.Hour)
	v.Float("mc_move_margin_fraction", &c.MarginFraction, 0, 10)
	v.Duration("mc_min_stay", &c.MinStay, 0, 30*24*time.Hour)
	v.Float("mc_checkpoint_gb", &c.CheckpointGB, 0, 1e9)
	v.String("mc_transfer_dir", &c.TransferDir)
	v.Float("mc_transfer_max_gb", &c.TransferMaxGB, 0.001, 1e6)
	v.Duration("mc_checkpoint_wait", &c.CheckpointWait, time.Second, 24*time.Hour)
	v.Duration("mc_probe_interval", &c.ProbeInterval, 0, 24*time.Hour)
	v.Duration("mc_link_max_age", &c.LinkMaxAge, 0, 7*24*time.Hour)
	if c.ProbeInterval > 0 && c.ProbeInterval < time.Second {
		return fmt.Errorf("mc_probe_interval %v: 0 (off) or 1s and more (each probe sends 512 KiB)", c.ProbeInterval)
	}
	if c.Name == "" && len(c.Links) > 0 {
		return fmt.Errorf("mc_link needs cluster_name")
	}
	return nil
}
