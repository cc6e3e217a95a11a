// Package placement answers the job_submit plugin's question "which GPU
// type and what walltime?" from state the controller already holds. It runs
// on slurmctld's submit path (inside the plugin's deadline), so a Placer
// never solves or does I/O there: the policy engine precomputes, Place
// looks up.
package placement

import (
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nuid"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/placement/rule"
	"github.com/rota-hpc/rota/wire"
)

// Placer decides one placement. Implementations must be safe for
// concurrent use and fast: microseconds, not milliseconds.
type Placer interface {
	// Name is the policy name written into annotations ("interim", "las"...).
	Name() string
	// Update gives the Placer a fresh picture of the cluster.
	Update(s *cluster.Snapshot)
	Place(req *wire.PlaceRequest) Result
}

// Shared is a Placer whose decisions plugins can make themselves: it
// hands out its state and counts what they placed.
type Shared interface {
	Placer
	// State is what plugins need to place as this Placer would.
	State(now time.Time) *wire.PlaceState
	// Absorb takes in a decision a plugin made from a State.
	Absorb(d *wire.Decision)
	// Generation changes whenever State would differ (other than its time).
	Generation() uint64
}

// Result is a placement with the numbers behind it, for `rota explain`.
type Result = rule.Result

// Config holds the knobs shared by placement rules.
type Config struct {
	// Speed is each GPU type's relative speed for a typical job (the
	// admin's table); a type missing from it counts as 1.
	Speed map[string]float64
	// RetypeTyped lets Rota change a type the user named.
	RetypeTyped bool
	// WalltimeMargin multiplies an estimated run time (>= 1).
	WalltimeMargin float64
	// WalltimeOverheadMin is added to every estimate: start-up, data
	// loading, checkpoint writing.
	WalltimeOverheadMin uint32
	// Name is the policy named in annotations; "" means "interim". The
	// controller sets it to the round loop's policy, whose rounds then
	// correct what the submit-time rule chose.
	Name string
}

// DefaultConfig is what an unconfigured controller uses.
func DefaultConfig() Config {
	return Config{Speed: map[string]float64{}, WalltimeMargin: 1.5, WalltimeOverheadMin: 5}
}

// Rule is c as the wire form the plugin receives.
func (c *Config) Rule() wire.PlaceRule {
	return wire.PlaceRule{Speed: maps.Clone(c.Speed), RetypeTyped: c.RetypeTyped, WalltimeMargin: c.WalltimeMargin, WalltimeOverheadMin: c.WalltimeOverheadMin}
}

// View turns a cluster snapshot into the wire form the rule reads.
func View(s *cluster.Snapshot) *wire.ClusterView {
	if s == nil {
		return nil
	}
	v := &wire.ClusterView{At: s.At, Types: make(map[string]wire.TypeView, len(s.Types)),
		Partitions: make(map[string]wire.PartitionView, len(s.Partitions)), DefaultPartition: s.DefaultPartition, ByFeature: s.ByFeature}
	for t, tc := range s.Types {
		parts := make([]string, 0, len(tc.Partitions))
		for p, ok := range tc.Partitions {
			if ok {
				parts = append(parts, p)
			}
		}
		sort.Strings(parts)
		// Shapes are shared, never changed: the snapshot is immutable.
		v.Types[t] = wire.TypeView{Nodes: tc.Nodes, Total: tc.Total, Used: tc.Used, MaxPerNode: tc.MaxPerNode, Partitions: parts, Shapes: tc.Shapes}
	}
	for n, p := range s.Partitions {
		v.Partitions[n] = wire.PartitionView{MaxTimeMin: p.MaxTimeMin, DefaultTimeMin: p.DefaultTimeMin}
	}
	return v
}

// Interim is Rota's submit-time rule (controller/placement/rule): jobs
// with known work go where they finish first, others to the type with the
// most free GPUs weighted by speed. The round loop corrects its choices
// later. Each placement reserves its GPUs (and books slots) in the view
// until the next refresh, so a burst of submissions spreads over the types
// instead of piling onto one.
//
// Interim also shares its state (State) so plugins can place locally with
// the same rule; the placements they report (Absorb) reserve GPUs here as
// the controller's own do.
type Interim struct {
	mu sync.Mutex
	// state's Reserved, Slots and Absorbed are owned here; State copies
	// the maps, and slot lists are replaced, never changed in place.
	state wire.PlaceState
	busy  map[string][]float64
	// roomTaken: placements that took from users' headroom, and when,
	// kept until a headroom counted from a later queue read replaces them.
	roomTaken []roomTake
}

