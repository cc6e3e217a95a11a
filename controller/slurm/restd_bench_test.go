package slurm

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestBenchBackends times the round loop's reads and updates through the
// command line and through slurmrestd, alternating, on a live cluster,
// with slurmctld's RPCs per call from sdiag. scripts/bench-backend sets
// it up (a cluster with slurmrestd and N pending jobs) and runs it; it is
// skipped otherwise. Environment: SLURM_CONF, ROTA_BENCH_RESTD_URL,
// ROTA_BENCH_JWT_KEY, ROTA_BENCH_REPS (default 5), ROTA_BENCH_UPDATES
// (default 100).
func TestBenchBackends(t *testing.T) {
	url := os.Getenv("ROTA_BENCH_RESTD_URL")
	if url == "" {
		t.Skip("scripts/bench-backend runs this (ROTA_BENCH_RESTD_URL unset)")
	}
	reps := envInt("ROTA_BENCH_REPS", 5)
	updates := envInt("ROTA_BENCH_UPDATES", 100)
	ctx := context.Background()
	cli := &CLI{Timeout: 120 * time.Second}
	restd := &Restd{CLI: &CLI{Timeout: 120 * time.Second}, URL: url, User: "root", Timeout: 120 * time.Second,
		Token: &KeyTokens{KeyFile: os.Getenv("ROTA_BENCH_JWT_KEY")}, Log: zerolog.New(os.Stderr)}
	v, err := restd.APIVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := cli.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pending []uint32
	for _, j := range jobs {
		if j.Pending() {
			pending = append(pending, j.ID)
		}
	}
	if len(pending) < updates {
		t.Fatalf("%d pending jobs, want at least %d", len(pending), updates)
	}
	type result struct {
		secs []float64
		rpcs []float64 // per call
		us   []float64 // slurmctld's time in those RPCs, per call
	}
	res := map[string]*result{}
	backends := []struct {
		name string
		s    Scheduler
	}{{"cli", cli}, {"restd", restd}}
	// The updates first, then 3 s for slurmctld's scheduler pass they
	// trigger, then the reads: jobs (the queue changed since this
	// backend's last read) and jobs_again (read once more at once: what an
	// idle round costs, nothing changed since).
	ops := []string{"update", "jobs", "jobs_again", "nodes", "partitions"}
	for rep := 0; rep < reps; rep++ {
		order := []int{0, 1}
		if rep%2 == 1 {
			order = []int{1, 0}
		}
		for _, bi := range order {
			b := backends[bi]
			for _, op := range ops {
				if op == "jobs" {
					time.Sleep(3 * time.Second)
				}
				if err := exec.Command("sdiag", "-r").Run(); err != nil {
					t.Fatalf("sdiag -r: %v", err)
				}
				calls := 1
				start := time.Now()
				switch op {
				case "jobs", "jobs_again":
					js, err := b.s.Jobs(ctx)
					if err != nil || len(js) < len(pending) {
						t.Fatalf("%s jobs: %d %v", b.name, len(js), err)
					}
				case "nodes":
					if _, err := b.s.Nodes(ctx); err != nil {
						t.Fatal(err)
					}
				case "partitions":
					if _, err := b.s.Partitions(ctx); err != nil {
						t.Fatal(err)
					}
				case "update":
					calls = updates
					for i := 0; i < updates; i++ {
						nice := int32(1 + (rep*2+bi+i)%50)
						if err := b.s.Update(ctx, pending[i], JobUpdate{Nice: &nice}); err != nil {
							t.Fatalf("%s update %d: %v", b.name, pending[i], err)
						}
					}
				}
				el := time.Since(start).Seconds()
				n, us, err := sdiagRPCs()
				if err != nil {
					t.Fatal(err)
				}
				k := b.name + "_" + op
				if res[k] == nil {
					res[k] = &result{}
				}
				res[k].secs = append(res[k].secs, el)
				res[k].rpcs = append(res[k].rpcs, float64(n)/float64(calls))
				res[k].us = append(res[k].us, float64(us)/float64(calls))
			}
		}
	}
	var last []string
	fmt.Printf("bench-backend: %d pending + running jobs, slurmrestd %s, %d reps alternating; medians\n", len(jobs), v, reps)
	fmt.Printf("%-18s %12s %14s %18s\n", "call", "wall_s", "rpcs_per_call", "ctld_us_per_call")
	for _, op := range []string{"jobs", "jobs_again", "nodes", "partitions", "update"} {
		for _, b := range backends {
			k := b.name + "_" + op
			r := res[k]
			label := k
			if op == "update" {
				label = fmt.Sprintf("%s (x%d)", k, updates)
			}
			fmt.Printf("%-18s %12.4f %14.2f %18.0f\n", label, median(r.secs), median(r.rpcs), median(r.us))
			last = append(last, fmt.Sprintf("%s_s=%.4f %s_rpcs=%.2f", k, median(r.secs), k, median(r.rpcs)))
		}
	}
	fmt.Printf("%s jobs=%d api=%s\n", strings.Join(last, " "), len(jobs), v)
}

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil && n > 0 {
		return n
	}
	return def
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// sdiagRPCs sums slurmctld's RPC counts and total times by message type
// since the last reset, less sdiag's own (REQUEST_STATS_INFO).
func sdiagRPCs() (count, totalUS int64, err error) {
	out, err := exec.Command("sdiag").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("sdiag: %w", err)
	}
	return ParseSdiagRPCs(string(out))
}

// ParseSdiagRPCs reads sdiag's "Remote Procedure Call statistics by
// message type" section: the RPCs' count and slurmctld's total time in
// them (microseconds), sdiag's own REQUEST_STATS_INFO left out.
func ParseSdiagRPCs(out string) (count, totalUS int64, err error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	in := false
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "Remote Procedure Call statistics by message type"):
			in = true
			continue
		case strings.HasPrefix(l, "Remote Procedure Call statistics by user"):
			in = false
		}
		if !in || l == "" || strings.HasPrefix(l, "REQUEST_STATS_INFO") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "count:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, 0, fmt.Errorf("sdiag line %q: %w", l, err)
				}
				count += n
			}
			if v, ok := strings.CutPrefix(f, "total_time:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, 0, fmt.Errorf("sdiag line %q: %w", l, err)
				}
				totalUS += n
			}
		}
	}
	return count, totalUS, nil
}

func TestParseSdiagRPCs(t *testing.T) {
	out := `Remote Procedure Call statistics by message type
	REQUEST_JOB_INFO                        ( 2003) count:3      ave_time:1200   total_time:3600
	REQUEST_STATS_INFO                      ( 2035) count:1      ave_time:100    total_time:100
	REQUEST_UPDATE_JOB                      ( 3001) count:100    ave_time:500    total_time:50000

Remote Procedure Call statistics by user
	root            (       0) count:104    ave_time:515    total_time:53700
`
	n, us, err := ParseSdiagRPCs(out)
	if err != nil || n != 103 || us != 53600 {
		t.Errorf("got %d %d %v", n, us, err)
	}
}
