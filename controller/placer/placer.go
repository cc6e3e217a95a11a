// Package placer is the controller's side of submit-time placement: it
// keeps what the placement rule (package placement) reads — the cluster's
// snapshot, the round loop's busy slots, users' headroom, the GPUs recent
// placements reserved — hands it to the plugins as a wire.PlaceState, takes
// in the decisions they made from it, and places the requests plugins in
// remote mode send. It runs on slurmctld's submit path (inside the
// plugin's deadline), so it never solves or does I/O there: the policy
// engine precomputes, Place looks up.
package placer

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nuid"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gputype"
)

// Result is a placement with the numbers behind it, for `rota explain`.
type Result = placement.Result

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
	// Kinds are the admin's rules for interactive and serve jobs
	// (interactive_* and serve_* in controller.conf).
	Kinds wire.KindRules
	// InteractiveReserve is, per GPU type, the GPUs batch jobs may not
	// take (interactive_reserve.<type>; docs/kinds.md).
	InteractiveReserve map[string]int
	// ServeHoldS holds a named service's replica for the controller to
	// spread it (serve_hold; 0 when nothing would release it).
	ServeHoldS uint32
	// ElsewhereHoldS holds a job whose allowed types are on no node here
	// for the multi-cluster manager (wire.PlaceRule.ElsewhereHoldS).
	ElsewhereHoldS uint32
	// GPUMemory is bytes per GPU by type where the admin set it
	// (gpu_mem.<type>); SliceMinMemory keeps jobs of unknown need off
	// smaller MIG slices (slice_min_gpu_mem). See wire.PlaceRule.
	GPUMemory      map[string]uint64
	SliceMinMemory uint64
	// Name is the policy named in annotations; "" means "interim". The
	// controller sets it to the round loop's policy, whose rounds then
	// correct what the submit-time rule chose.
	Name string
}

// DefaultConfig is what an unconfigured controller uses.
func DefaultConfig() Config {
	return Config{Speed: map[string]float64{}, WalltimeMargin: 1.5, WalltimeOverheadMin: 5, SliceMinMemory: gputype.DefaultSliceMinMemory}
}

// Rule is c as the wire form the plugin receives.
func (c *Config) Rule() wire.PlaceRule {
	return wire.PlaceRule{Speed: maps.Clone(c.Speed), RetypeTyped: c.RetypeTyped, WalltimeMargin: c.WalltimeMargin, WalltimeOverheadMin: c.WalltimeOverheadMin, Kinds: c.Kinds,
		InteractiveReserve: maps.Clone(c.InteractiveReserve), ServeHoldS: c.ServeHoldS, ElsewhereHoldS: c.ElsewhereHoldS,
		GPUMemory: maps.Clone(c.GPUMemory), SliceMinMemory: c.SliceMinMemory}
}

// Placer runs Rota's submit-time rule (package placement): jobs
// with known work go where they finish first, others to the type with the
// most free GPUs weighted by speed. The round loop corrects its choices
// later. Each placement reserves its GPUs (and books slots) in the view
// until the next refresh, so a burst of submissions spreads over the types
// instead of piling onto one.
//
// Placer also shares its state (State) so plugins can place locally with
// the same rule; the placements they report (Absorb) reserve GPUs here as
// the controller's own do.
type Placer struct {
	mu sync.Mutex
	// state's Reserved, Slots and Absorbed are owned here; State copies
	// the maps, and slot lists are replaced, never changed in place.
	state wire.PlaceState
	busy  map[string][]float64
	// held: GPUs interactive jobs held per type at the last round;
	// sessions: interactive placements, kept until a snapshot taken after
	// them replaces them (its round counts the session if it started).
	held     map[string]int
	sessions []roomTake
	// roomTaken: placements that took from users' headroom, and when,
	// kept until a headroom counted from a later queue read replaces them.
	roomTaken []roomTake
	// learned: what the round loop measured per user and job name
	// (Learn), the state's Learned built from it.
	learned map[string]learnedRates
}

type roomTake struct {
	at time.Time
	r  wire.Reservation
}

// New returns a Placer with no cluster view yet: until the
// first Update it keeps every request as it is.
func New(cfg Config) *Placer {
	return &Placer{state: wire.PlaceState{V: wire.Version, Controller: nuid.Next(), Policy: cfg.Name, Rule: cfg.Rule(),
		Reserved: map[string]int{}, Absorbed: map[string]uint64{}}}
}

