// Package report is what `rota estimate` asks and shows, in one place for
// the CLI and the controller's web view: the request from a job script
// and the fields a user gives (the CLI's flags, the web form's fields),
// and the reply as the table the CLI prints. Both front ends call these,
// so the web form shows exactly what `rota estimate` prints for the same
// script.
package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rota-hpc/rota/controller/estimate/forecast"
	"github.com/rota-hpc/rota/controller/jobscript"
	"github.com/rota-hpc/rota/internal/conf"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/hints"
)

// Fields are what the user gives besides the script; they override its
// #SBATCH lines. Zero values were not given.
type Fields struct {
	GPUs, Nodes, CPUsPerTask uint
	Steps                    uint64
	// Model names a job type of the controller's throughput table.
	Model string
	// Throughput is TYPE:STEPS_PER_S[,...], as --rota-throughput.
	Throughput string
	// GPUMem is each GPU's need (20GiB); Mem host memory per node, as
	// sbatch --mem.
	GPUMem, Mem string
	Partition   string
	Type        string
	// Time is the limit asked for, as sbatch --time.
	Time string
	Name string
}

// FieldError is a field the user got wrong (the CLI's usage error).
type FieldError struct{ Msg string }

func (e FieldError) Error() string { return e.Msg }

// NoGPUs is the FieldError of a job that asks for no GPUs.
const NoGPUs = "the job asks for no GPUs: give --gpus N or a script with #SBATCH --gres=gpu:N (or --gpus)"

// Request is the estimate request for script (nil: none) and f.
// scriptName is the script's file name, which names the job when its
// #SBATCH lines do not (as Slurm does); "" for a pasted script. optOut
// says the script opts out of Rota (--rota=off): it is estimated anyway.
// The caller sets the request's User.
func Request(script []byte, scriptName string, f Fields) (req wire.EstimateRequest, optOut bool, err error) {
	req = wire.EstimateRequest{V: wire.Version}
	if script != nil {
		j, err := jobscript.Parse(script)
		if err != nil {
			if scriptName == "" {
				scriptName = "script"
			}
			return req, false, fmt.Errorf("%s: %w", scriptName, err)
		}
		optOut = j.Off
		fromScript(&req, j)
		if req.Name == "" && scriptName != "" {
			req.Name = filepath.Base(scriptName)
		}
		req.ScriptHash = hints.ScriptHash(script)
	}
	if f.GPUs > 0 {
		req.GPUsPerNode, req.GPUsPerJob, req.GPUsPerTask = uint32(f.GPUs), 0, 0
	}
	if f.Nodes > 0 {
		req.Nodes = uint32(f.Nodes)
	}
	if f.Steps > 0 {
		req.Steps = f.Steps
	}
	if f.CPUsPerTask > 0 {
		req.CPUsPerTask = uint32(f.CPUsPerTask)
	}
	req.Model = f.Model
	if f.Throughput != "" {
		h, err := hints.ParseThroughput(f.Throughput)
		if err != nil {
			return req, optOut, FieldError{err.Error()}
		}
		req.Throughput = h
	}
	if f.GPUMem != "" {
		b, err := conf.ParseBytes(f.GPUMem)
		if err != nil || b == 0 {
			return req, optOut, FieldError{fmt.Sprintf("--gpu-mem=%q: want a size such as 20GiB", f.GPUMem)}
		}
		req.GPUMemBytes = b
	}
	if f.Mem != "" {
		j, err := jobscript.Parse([]byte("#SBATCH --mem=" + f.Mem))
		if err != nil {
			return req, optOut, FieldError{err.Error()}
		}
		req.MemPerNodeMB = j.MemMB
	}
	if f.Partition != "" {
		req.Partition = f.Partition
	}
	if f.Type != "" {
		req.GPUType = f.Type
	}
	if f.Time != "" {
		m, err := slurmtime.Parse(f.Time)
		if err != nil {
			return req, optOut, FieldError{fmt.Sprintf("--time=%q: %v", f.Time, err)}
		}
		req.TimeLimitMin = m
	}
	if f.Name != "" {
		req.Name = f.Name
	}
	if req.GPUsPerNode == 0 && req.GPUsPerJob == 0 && req.GPUsPerTask == 0 {
		return req, optOut, FieldError{NoGPUs}
	}
	return req, optOut, nil
}

