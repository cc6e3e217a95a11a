package chains

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestSegmentTimes(t *testing.T) {
	cfg := Config{Mode: ModeAhead, CheckpointLead: 5 * time.Minute, Margin: time.Minute, Tick: 10 * time.Second}
	cases := []struct {
		name       string
		mode       string
		wait       time.Duration
		known      bool
		ckpt, subm time.Duration // after t0
	}{
		// 60-minute limit: checkpoint at 55 min.
		{"predicted wait and margin", ModeAhead, 7 * time.Minute, true, 55 * time.Minute, 47 * time.Minute},
		{"no prediction: the margin", ModeAhead, 0, false, 55 * time.Minute, 54 * time.Minute},
		{"a prediction that is not known is ignored", ModeAhead, time.Hour, false, 55 * time.Minute, 54 * time.Minute},
		{"after the end: no submit time", ModeAfterEnd, 7 * time.Minute, true, 55 * time.Minute, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cf := cfg
			cf.Mode = c.mode
			got := cf.SegmentTimes(t0, 60, c.wait, c.known)
			if !got.End.Equal(t0.Add(time.Hour)) || !got.CheckpointAt.Equal(t0.Add(c.ckpt)) {
				t.Errorf("end %s checkpoint %s", got.End, got.CheckpointAt)
			}
			if c.subm < 0 {
				if !got.SubmitAt.IsZero() {
					t.Errorf("submit at %s, want none", got.SubmitAt)
				}
			} else if !got.SubmitAt.Equal(t0.Add(c.subm)) {
				t.Errorf("submit at %s, want %s", got.SubmitAt.Sub(t0), c.subm)
			}
		})
	}
	// A margin smaller than two ticks is raised to two ticks, so a tick
	// late is still ahead.
	cf := cfg
	cf.Margin, cf.Tick = time.Second, time.Minute
	if got := cf.SegmentTimes(t0, 60, 0, false); !got.SubmitAt.Equal(t0.Add(53 * time.Minute)) {
		t.Errorf("submit at %s, want 53m", got.SubmitAt.Sub(t0))
	}
}

func TestConfigCheck(t *testing.T) {
	good := DefaultConfig()
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"default", func(*Config) {}, ""},
		{"lead shorter than tick and grace", func(c *Config) { c.CheckpointLead = time.Minute }, "must exceed"},
		{"mode", func(c *Config) { c.Mode = "later" }, "chain_mode"},
		{"one segment", func(c *Config) { c.MaxSegments = 1 }, "at least 2"},
	}
	for _, c := range cases {
		cf := good
		c.edit(&cf)
		err := cf.Check()
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestPlannedSegments(t *testing.T) {
	lead := 5 * time.Minute
	cases := []struct {
		remaining, ran time.Duration
		limit          uint32
		want           int
	}{
		{50 * time.Minute, 0, 60, 1},
		{55 * time.Minute, 0, 60, 1},
		{56 * time.Minute, 0, 60, 2},
		{137 * time.Minute, 0, 60, 3}, // 2.5 x 55
		{100 * time.Minute, 30 * time.Minute, 60, 3},
		{time.Hour, 0, 5, 0}, // the lead eats the limit
	}
	for _, c := range cases {
		if got := PlannedSegments(c.remaining, c.limit, lead, c.ran); got != c.want {
			t.Errorf("remaining %s ran %s limit %d: %d segments, want %d", c.remaining, c.ran, c.limit, got, c.want)
		}
	}
}

func TestNeedsSuccessorAndResumed(t *testing.T) {
	at := t0.Add(10 * time.Minute)
	if NeedsSuccessor(t0, at, 9*time.Minute, true) || !NeedsSuccessor(t0, at, 11*time.Minute, true) || !NeedsSuccessor(t0, at, 0, false) {
		t.Error("NeedsSuccessor")
	}
	for _, c := range []struct {
		prev, first uint64
		want        bool
	}{{1000, 990, true}, {1000, 500, true}, {1000, 10, false}, {0, 10, true}, {1000, 0, true}} {
		if got := Resumed(c.prev, c.first); got != c.want {
			t.Errorf("Resumed(%d, %d) = %v", c.prev, c.first, got)
		}
	}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name string
		f    EndFacts
		want Outcome
	}{
		{"checkpointed and exited", EndFacts{Known: true, State: "COMPLETED", Signalled: true}, Continue},
		{"ended on its own before its limit", EndFacts{Known: true, State: "COMPLETED"}, Done},
		{"progress at total wins over a signal", EndFacts{Known: true, State: "COMPLETED", Signalled: true, StepsDone: true}, Done},
		{"user scancel", EndFacts{Known: true, State: "CANCELLED"}, Cancelled},
		{"user scancel after the signal", EndFacts{Known: true, State: "CANCELLED", Signalled: true}, Cancelled},
		{"killed at its limit", EndFacts{Known: true, State: "TIMEOUT"}, Rescue},
		{"node failed", EndFacts{Known: true, State: "NODE_FAIL"}, Rescue},
		{"grace ran out after the signal", EndFacts{Known: true, State: "FAILED", ExitCode: 143, Signalled: true}, Rescue},
		{"failed on its own", EndFacts{Known: true, State: "FAILED", ExitCode: 1}, Failed},
		{"forgotten after the signal", EndFacts{Signalled: true}, Continue},
		{"forgotten, never signalled", EndFacts{}, Failed},
	}
	for _, c := range cases {
		got, why := Judge(c.f)
		if got != c.want || why == "" {
			t.Errorf("%s: %s (%q), want %s", c.name, got, why, c.want)
		}
	}
}

