package jobs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Slurm 26.05's cgroup/v2 plugin names a job's cgroup by its SLUID
// (.../slurmstepd.scope/sEKNKTV3WPV500/step_batch/user/task_0), which does
// not contain the job ID. The job's environment says SLURM_JOB_ID, but its
// user can forge that. What the user cannot forge: the slurmstepd of each
// step, a root process in .../<SLUID>/step_<s>/slurm (a cgroup only root
// writes), whose process title is "slurmstepd: [<jobid>.<step>]".

// maxStepdPIDs bounds the processes tried in one step's slurm cgroup, which
// holds its slurmstepd alone.
const maxStepdPIDs = 16

// maxCachedSLUIDs bounds the SLUID -> job cache; when full it starts over.
const maxCachedSLUIDs = 4096

// sluidCache remembers resolved SLUIDs: a SLUID never names another job.
// It is shared by all Procs (they are values, copied freely), keyed by
// where a Proc reads (Root, CgroupRoot) and the cgroup path of the job.
type sluidCache struct {
	mu sync.Mutex
	m  map[string]uint32
}

var sluidJobs sluidCache

func (c *sluidCache) get(key string) (uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.m[key]
	return id, ok
}

func (c *sluidCache) put(key string, id uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedSLUIDs {
		c.m = make(map[string]uint32)
	}
	c.m[key] = id
}

// resolveSLUID maps the cgroup v2 path of a job named by SLUID
// (/system.slice/slurmstepd.scope/<SLUID>) to its job ID, read from the
// title of a slurmstepd in <job>/step_*/slurm.
func (p Proc) resolveSLUID(job string) (uint32, error) {
	key := p.root() + "\x00" + p.CgroupRoot + "\x00" + job
	if id, ok := sluidJobs.get(key); ok {
		return id, nil
	}
	sluid := path.Base(job)
	dirs, err := p.cgroupDirs(job)
	if err != nil {
		return 0, fmt.Errorf("%w: cannot resolve SLUID %s: %v", ErrNoJob, sluid, err)
	}
	var why error
	for _, dir := range dirs {
		id, err := p.stepdJob(dir, job)
		if err == nil {
			sluidJobs.put(key, id)
			return id, nil
		}
		why = err
	}
	return 0, fmt.Errorf("%w: SLUID %s names no running job: %v", ErrNoJob, sluid, why)
}

// cgroupDirs lists where the cgroup v2 path cg can be on this host's
// filesystem: under CgroupRoot, or under each cgroup2 mount that holds it.
func (p Proc) cgroupDirs(cg string) ([]string, error) {
	if p.CgroupRoot != "" {
		return []string{filepath.Join(p.CgroupRoot, filepath.FromSlash(cg))}, nil
	}
	info := filepath.Join(p.root(), "self", "mountinfo")
	data, err := readBounded(info)
	if err != nil {
		return nil, fmt.Errorf("finding the cgroup2 mount: %v", err)
	}
	var dirs []string
	for _, m := range cgroup2Mounts(data) {
		switch {
		case m.root == "/":
			dirs = append(dirs, filepath.Join(m.point, filepath.FromSlash(cg)))
		case cg == m.root || strings.HasPrefix(cg, m.root+"/"):
			dirs = append(dirs, filepath.Join(m.point, filepath.FromSlash(cg[len(m.root):])))
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no cgroup2 mount in %s holds %s", info, cg)
	}
	return dirs, nil
}

type mount struct{ root, point string }

// cgroup2Mounts reads the cgroup2 mounts from /proc/<pid>/mountinfo:
// "id parent maj:min root mountpoint options [optional...] - fstype source
// superoptions".
func cgroup2Mounts(data []byte) []mount {
	var out []mount
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		for i := 5; i+1 < len(f); i++ {
			if f[i] == "-" {
				if f[i+1] == "cgroup2" {
					out = append(out, mount{unescapeMount(f[3]), unescapeMount(f[4])})
				}
				break
			}
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// stepdJob finds a trusted slurmstepd in dir/step_*/slurm, dir being the
// cgroup v2 path job on the filesystem, and reads the job ID from its title.
func (p Proc) stepdJob(dir, job string) (uint32, error) {
	steps, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	for _, s := range steps {
		if !s.IsDir() || !strings.HasPrefix(s.Name(), "step_") {
			continue
		}
		procs, err := readBounded(filepath.Join(dir, s.Name(), "slurm", "cgroup.procs"))
		if err != nil {
			continue
		}
		for i, f := range strings.Fields(string(procs)) {
			if i == maxStepdPIDs {
				break
			}
			pid, err := strconv.ParseUint(f, 10, 32)
			if err != nil || pid == 0 {
				continue
			}
			if id, ok := p.stepdTitle(pid, job+"/"+s.Name()+"/slurm"); ok {
				return id, nil
			}
		}
	}
	return 0, fmt.Errorf("no slurmstepd with a job title in %s", filepath.Join(dir, "step_*", "slurm"))
}

// stepdTitle reads the job ID from the title of process pid if it is a
// slurmstepd: a root process whose own cgroup v2 path is cg (the step's
// slurm cgroup). All reads go through one handle on /proc/<pid>, so a PID
// reused meanwhile fails them instead of answering for another process.
func (p Proc) stepdTitle(pid uint64, cg string) (uint32, bool) {
	r, err := os.OpenRoot(filepath.Join(p.root(), strconv.FormatUint(pid, 10)))
	if err != nil {
		return 0, false
	}
	defer r.Close()
	data, err := readIn(r, "cgroup")
	if err != nil {
		return 0, false
	}
	if own, ok := v2Path(data); !ok || own != cg {
		return 0, false
	}
	if status, err := readIn(r, "status"); err != nil || !rootProcess(status) {
		return 0, false
	}
	cmdline, err := readIn(r, "cmdline")
	if err != nil {
		return 0, false
	}
	return parseStepdTitle(cmdline)
}

func readIn(r *os.Root, name string) ([]byte, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcFile))
}

// rootProcess says whether /proc/<pid>/status gives real user ID 0.
func rootProcess(status []byte) bool {
	for _, line := range bytes.Split(status, []byte{'\n'}) {
		if rest, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			f := bytes.Fields(rest)
			return len(f) > 0 && string(f[0]) == "0"
		}
	}
	return false
}

// parseStepdTitle reads the job ID from a slurmstepd's /proc/<pid>/cmdline,
// "slurmstepd: [<jobid>.<step>]" or "slurmstepd: [<jobid>]", whether
// setproctitle left it one string (padded with NULs) or NUL-separated.
func parseStepdTitle(cmdline []byte) (uint32, bool) {
	f := strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " "))
	if len(f) != 2 || f[0] != "slurmstepd:" {
		return 0, false
	}
	in, ok := strings.CutPrefix(f[1], "[")
	if !ok {
		return 0, false
	}
	if in, ok = strings.CutSuffix(in, "]"); !ok {
		return 0, false
	}
	job, step, dot := strings.Cut(in, ".")
	if dot && step == "" || job == "" || strings.TrimLeft(job, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseUint(job, 10, 32)
	if err != nil || id == 0 {
		return 0, false
	}
	return uint32(id), true
}
