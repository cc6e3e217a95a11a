package rounds

import (
	"context"
	"reflect"
	"testing"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/estimate"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// measuredEst has job1 measured on k80 and completed on p100, v100 from
// the table; job2 only hinted; the rest unknown.
type measuredEst struct{ tableEst }

func (e *measuredEst) Rates(_ context.Context, key string, types []string) ([]float64, []string) {
	switch key {
	case estimate.Identity{User: "u", Name: "job1"}.Key():
		return []float64{1, 2.5, 4}, []string{estimate.SourceMeasured, estimate.SourceCompleted, estimate.SourceTable}
	case estimate.Identity{User: "u", Name: "job2"}.Key():
		return []float64{1, 2, 4}, []string{estimate.SourceHint, estimate.SourceHint, estimate.SourceHint}
	}
	return []float64{1, 2, 4}, []string{estimate.SourceRelative, estimate.SourceRelative, estimate.SourceRelative}
}

// What a round measured of a job is what the submit-time placement
// learns of its user's job name: the measured and completed rates only,
// keyed by the uid and name its user submitted with; nothing of a job
// only hinted, of one without a name, or of an adopted job whose user's
// uid was not found (0, which is root's).
func TestPlanTeachesWhatWasMeasured(t *testing.T) {
	t.Parallel()
	f, decs := newFake(), &fakeDecisions{m: map[string]*wire.Decision{}}
	f.add(1, "RUNNING", "node-k80", "k80", &wire.Decision{Asked: wire.PlaceRequest{UID: 7, Name: "lm"}}, decs)
	f.add(2, "RUNNING", "node-p100", "p100", &wire.Decision{Asked: wire.PlaceRequest{UID: 7, Name: "hinted"}}, decs)
	f.add(3, "PENDING", "", "", &wire.Decision{Asked: wire.PlaceRequest{UID: 7}}, decs)
	f.jobs[4] = &slurm.Job{ID: 4, State: "RUNNING", User: "u", Name: "job1"} // never in the plan: no decision
	// job 5 has job1's identity (same user and name: measured), but was
	// adopted with no uid found.
	f.add(5, "RUNNING", "node-v100", "v100", &wire.Decision{Asked: wire.PlaceRequest{Name: "adopted"}}, decs)
	f.jobs[5].Name = "job1"
	l := newLoop(t, f, decs, &measuredEst{}, nil)
	var plan *Plan
	l.OnSnapshot = func(_ *cluster.Snapshot, p *Plan) { plan = p }
	if err := l.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if plan == nil {
		t.Fatal("no plan")
	}
	want := map[string]map[string]float64{wire.LearnedKey(7, "lm"): {"k80": 1, "p100": 2.5}}
	if got := plan.Learned(); !reflect.DeepEqual(got, want) {
		t.Fatalf("learned %v, want %v", got, want)
	}
}
