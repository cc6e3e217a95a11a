package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/rota-hpc/rota/controller/policy/workload"
)

// WorkloadJob is one line of `rota-synthtrain workload`.
type WorkloadJob struct {
	I     int    `json:"i"`
	Model string `json:"model"`
	Steps uint64 `json:"steps"`
	// Seconds is the expected run time per GPU type at the time scale.
	Seconds map[string]float64 `json:"seconds"`
}

// drawWorkload draws n single-GPU jobs with Gavel's generator (job type
// uniform over the table, duration on a V100 from its two-mode
// distribution), so both runs of the driver submit the same jobs for a
// seed. maxV100 > 0 caps a job's expected seconds on a V100 at timeScale:
// Gavel's long mode (up to a week) would otherwise dwarf a demo.
func drawWorkload(table string, gpuTypes []string, n int, seed int64, timeScale, maxV100 float64) ([]WorkloadJob, error) {
	t, err := workload.Load(table, gpuTypes)
	if err != nil {
		return nil, err
	}
	v100 := -1
	for i, g := range gpuTypes {
		if g == "v100" {
			v100 = i
		}
	}
	if v100 < 0 {
		// The generator anchors durations on the V100, as Gavel does.
		return nil, errors.New("--gpu-types must include v100 (Gavel's durations are V100 seconds)")
	}
	g := workload.NewGenerator(t, seed, false)
	out := make([]WorkloadJob, 0, n)
	for i := range n {
		j := g.Next(0)
		steps := j.Steps
		if maxV100 > 0 {
			steps = math.Min(steps, maxV100*j.Rates[v100]*timeScale)
		}
		w := WorkloadJob{I: i, Model: j.Type, Steps: uint64(math.Max(1, math.Round(steps))), Seconds: map[string]float64{}}
		for gi, gt := range gpuTypes {
			if j.Rates[gi] > 0 {
				w.Seconds[gt] = math.Round(float64(w.Steps)/(j.Rates[gi]*timeScale)*10) / 10
			}
		}
		out = append(out, w)
	}
	return out, nil
}

func workloadCmd(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("rota-synthtrain workload", flag.ContinueOnError)
	n := fs.Int("n", 24, "number of jobs")
	seed := fs.Int64("seed", 1, "seed: the same seed prints the same jobs")
	table := fs.String("throughputs", "../shared/data/gavel/simulation_throughputs.json", "Gavel's simulation_throughputs.json")
	types := fs.String("gpu-types", "v100,p100,k80", "GPU types of the cluster (comma-separated)")
	scale := fs.Float64("time-scale", 1, "the --time-scale the jobs will run with (for the seconds columns and --max-v100-s)")
	maxV100 := fs.Float64("max-v100-s", 0, "cap each job's expected seconds on a V100 at --time-scale (0: no cap)")
	asJSON := fs.Bool("json", false, "JSON lines instead of tab-separated columns")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *n <= 0 || !(*scale > 0) || *maxV100 < 0 {
		fmt.Fprintln(os.Stderr, "rota-synthtrain workload: --n and --time-scale must be > 0, --max-v100-s >= 0")
		return 2
	}
	gts := strings.Split(*types, ",")
	jobs, err := drawWorkload(*table, gts, *n, *seed, *scale, *maxV100)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-synthtrain workload: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, j := range jobs {
			enc.Encode(j)
		}
		return 0
	}
	// The model goes last: it has blanks, and `read -r i steps ... model`
	// in a shell gives it whole to the last variable.
	fmt.Fprintf(stdout, "# i\tsteps\t%s\tmodel  (seconds per GPU type at time scale %g)\n", strings.Join(prefixed(gts, "s_"), "\t"), *scale)
	for _, j := range jobs {
		cols := []string{fmt.Sprint(j.I), fmt.Sprint(j.Steps)}
		for _, g := range gts {
			cols = append(cols, fmt.Sprint(j.Seconds[g]))
		}
		fmt.Fprintln(stdout, strings.Join(append(cols, j.Model), "\t"))
	}
	return 0
}

func prefixed(s []string, p string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = p + v
	}
	return out
}
