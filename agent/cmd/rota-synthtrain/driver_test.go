package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/controller/policy/workload"
	"github.com/rota-hpc/rota/controller/sim"
)

func ip(n int) *int { return &n }

func TestSummarize(t *testing.T) {
	start := func(job string, tt float64, restart int, gpu string, rate float64, from uint64) Event {
		return Event{Ev: "start", Job: job, T: tt, Restart: ip(restart), GPU: gpu, Model: "A3C", Total: 1000, Rate: rate, ResumedFrom: u64(from)}
	}
	ev := func(kind, job string, tt float64, step uint64) Event {
		return Event{Ev: kind, Job: job, T: tt, Step: u64(step)}
	}
	lost := func(job string, tt float64, steps uint64) Event {
		return Event{Ev: "lost", Job: job, T: tt, Steps: u64(steps)}
	}
	cases := []struct {
		name   string
		events []Event
		submit map[string]float64
		want   []string // JobSummary fields as "job state types type_changes starts restarts checkpoints stops lost_steps lost_s jct"
		tot    Totals
	}{
		{
			name: "migrated with a checkpoint, no loss",
			events: []Event{
				start("3", 100, 0, "k80", 10, 0), ev("checkpoint", "3", 150, 500),
				start("3", 300, 1, "v100", 40, 500), {Ev: "checkpoint", Job: "3", T: 312.5, Step: u64(1000), Reason: "end"},
				ev("end", "3", 312.5, 1000),
			},
			submit: map[string]float64{"3": 90},
			want:   []string{"3 done k80,v100 1 2 1 1 0 0 0 222.5"},
			tot:    Totals{Jobs: 1, Done: 1, Restarts: 1, TypeChanges: 1, Checkpoints: 1, Steps: 1000, MeanJCT: 222.5, Makespan: 222.5},
		},
		{
			// Killed by SIGTERM at 700 with its checkpoint at 500: 200 steps
			// lost, made at the first attempt's 10 steps/s = 20 s.
			name: "stopped unsaved, loss priced at the losing attempt's rate",
			events: []Event{
				start("10", 0, 0, "k80", 10, 0), ev("checkpoint", "10", 50, 500), ev("stop", "10", 70, 700),
				start("10", 200, 1, "k80", 40, 500), lost("10", 200, 200), ev("end", "10", 212.5, 1000),
			},
			want: []string{"10 done k80 0 2 1 1 1 200 20 0"},
			tot:  Totals{Jobs: 1, Done: 1, Restarts: 1, Checkpoints: 1, Stops: 1, LostSteps: 200, LostS: 20, Steps: 1000, LostFrac: 0.2, Makespan: 212.5},
		},
		{
			name: "unfinished, failed and done, sorted by job number, events out of order",
			events: []Event{
				ev("end", "9", 30, 1000), start("9", 10, 0, "v100", 100, 0),
				{Ev: "error", Job: "11", T: 5, Msg: "corrupt"},
				start("100", 1, 0, "p100", 5, 0), ev("checkpoint", "100", 2, 5),
			},
			want: []string{"9 done v100 0 1 0 0 0 0 0 0", "11 failed  0 0 0 0 0 0 0 0", "100 unfinished p100 0 1 0 1 0 0 0 0"},
			tot:  Totals{Jobs: 3, Done: 1, Unfinished: 1, Failed: 1, Checkpoints: 1, Steps: 2000},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jobs, tot := summarize(c.events, c.submit)
			var got []string
			for _, j := range jobs {
				got = append(got, strings.Join([]string{j.Job, j.State, j.Types, itoa(j.TypeChanges), itoa(j.Starts), itoa(j.Restarts),
					itoa(j.Checkpoints), itoa(j.Stops), itoa(int(j.LostSteps)), ftoa(j.LostS), ftoa(j.JCT)}, " "))
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Fatalf("jobs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if tot != c.tot {
				t.Fatalf("totals %+v\nwant   %+v", tot, c.tot)
			}
		})
	}
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// The summarize command over a log directory: a torn last line is skipped
// and counted, submit times give the JCT.
func TestSummarizeCmd(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "1.log"), []byte(
		`{"ev":"start","job":"1","t":10,"restart":0,"gpu":"k80","model":"A3C","total":100,"rate":10,"resumed_from":0}
{"ev":"end","job":"1","t":20,"step":100}
{"ev":"checkp`), 0o644)
	os.WriteFile(filepath.Join(dir, "2.jsonl"), []byte(
		`{"ev":"start","job":"2","t":11,"restart":0,"gpu":"v100","model":"A3C","total":300,"rate":30,"resumed_from":0}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "ignored.txt"), []byte("not a log\n"), 0o644)
	sub := filepath.Join(dir, "submits")
	os.WriteFile(sub, []byte("# job submit\n1 4.5\n2 5\n"), 0o644)
	var out bytes.Buffer
	if rc := summarizeCmd([]string{"--log-dir", dir, "--submit-times", sub}, &out); rc != 0 {
		t.Fatalf("rc %d", rc)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 ||
		!strings.HasPrefix(lines[0], `job=1 state=done model="A3C"`) || !strings.HasSuffix(lines[0], "jct_s=15.500") ||
		!strings.HasPrefix(lines[1], "job=2 state=unfinished") ||
		!strings.HasPrefix(lines[2], "totals jobs=2 done=1 unfinished=1 failed=0") || !strings.HasSuffix(lines[2], "bad_lines=1") {
		t.Fatalf("output:\n%s", out.String())
	}

	os.WriteFile(sub, []byte("1 yesterday\n"), 0o644)
	if rc := summarizeCmd([]string{"--log-dir", dir, "--submit-times", sub}, &out); rc != 1 {
		t.Fatalf("a bad submit-times file gave rc %d, want 1", rc)
	}
	if rc := summarizeCmd([]string{"--log-dir", t.TempDir()}, &out); rc != 2 {
		t.Fatalf("an empty log dir gave rc %d, want 2", rc)
	}
}

func TestWorkload(t *testing.T) {
	table := gavelTable(t)
	draw := func(seed int64, maxV100 float64) []WorkloadJob {
		t.Helper()
		w, err := drawWorkload(table, []string{"v100", "p100", "k80"}, 24, seed, 100, maxV100, 0)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	a, b, c := draw(1, 0), draw(1, 0), draw(2, 0)
	key := func(w []WorkloadJob) string {
		var s []string
		for _, j := range w {
			s = append(s, j.Model+"/"+itoa(int(j.Steps)))
		}
		return strings.Join(s, ",")
	}
	if key(a) != key(b) {
		t.Fatal("the same seed drew different workloads")
	}
	if key(a) == key(c) {
		t.Fatal("seeds 1 and 2 drew the same workload")
	}
	models := map[string]bool{}
	for _, j := range a {
		models[j.Model] = true
		// Seconds per type are steps / (Gavel rate x time scale).
		rates, _, _ := stepRate(table, "k80", j.Model, 100, nil)
		if want := float64(j.Steps) / rates; j.Seconds["k80"] < want-0.06 || j.Seconds["k80"] > want+0.06 {
			t.Fatalf("%s: k80 seconds %v, want %v", j.Model, j.Seconds["k80"], want)
		}
	}
	if len(models) < 8 {
		t.Fatalf("24 jobs over only %d job types; Gavel's generator draws uniformly over 26", len(models))
	}
	capped := draw(1, 30)
	for i, j := range capped {
		if j.Seconds["v100"] > 30.05 {
			t.Fatalf("job %d: %v s on a v100, cap 30", i, j.Seconds["v100"])
		}
		if j.Model != a[i].Model || j.Steps > a[i].Steps {
			t.Fatalf("cap changed job %d's type or raised its steps: %+v vs %+v", i, j, a[i])
		}
	}
	if _, err := drawWorkload(table, []string{"p100", "k80"}, 3, 1, 1, 0, 0); err == nil || !strings.Contains(err.Error(), "v100") {
		t.Fatalf("no v100: err %v", err)
	}
	var out bytes.Buffer
	if rc := workloadCmd([]string{"--n", "3", "--seed", "1", "--throughputs", table}, &out); rc != 0 {
		t.Fatal(rc)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "#") || len(strings.Split(lines[1], "\t")) != 6 {
		t.Fatalf("workload output:\n%s", out.String())
	}
}

// TestWorkloadArrivals: --rate draws Poisson arrivals in Gavel's hours,
// shrunk by the time scale in the arrival_s column and kept in Gavel's
// seconds in the --sim-trace CSV, which `rota sim --trace` reads back as
// the same jobs; without --rate the output is what it always was.
func TestWorkloadArrivals(t *testing.T) {
	table := gavelTable(t)
	tab, err := workload.Load(table, []string{"v100", "p100", "k80"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		n           int
		rate, scale float64
		cols        int     // columns of a TSV line
		meanGap     float64 // expected mean gap between arrivals, seconds at the scale (0: all at 0)
	}{
		{name: "no rate: all at once, the old columns", n: 50, scale: 1000, cols: 6},
		{name: "30 an hour at scale 1000", n: 2000, rate: 30, scale: 1000, cols: 7, meanGap: 3600.0 / 30 / 1000},
		{name: "150 an hour at scale 100", n: 2000, rate: 150, scale: 100, cols: 7, meanGap: 3600.0 / 150 / 100},
		{name: "4 an hour unscaled", n: 2000, rate: 4, scale: 1, cols: 7, meanGap: 900},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			csvPath := filepath.Join(dir, "trace.csv")
			args := []string{"--n", strconv.Itoa(c.n), "--seed", "3", "--time-scale", strconv.FormatFloat(c.scale, 'g', -1, 64),
				"--max-v100-s", "30", "--throughputs", table, "--sim-trace", csvPath}
			if c.rate > 0 {
				args = append(args, "--rate", strconv.FormatFloat(c.rate, 'g', -1, 64))
			}
			var out bytes.Buffer
			if rc := workloadCmd(args, &out); rc != 0 {
				t.Fatalf("rc %d", rc)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != c.n+1 || strings.Contains(lines[0], "arrival_s") != (c.rate > 0) {
				t.Fatalf("%d lines, header %q", len(lines), lines[0])
			}
			var arr []float64
			for _, l := range lines[1:] {
				f := strings.Split(l, "\t")
				if len(f) != c.cols {
					t.Fatalf("line %q: %d columns, want %d", l, len(f), c.cols)
				}
				if c.rate > 0 {
					a, err := strconv.ParseFloat(f[1], 64)
					if err != nil {
						t.Fatal(err)
					}
					arr = append(arr, a)
				}
			}
			for i := 1; i < len(arr); i++ {
				if arr[i] < arr[i-1] {
					t.Fatalf("arrival %d at %v before %d's at %v", i, arr[i], i-1, arr[i-1])
				}
			}
			if c.meanGap > 0 {
				// The first gap counts too (Gavel's first job arrives after one).
				if got := arr[len(arr)-1] / float64(len(arr)); got < 0.9*c.meanGap || got > 1.1*c.meanGap {
					t.Fatalf("mean gap %v s, want about %v", got, c.meanGap)
				}
			}
			f, err := os.Open(csvPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			jobs, err := sim.ReadTrace(f, tab)
			if err != nil {
				t.Fatalf("rota sim cannot read the trace: %v", err)
			}
			w, err := drawWorkload(table, []string{"v100", "p100", "k80"}, c.n, 3, c.scale, 30, c.rate)
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != c.n {
				t.Fatalf("trace has %d jobs, want %d", len(jobs), c.n)
			}
			for i, j := range jobs {
				// The same job, in Gavel's time: the arrival scaled back up,
				// the same steps, one GPU.
				if j.Type != w[i].Model || j.Steps != float64(w[i].Steps) || j.Scale != 1 ||
					math.Abs(j.Arrival-w[i].Arrival*c.scale) > 1e-3*c.scale {
					t.Fatalf("job %d: trace %+v, workload %+v", i, j, w[i])
				}
				if c.rate > 0 && math.Abs(j.Arrival/c.scale-arr[i]) > 0.0006 {
					t.Fatalf("job %d: trace arrival %v s of Gavel's, TSV %v s at scale %v", i, j.Arrival, arr[i], c.scale)
				}
			}
		})
	}
	// The same seed and rate draw the same trace. (A rate draws one more
	// number per job, so a seed draws other jobs with a rate than
	// without.)
	a, _ := drawWorkload(table, []string{"v100", "p100", "k80"}, 20, 5, 1000, 30, 60)
	b, _ := drawWorkload(table, []string{"v100", "p100", "k80"}, 20, 5, 1000, 30, 60)
	for i := range a {
		if a[i].Model != b[i].Model || a[i].Steps != b[i].Steps || a[i].Arrival != b[i].Arrival {
			t.Fatalf("seed 5 drew job %d twice differently: %+v, %+v", i, a[i], b[i])
		}
	}
	var out bytes.Buffer
	if rc := workloadCmd([]string{"--n", "3", "--rate", "-1", "--throughputs", table}, &out); rc != 2 {
		t.Fatalf("--rate -1 gave rc %d, want 2", rc)
	}
}
