package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rota-hpc/rota/controller/policy"
	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/controller/sim"
)

// simOptions are rota sim's flags.
type simOptions struct {
	policies                []string
	agnostic, multi, asJSON bool
	noGroup, noStick        bool
	spaceSharing            bool
	shareMargin             float64
	derive                  []string
	cluster, table, measure string
	trace, plot, cpuProfile string
	rate, jitter            float64
	static, perNode         int
	seed                    int64
	round, migCost, realloc time.Duration
	// several clusters (docs/multicluster.md)
	clusters, prices string
	links, moves     []string
	ckptGB, dataGB   string
	margin, minStay  time.Duration
	marginFraction   float64
	movesSet         bool
}

func newSimCmd() *cobra.Command {
	var o simOptions
	cmd := &cobra.Command{
		Use:   "sim [flags]",
		Short: "simulate policies with the round-based mechanism on generated or traced jobs",
		Long: `rota sim runs the controller's policies and round-based mechanism on a
simulated cluster: jobs drawn as Gavel's simulator draws them (Poisson
arrivals, or --static N jobs at once), or read from a CSV trace. It prints
per policy the average, median and 99th-percentile job completion time of
the measured jobs, the makespan, utilisation per GPU type, migrations and
solve times (docs/policy.md).

With --clusters it simulates several clusters, each with its own queue and
policy rounds, joined by --link; jobs are submitted to a home cluster and
carry a checkpoint and data that a move copies over the link. It prints per
--moves mode (none, greedy, planned) the JCTs, the makespan, the moves and
the GB they copied (docs/multicluster.md).

It reads Gavel's throughput table (` + throughputTableName + `): --` + throughputTableFlag + `, else
the controller's throughput_table (` + controllerConf + `), else the copy the
rota-controller package installs in ` + installedDataDir + `/.`,
		Example: `  rota sim --static 20
  rota sim --policy las --policy fifo --rate 5 --measure 4000:5000 --seed 1
  rota sim --policy makespan --static 200 --json --plot cdf.svg
  rota sim --clusters 'a:v100=32,p100=32;b:k80=64,v100=16' --link a-b:1GB/s --moves none,greedy,planned`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.movesSet = cmd.Flags().Changed("moves") || cmd.Flags().Changed("link")
			return runSim(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&o.policies, "policy", []string{"las"}, "policy to simulate (repeat, or comma-separate, to compare): "+strings.Join(policy.Names(), ", "))
	fs.BoolVar(&o.agnostic, "agnostic", false, "heterogeneity-agnostic variants")
	fs.StringVar(&o.cluster, "cluster", "v100=36,p100=36,k80=36", "GPU types and counts")
	addThroughputTableFlag(cmd, &o.table)
	fs.Float64Var(&o.rate, "rate", 4, "arrivals per hour (Poisson)")
	fs.StringVar(&o.measure, "measure", "4000:5000", "measured job window lo:hi (arrival indices)")
	fs.IntVar(&o.static, "static", 0, "static trace: this many jobs all at t=0, all measured")
	fs.Int64Var(&o.seed, "seed", 1, "random seed")
	fs.BoolVar(&o.multi, "multi-gpu", false, "Gavel's multi-GPU scale factors")
	fs.DurationVar(&o.round, "round", 360*time.Second, "round length")
	fs.DurationVar(&o.migCost, "migration-cost", 0, "time lost per migration (checkpoint + restart)")
	fs.DurationVar(&o.realloc, "realloc-interval", 0, "least simulated time between policy solves (0: at the first round after any arrival or completion, as Gavel's simulator)")
	fs.Float64Var(&o.jitter, "jitter", 0, "scale each throughput the policy sees by a fixed per-job factor in [1-J, 1+J]; jobs run at true rates")
	fs.BoolVar(&o.noGroup, "no-group", false, "las: solve over single jobs, not groups of identical jobs (slower, same optimum)")
	fs.BoolVar(&o.spaceSharing, "space-sharing", false, "las and ftf with space sharing: two single-GPU jobs share one GPU where the table's pair throughput beats taking turns by --share-margin (docs/policy.md)")
	fs.Float64Var(&o.shareMargin, "share-margin", policy.DefaultShareMargin, "with --space-sharing, how much more a pair must get done together than one after the other (sum of each one's throughput shared over alone)")
	fs.StringSliceVar(&o.derive, "derive-type", nil, "a GPU type the table never measured, as TYPE=FROM*FACTOR (e.g. a100=v100*2; repeat); MIG slices in --cluster (a100_3g.20gb) are derived from their whole GPU's rates and their share of its compute")
	fs.BoolVar(&o.noStick, "no-stick", false, "mechanism: Gavel's plain greedy, without keeping jobs on the type they hold")
	fs.IntVar(&o.perNode, "gpus-per-node", 4, "GPUs per node, for packing")
	fs.StringVar(&o.trace, "trace", "", "CSV trace (arrival_seconds,job_type,scale_factor,steps) instead of the generator")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.StringVar(&o.plot, "plot", "", "write the JCT CDF as SVG to this file")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the simulation to this file")
	aliasFlag(cmd, "cpuprofile", "cpu-profile")
	fs.StringVar(&o.clusters, "clusters", "", "several clusters, each name:type=count,...; separated by ';' (e.g. 'a:v100=32,p100=32;b:k80=64,v100=16'); replaces --cluster")
	fs.StringSliceVar(&o.links, "link", nil, "link between two clusters, a-b:bandwidth or a-b:bandwidth:latency (e.g. a-b:1GB/s:20ms; units B/s kB/s MB/s GB/s or Mb/s Gb/s); repeat per pair; unlinked pairs exchange no jobs")
	fs.StringSliceVar(&o.moves, "moves", []string{"none", "greedy", "planned"}, "with --clusters, move modes to compare: none (stay home), greedy (whenever sooner elsewhere), planned (gain > cost + margin, minimum stay)")
	fs.DurationVar(&o.margin, "move-margin", 0, "planned: a move's estimated gain must exceed its cost by this much")
	fs.Float64Var(&o.marginFraction, "move-margin-fraction", 0.1, "planned: and by this fraction of the job's estimated time left where it is (estimates err in proportion)")
	fs.DurationVar(&o.minStay, "min-stay", 2*time.Hour, "planned: least time a job stays on a cluster before moving again (longer if its last move cost more)")
	fs.StringVar(&o.ckptGB, "checkpoint-gb", "1:20", "with --clusters, checkpoint size per job, log-uniform in lo:hi GB")
	fs.StringVar(&o.dataGB, "data-gb", "10:500", "with --clusters, data size per job, log-uniform in lo:hi GB")
	fs.StringVar(&o.prices, "cluster-price", "", "with --clusters, price per GPU-hour per cluster, name=price,... (default 1); reported as cost")
	return cmd
}

func runSim(ctx context.Context, o simOptions, stdout, stderr io.Writer) error {
	pols := o.policies
	if len(pols) == 0 {
		pols = []string{"las"}
	}
	var clusters []sim.Cluster
	types, caps, err := parseCluster(o.cluster)
	if o.clusters != "" {
		types, clusters, err = parseClusters(o.clusters)
	} else if o.movesSet {
		err = fmt.Errorf("--moves and --link need --clusters")
	}
	if err != nil {
		return usageError{err.Error()}
	}
	lo, hi, err := parseWindow(o.measure)
	if err != nil || o.rate <= 0 || o.round <= 0 {
		return usageError{"--measure lo:hi with lo < hi, --rate > 0, --round > 0"}
	}
	path, err := throughputTable(o.table)
	if err != nil {
		return err
	}
	derive, err := workload.ParseDerivations(o.derive)
	if err != nil {
		return usageError{err.Error()}
	}
	tab, err := workload.LoadDerived(path, types, derive)
	if err != nil {
		return err
	}
	for _, t := range types {
		if how := tab.Derived[t]; how != "" {
			fmt.Fprintf(stderr, "rota sim: %s not measured in the table; its rates are %s\n", t, how)
		}
	}
	var jobs []workload.Job
	switch {
	case o.trace != "":
		f, err := os.Open(o.trace)
		if err != nil {
			return err
		}
		jobs, err = sim.ReadTrace(f, tab)
		f.Close()
		if err != nil {
			return err
		}
		hi = min(hi, len(jobs))
		if o.static > 0 || lo >= hi {
			lo, hi = 0, len(jobs)
		}
	case o.static > 0:
		g := workload.NewGenerator(tab, o.seed, o.multi)
		for i := 0; i < o.static; i++ {
			jobs = append(jobs, g.Next(0))
		}
		lo, hi = 0, o.static
	default:
		// Keep arrivals coming past the window so the load stays up while
		// the measured jobs finish, as Gavel's simulator does.
		g := workload.NewGenerator(tab, o.seed, o.multi)
		for i := 0; i < hi*3; i++ {
			jobs = append(jobs, g.Next(o.rate))
		}
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
		defer pprof.StopCPUProfile()
	}
	if clusters != nil && o.spaceSharing {
		return usageError{"--space-sharing is simulated on one cluster, not with --clusters"}
	}
	if clusters != nil {
		return runMultiSim(ctx, o, simCfg{types: types, clusters: clusters, jobs: jobs, lo: lo, hi: hi}, stdout)
	}
	cfg := sim.Config{Types: types, Capacity: caps, Round: o.round.Seconds(), MigrationCost: o.migCost.Seconds(),
		GPUsPerNode: o.perNode, Jobs: jobs, MeasureLo: lo, MeasureHi: hi,
		ReallocInterval: o.realloc.Seconds(), Seed: o.seed, Jitter: o.jitter, NoStick: o.noStick}
	if o.spaceSharing {
		if o.shareMargin <= 0 {
			return usageError{"--share-margin must be > 0"}
		}
		cfg.Pairs = func(a, b workload.Job) [][2]float64 { return tab.PairRates(a.Type, b.Type, 1) }
	}
	var reps []sim.Report
	for _, name := range pols {
		pol, err := policy.New(name, policy.Options{Agnostic: o.agnostic, SpaceSharing: o.spaceSharing, ShareMargin: o.shareMargin})
		if err != nil {
			return usageError{err.Error()}
		}
		c := cfg
		// las sees only throughputs, scale and weight: identical jobs can
		// be solved as one group, exactly (see sim.Config.GroupIdentical).
		c.GroupIdentical = name == "las" && !o.noGroup
		rep, err := sim.Run(ctx, c, pol)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	if o.plot != "" {
		if err := writePlot(o.plot, reps); err != nil {
			return err
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if len(reps) == 1 {
			return enc.Encode(reps[0])
		}
		return enc.Encode(reps)
	}
	for _, r := range reps {
		fmt.Fprintf(stdout, "%-22s jobs %d  JCT h avg %.2f med %.2f p99 %.2f  makespan %.1f h  util %v  migrations %d  lease ext %d / %d rounds  rho mean %.2f p99 %.2f  solve mean %.4fs max %.4fs (%d solves)",
			r.Policy, r.JobsMeasured, r.AvgJCTHours, r.MedianJCTHours, r.P99JCTHours, r.MakespanHours, fmtUtil(types, r.Utilisation),
			r.Migrations, r.LeaseExtensions, r.Rounds, r.RhoMean, r.RhoP99, r.SolveSecondsMean, r.SolveSecondsMax, r.Solves)
		if o.spaceSharing {
			fmt.Fprintf(stdout, "  shared %.0f GPU-h", r.SharedGPUHours)
		}
		fmt.Fprintln(stdout)
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

// writePlot writes the JCT CDFs of reps to path (--plot).
func writePlot(path string, reps []sim.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := sim.WriteCDF(f, reps); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
