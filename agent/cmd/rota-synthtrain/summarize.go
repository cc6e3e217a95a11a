package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// JobSummary is what the logs say about one job.
type JobSummary struct {
	Job   string `json:"job"`
	Model string `json:"model"`
	Total uint64 `json:"total"`
	// State: done (an end event), failed (an error event last), or
	// unfinished (anything else: still running, killed, never requeued).
	State       string  `json:"state"`
	Submit      float64 `json:"submit,omitempty"` // from --submit-times
	FirstStart  float64 `json:"first_start"`
	End         float64 `json:"end,omitempty"`
	JCT         float64 `json:"jct_s,omitempty"` // end - submit
	Starts      int     `json:"starts"`
	Restarts    int     `json:"restarts"` // highest $SLURM_RESTART_COUNT seen
	Types       string  `json:"types"`    // GPU type of each start, repeats collapsed: "k80,v100"
	TypeChanges int     `json:"type_changes"`
	Checkpoints int     `json:"checkpoints"`      // on signal or periodic, not the final one
	Stops       int     `json:"stops"`            // ended by a signal without saving
	Shared      bool    `json:"shared,omitempty"` // trained beside another job on one GPU (--share-dir)
	LostSteps   uint64  `json:"lost_steps"`
	// LostS is the lost steps in seconds of the attempt that made them (at
	// its rate), so jobs of different speeds add up.
	LostS   float64 `json:"lost_s"`
	MaxStep uint64  `json:"max_step"`
}

// Totals sum the job summaries.
type Totals struct {
	Jobs        int     `json:"jobs"`
	Done        int     `json:"done"`
	Unfinished  int     `json:"unfinished"`
	Failed      int     `json:"failed"`
	Restarts    int     `json:"restarts"`
	TypeChanges int     `json:"type_changes"`
	Checkpoints int     `json:"checkpoints"`
	Stops       int     `json:"stops"`
	Shared      int     `json:"shared"` // jobs that trained beside another on one GPU
	LostSteps   uint64  `json:"lost_steps"`
	LostS       float64 `json:"lost_s"`
	Steps       uint64  `json:"steps"`     // total steps of all jobs
	LostFrac    float64 `json:"lost_frac"` // lost_steps / steps
	MeanJCT     float64 `json:"mean_jct_s,omitempty"`
	Makespan    float64 `json:"makespan_s,omitempty"` // last end - first submit (or first start)
	BadLines    int     `json:"bad_lines"`
}

// readEvents reads the JSON lines of r. A line that does not parse (a torn
// last line of a killed writer) is counted, not fatal.
func readEvents(r io.Reader, out *[]Event) (bad int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e Event
		if json.Unmarshal([]byte(line), &e) != nil || e.Ev == "" || e.Job == "" {
			bad++
			continue
		}
		*out = append(*out, e)
	}
	return bad, sc.Err()
}

// readSubmitTimes reads "<job> <unix seconds>" lines; '#' starts a comment.
func readSubmitTimes(path string) (map[string]float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for i, line := range strings.Split(string(data), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want '<job id> <unix seconds>', got %q", path, i+1, line)
		}
		t, err := strconv.ParseFloat(f[1], 64)
		if err != nil || t <= 0 || math.IsInf(t, 0) {
			return nil, fmt.Errorf("%s:%d: %q is not Unix seconds", path, i+1, f[1])
		}
		out[f[0]] = t
	}
	return out, nil
}

