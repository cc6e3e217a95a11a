package web

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/controller/estimate/forecast/report"
	"github.com/rota-hpc/rota/controller/trend"
	"github.com/rota-hpc/rota/wire"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeSource answers from fixed values and records the estimate asked.
type fakeSource struct {
	empty   bool // a controller that knows nothing yet
	jobsErr error
	mu      sync.Mutex
	asked   *wire.EstimateRequest
}

func ptr(f float64) *float64 { return &f }

func (f *fakeSource) Overview(context.Context) Overview {
	if f.empty {
		return Overview{}
	}
	return Overview{Leading: true, Policy: "las", RefreshedAt: t0.Add(-5 * time.Second), Decisions: 7,
		Types:      []wire.TypeState{{Type: "v100", Nodes: 1, Total: 4, Used: 3, Speed: 3.36}, {Type: "k80", Nodes: 1, Total: 4, Used: 0, Speed: 1}},
		Partitions: []wire.Partition{{Name: "gpu", MaxTimeMin: 2880, Default: true, Nodes: "node-[v100,k80]"}},
		Rounds:     &wire.RoundsStatus{Policy: "las", Rounds: 12, Migrations: 2}}
}

func (f *fakeSource) Jobs(context.Context) (Jobs, error) {
	if f.empty {
		return Jobs{}, f.jobsErr
	}
	return Jobs{At: t0, List: []Job{
		{ID: 41, State: "RUNNING", User: "alice", Account: "lab-a", Name: "train<1>", Partition: "gpu", GPUs: 3, Request: "gres:gpu:3",
			Type: "v100", TimeLimitMin: 95, Decision: "d1", Given: "v100, 1:35:00", Why: "fastest free type <b>", Submit: t0.Add(-time.Hour)},
		{ID: 42, State: "PENDING", Reason: "Resources", User: "bob", GPUs: 2, Request: "gres:gpu:2", Type: "k80", Why: "waits"},
		{ID: 43, State: "PENDING", Reason: "Priority", User: "carol", GPUs: 1, Request: "gres:gpu:1"},
	}}, f.jobsErr
}

func (f *fakeSource) Explain(_ context.Context, id uint32) wire.ExplainReply {
	if id != 41 {
		return wire.ExplainReply{Error: "job 99 has no Rota annotation"}
	}
	return wire.ExplainReply{Decision: &wire.Decision{ID: "d1", JobID: 41, At: t0,
		Given: wire.PlaceReply{GPUType: "v100", TimeLimitMin: 95, Policy: "las", Reason: "v100 is fastest"}, Numbers: map[string]float64{"speed": 3.36}},
		Round: &wire.RoundJob{JobID: 41, Type: "v100", Placed: true, Why: "round says v100", Rates: map[string]float64{"v100": 10, "k80": 3},
			RateSource: map[string]string{"v100": "hint", "k80": "table"}, Share: map[string]float64{"v100": 1}}}
}

func (f *fakeSource) Trend() []trend.Sample {
	if f.empty {
		return nil
	}
	return []trend.Sample{{At: t0.Add(-time.Minute), Running: 1, Pending: 2, Entities: 2, Jain: 0.5, HasJain: true},
		{At: t0, Running: 2, Pending: 1, Entities: 2, Jain: 1, HasJain: true, Finished: 1, MeanJCT: 600, P50JCT: 600}}
}

func (f *fakeSource) Moves() Moves {
	if f.empty {
		return Moves{}
	}
	return Moves{Rounds: &wire.RoundsStatus{Migrations: 2}, Moved: []Moved{{JobID: 41, Type: "v100", Moves: 1, Why: "faster"}},
		Chains: []wire.ChainStatus{{ID: 50, State: "running", Segments: []wire.ChainSegment{{JobID: 50, N: 1, Type: "k80", State: "RUNNING"}}}}}
}

func (f *fakeSource) Agents() Agents {
	if f.empty {
		return Agents{}
	}
	return Agents{Ingest: &wire.IngestStatus{Nodes: 1}, Nodes: []AgentNode{
		{Node: "node-v100", GPUType: "v100", GPUs: 4, Seen: t0.Add(-2 * time.Second), ReportedGPUs: 4, UtilPercent: 75},
		{Node: "node-p100", GPUType: "p100", GPUs: 4, Seen: t0.Add(-5 * time.Minute)},
		{Node: "node-k80", GPUType: "k80", GPUs: 4}}}
}

