package jobs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// ErrNoJob means a process exists but belongs to no Slurm job.
var ErrNoJob = errors.New("process belongs to no Slurm job")

// ErrOtherNode means a process belongs to a job of another slurmd that
// shares this host (Slurm's multiple-slurmd layout, as in the dev cluster):
// not this agent's to report or signal.
var ErrOtherNode = fmt.Errorf("%w on this node: it runs under another slurmd on this host", ErrNoJob)

// maxProcFile bounds what is read from /proc/<pid>/cgroup and environ.
const maxProcFile = 256 << 10

// Proc reads the process table under Root ("/proc" on a node; a fixture
// directory in tests, which is how tests put real processes into a fake
// job).
type Proc struct {
	Root string
	// Node is this agent's Slurm node name. Processes whose cgroup names
	// another node's slurmd (/slurm_<other>/..., <other>_slurmstepd.scope)
	// are not this node's.
	Node string
	// CgroupRoot is where the cgroup v2 hierarchy is mounted, to find the
	// slurmstepd of a job whose cgroup is named by SLUID. Empty: the cgroup2
	// mounts in <Root>/self/mountinfo.
	CgroupRoot string
}

func (p Proc) root() string {
	if p.Root == "" {
		return "/proc"
	}
	return p.Root
}

// JobOf says which job pid belongs to. It returns ErrNoJob for a process
// outside Slurm and an fs.ErrNotExist error for one that has gone. For a
// cgroup named by SLUID it fills in JobID from the step's slurmstepd (see
// resolveSLUID), and returns ErrNoJob, with the reason, when it cannot.
func (p Proc) JobOf(pid uint32) (Ref, error) {
	data, err := readBounded(filepath.Join(p.root(), strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if err != nil {
		return Ref{}, err
	}
	ref, prefix, v2, ok := parseCgroup(data)
	if !ok {
		return Ref{}, ErrNoJob
	}
	if ref.Node != "" && p.Node != "" && ref.Node != p.Node {
		return Ref{}, ErrOtherNode
	}
	if ref.SLUID != "" {
		if !v2 {
			return Ref{}, fmt.Errorf("%w: SLUID %s outside the cgroup v2 hierarchy", ErrNoJob, ref.SLUID)
		}
		id, err := p.resolveSLUID(prefix)
		if err != nil {
			return Ref{}, err
		}
		ref.JobID = id
	}
	return ref, nil
}

// PIDsOf lists the processes whose cgroup puts them in job, this node only
// (cgroups named by SLUID included, through JobOf).
func (p Proc) PIDsOf(job uint32) ([]int, error) {
	d, err := os.Open(p.root())
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing processes in %s: %w", p.root(), err)
	}
	var out []int
	for _, n := range names {
		pid, err := strconv.ParseUint(n, 10, 32)
		if err != nil || pid == 0 {
			continue
		}
		ref, err := p.JobOf(uint32(pid))
		if err == nil && ref.JobID == job {
			out = append(out, int(pid))
		}
	}
	return out, nil
}

// Env returns one variable from pid's initial environment.
func (p Proc) Env(pid int, key string) (string, bool) {
	data, err := readBounded(filepath.Join(p.root(), strconv.Itoa(pid), "environ"))
	if err != nil {
		return "", false
	}
	prefix := []byte(key + "=")
	for _, kv := range bytes.Split(data, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			return string(kv[len(prefix):]), true
		}
	}
	return "", false
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcFile))
}

// NodesFromEnviron maps job IDs to the node named in their processes'
// environments (SLURM_JOB_ID, SLURMD_NODENAME). Only for clusters where
// Slurm puts jobs in no cgroup (proctrack/linuxproc, as in the dev
// cluster, where several slurmd share one host): a job's user can forge
// its environment, so this serves to attribute progress files, never to
// choose whom to signal.
func (p Proc) NodesFromEnviron() map[uint32]string {
	out := map[uint32]string{}
	names, err := os.ReadDir(p.root())
	if err != nil {
		return out
	}
	for _, e := range names {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		job, ok := p.Env(pid, "SLURM_JOB_ID")
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(job, 10, 32)
		if err != nil || id == 0 {
			continue
		}
		if node, ok := p.Env(pid, "SLURMD_NODENAME"); ok && node != "" {
			out[uint32(id)] = node
		}
	}
	return out
}