// Name is the policy name written into annotations ("interim", "las"...).
func (p *Placer) Name() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nameLocked()
}

func (p *Placer) nameLocked() string {
	if p.state.Policy != "" {
		return p.state.Policy
	}
	return "interim"
}

// SetName names the policy whose rounds follow up on these placements.
func (p *Placer) SetName(name string) {
	p.mu.Lock()
	p.state.Policy = name
	p.state.Gen++
	p.mu.Unlock()
}

// SetBusy tells the placer, per GPU type, how many seconds each running
// job has left (one entry per GPU it holds; unknown ones left out). It
// takes effect at the next Update.
func (p *Placer) SetBusy(busy map[string][]float64) {
	p.mu.Lock()
	p.busy = busy
	p.mu.Unlock()
}

// SetInteractiveHeld tells the placer, per GPU type, how many GPUs
// interactive jobs hold (the round loop's last round). It takes effect
// at the next Update, with the snapshot that counts them as used.
func (p *Placer) SetInteractiveHeld(held map[string]int) {
	p.mu.Lock()
	p.held = held
	p.mu.Unlock()
}

// SetHeadroom replaces what the site's typed GPU limits leave each user,
// as the round loop counted it from the queue it read at asOf; the
// placements made since (whose jobs that read may not have seen) are
// taken off it again.
func (p *Placer) SetHeadroom(h map[uint32]wire.UserHeadroom, asOf time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Headroom = h
	kept := p.roomTaken[:0]
	for _, t := range p.roomTaken {
		if !t.at.Before(asOf) {
			kept = append(kept, t)
			placement.TakeRoom(&p.state, t.r)
		}
	}
	p.roomTaken = kept
	p.state.Gen++
}

// tookRoom remembers a placement that took from a user's headroom, and
// an interactive one.
func (p *Placer) tookRoom(r *wire.Reservation) {
	if r != nil && r.Room != "" {
		p.roomTaken = append(p.roomTaken, roomTake{at: time.Now(), r: *r})
	}
	if r != nil && r.Interactive && r.GPUs > 0 {
		p.sessions = append(p.sessions, roomTake{at: time.Now(), r: *r})
	}
}

// Update implements Placer. Reservations and bookings end: the new
// snapshot's use includes the jobs that have started. Absorbed stays: a
// plugin's placements up to it are covered by this view as much as by a
// reservation.
func (p *Placer) Update(s *cluster.Snapshot) {
	v := s.View()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state.Cluster = v
	p.state.Reserved = map[string]int{}
	p.state.InteractiveHeld = maps.Clone(p.held)
	kept := p.sessions[:0]
	for _, t := range p.sessions {
		// A session placed after the snapshot began is not in it: it
		// still holds its share of the reserve.
		if !t.at.Before(s.At) {
			kept = append(kept, t)
			if p.state.InteractiveHeld == nil {
				p.state.InteractiveHeld = map[string]int{}
			}
			p.state.InteractiveHeld[t.r.Type] += t.r.GPUs
		}
	}
	p.sessions = kept
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
func (p *Placer) Place(req *wire.PlaceRequest) Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := placement.Place(&p.state, nil, req)
	if r := res.Reserve; r != nil {
		placement.Apply(&p.state, *r)
		p.tookRoom(r)
		p.state.Gen++
	}
	return res
}

// Absorb counts the GPUs of a placement a plugin made locally, and
// remembers its sequence number so the plugin stops counting it itself
// once it sees a state with it.
func (p *Placer) Absorb(d *wire.Decision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := d.Reserve; r != nil {
		placement.Apply(&p.state, *r)
		p.tookRoom(r)
	}
	if d.Origin != "" && d.Seq > p.state.Absorbed[d.Origin] {
		p.state.Absorbed[d.Origin] = d.Seq
	}
	p.state.Gen++
}

// State is a copy of the placement state for plugins, stamped now.
func (p *Placer) State(now time.Time) *wire.PlaceState {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.state
	s.At = now.UTC()
	s.Policy = p.nameLocked()
	s.Reserved = maps.Clone(p.state.Reserved)
	s.InteractiveHeld = maps.Clone(p.state.InteractiveHeld)
	s.Absorbed = maps.Clone(p.state.Absorbed)
	s.Slots = maps.Clone(p.state.Slots)
	// Rule and Cluster are never changed in place, only replaced.
	return &s
}

// Generation changes whenever State would differ (other than its time).
func (p *Placer) Generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.Gen
}
