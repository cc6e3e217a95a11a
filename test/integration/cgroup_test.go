//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rota-hpc/rota/agent/jobs"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
)

// TestJobCgroupsMapToJobs: on the release under test, with the dev
// cluster's cgroup layout, a running job's task and its slurmstepd map to
// that job through agent/jobs (the agent's own code, on the real layout:
// job_<id>, or on 26.05 the job's SLUID), for this node only. On 26.05 a
// second cluster sets CgroupJobIdPaths=yes, as a site may, and the same
// holds for its job_<id> cgroups.
func TestJobCgroupsMapToJobs(t *testing.T) {
	if cgroupMode(devDir) == "" {
		t.Fatal("the dev cluster tracks no cgroups (proctrack/linuxproc)")
	}
	checkJobCgroup(t, testCluster, nodePrefix)
	if out, _ := run("scontrol", "-V"); !strings.Contains(out, " 26.05.") || cgroupMode(devDir) != "v2" {
		return // CgroupJobIdPaths is 26.05.2's, for cgroup v2
	}
	base, err := freeport.Consecutive(10)
	if err != nil {
		t.Fatal(err)
	}
	c := newDevCluster(devDir+"-jobid", nodePrefix+"j", base, base+4, "ROTA_DEV_ACCOUNTING=off", "ROTA_DEV_AGENTS=off",
		"ROTA_DEV_WEB=off", "ROTA_DEV_CGROUP_JOBID_PATHS=yes")
	if err := c.start(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	checkJobCgroup(t, c, nodePrefix+"j")
}

func checkJobCgroup(t *testing.T, c devCluster, prefix string) {
	t.Helper()
	out, err := c.run("sbatch", "--parsable", "-o", "/dev/null", "-w", prefix+"-v100", "--gres=gpu:1", "--wrap", "sleep 60")
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	id := strings.TrimSpace(out)
	defer c.run("scancel", id)
	dir := ""
	eventually.True(t, 30*time.Second, "job "+id+"'s cgroup with its task", func() bool {
		d := jobCgroupOrEmpty(c, prefix+"-v100", id)
		if d == "" {
			return false
		}
		dir = d
		return len(procsUnder(filepath.Join(d, "step_batch"))) >= 2
	})
	t.Logf("job %s: %s", id, dir)
	want, _ := strconv.ParseUint(id, 10, 32)
	p := jobs.Proc{Node: prefix + "-v100"}
	other := jobs.Proc{Node: prefix + "-k80"}
	for _, pid := range procsUnder(filepath.Join(dir, "step_batch")) {
		ref, err := p.JobOf(uint32(pid))
		if err != nil || ref.JobID != uint32(want) {
			t.Errorf("pid %d in %s: %+v %v, want job %s", pid, dir, ref, err, id)
			continue
		}
		if _, err := other.JobOf(uint32(pid)); err == nil {
			t.Errorf("pid %d of job %s maps to a job on another node's agent too", pid, id)
		}
	}
	pids, err := p.PIDsOf(uint32(want))
	if err != nil || len(pids) == 0 {
		t.Errorf("PIDsOf(%s): %v %v", id, pids, err)
	}
}

// jobCgroupOrEmpty is jobCgroup without failing: "" until it exists.
func jobCgroupOrEmpty(c devCluster, node, id string) string {
	root := filepath.Join(cgroupMountpoint(c.dir), "system.slice", node+"_slurmstepd.scope")
	if cgroupMode(c.dir) == "v1" {
		m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/freezer/slurm_"+node, "uid_*", "job_"+id))
		if len(m) == 1 {
			return m[0]
		}
		return ""
	}
	if d := filepath.Join(root, "job_"+id); dirExists(d) {
		return d
	}
	out, _ := c.run("scontrol", "-d", "show", "job", id)
	if m := sluidRe.FindStringSubmatch(out); m != nil && dirExists(filepath.Join(root, m[1])) {
		return filepath.Join(root, m[1])
	}
	return ""
}

// procsUnder lists the pids in every cgroup.procs below dir.
func procsUnder(dir string) []int {
	var pids []int
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}
