//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
)

// The Grafana dashboards in contrib/grafana, on a real Prometheus (Debian's)
// scraping this dev cluster's controller and agents every second: while
// jobs run, and after a migration, a chain of segments, a job judged
// against its walltime and an external estimator's answers, every query of
// every panel parses and returns data (at least one sample that is a
// number), with the dashboards' variables set as Grafana sets "All". Every
// target is up.
func TestDashboards(t *testing.T) {
	prom := prometheusBinary(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)

	// The contrib throughput estimator in front of the built-in, so its
	// panel has a plugin to show; it knows only the dash-short job.
	table := filepath.Join(dir, "speeds.csv")
	if err := os.WriteFile(table, []byte("dash-short,v100,24.09\ndash-short,p100,22.30\ndash-short,k80,7.05\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	est := filepath.Join(repo, "bin/rota-estimator-speedtable")
	if _, err := os.Stat(est); err != nil {
		t.Fatal("bin/rota-estimator-speedtable missing: run make build")
	}
	restartController(t, "ROTA_DEV_ESTIMATOR_THROUGHPUT="+est+" --table "+table)
	t.Cleanup(func() { restartController(t) })

	api, started := startPrometheus(t, prom, dir)
	eventually.True(t, 60*time.Second, "Prometheus to scrape every target up", func() bool {
		v, err := promQuery(api, "up")
		return err == nil && len(v.Data.Result) == 1+len(agentTargets(t)) && allOne(v)
	})

	migrateForDashboards(t, dir)
	chainAndShortJob(t, dir)

	// Every query, until all have data or the deadline: an instant query
	// sees what the last scrape (within a second) exposed.
	var failures []string
	defer func() {
		if len(failures) > 0 {
			t.Logf("%d dashboard queries without data:\n%s", len(failures), strings.Join(failures, "\n"))
		}
	}()
	eventually.True(t, 2*time.Minute, "every dashboard query to have data", func() bool {
		window := fmt.Sprintf("%ds", int(time.Since(started).Seconds())+10)
		failures = checkDashboards(t, api, window)
		return len(failures) == 0
	})
	v, err := promQuery(api, "up")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Data.Result) != 1+len(agentTargets(t)) || !allOne(v) {
		t.Fatalf("up: %s", v.raw)
	}
}

// prometheusBinary is Debian's prometheus, installed when missing (on the
// host by scripts/setup-deps, in a release's chroot by apt).
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	var cmd *exec.Cmd
	if os.Getenv("ROTA_IN_CHROOT") != "" {
		cmd = exec.Command("bash", "-c", "apt-get -o Acquire::Check-Valid-Until=false update -qq && "+
			"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus")
	} else {
		cmd = exec.Command(filepath.Join(repo, "scripts/setup-deps"))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("installing prometheus: %v\n%s", err, out)
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus still missing after installing it")
	}
	return p
}

var (
	metricsListenRe = regexp.MustCompile(`(?m)^metrics_listen = (\S+)$`)
	metricsAddrRe   = regexp.MustCompile(`(?m)^metrics_addr = (\S+)$`)
)

// controllerTarget is the controller's /metrics address, from the config
// scripts/dev-cluster wrote.
func controllerTarget(t *testing.T) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(devDir, "controller.conf"))
	m := metricsListenRe.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no metrics_listen in %s/controller.conf", devDir)
	}
	return string(m[1])
}

// agentTargets are the agents' /metrics addresses, from their configs.
func agentTargets(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(devDir, "agent", "*.conf"))
	var out []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		m := metricsAddrRe.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s has no metrics_addr (ROTA_DEV_AGENT_METRICS_PORT unset?)", f)
		}
		out = append(out, string(m[1]))
	}
	if len(out) == 0 {
		t.Fatalf("no agent configs in %s/agent", devDir)
	}
	return out
}

// startPrometheus runs prometheus on a free loopback port with its own
// storage, scraping the cluster every second, until the test ends. It
// returns its address and when it started.
func startPrometheus(t *testing.T, bin, dir string) (string, time.Time) {
	t.Helper()
	quote := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = strconv.Quote(s)
		}
		return strings.Join(q, ", ")
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: rota-controller
    static_configs:
      - targets: [%s]
  - job_name: rota-agent
    static_configs:
      - targets: [%s]
