package jobs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
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

// Process is a process of a job, and where in the job it runs.
type Process struct {
	PID int
	Ref Ref
}

// Scan reads every process's cgroup once and lists, per job, its
// processes on this node (cgroups named by SLUID included, through
// JobOf): one read of /proc serves every job a caller asks about.
func (p Proc) Scan() (map[uint32][]Process, error) {
	d, err := os.Open(p.root())
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing processes in %s: %w", p.root(), err)
	}
	out := map[uint32][]Process{}
	for _, n := range names {
		pid, err := strconv.ParseUint(n, 10, 32)
		if err != nil || pid == 0 {
			continue
		}
		if ref, err := p.JobOf(uint32(pid)); err == nil && ref.JobID != 0 {
			out[ref.JobID] = append(out[ref.JobID], Process{PID: int(pid), Ref: ref})
		}
	}
	return out, nil
}

// PIDsOf lists the processes whose cgroup puts them in job, this node
// only (Scan, for one job).
func (p Proc) PIDsOf(job uint32) ([]int, error) {
	all, err := p.Scan()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pr := range all[job] {
		out = append(out, pr.PID)
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

// EnvironScanner maps job IDs to the node named in their processes'
// environments (SLURM_JOB_ID, SLURMD_NODENAME). Only for clusters where
// Slurm puts jobs in no cgroup (proctrack/linuxproc, as in the dev
// cluster, where several slurmd share one host): a job's user can forge
// its environment, so this serves to attribute progress files, never to
// choose whom to signal.
//
// A process's initial environment does not change, so each process is
// read once while it lives (known by its PID, its /proc inode and its
// program: PIDs are reused, and a process forked from slurmstepd takes
// the job's environment only when it executes the job's program): where
// several slurmd share a host, every agent would otherwise read every
// process's environment each tick (66 agents and 528 jobs on a 2-core
// host: the agents took a fifth of it when they read each twice).
type EnvironScanner struct {
	Proc  Proc
	known map[int]environEntry
}

type environEntry struct {
	start procStart
	job   uint32 // 0: not a Slurm job's process
	node  string
}

// Scan lists the processes and returns job -> node.
func (s *EnvironScanner) Scan() map[uint32]string {
	out := map[uint32]string{}
	names, err := os.ReadDir(s.Proc.root())
	if err != nil {
		return out
	}
	fresh := make(map[int]environEntry, len(names))
	for _, e := range names {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		start, ok := s.Proc.startTime(pid)
		ent, seen := s.known[pid]
		if !ok || !seen || ent.start != start {
			ent = s.Proc.environEntry(pid)
			ent.start = start
		}
		if ok {
			fresh[pid] = ent // a process whose start time cannot be read is read again
		}
		if ent.job != 0 && ent.node != "" {
			out[ent.job] = ent.node
		}
	}
	s.known = fresh
	return out
}

// environEntry reads pid's job and node from one read of its environ.
func (p Proc) environEntry(pid int) environEntry {
	var ent environEntry
	data, err := readBounded(filepath.Join(p.root(), strconv.Itoa(pid), "environ"))
	if err != nil {
		return ent
	}
	var job, node []byte
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("SLURM_JOB_ID=")); ok {
			job = v
		} else if v, ok := bytes.CutPrefix(kv, []byte("SLURMD_NODENAME=")); ok {
			node = v
		}
	}
	if id, err := strconv.ParseUint(string(job), 10, 32); err == nil && id != 0 {
		ent.job, ent.node = uint32(id), string(node)
	}
	return ent
}

// procStart tells one process from another that later had its PID, and
// from itself before it executed another program: the inode of its
// /proc/<pid> (a new process is a new inode) and the program it runs
// (/proc/<pid>/exe). Both cost a fifth of reading a file there.
type procStart struct {
	ino uint64
	exe string
}

// startTime reads pid's procStart; false when it cannot (the process is
// gone, or its program is not for this agent to see).
func (p Proc) startTime(pid int) (procStart, bool) {
	dir := filepath.Join(p.root(), strconv.Itoa(pid))
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return procStart{}, false
	}
	exe, err := os.Readlink(filepath.Join(dir, "exe"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return procStart{}, false
	}
	// No program (a kernel thread, a zombie): none to execute either.
	return procStart{ino: st.Ino, exe: exe}, true
}