func (f *fakeSource) Estimate(_ context.Context, req *wire.EstimateRequest) wire.EstimateReply {
	f.mu.Lock()
	f.asked = req
	f.mu.Unlock()
	if req.Partition == "nowhere" {
		return wire.EstimateReply{Error: "no partition nowhere"}
	}
	return wire.EstimateReply{GPUs: int(req.GPUsPerNode), Cores: 1, Unit: "SU", Rows: []wire.EstimateRow{
		{Partition: "gpu", GPUType: "v100", Fits: "yes", Nodes: 1, StepsPerSec: ptr(10), RunMin: ptr(60), Segments: 1, WaitMin: ptr(1), FinishMin: ptr(61), Cost: ptr(3)},
		{Partition: "gpu", GPUType: "k80", Fits: "no", Why: []string{"needs more memory"}}},
		Fastest: &wire.Plan{Partition: "gpu", GPUType: "v100", Why: "finishes first"}}
}

func (f *fakeSource) Models() []string { return []string{"ResNet-50 (batch size 64)"} }

func newServer(t *testing.T, src Source, a Auth) *Server {
	t.Helper()
	s, err := New(src, Options{Auth: a, Log: zerolog.Nop(), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func do(s http.Handler, method, target string, body io.Reader, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, body)
	if body != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// Every page renders, for a controller that knows things and for one that
// knows nothing yet, with the security headers.
func TestPagesRender(t *testing.T) {
	t.Parallel()
	pages := []struct {
		path string
		want []string // in the body, as HTML
	}{
		{"/", []string{`<td>v100</td>`, `<td class="num">3</td>`, "policy <b>las</b>", "no type yet"}},
		{"/jobs", []string{`data-job="41"`, `data-job="42"`, `data-job="43"`, "train&lt;1&gt;", "fastest free type &lt;b&gt;", `href="/jobs/41"`}},
		{"/jobs/41", []string{"v100 is fastest", "round says v100", "speed", "hint"}},
		{"/jobs/99", []string{"no Rota annotation"}},
		{"/trend", []string{"<svg", "<polyline", "Jain", "10m0s"}},
		{"/moves", []string{"<td>41</td>", "<td>50</td>"}},
		{"/agents", []string{`health ok`, `health late`, `health silent`, "1 of 3"}},
		{"/estimate", []string{`<form method="post" action="/estimate"`, "ResNet-50 (batch size 64)"}},
		{"/static/style.css", []string{"--accent"}},
	}
	for _, empty := range []bool{false, true} {
		for _, p := range pages {
			t.Run(p.path+map[bool]string{false: "", true: " empty"}[empty], func(t *testing.T) {
				t.Parallel()
				s := newServer(t, &fakeSource{empty: empty, jobsErr: map[bool]error{true: errors.New("squeue: boom")}[empty]}, Auth{Mode: AuthNone})
				w := do(s, "GET", p.path, nil, nil)
				if w.Code != http.StatusOK {
					t.Fatalf("status %d\n%s", w.Code, w.Body)
				}
				if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
					t.Errorf("CSP %q", csp)
				}
				for _, h := range []string{"X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"} {
					if w.Header().Get(h) == "" {
						t.Errorf("no %s", h)
					}
				}
				body := w.Body.String()
				if strings.Contains(body, "<script") {
					t.Error("a page carries a script")
				}
				if !empty {
					for _, s := range p.want {
						if !strings.Contains(body, s) {
							t.Errorf("no %q in\n%s", s, body)
						}
					}
				}
			})
		}
	}
}

// Nothing but GET, and POST to the estimate form, is answered.
func TestMethods(t *testing.T) {
	t.Parallel()
	s := newServer(t, &fakeSource{}, Auth{Mode: AuthNone})
	tests := []struct {
		method, path string
		want         int
	}{
		{"GET", "/", 200},
		{"POST", "/", 405},
		{"POST", "/jobs", 405},
		{"PUT", "/estimate", 405},
		{"DELETE", "/jobs/41", 405},
		{"PATCH", "/", 405},
		{"HEAD", "/", 405},
		{"OPTIONS", "/estimate", 405},
		{"GET", "/nothing", 404},
		{"GET", "/jobs/x", 404},
		{"POST", "/estimate", 400}, // an empty form: no GPUs asked
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			var body io.Reader
			if tc.method == "POST" {
				body = strings.NewReader("")
			}
			if w := do(s, tc.method, tc.path, body, nil); w.Code != tc.want {
				t.Fatalf("%d, want %d", w.Code, tc.want)
			}
		})
	}
}