`, strconv.Quote(controllerTarget(t)), quote(agentTargets(t)))
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Consecutive(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	started := time.Now()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus's log:\n%s", b)
		}
	})
	api := "http://" + addr
	eventually.True(t, 30*time.Second, "prometheus to be ready", func() bool {
		select {
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus exited:\n%s", b)
		default:
		}
		resp, err := http.Get(api + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return api, started
}

// promAnswer is /api/v1/query's answer.
type promAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
	raw string
}

func promQuery(api, expr string) (*promAnswer, error) {
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a promAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", expr, err, b)
	}
	a.raw = string(b)
	return &a, nil
}

// hasNumber: a vector with at least one sample that is a number (a
// histogram_quantile over nothing observed is NaN: no data to show).
func (a *promAnswer) hasNumber() bool {
	if a.Status != "success" || a.Data.ResultType != "vector" {
		return false
	}
	for _, r := range a.Data.Result {
		if s, ok := r.Value[1].(string); ok && s != "NaN" {
			return true
		}
	}
	return false
}

func allOne(a *promAnswer) bool {
	for _, r := range a.Data.Result {
		if r.Value[1] != "1" {
			return false
		}
	}
	return len(a.Data.Result) > 0
}

// grafanaDashboard is what the test reads of a dashboard.
type grafanaDashboard struct {
	Title         string         `json:"title"`
	UID           string         `json:"uid"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
			IncludeAll bool   `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

var labelValuesRe = regexp.MustCompile(`^label_values\((?:(.+),\s*)?(\w+)\)$`)

// checkDashboards evaluates every target of every dashboard, window
// standing for $__rate_interval and $__range, and returns what failed.
func checkDashboards(t *testing.T, api, window string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repo, "contrib/grafana/*.json"))
	if len(files) < 2 {
		t.Fatalf("dashboards in contrib/grafana: %v", files)
	}
	var failures, counts, seen []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d grafanaDashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || d.SchemaVersion < 36 || len(d.Panels) == 0 {
			t.Fatalf("%s: uid %q schemaVersion %d, %d panels", f, d.UID, d.SchemaVersion, len(d.Panels))
		}
		vars := resolveVariables(t, api, f, &d)
		var walk func(ps []grafanaPanel)
		n := 0
		walk = func(ps []grafanaPanel) {
			for _, p := range ps {
				walk(p.Panels)
				if p.Type == "row" {
					continue
				}
				if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
					t.Fatalf("%s: panel %q: datasource %+v, %d targets", f, p.Title, p.Datasource, len(p.Targets))
				}
				for _, tg := range p.Targets {
					n++
					expr := strings.NewReplacer("$__rate_interval", window, "$__range", window).Replace(tg.Expr)
					for name, v := range vars {
						expr = strings.ReplaceAll(expr, "$"+name, v)
					}
					if strings.Contains(expr, "$") {
						t.Fatalf("%s: panel %q: a variable left in %s", f, p.Title, expr)
					}
					a, err := promQuery(api, expr)
					where := fmt.Sprintf("%s / %q / %s: %s", filepath.Base(f), p.Title, tg.RefID, expr)
					switch {
					case err != nil:
						failures = append(failures, where+"\n    "+err.Error())
					case !a.hasNumber():
						failures = append(failures, where+"\n    "+a.raw)
					default:
						seen = append(seen, fmt.Sprintf("  %s / %s: %v (%d series)", p.Title, tg.RefID, a.Data.Result[0].Value[1], len(a.Data.Result)))
					}
				}
			}
		}
		walk(d.Panels)
		if n == 0 {
			t.Fatalf("%s: no targets", f)
		}
		counts = append(counts, fmt.Sprintf("%s: %d queries", filepath.Base(f), n))
	}
	if len(failures) == 0 {
		t.Logf("every query has data (%s; windows %s); the first series of each:\n%s", strings.Join(counts, ", "), window, strings.Join(seen, "\n"))
	}
	return failures
}

// resolveVariables sets each query variable as Grafana sets "All": the
// regex alternation of the values its label_values query finds, with the
// variables before it substituted.
func resolveVariables(t *testing.T, api, file string, d *grafanaDashboard) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			continue
		case "query":
		default:
			t.Fatalf("%s: variable %s of type %s: the test knows datasource and query", file, v.Name, v.Type)
		}
		m := labelValuesRe.FindStringSubmatch(v.Definition)
		if m == nil || !v.IncludeAll {
			t.Fatalf("%s: variable %s: %q, includeAll %v", file, v.Name, v.Definition, v.IncludeAll)
		}
		sel := m[1]
		for name, val := range vars {
			sel = strings.ReplaceAll(sel, "$"+name, val)
		}
		q := url.Values{}
		if sel != "" {
			q.Set("match[]", sel)
		}
		resp, err := http.Get(api + "/api/v1/label/" + m[2] + "/values?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Status string   `json:"status"`
			Data   []string `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || a.Status != "success" || len(a.Data) == 0 {
			t.Fatalf("%s: variable %s (%s): %v %+v", file, v.Name, v.Definition, err, a)
		}
		for i := range a.Data {
			// Escaped as Grafana escapes them for a PromQL string: the
			// regex's backslashes doubled.
			a.Data[i] = strings.ReplaceAll(regexp.QuoteMeta(a.Data[i]), `\`, `\\`)
		}
		vars[v.Name] = "(" + strings.Join(a.Data, "|") + ")"
	}
	return vars
}

// controllerMetric waits until the controller's /metrics has a line
// matching re.
func controllerMetric(t *testing.T, d time.Duration, what string, re *regexp.Regexp) {
	t.Helper()
	eventually.TrueEvery(t, d, time.Second, what, func() bool {
		return re.MatchString(scrape(t))
	})
}

// migrateForDashboards moves a job from the K80 to a V100 freed for it,
// as TestMigrationEndToEnd does, and waits until the controller timed the
// move (the moved job running again); the job is then cancelled.
func migrateForDashboards(t *testing.T, dir string) {
	t.Helper()
	blockers := fillFastNodes(t)
	logf := filepath.Join(dir, "migrate.log")
	sf := trainScript(t, dir, "migrate.sh", 3000, logf)
	out, err := run("sbatch", "--parsable", "-J", uniqueName("dash-migrate"), "-o", "/dev/null", "--requeue", "--gres=gpu:1",
		"--rota-checkpoint-signal=USR1", "--rota-steps=3000", sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { cancelWait(id) })
	eventually.True(t, 60*time.Second, "job "+id+" training on the K80", func() bool {
		evs := readSynthLog(t, logf)
		return len(evs) > 0 && evs[0].Ev == "start" && evs[0].GPU == "k80"
	})
	time.Sleep(20 * time.Second) // past the minimum lease, with a measured rate
	run("scancel", blockers...)
	controllerMetric(t, 3*time.Minute, "the controller to time job "+id+"'s migration",
		regexp.MustCompile(`(?m)^rota_controller_migration_duration_seconds_count [1-9]`))
	cancelWait(id)
}

// chainAndShortJob runs, under a MaxTime of one minute, a job needing 2.5
// of them (a chain: its segments are checkpointed and their gap timed) and
// a short hinted job that finishes, so Rota judges its walltime and the
// hint; it returns with the chain's later segments still running.
func chainAndShortJob(t *testing.T, dir string) {
	t.Helper()
	maxTimeOneMinute(t)
	logs := filepath.Join(dir, "logs")
	os.MkdirAll(logs, 0o777)
	sf := trainScript(t, dir, "dash-chain.sh", 3600, logs+"/$SLURM_JOB_ID.log")
	out, err := run("sbatch", "--parsable", "-J", "dash-chain", "-o", "/dev/null", "--gres=gpu:v100:1",
		"--rota-checkpoint-signal=USR1", "--rota-steps=3600", "--rota-throughput=v100:24.09", sf)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	first, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 32)
	t.Cleanup(func() { cancelWait("--name=dash-chain") })
	// As trainScript's, but it stays running past its last step, so a
	// round sees it done.
	short := filepath.Join(dir, "dash-short.sh")
	script := fmt.Sprintf("#!/bin/bash\n%s --model 'ResNet-18 (batch size 64)' --steps 300 --time-scale 1 --throughputs %s --ckpt-dir %s --log %s\nsleep 8\n",
		filepath.Join(repo, "bin/rota-synthtrain"), filepath.Join(repo, "../shared/data/gavel/simulation_throughputs.json"),
		filepath.Join(dir, "short-ckpt"), filepath.Join(logs, "short.log"))
	if err := os.WriteFile(short, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = run("sbatch", "--parsable", "-J", "dash-short", "-o", "/dev/null", "--gres=gpu:1",
		"--rota-steps=300", "--rota-throughput=v100:24.09,p100:22.30,k80:7.05", short)
	if err != nil {
		t.Fatalf("sbatch: %v %s", err, out)
	}
	shortID := strings.TrimSpace(out)
	t.Cleanup(func() { cancelWait(shortID) })

	eventually.TrueEvery(t, 4*time.Minute, time.Second, fmt.Sprintf("chain %d's second segment to start", first), func() bool {
		for _, c := range status(t).Chains {
			if c.ID == uint32(first) {
				return len(c.Segments) >= 2 && c.Segments[1].Started != ""
			}
		}
		return false
	})
	controllerMetric(t, 2*time.Minute, "the controller to judge the short job's walltime",
		regexp.MustCompile(`(?m)^rota_controller_walltime_estimates_judged [1-9]`))
}
