// Package lp holds Rota's linear-programming core: a problem type shared by
// every LP policy, a dense bounded-size simplex used on the small reduced
// problems the structured solvers produce, and a free-MPS writer so that an
// independent solver (clp, glpsol) can check any LP we solve.
package lp

import "fmt"

// Sense is the direction of a constraint row.
type Sense int8

const (
	LE Sense = iota // a·x <= b
	GE              // a·x >= b
	EQ              // a·x == b
)

func (s Sense) String() string {
	switch s {
	case LE:
		return "L"
	case GE:
		return "G"
	default:
		return "E"
	}
}

// Row is one sparse constraint.
type Row struct {
	Name  string
	Idx   []int
	Val   []float64
	Sense Sense
	RHS   float64
}

// Problem is "maximise Obj·x subject to Rows, x >= 0". Every Rota LP has
// non-negative variables, so there are no other bounds to carry.
type Problem struct {
	VarNames []string
	Obj      []float64
	Rows     []Row
}

// NumVars is the number of columns.
func (p *Problem) NumVars() int { return len(p.Obj) }

// AddVar appends a column and returns its index.
func (p *Problem) AddVar(name string, obj float64) int {
	p.VarNames = append(p.VarNames, name)
	p.Obj = append(p.Obj, obj)
	return len(p.Obj) - 1
}

// AddRow appends a constraint and returns its index.
func (p *Problem) AddRow(r Row) int {
	p.Rows = append(p.Rows, r)
	return len(p.Rows) - 1
}

// Value evaluates the objective at x.
func (p *Problem) Value(x []float64) float64 {
	v := 0.0
	for j, c := range p.Obj {
		v += c * x[j]
	}
	return v
}

// MaxViolation is the largest amount by which x breaks a row or a
// non-negativity bound; tests use it to check solutions independently of the
// solver that produced them.
func (p *Problem) MaxViolation(x []float64) float64 {
	worst := 0.0
	for _, v := range x {
		if -v > worst {
			worst = -v
		}
	}
	for _, r := range p.Rows {
		lhs := 0.0
		for i, j := range r.Idx {
			lhs += r.Val[i] * x[j]
		}
		var viol float64
		switch r.Sense {
		case LE:
			viol = lhs - r.RHS
		case GE:
			viol = r.RHS - lhs
		case EQ:
			viol = lhs - r.RHS
			if viol < 0 {
				viol = -viol
			}
		}
		if viol > worst {
			worst = viol
		}
	}
	return worst
}

// Status is the outcome of a solve.
type Status int8

const (
	Optimal Status = iota
	Infeasible
	Unbounded
	IterationLimit
	Cancelled // the context was cancelled (SolveDenseContext)
)

func (s Status) String() string {
	return [...]string{"optimal", "infeasible", "unbounded", "iteration limit", "cancelled"}[s]
}

// Result is a solve's outcome. Dual[i] is d(objective)/d(RHS of row i) for
// the maximisation, so a binding <= capacity row has a non-negative price.
type Result struct {
	Status     Status
	Objective  float64
	X          []float64
	Dual       []float64
	Iterations int
}

// ErrNotOptimal reports a solve that ended without an optimum.
type ErrNotOptimal struct{ Status Status }

func (e ErrNotOptimal) Error() string { return fmt.Sprintf("lp: %v", e.Status) }