func TestChooseDev(t *testing.T) {
	cases := []struct {
		name     string
		steps    float64
		mainWait time.Duration
		devs     []DevQueue
		want     string
	}{
		{"idle and faster", 600, 0, []DevQueue{{Partition: "dev", MaxTimeMin: 30, Idle: true, Rate: 2}}, "dev"},
		{"idle, same speed, main waits", 600, 10 * time.Minute, []DevQueue{{Partition: "dev", MaxTimeMin: 30, Idle: true, Rate: 1}}, "dev"},
		{"idle, same speed, main takes over", 600, 0, []DevQueue{{Partition: "dev", MaxTimeMin: 30, Idle: true, Rate: 1}}, ""},
		{"busy", 600, time.Hour, []DevQueue{{Partition: "dev", MaxTimeMin: 30, Idle: false, Rate: 2}}, ""},
		{"work does not fit its MaxTime", 6000, time.Hour, []DevQueue{{Partition: "dev", MaxTimeMin: 30, Idle: true, Rate: 2}}, ""},
		{"rate unknown there", 600, time.Hour, []DevQueue{{Partition: "dev", MaxTimeMin: 30, Idle: true}}, ""},
		{"the sooner of two", 600, time.Hour, []DevQueue{{Partition: "a", MaxTimeMin: 30, Idle: true, Rate: 1}, {Partition: "b", MaxTimeMin: 30, Idle: true, Rate: 3}}, "b"},
	}
	for _, c := range cases {
		got, why := ChooseDev(c.steps, 1, c.mainWait, 1.2, c.devs)
		if got != c.want || (got != "") != (why != "") {
			t.Errorf("%s: %q (%s), want %q", c.name, got, why, c.want)
		}
	}
}