// Explain details and the estimate form are for authenticated users when
// the view asks for it; the rest is open.
func TestAuth(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef0123"
	tokenAuth := Auth{Mode: AuthToken, Token: token}
	proxy := Auth{Mode: AuthProxy, UserHeader: "X-Remote-User"}
	proxyNet := Auth{Mode: AuthProxy, UserHeader: "X-Remote-User", Trusted: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}
	basic := func(user, pw string) map[string]string {
		r := httptest.NewRequest("GET", "/", nil)
		r.SetBasicAuth(user, pw)
		return map[string]string{"Authorization": r.Header.Get("Authorization")}
	}
	tests := []struct {
		name   string
		auth   Auth
		remote string
		hdr    map[string]string
		path   string
		want   int
	}{
		{"none: explain open", Auth{Mode: AuthNone}, "", nil, "/jobs/41", 200},
		{"token: overview open", tokenAuth, "", nil, "/", 200},
		{"token: jobs list open", tokenAuth, "", nil, "/jobs", 200},
		{"token: explain asks for it", tokenAuth, "", nil, "/jobs/41", 401},
		{"token: estimate asks for it", tokenAuth, "", nil, "/estimate", 401},
		{"token as basic password", tokenAuth, "", basic("anyone", token), "/jobs/41", 200},
		{"token as bearer", tokenAuth, "", map[string]string{"Authorization": "Bearer " + token}, "/estimate", 200},
		{"wrong token", tokenAuth, "", basic("anyone", token+"x"), "/jobs/41", 401},
		{"empty token", tokenAuth, "", map[string]string{"Authorization": "Bearer "}, "/jobs/41", 401},
		{"proxy: user from loopback", proxy, "127.0.0.1:5000", map[string]string{"X-Remote-User": "alice"}, "/jobs/41", 200},
		{"proxy: ipv6 loopback", proxy, "[::1]:5000", map[string]string{"X-Remote-User": "alice"}, "/estimate", 200},
		{"proxy: header from elsewhere ignored", proxy, "192.0.2.7:5000", map[string]string{"X-Remote-User": "alice"}, "/jobs/41", 403},
		{"proxy: no header", proxy, "127.0.0.1:5000", nil, "/jobs/41", 403},
		{"proxy: odd user name", proxy, "127.0.0.1:5000", map[string]string{"X-Remote-User": "al ice<"}, "/jobs/41", 403},
		{"proxy: configured network", proxyNet, "10.1.2.3:5000", map[string]string{"X-Remote-User": "bob"}, "/jobs/41", 200},
		{"proxy: loopback not trusted once networks are set", proxyNet, "127.0.0.1:5000", map[string]string{"X-Remote-User": "bob"}, "/jobs/41", 403},
		{"proxy: open pages need nothing", proxy, "192.0.2.7:5000", nil, "/agents", 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, &fakeSource{}, tc.auth)
			r := httptest.NewRequest("GET", tc.path, nil)
			if tc.remote != "" {
				r.RemoteAddr = tc.remote
			}
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("%d, want %d", w.Code, tc.want)
			}
			if tc.want == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("401 without a Basic challenge")
			}
			// The jobs list hides the why column from those not signed in.
			if tc.path == "/jobs" && strings.Contains(w.Body.String(), "fastest free type") {
				t.Errorf("the list shows explain details to an anonymous user")
			}
		})
	}
}

func TestAuthConfig(t *testing.T) {
	t.Parallel()
	for _, a := range []Auth{{Mode: "magic"}, {Mode: AuthToken, Token: "short"}, {Mode: AuthProxy}} {
		if _, err := New(&fakeSource{}, Options{Auth: a}); err == nil {
			t.Errorf("%+v accepted", a)
		}
	}
	if _, err := ParseTrusted([]string{"10.0.0.0/8", "192.0.2.1", "::1"}); err != nil {
		t.Error(err)
	}
	if _, err := ParseTrusted([]string{"proxy.example"}); err == nil {
		t.Error("a host name accepted as a proxy address")
	}
}

var cellRe = regexp.MustCompile(`(?s)<table id="estimate">.*?</table>`)

