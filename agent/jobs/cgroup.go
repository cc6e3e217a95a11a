// Package jobs maps processes to Slurm jobs from their control group, the
// one fact about a process that its owner cannot forge: slurmstepd puts
// every task in a cgroup named after its job and step.
//
//	cgroup v1: 7:devices:/slurm/uid_1000/job_123/step_0/task_0
//	           (or /slurm_<node>/... when several slurmd share a host)
//	cgroup v2: 0::/system.slice/slurmstepd.scope/job_123/step_batch/user/task_0
//	           (or <node>_slurmstepd.scope when several slurmd share a host)
//	Slurm 26.05+ v2 names the job by its SLUID unless CgroupJobIdPaths=yes:
//	           0::/system.slice/slurmstepd.scope/sEKNKTV3WPV500/step_0/user/task_0
//
// The first job_<id> or SLUID component after a component that starts with
// "slurm" (or is <node>_slurmstepd.scope) wins, so cgroups a user creates
// below the task level cannot claim to be another job; and a path through
// user.slice or a .service (a tree systemd delegates to its user) is never
// Slurm's. A SLUID does not
// contain the job ID: Proc.JobOf reads it from the process title
// ("slurmstepd: [123.batch]") of the step's root-owned slurmstepd in
// .../<SLUID>/step_<s>/slurm, never from the job's forgeable environment.
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
	// Node is the slurmd a path names (v1 "/slurm_<node>/...", v2
	// "<node>_slurmstepd.scope"), as Slurm lays cgroups out when several
	// slurmd share one host; "" otherwise.
	Node string
	// SLUID is the job's Slurm lineage ID when the path names the job by it
	// (cgroup/v2 from Slurm 26.05 on, unless CgroupJobIdPaths=yes):
	// ParsePath then leaves JobID 0 and Proc.JobOf fills it in.
	SLUID string
}

// ParseCgroup reads the contents of /proc/<pid>/cgroup. ok is false when
// the process belongs to no Slurm job. A path that names the job by SLUID
// gives JobID 0 and SLUID set.
func ParseCgroup(data []byte) (ref Ref, ok bool) {
	ref, _, _, ok = parseCgroup(data)
	return ref, ok
}

// parseCgroup is ParseCgroup that also returns the matching path up to and
// including its job component, and whether that path is the cgroup v2 one
// ("0::<path>").
func parseCgroup(data []byte) (ref Ref, prefix string, v2, ok bool) {
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
		pathAt := first + 1 + second + 1
		if r, pre, ok := parsePath(string(line[pathAt:])); ok {
			return r, pre, string(line[:pathAt]) == "0::", true
		}
	}
	return Ref{}, "", false, false
}

// v2Path returns the cgroup v2 path ("0::<path>") in /proc/<pid>/cgroup.
func v2Path(data []byte) (string, bool) {
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(p), true
		}
	}
	return "", false
}

// ParsePath reads one cgroup path.
func ParsePath(path string) (ref Ref, ok bool) {
	ref, _, ok = parsePath(path)
	return ref, ok
}

// parsePath is ParsePath that also returns path up to and including its job
// component (job_<id> or SLUID).
func parsePath(path string) (ref Ref, prefix string, ok bool) {
	ref.UID = -1
	inSlurm := false
	parts := strings.Split(path, "/")
	for i, p := range parts {
		switch {
		case !inSlurm:
			// Below user.slice or a service (user@1000.service), systemd
			// delegates the tree to a user, who could make a slurm*/job_N
			// of their own there; Slurm's cgroups are never inside one.
			if p == "user.slice" || strings.HasSuffix(p, ".service") {
				return Ref{}, "", false
			}
			if n, ok := nodeScope(p); ok {
				inSlurm, ref.Node = true, n
				break
			}
			inSlurm = strings.HasPrefix(p, "slurm")
			if n, ok := strings.CutPrefix(p, "slurm_"); ok {
				ref.Node = n
			}
		case strings.HasPrefix(p, "uid_"):
			if u, err := strconv.ParseInt(p[4:], 10, 64); err == nil && u >= 0 {
				ref.UID = u
			}
		case strings.HasPrefix(p, "job_") || isSLUID(p):
			if isSLUID(p) {
				ref.SLUID = p
			} else {
				id, err := strconv.ParseUint(p[4:], 10, 32)
				if err != nil || id == 0 {
					return Ref{}, "", false
				}
				ref.JobID = uint32(id)
			}
			if i+1 < len(parts) && strings.HasPrefix(parts[i+1], "step_") {
				if s := parts[i+1][5:]; validStep(s) {
					ref.Step = s
				}
				ref.Stepd = i+2 < len(parts) && parts[i+2] == "slurm"
			}
			return ref, strings.Join(parts[:i+1], "/"), true
		}
	}
	return Ref{}, "", false
}

// stepdScope is the suffix of Slurm's cgroup/v2 scope when several slurmd
// share one host (MULTIPLE_SLURMD builds): <node>_slurmstepd.scope.
const stepdScope = "_slurmstepd.scope"

// nodeScope reads the node name out of a <node>_slurmstepd.scope component.
func nodeScope(p string) (string, bool) {
	n, ok := strings.CutSuffix(p, stepdScope)
	if !ok || n == "" || len(n) > 255 {
		return "", false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return "", false
		}
	}
	return n, true
}

// crockford is the alphabet of Crockford's base32, in which Slurm prints
// SLUIDs (print_sluid): digits and capitals without I, L, O and U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// isSLUID says whether s is a SLUID as Slurm prints it: "s" and 13
// Crockford base32 characters, such as sEKNKTV3WPV500.
func isSLUID(s string) bool {
	if len(s) != 14 || s[0] != 's' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if strings.IndexByte(crockford, s[i]) < 0 {
			return false
		}
	}
	return true
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
