//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/rota-hpc/rota/internal/eventually"
)

// TestWeb opens the controller's web view in Debian's chromium, headless,
// on the dev cluster with GPU jobs running and pending: every page loads,
// the jobs page lists exactly the GPU jobs squeue lists, and the estimate
// form, filled and submitted as a user would, shows what `bin/rota
// estimate` prints for the same script. With ROTA_WEB_SCREENSHOTS=DIR it
// saves a screenshot of each page there (scripts/web-screenshots: docs/web).
//
// chromedp rather than chromium's --dump-dom: the estimate form is a POST
// that only a browser filling and submitting it exercises, and one browser
// session serves every page, the proxy's header and the screenshots.
func TestWeb(t *testing.T) {
	chrome := ensureChromium(t)
	shots := os.Getenv("ROTA_WEB_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	// Explain and estimate for the user a proxy on loopback names: the
	// browser sends root's name, as bin/rota (run as root) does, so the
	// estimate is asked as the same user both ways.
	restartController(t, "ROTA_DEV_WEB_AUTH=proxy")
	// Jobs submitted before the plugin reconnects pass unannotated.
	if err := waitPlaced(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		restartController(t)
		if err := waitPlaced(); err != nil {
			t.Error(err)
		}
	})
	out, err := dev("env")
	if err != nil {
		t.Fatalf("dev-cluster env: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`ROTA_WEB_URL=(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("dev-cluster env prints no ROTA_WEB_URL:\n%s", out)
	}
	base := m[1]

	// Jobs: long ones of two accounts running, short ones of root that
	// finish while the test runs (JCT), held ones pending, and a CPU job
	// the GPU pages must leave out.
	submit := func(user string, args ...string) uint32 {
		t.Helper()
		all := append([]string{"sbatch", "--parsable", "-D", "/tmp", "-o", "/dev/null"}, args...)
		if user != "root" {
			all = append([]string{"runuser", "-u", user, "--"}, all...)
		}
		out, err := run(all[0], all[1:]...)
		if err != nil {
			t.Fatalf("%v: %v: %s", all, err, out)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(strings.Split(out, ";")[0]), 10, 32)
		if err != nil {
			t.Fatalf("%v printed %q", all, out)
		}
		t.Cleanup(func() { run("scancel", strconv.FormatUint(id, 10)) })
		return uint32(id)
	}
	running := []uint32{
		submit("rota-a", "-J", "resnet", "--gres=gpu:1", "--rota-steps=100000", "--rota-throughput=v100:10", "--wrap", "sleep 600"),
		submit("rota-a", "-J", "bert", "--gres=gpu:1", "--wrap", "sleep 600"),
		submit("rota-b", "-J", "gpt", "--gres=gpu:2", "--wrap", "sleep 600"),
		submit("root", "-J", "short", "--gres=gpu:1", "--wrap", "sleep 12"),
		submit("root", "-J", "short", "--gres=gpu:1", "--wrap", "sleep 12"),
	}
	// Screenshots want a trend with a few finished jobs.
	wantFinished := 1
	if os.Getenv("ROTA_WEB_SCREENSHOTS") != "" {
		for _, s := range []string{"25", "40", "55"} {
			submit("rota-b", "-J", "eval", "--gres=gpu:1", "--wrap", "sleep "+s)
		}
		wantFinished = 5
	}
	submit("root", "-H", "-J", "held", "--gres=gpu:1", "--wrap", "sleep 1")
	submit("rota-b", "-H", "-J", "held", "--gres=gpu:2", "--wrap", "sleep 1")
	cpu := submit("root", "-J", "cpu-only", "--wrap", "sleep 600")
	eventually.True(t, 60*time.Second, "the GPU jobs to run", func() bool {
		q := gpuQueue(t)
		for _, id := range running[:3] {
			if q[id] != "RUNNING" {
				return false
			}
		}
		return true
	})

	// Nothing but GET (and the estimate form's POST) is answered; the
	// protected pages want the proxy's user.
	for _, c := range []struct {
		method, path string
		want         int
	}{{"POST", "/jobs", 405}, {"PUT", "/", 405}, {"DELETE", "/jobs/1", 405}, {"GET", "/estimate", 403}, {"GET", fmt.Sprintf("/jobs/%d", running[0]), 403}} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}

	// --no-sandbox: chromium's sandbox needs user namespaces, which a
	// root process in a container does not get, and chromium refuses to
	// run as root with it.
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1440, 900))...)
	defer cancel()
	browser, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// The first run starts the browser: no timeout on it (it would end
	// the browser too).
	if err := chromedp.Do(browser, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"X-Remote-User": "root"}})
		return err
	})); err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	load := func(path string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(base+path))
		if err != nil {
			t.Fatalf("loading %s: %v", path, err)
		}
		if resp.Status != http.StatusOK {
			t.Fatalf("%s: HTTP %d", path, resp.Status)
		}
		step(path+": main heading", chromedp.WaitVisible("main h1"))
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.TextContent(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	shot := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The jobs page lists exactly the GPU jobs squeue lists, each in
	// squeue's state. The view reads the queue at most every 5 s: wait
	// for a page and two squeue reads around it that agree.
	pageJobs := func() map[uint32]string {
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll('#jobs tbody tr[data-job]')).map(r => r.dataset.job + ' ' + r.cells[1].textContent.trim().split(' ')[0])`))
		if err != nil {
			t.Fatalf("reading the jobs table: %v", err)
		}
		out := map[uint32]string{}
		for _, r := range rows {
			id, state, _ := strings.Cut(r, " ")
			n, _ := strconv.ParseUint(id, 10, 32)
			out[uint32(n)] = state
		}
		return out
	}
	var page, before map[uint32]string
	eventually.True(t, 30*time.Second, "the jobs page to show squeue's GPU jobs", func() bool {
		before = gpuQueue(t)
		load("/jobs")
		page = pageJobs()
		return equalQueues(before, page) && equalQueues(before, gpuQueue(t))
	})
	if _, ok := page[cpu]; ok {
		t.Errorf("the CPU job %d is on the GPU jobs page", cpu)
	}
	t.Logf("jobs page = squeue's GPU jobs: %v", page)
	if head := text("#jobs thead"); !strings.Contains(head, "Why") {
		t.Errorf("the proxy's user sees no explain column: %q", head)
	}
	shot("jobs")

	load("/")
	for _, typ := range []string{"v100", "p100", "k80"} {
		if !strings.Contains(text("#types"), typ) {
			t.Errorf("overview: no %s", typ)
		}
	}
	shot("overview")

	// The decision is there from submission; the last round's section
	// once a round (every 3 s here) has seen the job, which may be after
	// the page first loads: the controller restarted just before.
	var d string
	seen := false
	defer func() {
		if !seen {
			t.Logf("explain page of %d, last loaded: %q", running[0], d)
		}
	}()
	eventually.True(t, 30*time.Second, fmt.Sprintf("the explain page of %d to show the last round", running[0]), func() bool {
		load(fmt.Sprintf("/jobs/%d", running[0]))
		d = text("main")
		return strings.Contains(d, "Last round")
	})
	seen = true
	if !strings.Contains(d, "decision") || !strings.Contains(d, "given") || !strings.Contains(d, "Last round") {
		t.Errorf("explain page of %d: %q", running[0], d)
	}
	shot("job")

	load("/agents")
	if a := text("#agents"); strings.Count(a, "ok") < 3 {
		t.Errorf("agents page: %q, want the three sim agents ok", a)
	}
	shot("agents")

	load("/moves")
	shot("moves")

	// The short jobs finish; the trend then has a JCT.
	finished := regexp.MustCompile(`(\d+) jobs finished`)
	eventually.True(t, 120*time.Second, "finished jobs on the trend page", func() bool {
		load("/trend")
		m := finished.FindStringSubmatch(text("main .lead"))
		n := 0
		if m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		return n >= wantFinished
	})
	if n := strings.Count(text("main"), "No samples yet"); n > 0 {
		t.Errorf("%d charts without samples", n)
	}
	shot("trend")

	// The estimate form, filled and submitted as a user would, shows what
	// bin/rota estimate prints for the same script.
	script := "#!/bin/bash\n#SBATCH --job-name=webtest\n#SBATCH --gres=gpu:1 --time=4:00:00\n#SBATCH --rota-steps=36000 --rota-throughput=v100:10\nsrun python train.py\n"
	file := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cli, err := run(filepath.Join(repo, "bin/rota"), "estimate", "--nats", natsURL, file)
	if err != nil {
		t.Fatalf("rota estimate: %v\n%s", err, cli)
	}
	load("/estimate")
	step("filling the estimate form", chromedp.Steps(chromedp.SetValue("#script", script), chromedp.Click(`form.estimate button[type="submit"]`),
		chromedp.WaitVisible("#estimate")))
	shot("estimate")
	if got := text("#estimate-text"); got != cli {
		t.Errorf("the form's text:\n%s\nrota estimate printed:\n%s", got, cli)
	}
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](
		`Array.from(document.querySelectorAll('#estimate tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))`))
	if err != nil {
		t.Fatal(err)
	}
	if want := cliTable(cli); !slices.EqualFunc(cells, want, slices.Equal) {
		t.Errorf("the form's table %q\nrota estimate's %q", cells, want)
	}
}

// gpuQueue is squeue's pending and running GPU jobs and their states.
func gpuQueue(t *testing.T) map[uint32]string {
	t.Helper()
	out, err := run("squeue", "-h", "-t", "PENDING,RUNNING,CONFIGURING",
		"-O", "JobID:0|,State:0|,tres-per-job:0|,tres-per-node:0|,tres-per-socket:0|,tres-per-task:0|")
	if err != nil {
		t.Fatalf("squeue: %v: %s", err, out)
	}
	q := map[uint32]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) < 6 || !strings.Contains(strings.Join(f[2:], " "), "gpu") {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSpace(f[0]), 10, 32)
		if err != nil {
			t.Fatalf("squeue line %q", line)
		}
		q[uint32(id)] = strings.TrimSpace(f[1])
	}
	return q
}

func equalQueues(a, b map[uint32]string) bool {
	if len(a) != len(b) {
		return false
	}
	for id, s := range a {
		if b[id] != s {
			return false
		}
	}
	return true
}

// cliTable is the rows of rota estimate's table: the lines after its
// header up to the blank line, cells apart by two spaces or more.
func cliTable(out string) [][]string {
	var rows [][]string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "PARTITION"):
			in = true
		case in && strings.TrimSpace(line) == "":
			return rows
		case in:
			rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
		}
	}
	return rows
}

// ensureChromium returns Debian's chromium, installing it (with the rest
// of scripts/setup-deps) when it is missing.
func ensureChromium(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Log("chromium missing: installing it with scripts/setup-deps")
	cmd := exec.Command(filepath.Join(repo, "scripts/setup-deps"))
	out, err := cmd.CombinedOutput()
	p, lerr := exec.LookPath("chromium")
	if lerr != nil {
		t.Fatalf("chromium still missing after scripts/setup-deps (%v): %v\n%s", err, errors.Join(lerr), out)
	}
	return p
}
