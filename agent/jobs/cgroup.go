// Package jobs maps processes to Slurm jobs from their control group, the
// one fact about a process that its owner cannot forge: slurmstepd puts
// every task in a cgroup named after its job and step.
//
//	cgroup v1: 7:devices:/slurm/uid_1000/job_123/step_0/task_0
//	           (or /slurm_<node>/... when several slurmd share a host)
//	cgroup v2: 0::/system.slice/slurmstepd.scope/job_123/step_batch/user/task_0
//
// The first job_<id> component after a component that starts with "slurm"
// wins, so cgroups a user creates below the task level cannot claim to be
// another job.
package jobs

import (
	"bytes"
	"strconv"
	"strings"
)

// Ref is a process's place in Slurm.
type Ref struct {
	JobID uint32
	Step  string // "batch", "extern", "interactive", "0", ...; "" if none
	UID   int64  // from cgroup v1 uid_<n>; -1 when the path does not say
	// Stepd is set for Slurm's own slurmstepd, which cgroup v2 keeps in
	// .../step_<s>/slurm: it belongs to the job but is not the user's.
	Stepd bool
	// Node is the slurmd a v1 path names ("/slurm_<node>/..."), as Slurm
	// lays cgroups out when several slurmd share one host; "" otherwise.
	Node string
}

// ParseCgroup reads the contents of /proc/<pid>/cgroup. ok is false when
// the process belongs to no Slurm job.
func ParseCgroup(data []byte) (ref Ref, ok bool) {
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		// hierarchy-ID:controllers:path; the path may itself contain ':'.
		first := bytes.IndexByte(line, ':')
		if first < 0 {
			continue
		}
		second := bytes.IndexByte(line[first+1:], ':')
		if second < 0 {
			continue
		}
		if r, ok := ParsePath(string(line[first+1+second+1:])); ok {
			return r, true
		}
	}
	return Ref{}, false
}

// ParsePath reads one cgroup path.
func ParsePath(path string) (ref Ref, ok bool) {
	ref.UID = -1
	inSlurm := false
	parts := strings.Split(path, "/")
	for i, p := range parts {
		switch {
		case !inSlurm:
			inSlurm = strings.HasPrefix(p, "slurm")
			if n, ok := strings.CutPrefix(p, "slurm_"); ok {
				ref.Node = n
			}
		case strings.HasPrefix(p, "uid_"):
			if u, err := strconv.ParseInt(p[4:], 10, 64); err == nil && u >= 0 {
				ref.UID = u
			}
		case strings.HasPrefix(p, "job_"):
			id, err := strconv.ParseUint(p[4:], 10, 32)
			if err != nil || id == 0 {
				return Ref{}, false
			}
			ref.JobID = uint32(id)
			if i+1 < len(parts) && strings.HasPrefix(parts[i+1], "step_") {
				if s := parts[i+1][5:]; validStep(s) {
					ref.Step = s
				}
				ref.Stepd = i+2 < len(parts) && parts[i+2] == "slurm"
			}
			return ref, true
		}
	}
	return Ref{}, false
}

func validStep(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