// The form's answer is report.Build of the source's reply: the table the
// CLI prints, cell for cell, and its text.
func TestEstimateForm(t *testing.T) {
	t.Parallel()
	script := "#!/bin/bash\r\n#SBATCH --gres=gpu:2\r\n#SBATCH -J demo --rota-steps=36000\r\nsrun x\r\n"
	tests := []struct {
		name   string
		form   url.Values
		code   int
		errMsg string
	}{
		{"script", url.Values{"script": {script}}, 200, ""},
		{"fields only", url.Values{"gpus": {"2"}, "steps": {"36000"}, "name": {"demo"}}, 200, ""},
		{"bad number", url.Values{"gpus": {"two"}}, 400, "--gpus=&#34;two&#34;: want a whole number"},
		{"bad time", url.Values{"gpus": {"1"}, "time": {"soon"}}, 400, "--time="},
		{"no gpus", url.Values{"steps": {"5"}}, 400, "asks for no GPUs"},
		{"controller's error", url.Values{"gpus": {"1"}, "partition": {"nowhere"}}, 200, "no partition nowhere"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeSource{}
			s := newServer(t, src, Auth{Mode: AuthNone})
			w := do(s, "POST", "/estimate", strings.NewReader(tc.form.Encode()), nil)
			body := w.Body.String()
			if w.Code != tc.code {
				t.Fatalf("%d, want %d\n%s", w.Code, tc.code, body)
			}
			if tc.errMsg != "" {
				if !strings.Contains(body, tc.errMsg) {
					t.Fatalf("no %q in\n%s", tc.errMsg, body)
				}
				return
			}
			src.mu.Lock()
			req := src.asked
			src.mu.Unlock()
			if req == nil || req.GPUsPerNode != 2 || req.Steps != 36000 || req.Name != "demo" {
				t.Fatalf("asked %+v", req)
			}
			if tc.name == "script" {
				// As the file would hash: LF line ends.
				want, _, _ := report.Request([]byte(strings.ReplaceAll(script, "\r\n", "\n")), "", report.Fields{})
				if req.ScriptHash != want.ScriptHash {
					t.Errorf("script hash %q, want the LF file's %q", req.ScriptHash, want.ScriptHash)
				}
			}
			rep := src.Estimate(context.Background(), req)
			tab := report.Build(req, &rep)
			got := cellRe.FindString(body)
			for _, row := range tab.Rows {
				want := "<tr><td>" + strings.Join(escapeAll(row), "</td><td>") + "</td></tr>"
				if !strings.Contains(got, want) {
					t.Errorf("no row %s in\n%s", want, got)
				}
			}
			var text strings.Builder
			tab.WriteText(&text)
			if !strings.Contains(body, html.EscapeString(text.String())) {
				t.Errorf("the text form differs from WriteText's\n%s", body)
			}
		})
	}
}

func escapeAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = html.EscapeString(x)
	}
	return out
}

func TestChart(t *testing.T) {
	t.Parallel()
	ts := []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Minute), t0.Add(3 * time.Minute)}
	nan := func() float64 { var z float64; return z / z }()
	c := newChart("x", "y", []Series{{Name: "a", T: ts, V: []float64{1, nan, 2, 3}}}, 0, nan)
	if c.Empty || len(c.Lines) != 1 || len(c.Lines[0].Paths) != 1 || len(c.Lines[0].Dots) != 1 {
		t.Fatalf("a gap should leave a dot and a line: %+v", c.Lines)
	}
	if c.Lines[0].Paths[0] != "438.7,130.0 630.0,92.0" || c.Lines[0].Dots[0] != (Dot{X: 56, Y: 168}) {
		t.Errorf("paths %q, dots %v", c.Lines[0].Paths, c.Lines[0].Dots)
	}
	// The time axis spans the samples without a value too.
	late := newChart("x", "y", []Series{{T: ts, V: []float64{nan, nan, nan, 1}}}, 0, 1)
	if len(late.Lines[0].Dots) != 1 || late.Lines[0].Dots[0].X != late.X1 || late.XTicks[0].Pos != late.X0 {
		t.Errorf("a last point alone: %+v", late)
	}
	if e := newChart("x", "y", []Series{{T: ts[:1], V: []float64{nan}}}, 0, 1); !e.Empty {
		t.Error("no data, yet not empty")
	}
	for v, want := range map[float64]float64{0: 1, 0.3: 0.5, 7: 10, 12: 20, 100: 100} {
		if got := niceTop(v); got != want {
			t.Errorf("niceTop(%v) = %v, want %v", v, got, want)
		}
	}
}
