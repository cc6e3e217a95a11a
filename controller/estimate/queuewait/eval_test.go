package queuewait

import (
	"os"
	"testing"
)

// lonestar6 is the real trace, read from the shared data beside the
// repository (../shared/data from its root).
const lonestar6 = "../../../shared/data/traces/lonestar6-a100-sacct.tsv"

// TestLonestar6 trains on all but the last 30 days of the real trace and
// checks the model against the recent-mean baseline on those 30 days.
func TestLonestar6(t *testing.T) {
	if _, err := os.Stat(lonestar6); os.IsNotExist(err) {
		t.Skipf("real trace %s not present (it lives in ../shared/data beside the repository)", lonestar6)
	}
	jobs, st, err := ReadTraceFile(lonestar6, TraceOptions{Partition: "gpu-a100", GPUsPerNode: 3})
	if err != nil {
		t.Fatal(err)
	}
	// The README's 24,777 jobs; one line has an extra column.
	if st.Jobs != 24776 || st.Bad != 1 || st.Preamble != 3 {
		t.Fatalf("trace stats %+v", st)
	}
	rep, err := Evaluate(jobs, DefaultEvalOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mae %.3f h (baseline %.3f), median ae %.3f h (baseline %.3f), within 2x %.3f (baseline %.3f), train %d, test %d, trained in %.1fs",
		rep.MAEHours, rep.BaselineMAEHours, rep.MedianAEHours, rep.BaselineMedianAEHours,
		rep.Within2x, rep.BaselineWithin2x, rep.JobsTrain, rep.JobsTest, rep.TrainSeconds)
	if rep.JobsTest < 6000 || rep.JobsTrain < 15000 {
		t.Fatalf("train %d, test %d jobs", rep.JobsTrain, rep.JobsTest)
	}
	if !(rep.MAEHours < rep.BaselineMAEHours) {
		t.Errorf("MAE %.3f h does not beat the baseline's %.3f h", rep.MAEHours, rep.BaselineMAEHours)
	}
	// Predicting no wait at all has an MAE of the mean wait: the model
	// must beat that too (by little: see docs/queuewait.md).
	if !(rep.MAEHours < rep.TestMeanWaitHours) {
		t.Errorf("MAE %.3f h does not beat always predicting zero (%.3f h)", rep.MAEHours, rep.TestMeanWaitHours)
	}
	if !(rep.MedianAEHours < rep.BaselineMedianAEHours) {
		t.Errorf("median error %.3f h does not beat the baseline's %.3f h", rep.MedianAEHours, rep.BaselineMedianAEHours)
	}
	if !(rep.Within2x > rep.BaselineWithin2x) {
		t.Errorf("within 2x %.3f does not beat the baseline's %.3f", rep.Within2x, rep.BaselineWithin2x)
	}
}
