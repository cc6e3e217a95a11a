package jobs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
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
	{"v2 step", "0::/system.slice/slurmstepd.scope/job_123/step_0/user/task_0\n", Ref{JobID: 123, Step: "0", UID: -1}, true},
	{"v2 batch", "0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0", Ref{JobID: 77, Step: "batch", UID: -1}, true},
	{"v2 per-node scope", "0::/system.slice/slurmstepd_node1.scope/job_9/step_extern/slurm\n", Ref{JobID: 9, Step: "extern", UID: -1, Stepd: true}, true},
	{"v2 job level", "0::/system.slice/slurmstepd.scope/job_5\n", Ref{JobID: 5, UID: -1}, true},
	{"v2 slurmstepd itself", "0::/system.slice/slurmstepd.scope/system\n", Ref{}, false},
	{"v2 step's slurmstepd", "0::/system.slice/slurmstepd.scope/job_8/step_0/slurm\n", Ref{JobID: 8, Step: "0", UID: -1, Stepd: true}, true},
	{"v1", "12:pids:/user.slice\n7:devices:/slurm/uid_1000/job_123/step_4/task_0\n4:freezer:/slurm/uid_1000/job_123/step_4\n", Ref{JobID: 123, Step: "4", UID: 1000}, true},
	{"v1 per node", "4:memory:/slurm_n1/uid_0/job_42/step_interactive\n", Ref{JobID: 42, Step: "interactive", UID: 0, Node: "n1"}, true},
	{"user nested fake job", "0::/system.slice/slurmstepd.scope/job_1/step_0/user/task_0/job_2/step_0\n", Ref{JobID: 1, Step: "0", UID: -1}, true},
	{"not slurm", "0::/user.slice/user-1000.slice/session-3.scope\n", Ref{}, false},
	{"job outside slurm", "0::/user.slice/job_12/step_0\n", Ref{}, false},
	{"job 0", "0::/slurmstepd.scope/job_0/step_0\n", Ref{}, false},
	{"job overflow", "0::/slurmstepd.scope/job_4294967296/step_0\n", Ref{}, false},
	{"job garbage", "0::/slurmstepd.scope/job_12a/step_0\n", Ref{}, false},
	{"colon in path", "0::/weird:name/slurmstepd.scope/job_3/step_1\n", Ref{JobID: 3, Step: "1", UID: -1}, true},
	{"empty", "", Ref{}, false},
	{"no colons", "garbage\n\n", Ref{}, false},
	{"bad step", "0::/slurmstepd.scope/job_3/step_\n", Ref{JobID: 3, UID: -1}, true},
	// Several slurmd on one host with cgroup/v2 (MULTIPLE_SLURMD builds).
	{"v2 node scope", "0::/system.slice/node-a_slurmstepd.scope/job_12/step_batch/user/task_special\n", Ref{JobID: 12, Step: "batch", UID: -1, Node: "node-a"}, true},
	// Slurm 26.05 cgroup/v2: the job level named by SLUID.
	{"v2 sluid", "0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_batch/user/task_special\n", Ref{Step: "batch", UID: -1, SLUID: "sEKNKTV3WPV500"}, true},
	{"v2 sluid stepd", "0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/slurm\n", Ref{Step: "0", UID: -1, Stepd: true, SLUID: "sEKNKTV3WPV500"}, true},
	{"v2 node scope sluid", "0::/system.slice/n1_slurmstepd.scope/s0123456789ABC/step_extern/user/task_special\n", Ref{Step: "extern", UID: -1, Node: "n1", SLUID: "s0123456789ABC"}, true},
}

