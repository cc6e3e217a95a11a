package web

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/estimate/forecast/report"
	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
)

// queueRow is one GPU type's line on the overview: Slurm's capacity and
// use, and the jobs headed for it.
type queueRow struct {
	wire.TypeState
	Free                          int
	Running, Pending, PendingGPUs int
	UsedPercent                   float64
}

type overviewData struct {
	Overview
	Types []queueRow
	// Untyped are pending jobs no type is chosen for yet.
	Untyped, UntypedGPUs int
	Jobs                 Jobs
	JobsErr              string
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	d := overviewData{Overview: s.src.Overview(ctx)}
	jobs, err := s.src.Jobs(ctx)
	if err != nil {
		d.JobsErr = err.Error()
	}
	d.Jobs = jobs
	idx := map[string]int{}
	for _, t := range d.Overview.Types {
		q := queueRow{TypeState: t, Free: max(t.Total-t.Used, 0)}
		if t.Total > 0 {
			q.UsedPercent = 100 * float64(t.Used) / float64(t.Total)
		}
		idx[t.Type] = len(d.Types)
		d.Types = append(d.Types, q)
	}
	for _, j := range jobs.List {
		k, known := idx[j.Type]
		switch {
		case j.State == "PENDING" && !known:
			d.Untyped++
			d.UntypedGPUs += j.GPUs
		case !known:
		case j.State == "PENDING":
			d.Types[k].Pending++
			d.Types[k].PendingGPUs += j.GPUs
		default:
			d.Types[k].Running++
		}
	}
	s.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: d})
}

type jobsData struct {
	Jobs
	Running, Pending int
	Err              string
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	jobs, err := s.src.Jobs(ctx)
	d := jobsData{Jobs: jobs}
	if err != nil {
		d.Err = err.Error()
	}
	for _, j := range jobs.List {
		if j.State == "PENDING" {
			d.Pending++
		} else {
			d.Running++
		}
	}
	s.render(w, r, http.StatusOK, "jobs", page{Title: "Jobs", Nav: "jobs", Data: d})
}

// jobData is one job's explain, as `rota explain` shows it.
type jobData struct {
	ID uint32
	wire.ExplainReply
	Numbers []kv
	Rates   []rateRow
}

type kv struct {
	K string
	V float64
}

type rateRow struct {
	Type, Source string
	Rate         float64
	Share        float64
	HasShare     bool
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	id, err := jobID(r)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, err.Error())
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	rep := s.src.Explain(ctx, id)
	d := jobData{ID: id, ExplainReply: rep}
	if rep.Decision != nil {
		for k, v := range rep.Decision.Numbers {
			d.Numbers = append(d.Numbers, kv{k, v})
		}
		sort.Slice(d.Numbers, func(a, b int) bool { return d.Numbers[a].K < d.Numbers[b].K })
	}
	if rj := rep.Round; rj != nil {
		for t, v := range rj.Rates {
			sh, ok := rj.Share[t]
			d.Rates = append(d.Rates, rateRow{Type: t, Rate: v, Source: rj.RateSource[t], Share: sh, HasShare: ok})
		}
		sort.Slice(d.Rates, func(a, b int) bool { return d.Rates[a].Type < d.Rates[b].Type })
	}
	s.render(w, r, http.StatusOK, "job", page{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: d})
}

type trendData struct {
	Fairness, JCT, Queue Chart
	Samples              int
	Last                 *sampleView
}

type sampleView struct {
	At                         time.Time
	Jain                       string
	Entities, Running, Pending int
	Finished                   int
	MeanJCT, P50JCT            string
}

