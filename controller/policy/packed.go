package policy

import (
	"context"
	"fmt"

	"github.com/rota-hpc/rota/controller/policy/lp"
)

// DefaultShareMargin is how much more two jobs sharing a GPU must get done
// together than one after the other (the sum of each one's throughput in
// the pair over its throughput alone) before a policy lets them share.
const DefaultShareMargin = 1.1

// Pair is two jobs that may share one GPU (Gavel's space sharing): A and B
// index Problem.Jobs (A == B: two members of a job row whose Count is at
// least 2). Throughput[k] is A's and B's steps/s while they share one GPU of
// type k; [0, 0] where they cannot (their memory does not fit, say).
// Only single-GPU jobs share.
type Pair struct {
	A, B       int
	Throughput [][2]float64
}

// shareGain is the pair's combined throughput on type k over each job's
// throughput alone there: above 1, sharing gets more done than taking
// turns. 0 where either cannot run.
func (p *Problem) shareGain(q *Pair, k int) float64 {
	ta, tb := p.Jobs[q.A].Throughput[k], p.Jobs[q.B].Throughput[k]
	if ta <= 0 || tb <= 0 || q.Throughput[k][0] <= 0 || q.Throughput[k][1] <= 0 {
		return 0
	}
	return q.Throughput[k][0]/ta + q.Throughput[k][1]/tb
}

func (p *Problem) validatePairs() error {
	K := len(p.Types)
	for i, q := range p.Pairs {
		if q.A < 0 || q.B < 0 || q.A >= len(p.Jobs) || q.B >= len(p.Jobs) {
			return fmt.Errorf("policy: pair %d names job %d and %d of %d", i, q.A, q.B, len(p.Jobs))
		}
		if len(q.Throughput) != K {
			return fmt.Errorf("policy: pair %d has %d throughputs for %d types", i, len(q.Throughput), K)
		}
		for _, t := range q.Throughput {
			if t[0] < 0 || t[1] < 0 || t[0] != t[0] || t[1] != t[1] {
				return fmt.Errorf("policy: pair %d has throughput %v", i, t)
			}
		}
		if p.Jobs[q.A].scale() != 1 || p.Jobs[q.B].scale() != 1 {
			return fmt.Errorf("policy: pair %d: only single-GPU jobs share a GPU", i)
		}
		if q.A == q.B && p.Jobs[q.A].count() < 2 {
			return fmt.Errorf("policy: pair %d pairs job %d with itself but it stands for one job", i, q.A)
		}
	}
	return nil
}

// packed is Gavel's space-sharing formulation of a max-min policy: the
// allocation units are single jobs and pairs of jobs, a pair's variable is
// the GPUs of a type it holds on average, and a job's throughput is what it
// gets alone plus what it gets in each pair it is in. It maximises t with,
// for every job row j (standing for Count_j identical jobs, per member):
//
//	time:     sum_k x_jk + sum_{pairs q with j, k} m_qj y_qk / Count_j <= 1
//	capacity: sum_j Count_j scale_j x_jk + sum_q y_qk <= Capacity_k
//	share:    c_j (sum_k T_jk x_jk + sum_{q,k} m_qj y_qk T^q_jk / Count_j) >= t
//
// m_qj is 2 for a pair of two members of j, else 1; c_j is the policy's
// weight for j (las: scale/(weight*equal share)). A pair gets a variable on
// a type only where sharing beats taking turns by the margin. The LP is
// solved by the dense simplex: it is meant for rows that group identical
// jobs (the simulator's) or the tens of jobs a real cluster's shared GPUs
// hold, not thousands of distinct jobs.
type packed struct {
	p      *Problem
	idx    []int // schedulable job rows
	margin float64
	// vars: x[i][k] (idx i) and y[q][k] (p.Pairs q) column, -1 if none.
	x, y [][]int
	t    int
	lp   *lp.Problem
	fair []int // row of job idx i's share constraint, -1 if none
}