// summarize folds the events (any order, any files) into one summary per
// job, sorted by job id (numerically where the ids are numbers).
func summarize(events []Event, submit map[string]float64) ([]JobSummary, Totals) {
	sort.SliceStable(events, func(i, j int) bool { return events[i].T < events[j].T })
	byJob := map[string]*JobSummary{}
	// The rate of a job's current and previous attempt: a lost event
	// (logged by the new attempt) is priced at the previous one's rate.
	curRate, prevRate := map[string]float64{}, map[string]float64{}
	lastEv := map[string]string{}
	var order []string
	for _, e := range events {
		s := byJob[e.Job]
		if s == nil {
			s = &JobSummary{Job: e.Job, State: "unfinished"}
			byJob[e.Job] = s
			order = append(order, e.Job)
		}
		lastEv[e.Job] = e.Ev
		if e.Step != nil {
			s.MaxStep = max(s.MaxStep, *e.Step)
		}
		switch e.Ev {
		case "start":
			if s.Starts == 0 {
				s.FirstStart = e.T
			}
			s.Starts++
			s.Model, s.Total = e.Model, e.Total
			if e.Restart != nil {
				s.Restarts = max(s.Restarts, *e.Restart)
			}
			types := strings.Split(s.Types, ",")
			if s.Types == "" {
				s.Types = e.GPU
			} else if types[len(types)-1] != e.GPU {
				s.Types += "," + e.GPU
				s.TypeChanges++
			}
			if e.ResumedFrom != nil {
				s.MaxStep = max(s.MaxStep, *e.ResumedFrom)
			}
			prevRate[e.Job], curRate[e.Job] = curRate[e.Job], e.Rate
			s.Shared = s.Shared || strings.Contains(e.Msg, sharingWords)
		case "rate":
			curRate[e.Job] = e.Rate
			s.Shared = s.Shared || strings.Contains(e.Msg, sharingWords)
		case "lost":
			if e.Steps != nil {
				s.LostSteps += *e.Steps
				if r := prevRate[e.Job]; r > 0 {
					s.LostS += float64(*e.Steps) / r
				}
			}
		case "checkpoint":
			if e.Reason != "end" {
				s.Checkpoints++
			}
		case "stop":
			s.Stops++
		case "end":
			s.State, s.End = "done", e.T
		}
	}
	var tot Totals
	sort.SliceStable(order, func(i, j int) bool { return jobLess(order[i], order[j]) })
	out := make([]JobSummary, 0, len(order))
	firstT, lastEnd := math.Inf(1), 0.0
	var jctSum float64
	var jctN int
	for _, id := range order {
		s := byJob[id]
		if s.State != "done" && lastEv[id] == "error" {
			s.State = "failed"
		}
		if t, ok := submit[id]; ok {
			s.Submit = t
			firstT = math.Min(firstT, t)
			if s.State == "done" {
				s.JCT = s.End - t
				jctSum += s.JCT
				jctN++
			}
		} else if s.Starts > 0 {
			firstT = math.Min(firstT, s.FirstStart)
		}
		lastEnd = math.Max(lastEnd, s.End)
		s.LostS = math.Round(s.LostS*1000) / 1000
		out = append(out, *s)
		tot.Jobs++
		switch s.State {
		case "done":
			tot.Done++
		case "failed":
			tot.Failed++
		default:
			tot.Unfinished++
		}
		tot.Restarts += s.Restarts
		tot.TypeChanges += s.TypeChanges
		tot.Checkpoints += s.Checkpoints
		tot.Stops += s.Stops
		if s.Shared {
			tot.Shared++
		}
		tot.LostSteps += s.LostSteps
		tot.LostS += s.LostS
		tot.Steps += s.Total
	}
	if tot.Steps > 0 {
		tot.LostFrac = float64(tot.LostSteps) / float64(tot.Steps)
	}
	if jctN > 0 {
		tot.MeanJCT = jctSum / float64(jctN)
	}
	if tot.Done == tot.Jobs && tot.Jobs > 0 && !math.IsInf(firstT, 1) {
		tot.Makespan = lastEnd - firstT
	}
	return out, tot
}

func jobLess(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		return x < y
	}
	return a < b
}

func summarizeCmd(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("rota-synthtrain summarize", flag.ContinueOnError)
	dir := fs.String("log-dir", "", "directory of job logs (every *.log and *.jsonl in it); more log files may follow as arguments")
	submitPath := fs.String("submit-times", "", "file of '<job id> <unix seconds>' lines, the driver's sbatch times (Slurm resets SubmitTime on requeue); gives jct_s")
	asJSON := fs.Bool("json", false, "one JSON object {jobs, totals} instead of key=value lines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	files := fs.Args()
	if *dir != "" {
		for _, pat := range []string{"*.log", "*.jsonl"} {
			m, _ := filepath.Glob(filepath.Join(*dir, pat))
			files = append(files, m...)
		}
	}
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "rota-synthtrain summarize: no logs (give --log-dir with *.log / *.jsonl files, or log files)")
		return 2
	}
	var events []Event
	bad := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rota-synthtrain summarize: %v\n", err)
			return 1
		}
		n, err := readEvents(fh, &events)
		fh.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rota-synthtrain summarize: %s: %v\n", f, err)
			return 1
		}
		bad += n
	}
	var submit map[string]float64
	if *submitPath != "" {
		var err error
		if submit, err = readSubmitTimes(*submitPath); err != nil {
			fmt.Fprintf(os.Stderr, "rota-synthtrain summarize: %v\n", err)
			return 1
		}
	}
	jobs, tot := summarize(events, submit)
	tot.BadLines = bad
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "rota-synthtrain summarize: %d log lines did not parse (skipped)\n", bad)
	}
	if *asJSON {
		json.NewEncoder(stdout).Encode(struct {
			Jobs   []JobSummary `json:"jobs"`
			Totals Totals       `json:"totals"`
		}{jobs, tot})
		return 0
	}
	for _, s := range jobs {
		fmt.Fprintf(stdout, "job=%s state=%s model=%q total=%d max_step=%d starts=%d restarts=%d types=%s type_changes=%d checkpoints=%d stops=%d lost_steps=%d lost_s=%.3f first_start=%.3f end=%.3f jct_s=%.3f\n",
			s.Job, s.State, s.Model, s.Total, s.MaxStep, s.Starts, s.Restarts, s.Types, s.TypeChanges, s.Checkpoints, s.Stops,
			s.LostSteps, s.LostS, s.FirstStart, s.End, s.JCT)
	}
	fmt.Fprintf(stdout, "totals jobs=%d done=%d unfinished=%d failed=%d restarts=%d type_changes=%d checkpoints=%d stops=%d lost_steps=%d lost_s=%.3f steps=%d lost_frac=%.6f mean_jct_s=%.3f makespan_s=%.3f bad_lines=%d\n",
		tot.Jobs, tot.Done, tot.Unfinished, tot.Failed, tot.Restarts, tot.TypeChanges, tot.Checkpoints, tot.Stops,
		tot.LostSteps, tot.LostS, tot.Steps, tot.LostFrac, tot.MeanJCT, tot.Makespan, tot.BadLines)
	return 0
}
