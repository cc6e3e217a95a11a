package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/controller/sim"
)

func init() {
	register("sim", command{summary: "simulate policies with the round-based mechanism on generated or traced jobs", run: runSim})
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runSim(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var pols multiFlag
	fs.Var(&pols, "policy", "policy to simulate (repeat to compare)")
	agnostic := fs.Bool("agnostic", false, "heterogeneity-agnostic variants")
	cluster := fs.String("cluster", "v100=36,p100=36,k80=36", "GPU types and counts")
	tput := fs.String("throughputs", "../shared/data/gavel/simulation_throughputs.json", "Gavel throughput table")
	rate := fs.Float64("rate", 4, "arrivals per hour (Poisson)")
	measure := fs.String("measure", "4000:5000", "measured job window lo:hi (arrival indices)")
	static := fs.Int("static", 0, "static trace: this many jobs all at t=0, all measured")
	seed := fs.Int64("seed", 1, "random seed")
	multi := fs.Bool("multi-gpu", false, "Gavel's multi-GPU scale factors")
	round := fs.Duration("round", 360*time.Second, "round length")
	migCost := fs.Duration("migration-cost", 0, "time lost per migration (checkpoint + restart)")
	realloc := fs.Duration("realloc-interval", 0, "least simulated time between policy solves (0: at the first round after any arrival or completion, as Gavel's simulator)")
	jit := fs.Float64("jitter", 0, "scale each throughput the policy sees by a fixed per-job factor in [1-J, 1+J] (jobs run at true rates)")
	noGroup := fs.Bool("no-group", false, "las: solve over single jobs, not groups of identical jobs (slower, same optimum)")
	noStick := fs.Bool("no-stick", false, "mechanism: Gavel's plain greedy, without keeping jobs on the type they hold")
	perNode := fs.Int("gpus-per-node", 4, "GPUs per node, for packing")
	trace := fs.String("trace", "", "CSV trace (arrival_seconds,job_type,scale_factor,steps) instead of the generator")
	asJSON := fs.Bool("json", false, "print JSON")
	plot := fs.String("plot", "", "write the JCT CDF as SVG to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the simulation to this file")
	if err := fs.Parse(args); err != nil {
		return usageError{"sim: " + err.Error()}
	}
	if len(pols) == 0 {
		pols = multiFlag{"las"}
	}
	types, caps, err := parseCluster(*cluster)
	if err != nil {
		return usageError{"sim: " + err.Error()}
	}
	lo, hi, err := parseWindow(*measure)
	if err != nil || *rate <= 0 || *round <= 0 {
		return usageError{"sim: --measure lo:hi with lo < hi, --rate > 0, --round > 0"}
	}
	tab, err := workload.Load(*tput, types)
	if err != nil {
		return err
	}
	var jobs []workload.Job
	switch {
	case *trace != "":
		f, err := os.Open(*trace)
		if err != nil {
			return err
		}
		jobs, err = sim.ReadTrace(f, tab)
		f.Close()
		if err != nil {
			return err
		}
		hi = min(hi, len(jobs))
		if *static > 0 || lo >= hi {
			lo, hi = 0, len(jobs)
		}
	case *static > 0:
		g := workload.NewGenerator(tab, *seed, *multi)
		for i := 0; i < *static; i++ {
			jobs = append(jobs, g.Next(0))
		}
		lo, hi = 0, *static
	default:
		// Keep arrivals coming past the window so the load stays up while
		// the measured jobs finish, as Gavel's simulator does.
		g := workload.NewGenerator(tab, *seed, *multi)
		for i := 0; i < hi*3; i++ {
			jobs = append(jobs, g.Next(*rate))
		}
	}
	cfg := sim.Config{Types: types, Capacity: caps, Round: round.Seconds(), MigrationCost: migCost.Seconds(),
		GPUsPerNode: *perNode, Jobs: jobs, MeasureLo: lo, MeasureHi: hi,
		ReallocInterval: realloc.Seconds(), Seed: *seed, Jitter: *jit, NoStick: *noStick}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var reps []sim.Report
	for _, name := range pols {
		pol, err := policy.New(name, policy.Options{Agnostic: *agnostic})
		if err != nil {
			return usageError{"sim: " + err.Error()}
		}
		c := cfg
		// las sees only throughputs, scale and weight: identical jobs can
		// be solved as one group, exactly (see sim.Config.GroupIdentical).
		c.GroupIdentical = name == "las" && !*noGroup
		rep, err := sim.Run(ctx, c, pol)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	if *plot != "" {
		f, err := os.Create(*plot)
		if err != nil {
			return err
		}
		if err := sim.WriteCDF(f, reps); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if len(reps) == 1 {
			return enc.Encode(reps[0])
		}
		return enc.Encode(reps)
	}
	for _, r := range reps {
		fmt.Fprintf(stdout, "%-22s jobs %d  JCT h avg %.2f med %.2f p99 %.2f  makespan %.1f h  util %v  migrations %d  lease ext %d / %d rounds  rho mean %.2f p99 %.2f  solve mean %.4fs max %.4fs (%d solves)\n",
			r.Policy, r.JobsMeasured, r.AvgJCTHours, r.MedianJCTHours, r.P99JCTHours, r.MakespanHours, fmtUtil(types, r.Utilisation),
			r.Migrations, r.LeaseExtensions, r.Rounds, r.RhoMean, r.RhoP99, r.SolveSecondsMean, r.SolveSecondsMax, r.Solves)
	}
	return nil
}

func fmtUtil(types []string, u []float64) string {
	var parts []string
	for k, t := range types {
		parts = append(parts, fmt.Sprintf("%s=%.0f%%", t, 100*u[k]))
	}
	return strings.Join(parts, ",")
}

func parseWindow(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, ":")
	lo, e1 := strconv.Atoi(a)
	hi, e2 := strconv.Atoi(b)
	if !ok || e1 != nil || e2 != nil || lo < 0 || hi <= lo {
		return 0, 0, fmt.Errorf("bad window %q", s)
	}
	return lo, hi, nil
}
