// Package serve runs inference services (docs/serve.md): jobs of kind
// serve (--rota-kind=serve or the admin's serve_* rules), grouped into a
// service by --rota-service. It keeps a service's replicas on distinct
// nodes (or GPU types) by setting each pending replica's ExcNodeList to
// the nodes its siblings hold, and rolls each replica over before its time
// limit: a successor is submitted ahead on another node, and the
// predecessor is cancelled only once the successor's ready file is
// reported by its node agent. The round loop and the chain manager leave
// serve jobs alone; this package is the only one that touches them.
package serve

import (
	"fmt"
	"time"
)

// Spread values: what a service's replicas are kept apart by.
const (
	SpreadNodes = "nodes"
	SpreadTypes = "types"
)

// Config is the manager's part of controller.conf (serve_*).
type Config struct {
	// Off: no spreading and no rollovers (serve jobs are still left alone
	// by the round loop and the chains).
	Off bool
	// Tick is how often the manager reads the queue.
	Tick time.Duration
	// Lead is how long before a replica's time limit its successor is
	// submitted: its queue wait plus its start-up until ready must fit.
	Lead time.Duration
	// Spread is SpreadNodes or SpreadTypes (each replica on a type of its
	// own while there are types enough, else on a node of its own).
	Spread string
	// Hold is how long the plugin holds a named service's replica for the
	// manager to spread it (placer's ServeHoldS); the manager releases
	// replicas of one service one at a time, waiting at most this long
	// for the last released one to start.
	Hold time.Duration
	// Priority is the admin priority a successor gets, so it starts
	// before the predecessor's limit even on a busy cluster.
	Priority uint32
	// MaxTries bounds the successors of one job that may end before they
	// were ready; the job then runs to its limit.
	MaxTries int
}

// DefaultConfig is the manager's defaults.
func DefaultConfig() Config {
	return Config{Tick: 10 * time.Second, Lead: 10 * time.Minute, Spread: SpreadNodes, Hold: 30 * time.Second,
		Priority: 1_200_000, MaxTries: 3}
}

// Check refuses settings the manager cannot keep.
func (c Config) Check() error {
	if c.Spread != SpreadNodes && c.Spread != SpreadTypes {
		return fmt.Errorf("serve_spread %q: want %s or %s", c.Spread, SpreadNodes, SpreadTypes)
	}
	if c.Tick <= 0 {
		return fmt.Errorf("serve_tick must be positive")
	}
	if c.Lead < 2*c.Tick {
		return fmt.Errorf("serve_rollover_lead (%s) must be at least two serve_ticks (%s): the successor needs a tick to be submitted and one to be seen ready", c.Lead, c.Tick)
	}
	if c.MaxTries < 1 {
		return fmt.Errorf("serve_max_tries must be at least 1")
	}
	return nil
}