func (j *Job) count() float64 {
	if j.Count <= 0 {
		return 1
	}
	return float64(j.Count)
}

func newPacked(p *Problem, idx []int, margin float64, agnostic bool) *packed {
	K := len(p.Types)
	pk := &packed{p: p, idx: idx, margin: margin, lp: &lp.Problem{}}
	pos := make(map[int]int, len(idx)) // job row -> idx position
	for i, j := range idx {
		pos[j] = i
	}
	pk.x = make([][]int, len(idx))
	for i, j := range idx {
		pk.x[i] = make([]int, K)
		u := p.usable(j, agnostic)
		for k := range pk.x[i] {
			pk.x[i][k] = -1
			if u[k] > 0 {
				pk.x[i][k] = pk.lp.AddVar(fmt.Sprintf("x_%d_%d", j, k), 0)
			}
		}
	}
	pk.y = make([][]int, len(p.Pairs))
	for q := range p.Pairs {
		pk.y[q] = make([]int, K)
		pr := &p.Pairs[q]
		_, okA := pos[pr.A]
		_, okB := pos[pr.B]
		for k := range pk.y[q] {
			pk.y[q][k] = -1
			// Agnostic policies see every type as equally fast: they have
			// no measure of what sharing gains, so they never share.
			if !agnostic && okA && okB && p.shareGain(pr, k) >= margin && p.Capacity[k] > 0 {
				pk.y[q][k] = pk.lp.AddVar(fmt.Sprintf("y_%d_%d_%d", pr.A, pr.B, k), 0)
			}
		}
	}
	pk.t = pk.lp.AddVar("t", 1)
	// time rows
	type term struct {
		col int
		val float64
	}
	timeRow := make([][]term, len(idx))
	shareRow := make([][]term, len(idx))
	capRow := make([][]term, K)
	for i, j := range idx {
		job := &p.Jobs[j]
		u := p.usable(j, agnostic)
		for k, c := range pk.x[i] {
			if c < 0 {
				continue
			}
			timeRow[i] = append(timeRow[i], term{c, 1})
			shareRow[i] = append(shareRow[i], term{c, u[k]})
			capRow[k] = append(capRow[k], term{c, job.count() * job.scale()})
		}
	}
	for q := range p.Pairs {
		pr := &p.Pairs[q]
		for k, c := range pk.y[q] {
			if c < 0 {
				continue
			}
			capRow[k] = append(capRow[k], term{c, 1})
			if pr.A == pr.B {
				i := pos[pr.A]
				n := p.Jobs[pr.A].count()
				timeRow[i] = append(timeRow[i], term{c, 2 / n})
				// both members of the pair are j's: each member's rate is
				// the mean of the two measured sides.
				shareRow[i] = append(shareRow[i], term{c, (pr.Throughput[k][0] + pr.Throughput[k][1]) / n})
				continue
			}
			for side, j := range [2]int{pr.A, pr.B} {
				i := pos[j]
				n := p.Jobs[j].count()
				timeRow[i] = append(timeRow[i], term{c, 1 / n})
				shareRow[i] = append(shareRow[i], term{c, pr.Throughput[k][side] / n})
			}
		}
	}
	toRow := func(name string, ts []term, sense lp.Sense, rhs float64) lp.Row {
		r := lp.Row{Name: name, Sense: sense, RHS: rhs}
		for _, t := range ts {
			r.Idx = append(r.Idx, t.col)
			r.Val = append(r.Val, t.val)
		}
		return r
	}
	for i, j := range idx {
		pk.lp.AddRow(toRow(fmt.Sprintf("time_%d", j), timeRow[i], lp.LE, 1))
	}
	for k := range capRow {
		pk.lp.AddRow(toRow(fmt.Sprintf("cap_%d", k), capRow[k], lp.LE, float64(p.Capacity[k])))
	}
	pk.fair = make([]int, len(idx))
	for i, j := range idx {
		// the coefficients are set per solve (setShares)
		r := toRow(fmt.Sprintf("share_%d", j), shareRow[i], lp.GE, 0)
		r.Idx = append(r.Idx, pk.t)
		r.Val = append(r.Val, -1)
		pk.fair[i] = pk.lp.AddRow(r)
	}
	return pk
}

