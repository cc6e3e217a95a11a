package rounds

import (
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/estimate"
)

// fill: a pending job the mechanism sent to a full type starts now on a
// free one when it would finish sooner there than by waiting.
func TestFill(t *testing.T) {
	src := []string{"measured", "measured"}
	for _, c := range []struct {
		name        string
		runningLeft float64 // steps left of the job holding the only v100
		stepsLeft   float64 // the pending job's
		rel         bool    // rates only relative
		want        string
		migratable  bool
	}{
		{"v100 busy for long: start on the k80", 1000, 100, false, "k80", false},
		{"v100 frees soon: wait for it", 10, 100, false, "v100", false},
		{"unknown work, k80 under half as fast: wait", 1000, 0, true, "v100", false},
		{"unknown work but can be moved later: start now", 1000, 0, true, "k80", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := src
			if c.rel {
				s = []string{estimate.SourceRelative, estimate.SourceRelative}
			}
			jobs := []JobView{
				{ID: 1, Running: true, Type: "v100", GPUs: 1, Rates: []float64{0.5, 1}, RateSource: src, StepsLeft: c.runningLeft},
				{ID: 2, Type: "v100", GPUs: 1, Rates: []float64{0.3, 1}, RateSource: s, StepsLeft: c.stepsLeft, Submit: time.Unix(1, 0), Migratable: c.migratable},
			}
			plan := Plan{Types: []string{"k80", "v100"}, Capacity: []int{1, 1},
				Actions: []Action{{JobID: 1, Type: "v100"}, {JobID: 2, Type: "v100", Priority: 5}}}
			fill(&plan, jobs)
			if got := plan.Actions[1].Type; got != c.want {
				t.Errorf("pending job goes to %s, want %s (%s)", got, c.want, plan.Actions[1].Why)
			}
		})
	}
}
