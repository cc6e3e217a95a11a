package slurm

import (
	"strings"
	"testing"
	"time"
)

// Real lines of `scontrol show job -o` (Slurm 22.05.8, the dev cluster).
const showCompleted = `JobId=10 JobName=my job UserId=alice(1000) GroupId=ml(2000) MCS_label=N/A Priority=4294901750 Nice=0 Account=(null) QOS=(null) JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:02 TimeLimit=00:01:00 TimeMin=N/A SubmitTime=2026-11-22T08:25:00 EligibleTime=2026-11-22T08:25:00 AccrueTime=2026-11-22T08:25:00 StartTime=2026-11-22T08:25:00 EndTime=2026-11-22T08:25:02 Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-22T08:25:00 Scheduler=Backfill Partition=gpu AllocNode:Sid=localhost:8549 ReqNodeList=(null) ExcNodeList=(null) NodeList=node-k80 BatchHost=node-k80 NumNodes=1 NumCPUs=2 NumTasks=1 CPUs/Task=2 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=1,billing=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=2 MinMemoryNode=1000M MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp StdErr=/tmp/x-10.out StdIn=/dev/null StdOut=/tmp/x-10.out Power= TresPerNode=gres:gpu:1`

const showPending = `JobId=7 JobName=train UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 Nice=0 Account=ml QOS=normal JobState=PENDING Reason=DependencyNeverSatisfied Dependency=afterok:6(failed) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=2-00:00:00 TimeMin=N/A SubmitTime=2026-11-22T08:22:10 EligibleTime=2026-11-22T08:22:40 StartTime=Unknown EndTime=Unknown Partition=gpu ExcNodeList=node-v100,node-p100 NumNodes=1-1 NumCPUs=1 NumTasks=1 CPUs/Task=1 MinMemoryNode=0 Features=ib&v100 AdminComment=rota: gpu any->v100, time 95 (las) [d=zRoJxe0UZ] WorkDir=/home/a b StdOut=/home/a b/slurm-7.out TresPerJob=gres:gpu:2`

func TestParseShowJob(t *testing.T) {
	s, err := ParseShowJob(showCompleted, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	want := JobSpec{ID: 10, User: "alice", UID: 1000, GID: 2000, State: "COMPLETED", Reason: "None", ExitCode: 0, Partition: "gpu",
		WorkDir: "/tmp", StdOut: "/tmp/x-10.out", StdErr: "/tmp/x-10.out", NumNodes: 1, NumTasks: 1, CPUsPerTask: 2,
		MemPerNode: "1000M", Requeue: true, TimeLimitMin: 1, Start: time.Date(2026, 11, 22, 8, 25, 0, 0, time.UTC),
		End: time.Date(2026, 11, 22, 8, 25, 2, 0, time.UTC), Eligible: time.Date(2026, 11, 22, 8, 25, 0, 0, time.UTC), TresPerNode: "gres:gpu:1"}
	if s != want {
		t.Errorf("got  %+v\nwant %+v", s, want)
	}
	if !s.Ended() {
		t.Error("COMPLETED not ended")
	}
	s, err = ParseShowJob(showPending+"\n", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != 7 || s.Account != "ml" || s.QOS != "normal" || s.Dependency != "afterok:6(failed)" || s.Features != "ib&v100" ||
		s.TimeLimitMin != 2880 || !s.Start.IsZero() || s.WorkDir != "/home/a b" || s.StdOut != "/home/a b/slurm-7.out" ||
		s.TresPerJob != "gres:gpu:2" || s.NumNodes != 1 || s.Ended() || s.Requeue || s.ExcNodes != "node-v100,node-p100" ||
		!s.Eligible.Equal(time.Date(2026, 11, 22, 8, 22, 40, 0, time.UTC)) {
		t.Errorf("%+v", s)
	}
	for _, bad := range []string{"", "JobName=x", "JobId=x JobName=y", "JobId=3 TimeLimit=soon", "JobId=3 StartTime=yesterday"} {
		if _, err := ParseShowJob(bad, time.UTC); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func FuzzParseShowJob(f *testing.F) {
	for _, s := range []string{showCompleted, showPending, "JobId=1", "JobId=1 UserId=(", "JobId=1 ExitCode=:"} {
		f.Add(s)
	}
	// No input may panic it, and what it accepts is a job it can name.
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseShowJob(s, time.UTC)
		if err == nil && !strings.Contains(s, "JobId=") {
			t.Fatalf("accepted %q without a JobId: %+v", s, j)
		}
	})
}
