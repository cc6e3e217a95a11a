// Package jobscript reads what a batch script asks Slurm for: its #SBATCH
// lines, as sbatch reads them, including Rota's own SPANK options
// (--rota-steps, --rota-throughput). `rota estimate job.sh` uses it.
// Options Rota does not need are skipped; a value it needs but cannot
// read is an error naming the line, never a guess.
package jobscript

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/internal/slurmsize"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire/gpureq"
	"github.com/rota-hpc/rota/wire/hints"
)

// Job is what the script asks for; zero values were not given.
type Job struct {
	Name       string
	Partitions []string
	TimeMin    uint32
	Nodes      uint32 // minimum node count (-N 2-4 gives 2)
	Tasks      uint32
	// TasksPerNode is --ntasks-per-node.
	TasksPerNode uint32
	CPUsPerTask  uint32
	MemMB        uint64 // --mem, per node
	// GPU counts by field, and the one type named (if any).
	GPUsPerJob, GPUsPerNode, GPUsPerTask uint32
	GPUType                              string
	Steps                                uint64
	Throughput                           map[string]float64
	Off                                  bool // --rota=off
}

// MaxScript bounds the script read: sbatch's own limit is larger, but
// #SBATCH lines sit at the top.
const MaxScript = 4 << 20

// Parse reads the #SBATCH lines at the top of script: sbatch reads them
// until the first line that is neither blank nor a comment.
func Parse(script []byte) (Job, error) {
	var j Job
	if len(script) > MaxScript {
		script = script[:MaxScript]
	}
	for n, line := range strings.Split(string(script), "\n") {
		line = strings.TrimRight(line, "\r")
		t := strings.TrimSpace(line)
		if t == "" {
			continue
		}
		if !strings.HasPrefix(t, "#") {
			break
		}
		rest, ok := strings.CutPrefix(t, "#SBATCH")
		if !ok {
			continue
		}
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			continue // "#SBATCHX" is a comment
		}
		args, err := split(rest)
		if err != nil {
			return j, fmt.Errorf("line %d: %w", n+1, err)
		}
		if err := j.apply(args); err != nil {
			return j, fmt.Errorf("line %d: %w", n+1, err)
		}
	}
	return j, nil
}

// split cuts an #SBATCH line into words: blanks separate, quotes group,
// and a word starting with '#' starts a comment.
func split(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		case r == '#' && !in:
			return out, nil
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote")
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}

// options maps every spelling to the long name; withValue lists those
// that take a value.
var short = map[string]string{
	"-p": "partition", "-t": "time", "-N": "nodes", "-n": "ntasks", "-c": "cpus-per-task",
	"-G": "gpus", "-J": "job-name",
}

var known = map[string]bool{
	"partition": true, "time": true, "nodes": true, "ntasks": true, "ntasks-per-node": true,
	"cpus-per-task": true, "gpus": true, "gres": true, "gpus-per-node": true, "gpus-per-task": true,
	"mem": true, "job-name": true, "rota-steps": true, "rota-throughput": true, "rota": true,
}

func (j *Job) apply(args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		var name, val string
		hasVal := false
		switch {
		case strings.HasPrefix(a, "--"):
			name, val, hasVal = strings.Cut(a[2:], "=")
		case strings.HasPrefix(a, "-") && len(a) >= 2:
			long, ok := short[a[:2]]
			if !ok {
				continue // a short option Rota does not read
			}
			name = long
			if len(a) > 2 {
				val, hasVal = strings.TrimPrefix(a[2:], "="), true
			}
		default:
			continue // a stray word: sbatch would complain, Rota need not
		}
		if !known[name] {
			continue
		}
		if !hasVal {
			if name == "rota" {
				continue // --rota alone: on
			}
			if i+1 >= len(args) {
				return fmt.Errorf("--%s needs a value", name)
			}
			i++
			val = args[i]
		}
		if err := j.set(name, val); err != nil {
			return err
		}
	}
	return nil
}

