package jobs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var cgroupCases = []struct {
	name string
	in   string
	want Ref
	ok   bool
}{
	{"v2 step", "0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0\n", Ref{123, "0", -1, false, ""}, true},
	{"v2 batch", "0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0", Ref{77, "batch", -1, false, ""}, true},
	{"v2 per-node scope", "0::/system.slice/slurmstepd_node1.scope/job_9/step_extern/slurm\n", Ref{9, "extern", -1, true, ""}, true},
	{"v2 job level", "0::/system.slice/slurmstepd.scope/job_5\n", Ref{5, "", -1, false, ""}, true},
	{"v2 slurmstepd itself", "0::/system.slice/slurmstepd.scope/system\n", Ref{}, false},
	{"v2 step's slurmstepd", "0::/system.slice/slurmstepd.scope/job_8/step_0/slurm\n", Ref{8, "0", -1, true, ""}, true},
	{"v1", "12:pids:/user.slice\n7:devices:/slurm/uid_1000/job_123/step_4/task_0\n4:freezer:/slurm/uid_1000/job_123/step_4\n", Ref{123, "4", 1000, false, ""}, true},
	{"v1 per node", "4:memory:/slurm_n1/uid_0/job_42/step_interactive\n", Ref{42, "interactive", 0, false, "n1"}, true},
	{"user nested fake job", "0::/system.slice/slurmstepd.scope/job_1/step_0/user/task_0/job_2/step_0\n", Ref{1, "0", -1, false, ""}, true},
	{"not slurm", "0::/user.slice/user-1000.slice/session-3.scope\n", Ref{}, false},
	{"job outside slurm", "0::/user.slice/job_12/step_0\n", Ref{}, false},
	{"job 0", "0::/slurmstepd.scope/job_0/step_0\n", Ref{}, false},
	{"job overflow", "0::/slurmstepd.scope/job_4294967296/step_0\n", Ref{}, false},
	{"job garbage", "0::/slurmstepd.scope/job_12a/step_0\n", Ref{}, false},
	{"colon in path", "0::/weird:name/slurmstepd.scope/job_3/step_1\n", Ref{3, "1", -1, false, ""}, true},
	{"empty", "", Ref{}, false},
	{"no colons", "garbage\n\n", Ref{}, false},
	{"bad step", "0::/slurmstepd.scope/job_3/step_\n", Ref{3, "", -1, false, ""}, true},
}

func TestParseCgroup(t *testing.T) {
	for _, tc := range cgroupCases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseCgroup([]byte(tc.in))
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseCgroup(%q) = %+v,%v want %+v,%v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzParseCgroup(f *testing.F) {
	for _, tc := range cgroupCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ref, ok := ParseCgroup(data)
		if !ok {
			if ref != (Ref{}) {
				t.Fatalf("not ok but ref %+v", ref)
			}
			return
		}
		if ref.JobID == 0 {
			t.Fatalf("ok with job 0")
		}
		if !strings.Contains(string(data), "job_") || !strings.Contains(string(data), "slurm") {
			t.Fatalf("job %d found in %q", ref.JobID, data)
		}
		if ref.Step != "" && !validStep(ref.Step) {
			t.Fatalf("bad step %q", ref.Step)
		}
	})
}

func writeProc(t *testing.T, root string, pid int, cgroup, environ string) {
	t.Helper()
	dir := filepath.Join(root, itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
	if environ != "" {
		if err := os.WriteFile(filepath.Join(dir, "environ"), []byte(environ), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestProc(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 10, "0::/system.slice/slurmstepd.scope/job_5/step_0/user/task_0\n", "A=1\x00ROTA_CHECKPOINT_SIGNAL=USR2\x00")
	writeProc(t, root, 11, "0::/system.slice/slurmstepd.scope/job_5/step_batch/user/task_0\n", "")
	writeProc(t, root, 12, "0::/system.slice/slurmstepd.scope/job_6/step_0/user/task_0\n", "")
	writeProc(t, root, 13, "0::/user.slice\n", "")
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Proc{Root: root}

	if ref, err := p.JobOf(10); err != nil || ref.JobID != 5 || ref.Step != "0" {
		t.Errorf("JobOf(10) = %+v, %v", ref, err)
	}
	if _, err := p.JobOf(13); !errors.Is(err, ErrNoJob) {
		t.Errorf("JobOf(13) err = %v, want ErrNoJob", err)
	}
	if _, err := p.JobOf(99); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("JobOf(99) err = %v, want not exist", err)
	}
	pids, err := p.PIDsOf(5)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 2 || !(pids[0] == 10 && pids[1] == 11 || pids[0] == 11 && pids[1] == 10) {
		t.Errorf("PIDsOf(5) = %v", pids)
	}
	// Several slurmd on one host (/slurm_<node>/...): each agent keeps its
	// own node's jobs and never signals another's.
	writeProc(t, root, 20, "4:freezer:/slurm_node-a/uid_0/job_7/step_batch\n", "")
	writeProc(t, root, 21, "4:freezer:/slurm_node-b/uid_0/job_8/step_batch\n", "")
	a := Proc{Root: root, Node: "node-a"}
	if ref, err := a.JobOf(20); err != nil || ref.JobID != 7 || ref.Node != "node-a" {
		t.Errorf("node-a JobOf(20) = %+v, %v", ref, err)
	}
	if _, err := a.JobOf(21); !errors.Is(err, ErrOtherNode) || !errors.Is(err, ErrNoJob) {
		t.Errorf("node-a JobOf(21) err = %v, want ErrOtherNode", err)
	}
	if pids, _ := a.PIDsOf(8); len(pids) != 0 {
		t.Errorf("node-a PIDsOf(8) = %v: another slurmd's job", pids)
	}
	if pids, _ := (Proc{Root: root, Node: "node-b"}).PIDsOf(8); len(pids) != 1 || pids[0] != 21 {
		t.Errorf("node-b PIDsOf(8) = %v", pids)
	}

	if v, ok := p.Env(10, "ROTA_CHECKPOINT_SIGNAL"); !ok || v != "USR2" {
		t.Errorf("Env = %q,%v", v, ok)
	}
	if _, ok := p.Env(11, "ROTA_CHECKPOINT_SIGNAL"); ok {
		t.Errorf("Env found a variable in a process without environ")
	}
}

// On the real /proc, this test process belongs to no Slurm job (unless the
// tests run inside one).
func TestRealProc(t *testing.T) {
	ref, err := Proc{}.JobOf(uint32(os.Getpid()))
	if err != nil && !errors.Is(err, ErrNoJob) {
		t.Fatalf("JobOf(self) = %v", err)
	}
	t.Logf("this test runs in %+v", ref)
}

func TestNodesFromEnviron(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 20, "0::/\n", "SLURM_JOB_ID=31\x00SLURMD_NODENAME=node-v100\x00")
	writeProc(t, root, 21, "0::/\n", "SLURM_JOB_ID=32\x00SLURMD_NODENAME=node-k80\x00")
	writeProc(t, root, 22, "0::/\n", "SLURM_JOB_ID=x\x00SLURMD_NODENAME=node-k80\x00")
	writeProc(t, root, 23, "0::/\n", "HOME=/\x00")
	got := Proc{Root: root}.NodesFromEnviron()
	if len(got) != 2 || got[31] != "node-v100" || got[32] != "node-k80" {
		t.Errorf("NodesFromEnviron = %v", got)
	}
}
