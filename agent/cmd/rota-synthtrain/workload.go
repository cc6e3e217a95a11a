package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
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
	// Arrival is when the job arrives, in seconds from the first
	// instant of the trace at the time scale (Gavel's arrival divided by
	// it); only with a rate (Poisson arrivals), else 0: all at once.
	Arrival float64 `json:"arrival_s,omitempty"`
	// gavelArrival is the arrival in Gavel's (unscaled) seconds, for
	// `rota sim --trace`.
	gavelArrival float64
}

// drawWorkload draws n single-GPU jobs with Gavel's generator (job type
// uniform over the table, duration on a V100 from its two-mode
// distribution), so both runs of the driver submit the same jobs for a
// seed. maxV100 > 0 caps a job's expected seconds on a V100 at timeScale:
// Gavel's long mode (up to a week) would otherwise dwarf a demo. rate > 0
// gives Poisson arrivals of that many jobs per hour of Gavel's time, as
// Gavel's simulator draws them (an exponential gap before every job, the
// first included); rate 0 puts every job at 0, as before rates existed
// (the same seed draws the same jobs then).
func drawWorkload(table string, gpuTypes []string, n int, seed int64, timeScale, maxV100, rate float64) ([]WorkloadJob, error) {
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
		j := g.Next(rate)
		steps := j.Steps
		if maxV100 > 0 {
			steps = math.Min(steps, maxV100*j.Rates[v100]*timeScale)
		}
		w := WorkloadJob{I: i, Model: j.Type, Steps: uint64(math.Max(1, math.Round(steps))), Seconds: map[string]float64{},
			Arrival: j.Arrival / timeScale, gavelArrival: j.Arrival}
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
	rate := fs.Float64("rate", 0, "Poisson arrivals, this many jobs per hour of Gavel's time (0: all at once); adds the arrival_s column (seconds at --time-scale)")
	simTrace := fs.String("sim-trace", "", "also write the jobs as a `rota sim --trace` CSV to this file, arrivals in Gavel's seconds")
	soloTable := fs.String("solo-table", "", "also write the part of --throughputs a training job reads (each job type's isolated throughput on --gpu-types) to this file, in the same format: each job then starts without parsing the whole 1.2 MB table")
	asJSON := fs.Bool("json", false, "JSON lines instead of tab-separated columns")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *n <= 0 || !(*scale > 0) || *maxV100 < 0 || !(*rate >= 0) || math.IsInf(*rate, 0) {
		fmt.Fprintln(os.Stderr, "rota-synthtrain workload: --n and --time-scale must be > 0, --max-v100-s and --rate >= 0")
		return 2
	}
	gts := strings.Split(*types, ",")
	jobs, err := drawWorkload(*table, gts, *n, *seed, *scale, *maxV100, *rate)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rota-synthtrain workload: %v\n", err)
		return 1
	}
	if *simTrace != "" {
		if err := writeSimTrace(*simTrace, jobs); err != nil {
			fmt.Fprintf(os.Stderr, "rota-synthtrain workload: %v\n", err)
			return 1
		}
	}
	if *soloTable != "" {
		if err := writeSoloTable(*table, *soloTable, gts); err != nil {
			fmt.Fprintf(os.Stderr, "rota-synthtrain workload: %v\n", err)
			return 1
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, j := range jobs {
			enc.Encode(j)
		}
		return 0
	}
	// The model goes last: it has blanks, and `read -r i steps ... model`
	// in a shell gives it whole to the last variable. Arrivals, when
	// drawn, come second (`read -r i at steps ...`); without --rate the
	// columns are as they always were.
	at := ""
	if *rate > 0 {
		at = "arrival_s\t"
	}
	fmt.Fprintf(stdout, "# i\t%ssteps\t%s\tmodel  (seconds per GPU type at time scale %g)\n", at, strings.Join(prefixed(gts, "s_"), "\t"), *scale)
	for _, j := range jobs {
		cols := []string{fmt.Sprint(j.I)}
		if *rate > 0 {
			cols = append(cols, strconv.FormatFloat(j.Arrival, 'f', 3, 64))
		}
		cols = append(cols, fmt.Sprint(j.Steps))
		for _, g := range gts {
			cols = append(cols, fmt.Sprint(j.Seconds[g]))
		}
		fmt.Fprintln(stdout, strings.Join(append(cols, j.Model), "\t"))
	}
	return 0
}

// writeSoloTable writes the part of Gavel's table at src that stepRate
// reads, in its format: for each of gpuTypes, each job type's "null"
// (isolated) throughput, without the pairs that make up most of the file.
// A job starting on a busy host then spends about a millisecond, not tens,
// learning its speed.
func writeSoloTable(src, dst string, gpuTypes []string) error {
	raw, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var doc map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	out := map[string]map[string]map[string]json.RawMessage{}
	for _, g := range gpuTypes {
		rows, ok := doc[g]
		if !ok {
			return fmt.Errorf("%s: no GPU type %q", src, g)
		}
		out[g] = map[string]map[string]json.RawMessage{}
		for k, v := range rows {
			if n, ok := v["null"]; ok {
				out[g][k] = map[string]json.RawMessage{"null": n}
			}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// writeSimTrace writes jobs as the CSV `rota sim --trace` reads
// (arrival_seconds,job_type,scale_factor,steps): Gavel's time, not the
// time scale's, and the same steps, so that the simulator runs the very
// jobs the cluster ran (every one a single-GPU job: scale factor 1).
func writeSimTrace(path string, jobs []WorkloadJob) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"arrival_seconds", "job_type", "scale_factor", "steps"})
	for _, j := range jobs {
		w.Write([]string{strconv.FormatFloat(j.gavelArrival, 'f', 3, 64), j.Model, "1", strconv.FormatUint(j.Steps, 10)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func prefixed(s []string, p string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = p + v
	}
	return out
}
