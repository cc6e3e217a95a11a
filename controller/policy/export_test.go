package policy

import "context"

// HierarchicalShares runs the hierarchical water-filling, by stages or
// (levels) level by level, and returns every schedulable job's share and
// the number of LPs solved, for the tests in package policy_test.
func HierarchicalShares(ctx context.Context, p *Problem, o Options, levels bool) ([]float64, int, error) {
	h := &hierarchicalPolicy{o: o}
	idx, _ := p.schedulable()
	solve := h.solve
	if levels {
		solve = h.solveLevels
	}
	w, err := solve(ctx, p, idx)
	if err != nil {
		return nil, 0, err
	}
	return w.val, len(w.levels), nil
}