func TestSuccessorArgs(t *testing.T) {
	spec := &slurm.JobSpec{ID: 41, User: "alice", Account: "ml", WorkDir: "/home/alice/run", StdOut: "/home/alice/run/slurm-41.out",
		StdErr: "/home/alice/run/slurm-41.out", NumNodes: 1, NumTasks: 1, CPUsPerTask: 2, MemPerNode: "4000M", Requeue: true,
		TresPerNode: "gres:gpu:1"}
	args, env := SuccessorArgs(spec, Successor{Chain: 41, N: 2, Name: "train", Partition: "gpu", LimitMin: 60, After: 41,
		Features: "ib&v100", Hints: wire.Hints{Steps: 9000, CheckpointSignal: "USR1", Throughput: map[string]float64{"v100": 10, "k80": 2.5}}}, true)
	want := []string{"--job-name=train", "--partition=gpu", "--time=60", "--open-mode=append", "--account=ml", "--dependency=afterok:41",
		"--chdir=/home/alice/run", "--output=/home/alice/run/slurm-%j.out", "--nodes=1", "--ntasks=1", "--cpus-per-task=2",
		"--mem=4000M", "--requeue", "--gres=gpu:1", "--constraint=ib&v100", "--rota-steps=9000", "--rota-checkpoint-signal=USR1",
		"--rota-throughput=k80:2.5,v100:10", "--rota-chain=on"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args\n%q\nwant\n%q", args, want)
	}
	if !reflect.DeepEqual(env, []string{"ROTA_CHAIN_ID=41", "ROTA_CHAIN_SEGMENT=2"}) {
		t.Errorf("env %q", env)
	}
	// GPUs per job and per task, a job id that is part of a longer
	// number left alone, no SPANK options.
	spec = &slurm.JobSpec{ID: 7, StdOut: "/x/out-17-7.log", TresPerJob: "gres:gpu:v100:2", TresPerTask: "gres/gpu:1"}
	args, _ = SuccessorArgs(spec, Successor{Chain: 7, N: 3, Name: "n", Partition: "dev", LimitMin: 30}, false)
	want = []string{"--job-name=n", "--partition=dev", "--time=30", "--open-mode=append", "--output=/x/out-17-%j.log",
		"--gpus=v100:2", "--gpus-per-task=1"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args\n%q\nwant\n%q", args, want)
	}
	// The id in a directory's name is where the file is, not its name
	// (a successor writing to a directory that does not exist fails).
	for path, wantOut := range map[string]string{
		"/var/lib/dev-9cc6cd3e/out/6":     "/var/lib/dev-9cc6cd3e/out/%j",
		"/runs/6/slurm-6.out":             "/runs/6/slurm-%j.out",
		"/runs/6/fixed.log":               "/runs/6/fixed.log",
		"relative/6-6/job6.err-6":         "relative/6-6/job%j.err-%j",
		"/home/a b/6/serve_6_replica.out": "/home/a b/6/serve_%j_replica.out",
	} {
		if got := withJobPattern(path, 6); got != wantOut {
			t.Errorf("withJobPattern(%q) = %q, want %q", path, got, wantOut)
		}
	}
}

func TestObservedWaits(t *testing.T) {
	o := NewObservedWaits()
	job := func(id uint32, part, state string, wait time.Duration, restarts int) slurm.Job {
		return slurm.Job{ID: id, Partition: part, State: state, Submit: t0, Start: t0.Add(wait), Restarts: restarts}
	}
	if _, ok := o.PredictWait(WaitRequest{Partition: "gpu"}); ok {
		t.Fatal("a prediction from nothing")
	}
	o.Observe([]slurm.Job{job(1, "gpu", "RUNNING", 10*time.Second, 0), job(2, "gpu", "RUNNING", 20*time.Second, 0)}, nil)
	if _, ok := o.PredictWait(WaitRequest{Partition: "gpu"}); ok {
		t.Fatal("a prediction from two waits")
	}
	o.Observe([]slurm.Job{
		job(1, "gpu", "RUNNING", 99*time.Hour, 0), // counted once
		job(3, "gpu", "RUNNING", 30*time.Second, 0),
		job(4, "gpu", "RUNNING", time.Hour, 1),       // requeued: submit time reset
		job(5, "gpu", "PENDING", time.Hour, 0),       // not started
		job(6, "gpu", "RUNNING", 2*time.Hour, 0),     // a chain successor: skipped
		job(7, "dev", "RUNNING", 5*time.Second, 0),   // another partition
		job(8, "gpu", "RUNNING", 100*time.Second, 0), // the 90th percentile of 10,20,30,100
	}, func(id uint32) bool { return id == 6 })
	got, ok := o.PredictWait(WaitRequest{Partition: "gpu"})
	if !ok || got != 100*time.Second {
		t.Errorf("predicted %s %v, want 100s", got, ok)
	}
	if _, ok := o.PredictWait(WaitRequest{Partition: "dev"}); ok {
		t.Error("dev predicted from one wait")
	}
}