// fromScript copies what the script asks for into the request.
func fromScript(r *wire.EstimateRequest, j jobscript.Job) {
	r.Name = j.Name
	if len(j.Partitions) == 1 {
		r.Partition = j.Partitions[0]
	}
	r.TimeLimitMin, r.Nodes, r.CPUsPerTask, r.MemPerNodeMB = j.TimeMin, j.Nodes, j.CPUsPerTask, j.MemMB
	r.Tasks = j.Tasks
	if r.Tasks == 0 && j.TasksPerNode > 0 {
		r.Tasks = j.TasksPerNode * max(j.Nodes, 1)
	}
	r.GPUsPerJob, r.GPUsPerNode, r.GPUsPerTask, r.GPUType = j.GPUsPerJob, j.GPUsPerNode, j.GPUsPerTask, j.GPUType
	r.Steps, r.Throughput = j.Steps, j.Throughput
}

// Table is an estimate as `rota estimate` shows it: every cell and line
// already in words.
type Table struct {
	// Job is the first line: "job: 1 GPU(s), 2 core(s), 1000 steps".
	Job    string
	Header []string
	Rows   [][]string
	// Reasons say why a row does not fit and where each unknown comes
	// from ("partition/type: ...").
	Reasons []string
	// Plans are the fastest and cheapest plans' lines.
	Plans []string
	Notes []string
}

// Header is the table's header.
var Header = []string{"PARTITION", "TYPE", "FITS", "NODES", "STEPS/S", "RUN", "CHAIN", "WAIT NOW", "FINISH", "COST"}

// Build lays out rep, the controller's answer to req.
func Build(req *wire.EstimateRequest, rep *wire.EstimateReply) *Table {
	t := &Table{Header: Header, Job: fmt.Sprintf("job: %d GPU(s), %d core(s)", rep.GPUs, rep.Cores)}
	if req.Steps > 0 {
		t.Job += fmt.Sprintf(", %d steps", req.Steps)
	}
	var why []string
	for _, r := range rep.Rows {
		p := r.Partition
		if r.Debug {
			p += " (debug)"
		}
		sps := "unknown"
		if r.StepsPerSec != nil {
			sps = fmt.Sprintf("%.4g", *r.StepsPerSec)
		}
		chain := "-"
		switch {
		case r.Segments > 1:
			chain = fmt.Sprintf("%d x %s", r.Segments, slurmtime.Format(r.SegmentMin))
		case r.Segments == 0:
			chain = "unknown"
		}
		t.Rows = append(t.Rows, []string{p, r.GPUType, r.Fits, strconv.Itoa(int(r.Nodes)), sps, minutes(r.RunMin), chain,
			minutes(r.WaitMin), minutes(r.FinishMin), cost(r.Cost, rep.Unit)})
		at := r.Partition + "/" + r.GPUType + ": "
		for _, y := range r.Why {
			why = append(why, at+y)
		}
		if r.RunWhy != "" {
			why = append(why, at+"run time unknown: "+r.RunWhy)
		}
		if r.WaitWhy != "" && r.Fits != "no" {
			why = append(why, at+r.WaitWhy)
		}
		if r.Cost == nil && r.RunMin != nil {
			why = append(why, at+r.CostBasis)
		}
	}
	t.Reasons = dedupe(why)
	plan := func(label string, p *wire.Plan) {
		if p == nil {
			return
		}
		t.Plans = append(t.Plans, fmt.Sprintf("%s %s on %s: %s", label, p.GPUType, p.Partition, p.Why))
		if p.Segments > 1 {
			t.Plans = append(t.Plans, fmt.Sprintf("%*s as a chain of %d jobs, each within its time limit", len(label), "", p.Segments))
		}
	}
	plan("fastest: ", rep.Fastest)
	plan("cheapest:", rep.Cheapest)
	t.Notes = rep.Notes
	return t
}

// WriteText prints the table as `rota estimate` does.
func (t *Table) WriteText(w io.Writer) error {
	fmt.Fprintln(w, t.Job)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Header, "\t"))
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.Reasons) > 0 {
		fmt.Fprintln(w)
		for _, y := range t.Reasons {
			fmt.Fprintln(w, "  "+y)
		}
	}
	fmt.Fprintln(w)
	for _, p := range t.Plans {
		fmt.Fprintln(w, p)
	}
	for _, n := range t.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}

// minutes is a table cell's duration (forecast.Minutes); nil is unknown.
func minutes(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return forecast.Minutes(*p)
}

func cost(p *float64, unit string) string {
	if p == nil {
		return "unknown"
	}
	return strings.TrimSpace(fmt.Sprintf("%.4g %s", *p, unit))
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