func TestParseCgroup(t *testing.T) {
	t.Parallel()
	for _, tc := range cgroupCases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseCgroup([]byte(tc.in))
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseCgroup(%q) = %+v,%v want %+v,%v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	t.Parallel()
	const sluid = "sEKNKTV3WPV500"
	for _, tc := range []struct {
		name string
		in   string
		want Ref
		ok   bool
	}{
		{"node scope job", "/system.slice/node-a_slurmstepd.scope/job_12/step_batch/user/task_special", Ref{JobID: 12, Step: "batch", UID: -1, Node: "node-a"}, true},
		{"node scope odd name", "/system.slice/gpu_01.rack-2_slurmstepd.scope/job_3/step_0/user/task_0", Ref{JobID: 3, Step: "0", UID: -1, Node: "gpu_01.rack-2"}, true},
		{"node named slurm", "/system.slice/slurm_slurmstepd.scope/job_3/step_0", Ref{JobID: 3, Step: "0", UID: -1, Node: "slurm"}, true},
		{"node scope stepd", "/system.slice/n1_slurmstepd.scope/job_4/step_extern/slurm", Ref{JobID: 4, Step: "extern", UID: -1, Stepd: true, Node: "n1"}, true},
		{"node scope sluid", "/system.slice/node-a_slurmstepd.scope/" + sluid + "/step_batch/user/task_special", Ref{Step: "batch", UID: -1, Node: "node-a", SLUID: sluid}, true},
		{"plain scope sluid", "/system.slice/slurmstepd.scope/" + sluid + "/step_batch/user/task_special", Ref{Step: "batch", UID: -1, SLUID: sluid}, true},
		{"plain scope sluid stepd", "/system.slice/slurmstepd.scope/" + sluid + "/step_batch/slurm", Ref{Step: "batch", UID: -1, Stepd: true, SLUID: sluid}, true},
		{"sluid job level", "/system.slice/slurmstepd.scope/" + sluid, Ref{UID: -1, SLUID: sluid}, true},
		{"sluid all digits", "/system.slice/slurmstepd.scope/s0000000000000/step_0/user/task_0", Ref{Step: "0", UID: -1, SLUID: "s0000000000000"}, true},
		{"user-delegated slurm dir", "/user.slice/user-1000.slice/user@1000.service/app.slice/slurm/job_42/step_0", Ref{}, false},
		{"user-delegated node scope", "/user.slice/user-1000.slice/user@1000.service/x_slurmstepd.scope/job_42/step_0", Ref{}, false},
		{"user-delegated sluid", "/user.slice/user-1000.slice/user@1000.service/slurmstepd.scope/" + sluid + "/step_0/slurm", Ref{}, false},
		{"service subtree", "/system.slice/foo.service/slurm/job_42/step_0", Ref{}, false},
		{"container then slurm", "/docker.slice/docker-ab12.scope/system.slice/slurmstepd.scope/job_7/step_0/user/task_0", Ref{JobID: 7, Step: "0", UID: -1}, true},
		{"slurmstepd system", "/system.slice/slurmstepd.scope/system", Ref{}, false},
		{"node scope system", "/system.slice/n1_slurmstepd.scope/system", Ref{}, false},
		{"empty node", "/system.slice/_slurmstepd.scope/job_3/step_0", Ref{}, false},
		{"bad node char", "/system.slice/n!1_slurmstepd.scope/job_3/step_0", Ref{}, false},
		{"node scope typo", "/system.slice/n1_slurmstepd.slice/job_3/step_0", Ref{}, false},
		{"sluid short", "/system.slice/slurmstepd.scope/sEKNKTV3WPV50/step_0/user/task_0", Ref{}, false},
		{"sluid long", "/system.slice/slurmstepd.scope/sEKNKTV3WPV5000/step_0/user/task_0", Ref{}, false},
		{"sluid lowercase", "/system.slice/slurmstepd.scope/seknktv3wpv500/step_0/user/task_0", Ref{}, false},
		{"sluid capital S", "/system.slice/slurmstepd.scope/SEKNKTV3WPV500/step_0/user/task_0", Ref{}, false},
		{"sluid I", "/system.slice/slurmstepd.scope/sEKNKTV3WPV50I/step_0/user/task_0", Ref{}, false},
		{"sluid L", "/system.slice/slurmstepd.scope/sLKNKTV3WPV500/step_0/user/task_0", Ref{}, false},
		{"sluid O", "/system.slice/slurmstepd.scope/sEKNKTV3WPVO00/step_0/user/task_0", Ref{}, false},
		{"sluid U", "/system.slice/slurmstepd.scope/sEKNKUV3WPV500/step_0/user/task_0", Ref{}, false},
		{"sluid outside slurm", "/user.slice/" + sluid + "/step_0", Ref{}, false},
		// Cgroups a user creates below the task level never win.
		{"user fake job under sluid", "/system.slice/slurmstepd.scope/" + sluid + "/step_0/user/task_0/job_2/step_0/slurm", Ref{Step: "0", UID: -1, SLUID: sluid}, true},
		{"user fake sluid under job", "/system.slice/slurmstepd.scope/job_1/step_0/user/task_0/s0123456789ABC/step_0/slurm", Ref{JobID: 1, Step: "0", UID: -1}, true},
		{"user fake node scope", "/system.slice/n1_slurmstepd.scope/job_1/step_0/user/task_0/n2_slurmstepd.scope/job_2/step_0", Ref{JobID: 1, Step: "0", UID: -1, Node: "n1"}, true},
		{"user fake sluid under sluid", "/system.slice/slurmstepd.scope/" + sluid + "/step_0/user/task_0/s0123456789ABC/step_1/slurm", Ref{Step: "0", UID: -1, SLUID: sluid}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParsePath(tc.in)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParsePath(%q) = %+v,%v want %+v,%v", tc.in, got, ok, tc.want, tc.ok)
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
		if (ref.JobID == 0) == (ref.SLUID == "") {
			t.Fatalf("ok with job %d and SLUID %q", ref.JobID, ref.SLUID)
		}
		if ref.SLUID != "" && !isSLUID(ref.SLUID) {
			t.Fatalf("bad SLUID %q", ref.SLUID)
		}
		if ref.JobID != 0 && !strings.Contains(string(data), "job_") ||
			ref.SLUID != "" && !strings.Contains(string(data), "/"+ref.SLUID) ||
			!strings.Contains(string(data), "slurm") {
			t.Fatalf("job %d / %q found in %q", ref.JobID, ref.SLUID, data)
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

func TestEnvironScanner(t *testing.T) {
	root := t.TempDir()
	writeProc(t, root, 20, "0::/\n", "SLURM_JOB_ID=31\x00SLURMD_NODENAME=node-v100\x00")
	writeProc(t, root, 21, "0::/\n", "SLURM_JOB_ID=32\x00SLURMD_NODENAME=node-k80\x00")
	writeProc(t, root, 22, "0::/\n", "SLURM_JOB_ID=x\x00SLURMD_NODENAME=node-k80\x00")
	writeProc(t, root, 23, "0::/\n", "HOME=/\x00")
	got := (&EnvironScanner{Proc: Proc{Root: root}}).Scan()
	if len(got) != 2 || got[31] != "node-v100" || got[32] != "node-k80" {
		t.Errorf("Scan = %v", got)
	}
}

// writeExe makes /proc/<pid>/exe name prog; fresh makes <pid> anew
// first, as a new process of that PID (a new inode) would.
func writeExe(t *testing.T, root string, pid int, prog string, fresh bool) {
	t.Helper()
	dir := filepath.Join(root, itoa(pid))
	if fresh {
		tmp := dir + ".new"
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"cgroup", "environ"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				os.WriteFile(filepath.Join(tmp, f), b, 0o644)
			}
		}
		os.RemoveAll(dir + ".old")
		if err := os.Rename(dir, dir+".old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(dir, "exe"))
	if err := os.Symlink(prog, filepath.Join(dir, "exe")); err != nil {
		t.Fatal(err)
	}
}

// An EnvironScanner reads a process's environment once while it lives,
// and again when its PID is another process's or it executed another
// program (slurmstepd's child takes the job's environment at exec).
func TestEnvironScannerRereads(t *testing.T) {
	root := t.TempDir()
	s := EnvironScanner{Proc: Proc{Root: root}}
	writeProc(t, root, 30, "0::/\n", "SLURM_JOB_ID=41\x00SLURMD_NODENAME=node-a\x00")
	writeExe(t, root, 30, "/usr/bin/bash", false)
	writeProc(t, root, 31, "0::/\n", "HOME=/\x00") // slurmstepd's child, before its exec
	writeExe(t, root, 31, "/usr/sbin/slurmstepd", false)
	writeProc(t, root, 32, "0::/\n", "SLURM_JOB_ID=43\x00SLURMD_NODENAME=node-c\x00")
	writeExe(t, root, 32, "/usr/bin/python3", false)
	if got := s.Scan(); len(got) != 2 || got[41] != "node-a" || got[43] != "node-c" {
		t.Fatalf("first scan = %v", got)
	}
	// Unchanged processes are not read again: a changed file is not seen.
	writeProc(t, root, 30, "0::/\n", "SLURM_JOB_ID=41\x00SLURMD_NODENAME=node-z\x00")
	if got := s.Scan(); got[41] != "node-a" {
		t.Errorf("the same process read again: %v", got)
	}
	// 31 executes the job's script: same PID and inode, new program.
	writeProc(t, root, 31, "0::/\n", "SLURM_JOB_ID=42\x00SLURMD_NODENAME=node-b\x00")
	writeExe(t, root, 31, "/usr/bin/bash", false)
	// 30 ended and its PID went to another job's process, same program.
	writeProc(t, root, 30, "0::/\n", "SLURM_JOB_ID=44\x00SLURMD_NODENAME=node-d\x00")
	writeExe(t, root, 30, "/usr/bin/bash", true)
	os.RemoveAll(filepath.Join(root, "30.old"))
	// 32 ended.
	os.RemoveAll(filepath.Join(root, "32"))
	got := s.Scan()
	want := map[uint32]string{42: "node-b", 44: "node-d"}
	if len(got) != len(want) || got[42] != "node-b" || got[44] != "node-d" {
		t.Errorf("after an exec, a reused PID and an exit: %v, want %v", got, want)
	}
	if len(s.known) != 2 {
		t.Errorf("remembers %d processes, want the 2 that live", len(s.known))
	}
}

// On the real /proc: a child started with a job's environment is found,
// and found again (from memory) on the next scan.
func TestEnvironScannerRealProc(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"SLURM_JOB_ID=4000000001", "SLURMD_NODENAME=node-real"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var s EnvironScanner
	for i := 0; i < 2; i++ {
		if got := s.Scan(); got[4000000001] != "node-real" {
			t.Fatalf("scan %d: job of the child not found: %v", i, got[4000000001])
		}
	}
	if _, ok := s.known[cmd.Process.Pid]; !ok {
		t.Errorf("the child's process is not remembered")
	}
}
