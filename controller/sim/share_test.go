package sim

import (
	"context"
	"testing"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

// shareCfg is a saturated single-GPU workload (rate 7 an hour on 24 GPUs)
// with the table's pair throughputs.
func shareCfg(t *testing.T) (Config, *workload.Table) {
	t.Helper()
	tab, err := workload.Load("../../../shared/data/gavel/simulation_throughputs.json", []string{"v100", "p100", "k80"})
	if err != nil {
		t.Fatal(err)
	}
	g := workload.NewGenerator(tab, 3, false)
	var jobs []workload.Job
	for i := 0; i < 150; i++ {
		jobs = append(jobs, g.Next(7))
	}
	return Config{Types: []string{"v100", "p100", "k80"}, Capacity: []int{4, 4, 4}, Round: 360,
		GPUsPerNode: 4, Jobs: jobs, MeasureLo: 30, MeasureHi: 100, MigrationCost: 30, GroupIdentical: true}, tab
}

// TestSpaceSharingPays: on a saturated cluster, las with the table's pairs
// shares GPUs and finishes the same jobs sooner on average; with pairs that
// lose (each job at 0.5 of its speed alone, no better than taking turns)
// nothing shares and the result is plain las's.
func TestSpaceSharingPays(t *testing.T) {
	t.Parallel()
	c, tab := shareCfg(t)
	plainPol, _ := policy.New("las", policy.Options{})
	plain, err := Run(context.Background(), c, plainPol)
	if err != nil {
		t.Fatal(err)
	}
	ssPol, _ := policy.New("las", policy.Options{SpaceSharing: true})
	table := c
	table.Pairs = func(a, b workload.Job) [][2]float64 { return tab.PairRates(a.Type, b.Type, 1) }
	ss, err := Run(context.Background(), table, ssPol)
	if err != nil {
		t.Fatal(err)
	}
	if ss.JobsMeasured != plain.JobsMeasured || ss.SharedGPUHours <= 0 || ss.AvgJCTHours >= plain.AvgJCTHours {
		t.Fatalf("space sharing: %d jobs, avg JCT %.2f h, %.0f shared GPU-h; plain las: %d jobs, %.2f h",
			ss.JobsMeasured, ss.AvgJCTHours, ss.SharedGPUHours, plain.JobsMeasured, plain.AvgJCTHours)
	}
	losing := c
	losing.Pairs = func(a, b workload.Job) [][2]float64 {
		out := make([][2]float64, len(a.Rates))
		for k := range out {
			out[k] = [2]float64{a.Rates[k] / 2, b.Rates[k] / 2}
		}
		return out
	}
	lose, err := Run(context.Background(), losing, ssPol)
	if err != nil {
		t.Fatal(err)
	}
	if lose.SharedGPUHours != 0 {
		t.Fatalf("pairs that gain nothing shared %.1f GPU-h", lose.SharedGPUHours)
	}
	t.Logf("avg JCT h: las %.2f, las with space sharing %.2f (%.0f GPU-h shared), losing pairs %.2f",
		plain.AvgJCTHours, ss.AvgJCTHours, ss.SharedGPUHours, lose.AvgJCTHours)
}

// TestSpaceSharingFTF: ftf with space sharing (one row per job) runs and
// shares on the same workload.
func TestSpaceSharingFTF(t *testing.T) {
	t.Parallel()
	c, tab := shareCfg(t)
	c.GroupIdentical = false
	c.Jobs, c.MeasureLo, c.MeasureHi = c.Jobs[:60], 10, 40
	c.Pairs = func(a, b workload.Job) [][2]float64 { return tab.PairRates(a.Type, b.Type, 1) }
	pol, _ := policy.New("ftf", policy.Options{SpaceSharing: true})
	r, err := Run(context.Background(), c, pol)
	if err != nil {
		t.Fatal(err)
	}
	if r.JobsMeasured != 30 || r.SharedGPUHours <= 0 {
		t.Fatalf("ftf with space sharing: %d jobs measured, %.1f GPU-h shared", r.JobsMeasured, r.SharedGPUHours)
	}
}