// solve maximises t with job idx i's share row scaled by coef[i] (0: the
// job needs nothing, its row is dropped). It returns t, each idx job's row
// of X and each pair's GPUs per type.
func (pk *packed) solve(ctx context.Context, coef []float64) (float64, [][]float64, [][]float64, error) {
	prob, nFair := pk.formulated(coef)
	X := make([][]float64, len(pk.idx))
	Y := make([][]float64, len(pk.y))
	for i := range X {
		X[i] = make([]float64, len(pk.p.Types))
	}
	for q := range Y {
		Y[q] = make([]float64, len(pk.p.Types))
	}
	if nFair == 0 {
		return 0, X, Y, nil
	}
	res, err := lp.SolveDenseContext(ctx, prob)
	if err != nil {
		return 0, X, Y, err
	}
	if res.Status != lp.Optimal {
		return 0, X, Y, lp.ErrNotOptimal{Status: res.Status}
	}
	for i := range X {
		for k, c := range pk.x[i] {
			if c >= 0 {
				X[i][k] = max(0, res.X[c])
			}
		}
	}
	for q := range Y {
		for k, c := range pk.y[q] {
			if c >= 0 {
				Y[q][k] = max(0, res.X[c])
			}
		}
	}
	return res.X[pk.t], X, Y, nil
}

// formulated is the LP at coef, and how many share rows it kept.
func (pk *packed) formulated(coef []float64) (*lp.Problem, int) {
	prob := &lp.Problem{VarNames: pk.lp.VarNames, Obj: pk.lp.Obj}
	n := 0
	for r, row := range pk.lp.Rows {
		i := r - len(pk.lp.Rows) + len(pk.fair)
		if i < 0 {
			prob.Rows = append(prob.Rows, row)
			continue
		}
		if coef[i] <= 0 {
			continue
		}
		scaled := lp.Row{Name: row.Name, Idx: row.Idx, Val: make([]float64, len(row.Val)), Sense: row.Sense}
		for n, v := range row.Val {
			scaled.Val[n] = v * coef[i]
			if row.Idx[n] == pk.t {
				scaled.Val[n] = -1
			}
		}
		prob.Rows = append(prob.Rows, scaled)
		n++
	}
	return prob, n
}

// packedFill hands GPUs the packed optimum leaves idle to single jobs with
// time to spare, as fill does for the plain formulation: it only raises
// allocations, so no job's share falls.
func packedFill(p *Problem, X, Y [][]float64, idx []int, agnostic bool) {
	free := p.caps()
	room := make([]float64, len(p.Jobs))
	for j := range p.Jobs {
		room[j] = 1
		for k, x := range X[j] {
			free[k] -= p.Jobs[j].count() * p.Jobs[j].scale() * x
			room[j] -= x
		}
	}
	for q, pr := range p.Pairs {
		for k, y := range Y[q] {
			free[k] -= y
			if pr.A == pr.B {
				room[pr.A] -= 2 * y / p.Jobs[pr.A].count()
				continue
			}
			room[pr.A] -= y / p.Jobs[pr.A].count()
			room[pr.B] -= y / p.Jobs[pr.B].count()
		}
	}
	for _, c := range fillOrder(p, idx, agnostic) {
		if free[c.k] <= 1e-9 || room[c.j] <= 1e-9 {
			continue
		}
		per := p.Jobs[c.j].count() * p.Jobs[c.j].scale()
		add := min(room[c.j], free[c.k]/per)
		X[c.j][c.k] += add
		room[c.j] -= add
		free[c.k] -= add * per
	}
}