func (s *Server) trend(w http.ResponseWriter, r *http.Request) {
	samples := s.src.Trend()
	n := len(samples)
	ts := make([]time.Time, n)
	jain, mean, p50, run, pend := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i, x := range samples {
		ts[i] = x.At
		jain[i], mean[i], p50[i] = math.NaN(), math.NaN(), math.NaN()
		if x.HasJain {
			jain[i] = x.Jain
		}
		if x.Finished > 0 {
			mean[i], p50[i] = x.MeanJCT/60, x.P50JCT/60
		}
		run[i], pend[i] = float64(x.Running), float64(x.Pending)
	}
	d := trendData{Samples: n,
		Fairness: newChart("Fairness: Jain's index over entities' speed-weighted GPUs", "index", []Series{{Name: "Jain's index", Class: "s1", T: ts, V: jain}}, 0, 1),
		JCT: newChart("Job completion time of jobs finished in the last hour", "minutes",
			[]Series{{Name: "mean", Class: "s1", T: ts, V: mean}, {Name: "median", Class: "s2", T: ts, V: p50}}, 0, math.NaN()),
		Queue: newChart("GPU jobs in the queue", "jobs",
			[]Series{{Name: "running", Class: "s1", T: ts, V: run}, {Name: "pending", Class: "s2", T: ts, V: pend}}, 0, math.NaN()),
	}
	if n > 0 {
		x := samples[n-1]
		v := &sampleView{At: x.At, Entities: x.Entities, Running: x.Running, Pending: x.Pending, Finished: x.Finished,
			Jain: "-", MeanJCT: "-", P50JCT: "-"}
		if x.HasJain {
			v.Jain = fmt.Sprintf("%.3f", x.Jain)
		}
		if x.Finished > 0 {
			v.MeanJCT, v.P50JCT = seconds(x.MeanJCT), seconds(x.P50JCT)
		}
		d.Last = v
	}
	s.render(w, r, http.StatusOK, "trend", page{Title: "Fairness and JCT", Nav: "trend", Data: d})
}

func (s *Server) moves(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "moves", page{Title: "Migrations and chains", Nav: "moves", Data: s.src.Moves()})
}

// agentStale: a node agent reports every 5 s by default; six missed
// reports make it late.
const agentStale = 30 * time.Second

type agentRow struct {
	AgentNode
	Health string // ok, late, silent
	Age    string
}

type agentsData struct {
	SlurmAt time.Time
	Ingest  *wire.IngestStatus
	Nodes   []agentRow
	OK      int
	Stale   time.Duration
}

func (s *Server) agents(w http.ResponseWriter, r *http.Request) {
	a := s.src.Agents()
	d := agentsData{Ingest: a.Ingest, Stale: agentStale, SlurmAt: a.SlurmAt}
	now := s.now()
	for _, n := range a.Nodes {
		row := agentRow{AgentNode: n, Health: "silent", Age: "never"}
		if !n.Seen.IsZero() {
			age := now.Sub(n.Seen)
			row.Age = ago(age)
			row.Health = "ok"
			if age > agentStale {
				row.Health = "late"
			}
		}
		if row.Health == "ok" {
			d.OK++
		}
		d.Nodes = append(d.Nodes, row)
	}
	s.render(w, r, http.StatusOK, "agents", page{Title: "Agents", Nav: "agents", Data: d})
}

// estimateData is the form (as filled) and, once posted, the table.
type estimateData struct {
	Script string
	F      formFields
	Models []string
	User   string
	Err    string
	Table  *report.Table
	Text   string
}

// formFields are the form's fields as typed.
type formFields struct {
	GPUs, Nodes, CPUsPerTask, Steps                             string
	Model, Throughput, GPUMem, Mem, Partition, Type, Time, Name string
}

func (s *Server) estimateForm(w http.ResponseWriter, r *http.Request) {
	user, _ := s.auth.who(r)
	s.render(w, r, http.StatusOK, "estimate", page{Title: "Estimate", Nav: "estimate", Data: estimateData{Models: s.src.Models(), User: user}})
}