func (j *Job) set(name, v string) error {
	var err error
	switch name {
	case "partition":
		j.Partitions = nil
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				j.Partitions = append(j.Partitions, p)
			}
		}
		if len(j.Partitions) == 0 {
			return fmt.Errorf("--partition: empty")
		}
	case "time":
		if j.TimeMin, err = slurmtime.Parse(v); err != nil {
			return fmt.Errorf("--time=%q: %w", v, err)
		}
	case "nodes":
		lo, _, _ := strings.Cut(v, "-") // min[-max]: the minimum
		j.Nodes, err = positive(name, lo)
	case "ntasks":
		j.Tasks, err = positive(name, v)
	case "ntasks-per-node":
		j.TasksPerNode, err = positive(name, v)
	case "cpus-per-task":
		j.CPUsPerTask, err = positive(name, v)
	case "mem":
		j.MemMB, err = memMB(v)
	case "job-name":
		j.Name = v
	case "gres":
		spec, perr := gpureq.Parse(v)
		if perr != nil {
			return fmt.Errorf("--gres=%q: %w", v, perr)
		}
		if n, types, has := spec.GPUs(); has {
			j.GPUsPerNode = uint32(min(n, 1<<20))
			err = j.setType(types)
		}
	case "gpus", "gpus-per-node", "gpus-per-task":
		n, t, perr := gpuCount(v)
		if perr != nil {
			return fmt.Errorf("--%s=%q: %w", name, v, perr)
		}
		switch name {
		case "gpus":
			j.GPUsPerJob = n
		case "gpus-per-node":
			j.GPUsPerNode = n
		default:
			j.GPUsPerTask = n
		}
		if t != "" {
			err = j.setType([]string{t})
		}
	case "rota-steps":
		n, perr := strconv.ParseUint(v, 10, 64)
		if perr != nil || n == 0 {
			return fmt.Errorf("--rota-steps=%q: want a positive whole number of steps", v)
		}
		j.Steps = n
	case "rota-throughput":
		// The plugin's own parser: the script means to the estimate
		// what it will mean at submission.
		j.Throughput, err = hints.ParseThroughput(v)
	case "rota":
		switch strings.ToLower(v) {
		case "off", "no", "false", "0":
			j.Off = true
		case "on", "yes", "true", "1", "":
		default:
			return fmt.Errorf("--rota=%q: want on or off", v)
		}
	}
	return err
}

func (j *Job) setType(types []string) error {
	for _, t := range types {
		if j.GPUType != "" && j.GPUType != t {
			return fmt.Errorf("GPU types %s and %s both asked for; rota estimate reads one", j.GPUType, t)
		}
		j.GPUType = t
	}
	return nil
}

func positive(name, v string) (uint32, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
	if err != nil || n == 0 || n > 1<<20 {
		return 0, fmt.Errorf("--%s=%q: want a positive whole number", name, v)
	}
	return uint32(n), nil
}

// gpuCount reads "[type:]count" (--gpus, --gpus-per-node, --gpus-per-task).
func gpuCount(v string) (uint32, string, error) {
	t, c, typed := strings.Cut(v, ":")
	if !typed {
		t, c = "", v
	}
	if typed {
		if err := gpureq.CheckTypeName(t); err != nil {
			return 0, "", err
		}
	}
	n, err := strconv.ParseUint(c, 10, 32)
	if err != nil || n == 0 || n > 1<<20 {
		return 0, "", fmt.Errorf("want [TYPE:]COUNT with a positive count")
	}
	return uint32(n), t, nil
}

// memMB reads --mem: a number with an optional unit K, M (the default),
// G or T.
func memMB(v string) (uint64, error) {
	// --mem=0 means all of the node's memory: no number to check.
	mb, err := slurmsize.MB(v)
	if err != nil {
		return 0, fmt.Errorf("--mem=%q: want a size such as 16000, 16G or 512M", v)
	}
	return mb, nil
}
