package workload

import (
	"math/rand"
	"strconv"

	"github.com/rota-hpc/rota/controller/policy"
)

// DrawProblem draws n jobs with Gavel's generator on a cluster of the given
// types and GPU counts, jitters each (job, type) throughput by a factor in
// [1-jitter, 1+jitter] and spreads the jobs over entities (e0..e<E-1>,
// weights 1-3). Each job gets a deadline between 1.5x and 5x its duration
// on a V100, for min-cost-slo. `rota solve` and the policy benchmarks both
// draw their problems here, so a benchmark measures the LP that the
// documented `rota solve` command exports.
func DrawProblem(tab *Table, types []string, caps []int, n int, seed int64, multi bool, jitter float64, entities int) *policy.Problem {
	gen := NewGenerator(tab, seed, multi)
	rng := rand.New(rand.NewSource(seed ^ 0x5eed))
	p := &policy.Problem{Types: types, Capacity: caps, EntityWeights: map[string]float64{}}
	for i := 0; i < n; i++ {
		j := gen.Next(0)
		ent := "e" + strconv.Itoa(rng.Intn(entities))
		p.EntityWeights[ent] = float64(1 + len(ent)%3)
		p.Jobs = append(p.Jobs, policy.Job{
			ID: strconv.Itoa(j.ID), Throughput: Jitter(rng, j.Rates, jitter), Scale: j.Scale,
			Steps: j.Steps, Entity: ent, Arrival: float64(i),
			Deadline: j.Duration * (1.5 + 3.5*rng.Float64()),
		})
	}
	return p
}