func (s *Server) estimate(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseMultipartForm(maxForm); err != nil && err != http.ErrNotMultipart {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	user, _ := s.auth.who(r)
	v := r.PostForm.Get
	d := estimateData{Models: s.src.Models(), User: user,
		// Browsers send a textarea's lines with CRLF: the script as its
		// file holds it has LF, and the script's hash (which finds earlier
		// runs of the job) must be the file's.
		Script: strings.ReplaceAll(v("script"), "\r\n", "\n"),
		F: formFields{GPUs: v("gpus"), Nodes: v("nodes"), CPUsPerTask: v("cpus-per-task"), Steps: v("steps"),
			Model: v("model"), Throughput: v("throughput"), GPUMem: v("gpu-mem"), Mem: v("mem"),
			Partition: v("partition"), Type: v("type"), Time: v("time"), Name: v("name")}}
	f, err := d.F.parse()
	if err != nil {
		d.Err = err.Error()
		s.render(w, r, http.StatusBadRequest, "estimate", page{Title: "Estimate", Nav: "estimate", Data: d})
		return
	}
	var script []byte
	if strings.TrimSpace(d.Script) != "" {
		script = []byte(d.Script)
	}
	req, _, err := report.Request(script, "", f)
	if err != nil {
		d.Err = err.Error()
		s.render(w, r, http.StatusBadRequest, "estimate", page{Title: "Estimate", Nav: "estimate", Data: d})
		return
	}
	req.User = user
	ctx, cancel := s.ctx(r)
	defer cancel()
	select {
	case s.estimates <- struct{}{}:
		defer func() { <-s.estimates }()
	case <-ctx.Done():
		s.fail(w, r, http.StatusServiceUnavailable, "too many estimates at once; try again")
		return
	}
	rep := s.src.Estimate(ctx, &req)
	if rep.Error != "" {
		d.Err = rep.Error
		s.render(w, r, http.StatusOK, "estimate", page{Title: "Estimate", Nav: "estimate", Data: d})
		return
	}
	d.Table = report.Build(&req, &rep)
	var b strings.Builder
	if err := d.Table.WriteText(&b); err == nil {
		d.Text = b.String()
	}
	s.render(w, r, http.StatusOK, "estimate", page{Title: "Estimate", Nav: "estimate", Data: d})
}

// parse reads the numeric fields; the others go to report.Request as
// typed, which checks them as it checks rota estimate's flags.
func (f formFields) parse() (report.Fields, error) {
	out := report.Fields{Model: strings.TrimSpace(f.Model), Throughput: strings.TrimSpace(f.Throughput),
		GPUMem: strings.TrimSpace(f.GPUMem), Mem: strings.TrimSpace(f.Mem), Partition: strings.TrimSpace(f.Partition),
		Type: strings.TrimSpace(f.Type), Time: strings.TrimSpace(f.Time), Name: strings.TrimSpace(f.Name)}
	for _, n := range []struct {
		flag, v string
		to      *uint
	}{{"--gpus", f.GPUs, &out.GPUs}, {"--nodes", f.Nodes, &out.Nodes}, {"--cpus-per-task", f.CPUsPerTask, &out.CPUsPerTask}} {
		if v := strings.TrimSpace(n.v); v != "" {
			x, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return out, fmt.Errorf("%s=%q: want a whole number", n.flag, n.v)
			}
			*n.to = uint(x)
		}
	}
	if v := strings.TrimSpace(f.Steps); v != "" {
		x, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return out, fmt.Errorf("--steps=%q: want a whole number", f.Steps)
		}
		out.Steps = x
	}
	return out, nil
}

// funcs are the templates' helpers.
func funcs(now func() time.Time) map[string]any {
	return map[string]any{
		"limit": func(m uint32) string {
			if m == 0 {
				return "UNLIMITED"
			}
			return slurmtime.Format(m)
		},
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.Local().Format("2006-01-02 15:04:05")
		},
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return ago(now().Sub(t))
		},
		"pct":   func(f float64) string { return fmt.Sprintf("%.0f%%", f) },
		"gib":   func(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) },
		"float": func(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) },
		"secs":  seconds,
		"minutes": func(m uint32) string {
			if m == 0 {
				return "kept as asked"
			}
			return slurmtime.Format(m)
		},
		"ifempty": func(s, def string) string {
			if s == "" {
				return def
			}
			return s
		},
		"add": func(a, b int) int { return a + b },
	}
}

func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%.0fs ago", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.0fm ago", d.Minutes())
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1fh ago", d.Hours())
	}
	return fmt.Sprintf("%.1fd ago", d.Hours()/24)
}

func seconds(s float64) string {
	return (time.Duration(s*float64(time.Second)) / time.Second * time.Second).String()
}
