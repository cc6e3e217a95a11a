package app

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/estimate/forecast/report"
	"github.com/rota-hpc/rota/controller/site"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/internal/eventually"
	"github.com/rota-hpc/rota/internal/freeport"
	"github.com/rota-hpc/rota/wire"
)

// queueSlurm is fakeSlurm with a queue: two GPU jobs and a CPU job.
type queueSlurm struct{ *fakeSlurm }

func (q queueSlurm) Jobs(context.Context) ([]slurm.Job, error) {
	now := time.Now()
	return []slurm.Job{
		{ID: 10, State: "RUNNING", User: "alice", Account: "lab-a", Partition: "gpu", Submit: now.Add(-time.Hour), Nodes: []string{"n1"},
			NumNodes: 1, TresPerNode: "gres:gpu:2", DecisionRead: true},
		{ID: 11, State: "PENDING", Reason: "Resources", User: "bob", Partition: "gpu", Submit: now, TresPerNode: "gres:gpu:1",
			Features: "k80", DecisionRead: true},
		{ID: 12, State: "RUNNING", User: "carol", Partition: "gpu", Submit: now, Nodes: []string{"n2"}, NumNodes: 1, DecisionRead: true},
	}, nil
}

func (q queueSlurm) JobsAt(ctx context.Context) ([]slurm.Job, time.Time, error) {
	return slurm.JobsNow(ctx, q)
}

func (q queueSlurm) Job(context.Context, uint32) (slurm.Job, bool, error) {
	return slurm.Job{}, false, nil
}
func (q queueSlurm) DecisionIDs(context.Context) (map[uint32]string, error) { return nil, nil }
func (q queueSlurm) Update(context.Context, uint32, slurm.JobUpdate) error  { return nil }
func (q queueSlurm) Requeue(context.Context, uint32) error                  { return nil }

func webGet(t *testing.T, base, path string) string {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
	}
	return string(b)
}

var preRe = regexp.MustCompile(`(?s)<pre id="estimate-text">(.*?)</pre>`)

// The controller serves the view from its own state: the GPU jobs of the
// queue, and the estimate form's table is the one `rota estimate` prints
// from the controller's NATS answer to the same request.
func TestWebView(t *testing.T) {
	port, err := freeport.Consecutive(1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir())
	cfg.RoundsOff = true
	cfg.Refresh = time.Second
	cfg.Web.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.Site = site.Config{Unit: "SU", Rates: []wire.Rate{{Resource: site.GPU, GPUType: "v100", PerHour: 3}, {Resource: site.GPU, GPUType: "k80", PerHour: 1}}}
	natsURL, stop := startWith(t, cfg, queueSlurm{&fakeSlurm{comments: map[uint32]string{}}})
	defer stop()
	base := "http://" + cfg.Web.Listen

	if body := webGet(t, base, "/"); !strings.Contains(body, "<td>v100</td>") || !strings.Contains(body, "<td>k80</td>") {
		t.Errorf("overview without the GPU types:\n%s", body)
	}
	jobs := webGet(t, base, "/jobs")
	for _, want := range []string{`data-job="10"`, `data-job="11"`} {
		if !strings.Contains(jobs, want) {
			t.Errorf("no %s in the jobs page", want)
		}
	}
	if strings.Contains(jobs, `data-job="12"`) {
		t.Error("the CPU job is on the GPU jobs page")
	}
	// The trend's samples: alice holds 2 v100 GPUs, bob waits.
	var body string
	sampled := false
	defer func() {
		if !sampled {
			t.Logf("trend page:\n%s", body)
		}
	}()
	eventually.True(t, 10*time.Second, "the trend page to show Jain's index 0.500", func() bool {
		body = webGet(t, base, "/trend")
		return strings.Contains(body, "Jain's index 0.500")
	})
	sampled = true
	if !strings.Contains(body, "Jain's index 0.500") || !strings.Contains(body, `<circle class="dot s1"`) && !strings.Contains(body, "<polyline") {
		t.Errorf("trend page:\n%s", body)
	}

	script := "#!/bin/bash\n#SBATCH --gres=gpu:1 -J web --rota-steps=36000 --rota-throughput=v100:10\nsrun x\n"
	form := url.Values{"script": {strings.ReplaceAll(script, "\n", "\r\n")}}
	resp, err := http.PostForm(base+"/estimate", form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := preRe.FindSubmatch(b)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("estimate: %s\n%s", resp.Status, b)
	}
	req, _, err := report.Request([]byte(script), "", report.Fields{})
	if err != nil {
		t.Fatal(err)
	}
	var rep wire.EstimateReply
	request(t, natsURL, wire.SubjectEstimate, req, &rep)
	var want strings.Builder
	if err := report.Build(&req, &rep).WriteText(&want); err != nil {
		t.Fatal(err)
	}
	if got := html.UnescapeString(string(m[1])); got != want.String() {
		t.Errorf("the form shows\n%s\nrota estimate prints\n%s", got, want.String())
	}
}

// A web_listen the controller cannot bind stops it with a message saying
// which setting to change.
func TestWebListenTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig(t.TempDir())
	cfg.RoundsOff = true
	cfg.Web.Listen = ln.Addr().String()
	err = Run(context.Background(), Options{Config: cfg, Log: zerolog.Nop(), Slurm: &fakeSlurm{}})
	if err == nil || !strings.Contains(err.Error(), "web_listen "+cfg.Web.Listen+": cannot listen") {
		t.Fatalf("Run: %v", err)
	}
}

// TestWebConfig: the controller's config reads the web view's keys and
// rejects what web.Config.Check rejects (the keys' own cases are
// controller/web's TestConfig).
func TestWebConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, conf, err string
	}{
		{"off by default", "", ""},
		{"proxy with networks", "web_listen = 127.0.0.1:8080\nweb_auth = proxy\nweb_trusted_proxies = 10.0.0.5\n", ""},
		{"token without a file", "web_auth = token\n", "web_token_file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "controller.conf")
			writeFile(t, p, tc.conf)
			c, err := LoadConfig(p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := (tc.conf != ""); want != (c.Web.Listen == "127.0.0.1:8080" && c.Web.Auth == "proxy") {
				t.Errorf("web config %+v from %q", c.Web, tc.conf)
			}
		})
	}
}
