package chains

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// Successor describes the next segment to submit.
type Successor struct {
	Chain     uint32 // chain id (the first segment's job id)
	N         int    // its segment number (2, 3, ...)
	Name      string
	Partition string
	// LimitMin is the segment's time limit.
	LimitMin uint32
	// After is the job it depends on (afterok); 0 none.
	After uint32
	// Features is the constraint: the predecessor's GPU type pinned onto
	// the user's own, so the successor fits the GPUs its predecessor
	// frees; the user's alone in a development partition.
	Features string
	Hints    wire.Hints
}

// SuccessorArgs are the sbatch options of a copy of the job spec for the
// next segment. The batch script (with its own #SBATCH lines) goes with
// them; options here take precedence over the script's. The job's
// environment at submission cannot be read back from Slurm, so it gets a
// fresh one plus ROTA_CHAIN_ID and ROTA_CHAIN_SEGMENT (Env).
func SuccessorArgs(spec *slurm.JobSpec, s Successor, spankOptions bool) (args, env []string) {
	a := []string{"--job-name=" + s.Name, "--partition=" + s.Partition,
		"--time=" + strconv.FormatUint(uint64(s.LimitMin), 10), "--open-mode=append"}
	if spec.Account != "" {
		a = append(a, "--account="+spec.Account)
	}
	if spec.QOS != "" {
		a = append(a, "--qos="+spec.QOS)
	}
	if s.After != 0 {
		a = append(a, "--dependency=afterok:"+strconv.FormatUint(uint64(s.After), 10))
	}
	if spec.WorkDir != "" {
		a = append(a, "--chdir="+spec.WorkDir)
	}
	// Output files: the predecessor's id in the path becomes %j, so the
	// default slurm-<id>.out gives each segment its own file; a fixed
	// name is appended to (--open-mode=append).
	if spec.StdOut != "" {
		a = append(a, "--output="+withJobPattern(spec.StdOut, spec.ID))
	}
	if spec.StdErr != "" && spec.StdErr != spec.StdOut {
		a = append(a, "--error="+withJobPattern(spec.StdErr, spec.ID))
	}
	if spec.NumNodes > 0 {
		a = append(a, "--nodes="+strconv.Itoa(spec.NumNodes))
	}
	if spec.NumTasks > 0 {
		a = append(a, "--ntasks="+strconv.Itoa(spec.NumTasks))
	}
	if spec.CPUsPerTask > 0 {
		a = append(a, "--cpus-per-task="+strconv.Itoa(spec.CPUsPerTask))
	}
	if spec.MemPerNode != "" {
		a = append(a, "--mem="+spec.MemPerNode)
	} else if spec.MemPerCPU != "" {
		a = append(a, "--mem-per-cpu="+spec.MemPerCPU)
	}
	if spec.Requeue {
		a = append(a, "--requeue")
	}
	for _, g := range []struct{ opt, tres string }{{"--gres=", spec.TresPerNode}, {"--gpus=", spec.TresPerJob},
		{"--gpus-per-task=", spec.TresPerTask}, {"--gpus-per-socket=", spec.TresPerSocket}} {
		if v := gresArg(g.tres, g.opt != "--gres="); v != "" {
			a = append(a, g.opt+v)
		}
	}
	if s.Features != "" {
		a = append(a, "--constraint="+s.Features)
	}
	if spankOptions {
		a = append(a, SpankArgs(s.Hints)...)
	}
	env = []string{"ROTA_CHAIN_ID=" + strconv.FormatUint(uint64(s.Chain), 10), "ROTA_CHAIN_SEGMENT=" + strconv.Itoa(s.N)}
	return a, env
}

// SpankArgs are Rota's sbatch options for hints, so the successor's
// placement and the node agent know what the first segment's did.
func SpankArgs(h wire.Hints) []string {
	return append(HintArgs(h), "--rota-chain=on")
}

// HintArgs are Rota's sbatch options for a job's steps, throughput and
// checkpoint signal (a copy of the job elsewhere gets them too).
func HintArgs(h wire.Hints) []string {
	var a []string
	if h.Steps > 0 {
		a = append(a, "--rota-steps="+strconv.FormatUint(h.Steps, 10))
	}
	if h.CheckpointSignal != "" {
		a = append(a, "--rota-checkpoint-signal="+h.CheckpointSignal)
	}
	if len(h.Throughput) > 0 {
		ts := make([]string, 0, len(h.Throughput))
		for t := range h.Throughput {
			ts = append(ts, t)
		}
		sort.Strings(ts)
		for i, t := range ts {
			ts[i] = t + ":" + strconv.FormatFloat(h.Throughput[t], 'g', -1, 64)
		}
		a = append(a, "--rota-throughput="+strings.Join(ts, ","))
	}
	return a
}

// gresArg turns a TRES string as Slurm prints it ("gres:gpu:1",
// "gres/gpu:v100:2", "gpu:2") into an sbatch value: the whole gres for
// --gres, the count (with type) for the --gpus* options.
func gresArg(tres string, gpusOnly bool) string {
	var parts []string
	for _, item := range strings.Split(tres, ",") {
		item = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(item), "gres:"), "gres/")
		if item == "" {
			continue
		}
		if gpusOnly {
			v, ok := strings.CutPrefix(item, "gpu:")
			if !ok {
				continue
			}
			item = v
		}
		parts = append(parts, item)
	}
	return strings.Join(parts, ",")
}

// withJobPattern turns the job id in path's file name into %j. Only the
// file name: a directory whose name holds the id (run-6/, a hash like
// 9cc6cd3e) is where the file is, and a successor writing into a
// directory that does not exist fails at once.
func withJobPattern(path string, id uint32) string {
	dir, file := filepath.Split(path)
	re := regexp.MustCompile(`(^|[^0-9])` + strconv.FormatUint(uint64(id), 10) + `([^0-9]|$)`)
	return dir + re.ReplaceAllString(file, "${1}%j${2}")
}

// describe is a one-line summary for logs.
func (s Successor) describe() string {
	dep := "none"
	if s.After != 0 {
		dep = fmt.Sprintf("afterok:%d", s.After)
	}
	return fmt.Sprintf("segment %d of chain %d in %s, %d min, dependency %s", s.N, s.Chain, s.Partition, s.LimitMin, dep)
}
