package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/lp"
	"github.com/rota-hpc/rota/controller/policy/workload"
)

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

// solveOptions are rota solve's flags.
type solveOptions struct {
	policy, cluster, costs, table string
	emit, cpuProfile              string
	agnostic, innerFIFO, multi    bool
	withCLP, asJSON               bool
	jobs, entities, repeat        int
	seed                          int64
	jitter                        float64
}

func newSolveCmd() *cobra.Command {
	var o solveOptions
	cmd := &cobra.Command{
		Use:   "solve [flags]",
		Short: "solve one policy on a generated workload (speed and correctness check)",
		Long: `rota solve draws a workload as Gavel's generator does and solves one of the
controller's policies on it once (or --repeat times): the objective, the
solve time, and, with --emit-mps or --clp, the same linear program written
as free MPS and solved by clp for an independent check (docs/policy.md).

It reads Gavel's throughput table (` + throughputTableName + `) as rota sim does: --` + throughputTableFlag + `,
else the controller's throughput_table, else ` + installedDataDir + `/` + throughputTableName + `.`,
		Example: `  rota solve --policy las --jobs 2048
  rota solve --policy hierarchical --jobs 2048 --entities 8 --seed 1 --clp --json
  rota solve --policy ftf --repeat 20 --cpu-profile /tmp/p.prof`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSolve(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.policy, "policy", "las", "policy: "+strings.Join(policy.Names(), ", "))
	fs.BoolVar(&o.agnostic, "agnostic", false, "heterogeneity-agnostic baseline")
	fs.BoolVar(&o.innerFIFO, "inner-fifo", false, "hierarchical: FIFO inside each entity")
	fs.IntVar(&o.jobs, "jobs", 2048, "number of jobs to draw")
	fs.StringVar(&o.cluster, "cluster", "v100=512,p100=512,k80=512", "GPU types and counts")
	fs.StringVar(&o.costs, "cost", "v100=2.48,p100=1.46,k80=0.45", "dollars per GPU-hour per type (min-cost policies)")
	addThroughputTableFlag(cmd, &o.table)
	fs.Int64Var(&o.seed, "seed", 1, "random seed")
	fs.BoolVar(&o.multi, "multi-gpu", false, "draw Gavel's multi-GPU scale factors")
	fs.Float64Var(&o.jitter, "jitter", 0.2, "scale each (job, type) throughput by a factor in [1-J, 1+J]")
	fs.IntVar(&o.entities, "entities", 8, "hierarchical: number of entities jobs are spread over")
	fs.StringVar(&o.emit, "emit-mps", "", "write the LP as free MPS (a minimisation) to this file")
	fs.BoolVar(&o.withCLP, "clp", false, "also solve the exported LP with clp and report its optimum and time")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.IntVar(&o.repeat, "repeat", 1, "solve this many times (for profiles and timings); solve_seconds is the median")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the solves to this file")
	aliasFlag(cmd, "cpuprofile", "cpu-profile")
	return cmd
}

func runSolve(ctx context.Context, o solveOptions, stdout io.Writer) error {
	if o.repeat < 1 {
		return usageError{"--repeat must be >= 1"}
	}
	if o.jobs < 0 || o.jitter < 0 || o.jitter >= 1 || o.entities < 1 {
		return usageError{"--jobs must be >= 0, --jitter in [0,1), --entities >= 1"}
	}
	types, caps, err := parseCluster(o.cluster)
	if err != nil {
		return usageError{err.Error()}
	}
	pol, err := policy.New(o.policy, policy.Options{Agnostic: o.agnostic, InnerFIFO: o.innerFIFO})
	if err != nil {
		return usageError{err.Error()}
	}
	path, err := throughputTable(o.table)
	if err != nil {
		return err
	}
	tab, err := workload.Load(path, types)
	if err != nil {
		return err
	}
	prob := workload.DrawProblem(tab, types, caps, o.jobs, o.seed, o.multi, o.jitter, o.entities)
	if prob.CostPerHour, err = parseCosts(o.costs, types); err != nil {
		return usageError{err.Error()}
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	var alloc policy.Allocation
	times := make([]float64, o.repeat)
	for i := range times {
		start := time.Now()
		alloc, err = pol.Allocate(ctx, prob)
		times[i] = time.Since(start).Seconds()
		if err != nil {
			return err
		}
	}
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	sort.Float64s(times)
	secs := times[len(times)/2]
	rep := solveReport{Policy: pol.Name(), Jobs: o.jobs, Objective: alloc.Objective, ObjectiveName: alloc.ObjectiveName,
		SolveSeconds: secs, ReducedJobs: alloc.ReducedJobs, Levels: alloc.Levels, Unschedulable: len(alloc.Unschedulable), Note: alloc.Note}

	if o.emit != "" || o.withCLP {
		lpp, ok := pol.(policy.LPPolicy)
		if !ok {
			return fmt.Errorf("%s is not a single linear program; nothing to export", pol.Name())
		}
		form, err := lpp.Formulate(prob)
		if err != nil {
			return err
		}
		path := o.emit
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
		if o.emit != "" {
			rep.MPS = path
		}
		mo := -lpObjectiveValue(alloc, lpp)
		rep.MPSObjective = &mo
		if o.withCLP {
			v, t, err := lp.SolveWithCLPTimed(path)
			if err != nil {
				return err
			}
			rep.CLPObjective, rep.CLPSeconds = &v, &t
		}
	}
	if o.asJSON {
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
