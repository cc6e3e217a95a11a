package jobs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseStepdTitle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"slurmstepd: [1234.batch]", 1234, true},
		{"slurmstepd: [1234.batch]\x00\x00\x00\x00", 1234, true},
		{"slurmstepd: [1234.extern]   ", 1234, true},
		{"slurmstepd:\x00[1234.0]\x00", 1234, true},
		{"slurmstepd: [1234.0+1]", 1234, true},
		{"slurmstepd: [1234]", 1234, true},
		{"slurmstepd: [4294967295.0]", 4294967295, true},
		{"slurmstepd: [4294967296.0]", 0, false},
		{"slurmstepd: [0.batch]", 0, false},
		{"slurmstepd: [1234.]", 0, false},
		{"slurmstepd: []", 0, false},
		{"slurmstepd: [.batch]", 0, false},
		{"slurmstepd: [+12.batch]", 0, false},
		{"slurmstepd: [12a.batch]", 0, false},
		{"slurmstepd: [sEKNKTV3WPV500.batch]", 0, false},
		{"slurmstepd: 1234.batch", 0, false},
		{"slurmstepd: [1234.batch] extra", 0, false},
		{"/usr/sbin/slurmstepd", 0, false},
		{"slurmstepd:", 0, false},
		{"python\x00slurmstepd: [1234.batch]\x00", 0, false},
		{"", 0, false},
	} {
		got, ok := parseStepdTitle([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStepdTitle(%q) = %d,%v want %d,%v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCgroup2Mounts(t *testing.T) {
	t.Parallel()
	info := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 22 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
36 22 0:31 / /sys/fs/cgroup/systemd rw,nosuid shared:10 - cgroup cgroup rw,xattr,name=systemd
40 22 0:30 /system.slice /mnt/my\040cgroups rw shared:9 - cgroup2 cgroup2 rw
41 22 0:32 / /weird rw - tmpfs cgroup2 rw
garbage
`
	want := []mount{{"/", "/sys/fs/cgroup"}, {"/system.slice", "/mnt/my cgroups"}}
	if got := cgroup2Mounts([]byte(info)); !reflect.DeepEqual(got, want) {
		t.Errorf("cgroup2Mounts = %q, want %q", got, want)
	}
	for in, want := range map[string]string{`a\040b`: "a b", `a\134b`: `a\b`, `a\0`: `a\0`, `a\9999`: `a\9999`, `plain`: "plain"} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// procFixture is a fake /proc and a fake cgroup v2 tree.
type procFixture struct {
	t      *testing.T
	proc   string // Proc.Root
	cgroup string // where the fake cgroup2 hierarchy is "mounted"
}

func newProcFixture(t *testing.T) *procFixture {
	dir := t.TempDir()
	f := &procFixture{t: t, proc: filepath.Join(dir, "proc"), cgroup: filepath.Join(dir, "cgroup fs")}
	f.write(filepath.Join(f.proc, "self", "mountinfo"),
		"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"+
			"35 22 0:30 / "+strings.ReplaceAll(f.cgroup, " ", `\040`)+" rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")
	return f
}

func (f *procFixture) write(path, data string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// process puts a fake process into the fake /proc: its cgroup v2 path,
// real user ID and command line.
func (f *procFixture) process(pid int, cg string, uid int, cmdline string) {
	f.t.Helper()
	dir := filepath.Join(f.proc, itoa(pid))
	f.write(filepath.Join(dir, "cgroup"), "0::"+cg+"\n")
	f.write(filepath.Join(dir, "status"), "Name:\tx\nUid:\t"+itoa(uid)+"\t"+itoa(uid)+"\t"+itoa(uid)+"\t"+itoa(uid)+"\nGid:\t0\t0\t0\t0\n")
	f.write(filepath.Join(dir, "cmdline"), cmdline)
}

// procs writes the cgroup.procs of the fake cgroup cg.
func (f *procFixture) procs(cg, pids string) {
	f.t.Helper()
	f.write(filepath.Join(f.cgroup, filepath.FromSlash(cg), "cgroup.procs"), pids)
}

func TestProcSLUID(t *testing.T) {
	t.Parallel()
	f := newProcFixture(t)
	const (
		jobA = "/system.slice/slurmstepd.scope/sEKNKTV3WPV500"
		jobB = "/system.slice/slurmstepd.scope/s0123456789ABC"
		jobC = "/system.slice/slurmstepd.scope/sZZZZZZZZZZZZZ"
	)
	// Job 1234, named by SLUID: two steps, each with its slurmstepd in
	// step_<s>/slurm, the batch one's title padded with NULs and the
	// step 0 one's NUL-separated.
	f.process(100, jobA+"/step_batch/slurm", 0, "slurmstepd: [1234.batch]\x00\x00\x00\x00")
	f.process(101, jobA+"/step_batch/user/task_special", 1000, "bash\x00job.sh\x00")
	f.process(102, jobA+"/step_0/user/task_0", 1000, "python\x00train.py\x00")
	f.process(103, jobA+"/step_0/slurm", 0, "slurmstepd:\x00[1234.0]\x00")
	f.procs(jobA+"/step_batch/slurm", "100\n")
	f.procs(jobA+"/step_0/slurm", "103\n")
	f.procs(jobA+"/step_extern/slurm", "") // extern's slurmstepd gone already
	f.procs(jobA+"/step_batch/user/task_special", "101\n")
	// Job B: nothing in its slurm cgroups can be trusted. 200 is the job's
	// own process claiming job 1234 by its title (its cgroup is the user's,
	// so listing it does not help); 201 is gone; 202 sits in the slurm
	// cgroup but is not root; 203 is Slurm's but not titled yet.
	f.process(200, jobB+"/step_batch/user/task_0", 0, "slurmstepd: [1234.batch]")
	f.process(202, jobB+"/step_batch/slurm", 1000, "slurmstepd: [1234.batch]")
	f.process(203, jobB+"/step_batch/slurm", 0, "/usr/sbin/slurmstepd")
	f.process(204, jobB+"/step_batch/user/task_0/step_0/slurm", 0, "slurmstepd: [1234.batch]")
	f.procs(jobB+"/step_batch/slurm", "200\n201\n202\n203\n204\n")
	f.procs(jobB+"/step_batch/user/task_0/step_0/slurm", "204\n")
	f.procs(jobB+"/step_batch/user/task_0", "200\n")
	// Job C: a process whose job has no cgroup (any more).
	f.process(300, jobC+"/step_0/user/task_0", 1000, "sleep\x00")
	// A stepd of job A listed by job C's cgroup... is job A's, not C's.
	f.procs(jobC+"/step_batch/slurm", "100\n")
	f.process(301, jobC+"/step_1/user/task_0", 1000, "sleep\x00")

	for name, p := range map[string]Proc{
		"mountinfo":  {Root: f.proc},
		"CgroupRoot": {Root: f.proc, CgroupRoot: f.cgroup},
	} {
		t.Run(name, func(t *testing.T) {
			for pid, want := range map[uint32]Ref{
				100: {JobID: 1234, Step: "batch", UID: -1, Stepd: true, SLUID: "sEKNKTV3WPV500"},
				101: {JobID: 1234, Step: "batch", UID: -1, SLUID: "sEKNKTV3WPV500"},
				102: {JobID: 1234, Step: "0", UID: -1, SLUID: "sEKNKTV3WPV500"},
				103: {JobID: 1234, Step: "0", UID: -1, Stepd: true, SLUID: "sEKNKTV3WPV500"},
			} {
				if got, err := p.JobOf(pid); err != nil || got != want {
					t.Errorf("JobOf(%d) = %+v, %v want %+v", pid, got, err, want)
				}
			}
			for _, pid := range []uint32{200, 202, 203, 204, 300, 301} {
				ref, err := p.JobOf(pid)
				if !errors.Is(err, ErrNoJob) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrOtherNode) {
					t.Errorf("JobOf(%d) = %+v, %v, want ErrNoJob", pid, ref, err)
				}
				t.Logf("JobOf(%d): %v", pid, err)
			}
			pids, err := p.PIDsOf(1234)
			slices.Sort(pids)
			if err != nil || !slices.Equal(pids, []int{100, 101, 102, 103}) {
				t.Errorf("PIDsOf(1234) = %v, %v", pids, err)
			}
		})
	}

	// Once resolved, a SLUID stays its job's without looking again.
	p := Proc{Root: f.proc, CgroupRoot: f.cgroup}
	if err := os.RemoveAll(filepath.Join(f.cgroup, "system.slice")); err != nil {
		t.Fatal(err)
	}
	if ref, err := p.JobOf(101); err != nil || ref.JobID != 1234 {
		t.Errorf("JobOf(101) from the cache = %+v, %v", ref, err)
	}
	// Another Proc root reads its own processes: no answer from the cache.
	other := newProcFixture(t)
	other.process(101, jobA+"/step_batch/user/task_special", 1000, "")
	if ref, err := (Proc{Root: other.proc}).JobOf(101); !errors.Is(err, ErrNoJob) {
		t.Errorf("JobOf(101) in another root = %+v, %v, want ErrNoJob", ref, err)
	}
}

func TestProcSLUIDNodes(t *testing.T) {
	t.Parallel()
	f := newProcFixture(t)
	const (
		onA    = "/system.slice/node-a_slurmstepd.scope/sEKNKTV3WPV500"
		onB    = "/system.slice/node-b_slurmstepd.scope/s0123456789ABC"
		jobOnB = "/system.slice/node-b_slurmstepd.scope/job_88"
	)
	f.process(10, onA+"/step_batch/slurm", 0, "slurmstepd: [77.batch]")
	f.process(11, onA+"/step_batch/user/task_special", 1000, "")
	f.procs(onA+"/step_batch/slurm", "10\n")
	f.process(20, onB+"/step_extern/slurm", 0, "slurmstepd: [78.extern]")
	f.process(21, onB+"/step_extern/user/task_special", 1000, "")
	f.procs(onB+"/step_extern/slurm", "20\n")
	// node-a's stepd listed in node-b's job: not node-b's job's stepd.
	f.procs("/system.slice/node-b_slurmstepd.scope/sEKNKTV3WPV500/step_batch/slurm", "10\n")
	f.process(22, "/system.slice/node-b_slurmstepd.scope/sEKNKTV3WPV500/step_batch/user/task_0", 1000, "")
	f.process(30, jobOnB+"/step_0/user/task_0", 1000, "")

	a := Proc{Root: f.proc, Node: "node-a"}
	b := Proc{Root: f.proc, Node: "node-b"}
	if ref, err := a.JobOf(11); err != nil || ref != (Ref{JobID: 77, Step: "batch", UID: -1, Node: "node-a", SLUID: "sEKNKTV3WPV500"}) {
		t.Errorf("node-a JobOf(11) = %+v, %v", ref, err)
	}
	for _, pid := range []uint32{20, 21, 22, 30} {
		if _, err := a.JobOf(pid); !errors.Is(err, ErrOtherNode) || !errors.Is(err, ErrNoJob) {
			t.Errorf("node-a JobOf(%d) err = %v, want ErrOtherNode", pid, err)
		}
	}
	if ref, err := b.JobOf(21); err != nil || ref.JobID != 78 || ref.Node != "node-b" {
		t.Errorf("node-b JobOf(21) = %+v, %v", ref, err)
	}
	if ref, err := b.JobOf(30); err != nil || ref.JobID != 88 || ref.Node != "node-b" || ref.SLUID != "" {
		t.Errorf("node-b JobOf(30) = %+v, %v", ref, err)
	}
	if _, err := b.JobOf(22); !errors.Is(err, ErrNoJob) || errors.Is(err, ErrOtherNode) {
		t.Errorf("node-b JobOf(22) err = %v, want ErrNoJob: node-a's stepd vouches for no node-b job", err)
	}
	if pids, err := a.PIDsOf(78); err != nil || len(pids) != 0 {
		t.Errorf("node-a PIDsOf(78) = %v, %v: another slurmd's job", pids, err)
	}
	pids, err := b.PIDsOf(78)
	slices.Sort(pids)
	if err != nil || !slices.Equal(pids, []int{20, 21}) {
		t.Errorf("node-b PIDsOf(78) = %v, %v", pids, err)
	}
	// A process without a node scope is every node's business, as today.
	if pids, err := a.PIDsOf(77); err != nil || !slices.Equal(sorted(pids), []int{10, 11}) {
		t.Errorf("node-a PIDsOf(77) = %v, %v", pids, err)
	}
}

func sorted(s []int) []int { slices.Sort(s); return s }

func TestProcSLUIDMounts(t *testing.T) {
	t.Parallel()
	const job = "/system.slice/slurmstepd.scope/sEKNKTV3WPV500"
	// The hierarchy's /system.slice mounted alone: paths are relative to it.
	dir := t.TempDir()
	f := &procFixture{t: t, proc: filepath.Join(dir, "proc"), cgroup: filepath.Join(dir, "sub")}
	f.write(filepath.Join(f.proc, "self", "mountinfo"),
		"35 22 0:30 /user.slice "+filepath.Join(dir, "user")+" rw - cgroup2 cgroup2 rw\n"+
			"36 22 0:30 /system.slice "+filepath.Join(dir, "sub")+" rw - cgroup2 cgroup2 rw\n")
	f.process(1, job+"/step_batch/slurm", 0, "slurmstepd: [5.batch]")
	f.process(2, job+"/step_batch/user/task_special", 1000, "")
	f.write(filepath.Join(dir, "sub", "slurmstepd.scope", "sEKNKTV3WPV500", "step_batch", "slurm", "cgroup.procs"), "1\n")
	if ref, err := (Proc{Root: f.proc}).JobOf(2); err != nil || ref.JobID != 5 {
		t.Errorf("JobOf(2) = %+v, %v", ref, err)
	}

	// No cgroup2 mount, no mountinfo, a SLUID in a v1 hierarchy: ErrNoJob.
	for name, mountinfo := range map[string]string{
		"no cgroup2": "36 22 0:31 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw\n",
		"none":       "",
	} {
		g := newProcFixture(t)
		if mountinfo == "" {
			os.Remove(filepath.Join(g.proc, "self", "mountinfo"))
		} else {
			g.write(filepath.Join(g.proc, "self", "mountinfo"), mountinfo)
		}
		g.process(2, job+"/step_batch/user/task_special", 1000, "")
		if _, err := (Proc{Root: g.proc}).JobOf(2); !errors.Is(err, ErrNoJob) || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: JobOf(2) err = %v, want ErrNoJob", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	g := newProcFixture(t)
	writeProc(t, g.proc, 3, "4:memory:/slurm/uid_0/sEKNKTV3WPV500/step_0/task_0\n", "")
	if _, err := (Proc{Root: g.proc}).JobOf(3); !errors.Is(err, ErrNoJob) {
		t.Errorf("v1 SLUID: JobOf(3) err = %v, want ErrNoJob", err)
	}
}
