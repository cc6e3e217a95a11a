package policy

import (
	"fmt"
	"sort"

	"github.com/rota-hpc/rota/controller/policy/lp"
)

// Options select a policy's variant.
type Options struct {
	// Agnostic makes the policy heterogeneity-agnostic: it sees every GPU
	// type as equally fast (Gavel's baselines).
	Agnostic bool
	// InnerFIFO makes hierarchical serve jobs within an entity in arrival
	// order instead of fairly.
	InnerFIFO bool
	// NoFill leaves capacity the optimum does not need idle; by default
	// max-min policies hand it to jobs that can use it, which never lowers
	// anyone's share and so keeps the optimum.
	NoFill bool
	// SpaceSharing lets las and ftf place Problem.Pairs on one GPU
	// (Gavel's space-sharing variants) where the pair's combined
	// throughput beats taking turns by ShareMargin (0: DefaultShareMargin).
	SpaceSharing bool
	ShareMargin  float64
}

func (o Options) shareMargin() float64 {
	if o.ShareMargin <= 0 {
		return DefaultShareMargin
	}
	return o.ShareMargin
}

// LPPolicy is a policy whose decision is one linear program; Formulate
// returns it (maximisation) so it can be exported and checked
// independently. Its optimum equals Allocation.Objective after Transform.
type LPPolicy interface {
	Policy
	Formulate(p *Problem) (*lp.Problem, error)
	// LPObjective maps the LP's optimum to Allocation.Objective (identity
	// for most; makespan reports 1/t).
	LPObjective(v float64) float64
}

var registry = map[string]func(Options) Policy{}

func register(name string, f func(Options) Policy) { registry[name] = f }

// New returns the named policy.
func New(name string, o Options) (Policy, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("policy: unknown policy %q (have %v)", name, Names())
	}
	if o.SpaceSharing && name != "las" && name != "ftf" {
		return nil, fmt.Errorf("policy: %s has no space-sharing variant (las and ftf have)", name)
	}
	return f(o), nil
}

// Names lists the registered policies.
func Names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func suffix(o Options) string {
	s := ""
	if o.Agnostic {
		s += "-agnostic"
	}
	if o.SpaceSharing {
		s += "-ss"
	}
	return s
}
