package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/lp"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

func init() {
	register("solve", command{summary: "solve one policy on a generated workload (speed and correctness check)", run: runSolve})
}

// solveReport is `rota solve --json`'s output.
type solveReport struct {
	Policy        string  `json:"policy"`
	Jobs          int     `json:"jobs"`
	Objective     float64 `json:"objective"`
	ObjectiveName string  `json:"objective_name"`
	SolveSeconds  float64 `json:"solve_seconds"`
	ReducedJobs   int     `json:"reduced_jobs"`
	Levels        int     `json:"levels,omitempty"`
	Unschedulable int     `json:"unschedulable"`
	Note          string  `json:"note,omitempty"`
	MPS           string  `json:"mps,omitempty"`
	// MPSObjective is the optimum of the exported minimisation, which an
	// independent solver must reproduce.
	MPSObjective *float64 `json:"mps_objective,omitempty"`
	CLPObjective *float64 `json:"clp_objective,omitempty"`
	CLPSeconds   *float64 `json:"clp_seconds,omitempty"`
}

func runSolve(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("solve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("policy", "las", "policy: "+strings.Join(policy.Names(), ", "))
	agnostic := fs.Bool("agnostic", false, "heterogeneity-agnostic baseline")
	innerFIFO := fs.Bool("inner-fifo", false, "hierarchical: FIFO inside each entity")
	n := fs.Int("jobs", 2048, "number of jobs to draw")
	cluster := fs.String("cluster", "v100=512,p100=512,k80=512", "GPU types and counts")
	costs := fs.String("cost", "v100=2.48,p100=1.46,k80=0.45", "dollars per GPU-hour per type (min-cost policies)")
	tput := fs.String("throughputs", "../shared/data/gavel/simulation_throughputs.json", "Gavel throughput table")
	seed := fs.Int64("seed", 1, "random seed")
	multi := fs.Bool("multi-gpu", false, "draw Gavel's multi-GPU scale factors")
	jitter := fs.Float64("jitter", 0.2, "scale each (job, type) throughput by a factor in [1-J, 1+J]")
	entities := fs.Int("entities", 8, "hierarchical: number of entities jobs are spread over")
	emit := fs.String("emit-mps", "", "write the LP as free MPS (a minimisation) to this file")
	withCLP := fs.Bool("clp", false, "also solve the exported LP with clp and report its optimum and time")
	asJSON := fs.Bool("json", false, "print JSON")
	repeat := fs.Int("repeat", 1, "solve this many times (for profiles and timings); solve_seconds is the median")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the solves to this file")
	if err := fs.Parse(args); err != nil {
		return usageError{"solve: " + err.Error()}
	}
	if *repeat < 1 {
		return usageError{"solve: --repeat must be >= 1"}
	}
	if *n < 0 || *jitter < 0 || *jitter >= 1 || *entities < 1 {
		return usageError{"solve: --jobs must be >= 0, --jitter in [0,1), --entities >= 1"}
	}
	types, caps, err := parseCluster(*cluster)
	if err != nil {
		return usageError{"solve: " + err.Error()}
	}
	pol, err := policy.New(*name, policy.Options{Agnostic: *agnostic, InnerFIFO: *innerFIFO})
	if err != nil {
		return usageError{"solve: " + err.Error()}
	}
	tab, err := workload.Load(*tput, types)
	if err != nil {
		return err
	}
	prob := workload.DrawProblem(tab, types, caps, *n, *seed, *multi, *jitter, *entities)
	if prob.CostPerHour, err = parseCosts(*costs, types); err != nil {
		return usageError{"solve: " + err.Error()}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	var alloc policy.Allocation
	times := make([]float64, *repeat)
	for i := range times {
		start := time.Now()
		alloc, err = pol.Allocate(ctx, prob)
		times[i] = time.Since(start).Seconds()
		if err != nil {
			return err
		}
	}
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	sort.Float64s(times)
	secs := times[len(times)/2]
	rep := solveReport{Policy: pol.Name(), Jobs: *n, Objective: alloc.Objective, ObjectiveName: alloc.ObjectiveName,
		SolveSeconds: secs, ReducedJobs: alloc.ReducedJobs, Levels: alloc.Levels, Unschedulable: len(alloc.Unschedulable), Note: alloc.Note}

	if *emit != "" || *withCLP {
		lpp, ok := pol.(policy.LPPolicy)
		if !ok {
			return fmt.Errorf("solve: %s is not a single linear program; nothing to export", pol.Name())
		}
		form, err := lpp.Formulate(prob)
		if err != nil {
			return err
		}
		path := *emit
		if path == "" {
			dir, err := os.MkdirTemp("", "rota-solve")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "policy.mps")
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := lp.WriteFreeMPS(f, form, pol.Name()); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if *emit != "" {
			rep.MPS = path
		}
		mo := -lpObjectiveValue(alloc, lpp)
		rep.MPSObjective = &mo
		if *withCLP {
			v, t, err := lp.SolveWithCLPTimed(path)
			if err != nil {
				return err
			}
			rep.CLPObjective, rep.CLPSeconds = &v, &t
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "%s: %d jobs, %s = %.10g, solved in %.4fs (%d jobs in the exact finish)\n",
		rep.Policy, rep.Jobs, rep.ObjectiveName, rep.Objective, rep.SolveSeconds, rep.ReducedJobs)
	if rep.Note != "" {
		fmt.Fprintln(stdout, "note:", rep.Note)
	}
	if rep.MPSObjective != nil {
		fmt.Fprintf(stdout, "MPS minimisation optimum: %.10g\n", *rep.MPSObjective)
	}
	if rep.CLPObjective != nil {
		fmt.Fprintf(stdout, "clp: %.10g in %.4fs\n", *rep.CLPObjective, *rep.CLPSeconds)
	}
	return nil
}

// lpObjectiveValue inverts LPObjective: the LP's own (maximised) optimum.
func lpObjectiveValue(a policy.Allocation, p policy.LPPolicy) float64 {
	if a.FormulatedOptimum != 0 {
		return a.FormulatedOptimum
	}
	if p.LPObjective(2) != 2 { // makespan reports 1/t
		return 1 / a.Objective
	}
	return a.Objective
}

// parseCluster reads "v100=36,p100=36,k80=36".
func parseCluster(s string) ([]string, []int, error) {
	var types []string
	var caps []int
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		c, err := strconv.Atoi(val)
		if !ok || name == "" || err != nil || c < 0 {
			return nil, nil, fmt.Errorf("bad --cluster entry %q (want type=count)", part)
		}
		types = append(types, name)
		caps = append(caps, c)
	}
	return types, caps, nil
}

// parseCosts reads "v100=2.48,..." for the given types; missing types cost 1.
func parseCosts(s string, types []string) ([]float64, error) {
	out := make([]float64, len(types))
	for i := range out {
		out[i] = 1
	}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		c, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil || c <= 0 {
			return nil, fmt.Errorf("bad --cost entry %q (want type=dollars)", part)
		}
		for i, t := range types {
			if t == name {
				out[i] = c
			}
		}
	}
	return out, nil
}