type roomTake struct {
	at time.Time
	r  wire.Reservation
}

// NewInterim returns an Interim placer with no cluster view yet: until the
// first Update it keeps every request as it is.
func NewInterim(cfg Config) *Interim {
	return &Interim{state: wire.PlaceState{V: wire.Version, Controller: nuid.Next(), Policy: cfg.Name, Rule: cfg.Rule(),
		Reserved: map[string]int{}, Absorbed: map[string]uint64{}}}
}

// Name implements Placer.
func (p *Interim) Name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nameLocked()
}

func (p *Interim) nameLocked() string {
	if p.state.Policy != "" {
		return p.state.Policy
	}
	return "interim"
}

// SetName names the policy whose rounds follow up on these placements.
func (p *Interim) SetName(name string) {
	p.mu.Lock()
	p.state.Policy = name
	p.state.Gen++
	p.mu.Unlock()
}

// SetBusy tells the placer, per GPU type, how many seconds each running
// job has left (one entry per GPU it holds; unknown ones left out). It
// takes effect at the next Update.
func (p *Interim) SetBusy(busy map[string][]float64) {
	p.mu.Lock()
	p.busy = busy
	p.mu.Unlock()
}

// SetHeadroom replaces what the site's typed GPU limits leave each user,
// as the round loop counted it from the queue it read at asOf; the
// placements made since (whose jobs that read may not have seen) are
// taken off it again.
func (p *Interim) SetHeadroom(h map[uint32]wire.UserHeadroom, asOf time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Headroom = h
	kept := p.roomTaken[:0]
	for _, t := range p.roomTaken {
		if !t.at.Before(asOf) {
			kept = append(kept, t)
			rule.TakeRoom(&p.state, t.r)
		}
	}
	p.roomTaken = kept
	p.state.Gen++
}

// tookRoom remembers a placement that took from a user's headroom.
func (p *Interim) tookRoom(r *wire.Reservation) {
	if r != nil && r.Room != "" {
		p.roomTaken = append(p.roomTaken, roomTake{at: time.Now(), r: *r})
	}
}

// Update implements Placer. Reservations and bookings end: the new
// snapshot's use includes the jobs that have started. Absorbed stays: a
// plugin's placements up to it are covered by this view as much as by a
// reservation.
func (p *Interim) Update(s *cluster.Snapshot) {
	v := View(s)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Cluster = v
	p.state.Reserved = map[string]int{}
	p.state.Slots = slotsOf(s, p.busy)
	p.state.Gen++
}

// slotsOf is, per GPU type, when each GPU is free in seconds from now: 0
// for the free ones, then the known remaining times of busy ones (the
// round loop's estimates), sorted. GPUs whose end is unknown are left out.
func slotsOf(s *cluster.Snapshot, busy map[string][]float64) map[string][]float64 {
	slots := make(map[string][]float64, len(s.Types))
	for t, tc := range s.Types {
		sl := make([]float64, tc.Free(), tc.Total)
		for _, b := range busy[t] {
			if len(sl) == tc.Total {
				break
			}
			if b >= 0 && !math.IsInf(b, 0) && !math.IsNaN(b) {
				sl = append(sl, b)
			}
		}
		slices.Sort(sl)
		slots[t] = sl
	}
	return slots
}

// Place implements Placer.
func (p *Interim) Place(req *wire.PlaceRequest) Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := rule.Place(&p.state, nil, req)
	if r := res.Reserve; r != nil {
		rule.Apply(&p.state, *r)
		p.tookRoom(r)
		p.state.Gen++
	}
	return res
}

// Absorb counts the GPUs of a placement a plugin made locally, and
// remembers its sequence number so the plugin stops counting it itself
// once it sees a state with it.
func (p *Interim) Absorb(d *wire.Decision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := d.Reserve; r != nil {
		rule.Apply(&p.state, *r)
		p.tookRoom(r)
	}
	if d.Origin != "" && d.Seq > p.state.Absorbed[d.Origin] {
		p.state.Absorbed[d.Origin] = d.Seq
	}
	p.state.Gen++
}

// State is a copy of the placement state for plugins, stamped now.
func (p *Interim) State(now time.Time) *wire.PlaceState {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.state
	s.At = now.UTC()
	s.Policy = p.nameLocked()
	s.Reserved = maps.Clone(p.state.Reserved)
	s.Absorbed = maps.Clone(p.state.Absorbed)
	s.Slots = maps.Clone(p.state.Slots)
	// Rule and Cluster are never changed in place, only replaced.
	return &s
}

// Generation changes whenever State would differ (other than its time).
func (p *Interim) Generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.Gen
}
