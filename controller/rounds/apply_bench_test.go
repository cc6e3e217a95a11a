package rounds

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
)

// TestBenchApply measures what a round's updates cost a user's sbatch,
// by how they are spread: for each pace in ROTA_BENCH_APPLY_MODES
// ("off": no updates; "B/S": round_apply_batch/round_apply_share) it
// sends updates to the pending jobs for ROTA_BENCH_APPLY_SECONDS through
// the controller's own code (slurm.CLI.UpdatePaced, Pace) while an sbatch
// is timed every 50 ms, and prints the sbatch latencies and the update
// rate. "read/S" sends no updates but reads the whole queue every S
// seconds, as the controller's round and managers do (its rate is
// reads). scripts/bench-apply sets up the cluster and runs it; it is
// skipped otherwise. ROTA_BENCH_APPLY_UPDATE: gres (retype between v100
// and p100, and a nice; 24.11 and later), round (that and a time limit,
// as a round's retype sends) or nice.
func TestBenchApply(t *testing.T) {
	if os.Getenv("ROTA_BENCH_APPLY") == "" {
		t.Skip("scripts/bench-apply runs this (ROTA_BENCH_APPLY unset)")
	}
	modes := strings.Fields(os.Getenv("ROTA_BENCH_APPLY_MODES"))
	if len(modes) == 0 {
		modes = []string{"off", "1/0.5", "8/0.5", "64/0.5", "64/1"}
	}
	secs, _ := strconv.Atoi(os.Getenv("ROTA_BENCH_APPLY_SECONDS"))
	if secs <= 0 {
		secs = 20
	}
	reps, _ := strconv.Atoi(os.Getenv("ROTA_BENCH_APPLY_REPS"))
	if reps <= 0 {
		reps = 2
	}
	kind := os.Getenv("ROTA_BENCH_APPLY_UPDATE")
	gres, limit := kind != "nice", kind == "round"
	ctx := context.Background()
	cli := &slurm.CLI{}
	jobs, err := cli.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for _, j := range jobs {
		if j.Pending() {
			ids = append(ids, j.ID)
		}
	}
	if len(ids) < 100 {
		t.Fatalf("%d pending jobs, want at least 100", len(ids))
	}
	type result struct {
		lat     []float64 // ms
		updates int
		failed  int
	}
	res := map[string]*result{}
	for rep := 0; rep < reps; rep++ {
		for _, mode := range modes {
			r := res[mode]
			if r == nil {
				r = &result{}
				res[mode] = r
			}
			var pace Pace
			readEvery := time.Duration(0)
			if every, ok := strings.CutPrefix(mode, "read/"); ok {
				// No updates: the whole queue read every so many seconds.
				n, err := strconv.ParseFloat(every, 64)
				if err != nil || n <= 0 {
					t.Fatalf("ROTA_BENCH_APPLY_MODES: %q: want read/SECONDS", mode)
				}
				readEvery = time.Duration(n * float64(time.Second))
			} else if mode != "off" {
				b, s, ok := strings.Cut(mode, "/")
				pace.Batch, _ = strconv.Atoi(b)
				pace.Share, _ = strconv.ParseFloat(s, 64)
				pace.MaxPause = time.Second
				if !ok || pace.Check() != nil || pace.Batch < 1 || pace.Share <= 0 {
					t.Fatalf("ROTA_BENCH_APPLY_MODES: %q: want off or BATCH/SHARE", mode)
				}
			}
			time.Sleep(3 * time.Second) // the last mode's work settles
			wctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second)
			var wg sync.WaitGroup
			if readEvery > 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for wctx.Err() == nil {
						if _, err := cli.Jobs(wctx); err == nil {
							r.updates++ // reads, for this mode
						}
						select {
						case <-wctx.Done():
						case <-time.After(readEvery):
						}
					}
				}()
			} else if mode != "off" {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; wctx.Err() == nil; k++ {
						ch := make([]slurm.Change, 200)
						typ := []string{"v100", "p100"}[k%2]
						nice := int32(100 + k%2)
						for i := range ch {
							u := slurm.JobUpdate{Nice: &nice}
							if gres {
								u.GPU = &slurm.GPURequest{PerNode: "gres/gpu:" + typ + ":1"}
							}
							if limit {
								m := uint32(60 + k%2)
								u.TimeLimitMin = &m
							}
							ch[i] = slurm.Change{JobID: ids[rand.Intn(len(ids))], Update: u}
						}
						for _, err := range cli.UpdatePaced(wctx, ch, pace.gaps(wctx, nil)) {
							switch {
							case err == nil:
								r.updates++
							case wctx.Err() == nil:
								r.failed++
							}
						}
					}
				}()
			}
			for wctx.Err() == nil {
				start := time.Now()
				out, err := exec.Command("sbatch", "-Q", "-J", "probe", "-o", "/dev/null", "-D", "/tmp",
					"--gres=gpu:1", "--begin=now+1day", "--wrap", "true").CombinedOutput()
				if err != nil {
					t.Fatalf("sbatch: %v %s", err, out)
				}
				r.lat = append(r.lat, float64(time.Since(start).Microseconds())/1000)
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
			wg.Wait()
			exec.Command("scancel", "--name=probe").Run()
		}
	}
	q := func(v []float64, p float64) float64 { return v[min(len(v)-1, int(float64(len(v))*p))] }
	base := res["off"]
	if base != nil {
		sort.Float64s(base.lat)
	}
	var line []string
	for _, mode := range modes {
		r := res[mode]
		sort.Float64s(r.lat)
		rate := float64(r.updates) / float64(secs*reps)
		ratio := ""
		if base != nil && mode != "off" {
			ratio = fmt.Sprintf(", %.2fx / %.2fx rounds off's", q(r.lat, 0.5)/q(base.lat, 0.5), q(r.lat, 0.99)/q(base.lat, 0.99))
		}
		fmt.Printf("bench-apply: %-7s sbatch p50 %.1f ms, p90 %.1f, p99 %.1f over %d probes; %.0f updates/s (%d failed)%s\n",
			mode, q(r.lat, 0.5), q(r.lat, 0.9), q(r.lat, 0.99), len(r.lat), rate, r.failed, ratio)
		key := strings.NewReplacer("/", "_", ".", "").Replace(mode)
		line = append(line, fmt.Sprintf("p99_%s=%.1f rate_%s=%.0f", key, q(r.lat, 0.99), key, rate))
	}
	fmt.Println(strings.Join(line, " "))
}
