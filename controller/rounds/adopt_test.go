package rounds

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// recordingDecisions is fakeDecisions that also stores the loop's own.
type recordingDecisions struct{ fakeDecisions }

func (d *recordingDecisions) Record(x *wire.Decision) { d.m[x.ID] = x }

// A pending GPU job with no note of Rota's (it passed a plugin that failed
// open) is adopted: a decision recorded, the job retyped by the round and
// its note written with the decision's id; jobs Rota left on purpose (a
// note), running jobs and CPU jobs are not; with adopt_unplaced off, none.
func TestAdoptFailedOpenJobs(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		f := newFake()
		f.commentRead = true
		decs := &recordingDecisions{fakeDecisions{m: map[string]*wire.Decision{}}}
		unnoted := func(id uint32, state, node string, noted bool, tres string) {
			j := &slurm.Job{ID: id, State: state, User: "u", Name: "job", Partition: "gpu", TresPerNode: tres, NumNodes: 1, NumTasks: 1, Noted: noted}
			if node != "" {
				j.Nodes, j.RunSeconds = []string{node}, 60
			}
			f.jobs[id] = j
		}
		unnoted(1, "PENDING", "", false, "gres:gpu:1")         // failed open: adopted
		unnoted(2, "PENDING", "", true, "gres:gpu:1")          // opted out (a note): left
		unnoted(3, "RUNNING", "node-k80", false, "gres:gpu:1") // running: left
		unnoted(4, "PENDING", "", false, "")                   // no GPU: left
		unnoted(5, "PENDING", "", false, "gres:gpu:1")         // names its nodes: left
		f.restricts = map[uint32]bool{5: true}
		cfg := DefaultConfig()
		cfg.AdoptUnplaced = on
		l, err := New(cfg, zerolog.Nop(), Deps{Sched: f, Decisions: decs, Measurements: noMeasurements{}, Estimator: &tableEst{rates: map[string][]float64{}}, Checkpoint: nil})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !on {
			if len(decs.m) != 0 || f.decisions[1] != "" || f.jobs[1].Features != "" {
				t.Fatalf("adopt_unplaced off: decisions %v, job 1 %+v", decs.m, f.jobs[1])
			}
			continue
		}
		if len(decs.m) != 1 {
			t.Fatalf("%d decisions recorded, want 1 (job 1's): %v", len(decs.m), decs.m)
		}
		id := f.decisions[1]
		d := decs.m[id]
		if d == nil || d.JobID != 1 || d.Given.Reason != AdoptedWhy {
			t.Fatalf("job 1's note names decision %q; recorded %v", id, decs.m)
		}
		if f.jobs[1].Features == "" {
			t.Errorf("the adopted job was not typed by the round (updates %v)", f.updates)
		}
		var note string
		for _, u := range f.updates {
			if c, ok := strings.CutPrefix(u, "1 comment="); ok {
				note = c
			}
		}
		if !strings.HasPrefix(note, "rota: gpu any->any") || !strings.Contains(note, "adopted") || slurm.DecisionInComment(note) != id {
			t.Errorf("job 1's note %q", note)
		}
		for _, u := range f.updates {
			if strings.HasPrefix(u, "2 ") || strings.HasPrefix(u, "3 comment") || strings.HasPrefix(u, "4 ") || strings.HasPrefix(u, "5 ") {
				t.Errorf("a job not to adopt was changed: %s", u)
			}
		}
		if s := l.Stats(); s.Adopted != 1 {
			t.Errorf("stats.Adopted %d", s.Adopted)
		}
		// The next round finds the job Rota's by its note, as a restarted
		// controller would: no second decision, no second note.
		if err := l.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(decs.m) != 1 || strings.Count(strings.Join(f.updates, "\n"), "1 comment=") != 1 {
			t.Errorf("second round: %d decisions, updates %v", len(decs.m), f.updates)
		}
	}
}
