package slurm

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/rota-hpc/rota/internal/slurmtime"
)

// testdata/restd/v0.0.38 was captured from Debian 12's slurmrestd
// 22.05.8 on the dev cluster (ROTA_DEV_RESTD=on, Rota placing and
// ordering the jobs) by testdata/restd/record, with squeue.txt,
// sinfo.txt and partitions.txt read by the CLI at the same moment
// (captured-at: the Unix time of the job list).
const restd38 = "testdata/restd/v0.0.38"

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(restd38, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordings are the directories of answers recorded from a real
// slurmrestd, each with the CLI's output of the same moment.
func recordings(t *testing.T) []string {
	dirs, err := filepath.Glob("testdata/restd/v0.0.*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no recordings under testdata/restd: %v", err)
	}
	return dirs
}

func readIn(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestdJobsMatchSqueue: the job list of slurmrestd and squeue's
// formatted output of the same queue give the same jobs, field by field
// (run time within the seconds between the two reads).
func TestRestdJobsMatchSqueue(t *testing.T) {
	for _, dir := range recordings(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) { jobsMatchSqueue(t, dir) })
	}
}

func jobsMatchSqueue(t *testing.T, dir string) {
	at, err := strconv.ParseInt(strings.TrimSpace(string(readIn(t, dir, "captured-at"))), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	rest, err := ParseRestdJobs(readIn(t, dir, "jobs.json"), time.Unix(at, 0))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ParseSqueue(string(readIn(t, dir, "squeue.txt")), time.UTC, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != len(cli) || len(rest) < 5 {
		t.Fatalf("restd %d jobs, squeue %d", len(rest), len(cli))
	}
	byID := map[uint32]Job{}
	for _, j := range cli {
		byID[j.ID] = j
	}
	decisions, negNice := 0, 0
	for _, r := range rest {
		c, ok := byID[r.ID]
		if !ok {
			t.Fatalf("job %d from slurmrestd not in squeue", r.ID)
		}
		if math.Abs(r.RunSeconds-c.RunSeconds) > 3 {
			t.Errorf("job %d run time: restd %v, squeue %v", r.ID, r.RunSeconds, c.RunSeconds)
		}
		r.RunSeconds, c.RunSeconds = 0, 0
		// A reason may change between the two reads (a begin time
		// cleared, the scheduler's pass).
		r.Reason, c.Reason = "", ""
		r.Submit, c.Submit = r.Submit.UTC(), c.Submit.UTC()
		r.Start, c.Start = r.Start.UTC(), c.Start.UTC()
		if len(r.Nodes) == 0 && len(c.Nodes) == 0 {
			r.Nodes, c.Nodes = nil, nil
		}
		if !reflect.DeepEqual(r, c) {
			t.Errorf("job %d:\n restd  %+v\n squeue %+v", r.ID, r, c)
		}
		if r.Decision != "" {
			decisions++
		}
		if r.Nice < 0 {
			negNice++
		}
	}
	if decisions < 2 {
		t.Errorf("want 2 decision ids or more, got %d", decisions)
	}
	if negNice == 0 {
		t.Errorf("the recording has no negative nice, which v0.0.38 prints as a 32-bit two's complement")
	}
}

func TestParseRestdJobsFields(t *testing.T) {
	at, _ := strconv.ParseInt(strings.TrimSpace(string(readTestdata(t, "captured-at"))), 10, 64)
	jobs, err := ParseRestdJobs(readTestdata(t, "job-running.json"), time.Unix(at, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("got %d jobs", len(jobs))
	}
	j := jobs[0]
	if j.ID != 1 || !j.Running() || j.Decision == "" || !j.DecisionRead || j.RunSeconds < 30 ||
		j.TresPerNode != "gres:gpu:1" || j.Features != "v100" || j.TimeLimitMin != 30 || j.Account != "lab-a" ||
		j.QOS != "normal" || !reflect.DeepEqual(j.Nodes, []string{"rs-v100"}) || j.GPUs() != 1 {
		t.Errorf("job 1: %+v", j)
	}
	none, err := ParseRestdJobs(readTestdata(t, "job-missing.json"), time.Now())
	if err != nil || len(none) != 0 {
		t.Errorf("missing job: %v %v", none, err)
	}
}

func TestRestdNodesMatchSinfo(t *testing.T) {
	for _, dir := range recordings(t) {
		rest, err := ParseRestdNodes(readIn(t, dir, "nodes.json"))
		if err != nil {
			t.Fatal(err)
		}
		cli, err := ParseSinfoNodes(string(readIn(t, dir, "sinfo.txt")))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rest, cli) {
			t.Errorf("%s nodes:\n restd %+v\n sinfo %+v", dir, rest, cli)
		}
	}
}

func TestRestdPartitionsMatchScontrol(t *testing.T) {
	for _, dir := range recordings(t) {
		body := readIn(t, dir, "partitions.json")
		rest, err := ParseRestdPartitions(body)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := ParsePartitions(string(readIn(t, dir, "partitions.txt")))
		if err != nil {
			t.Fatal(err)
		}
		// From v0.0.39 the default comes from scontrol (Restd.Partitions).
		if lacks := restdPartitionsLackDefault(body); lacks != !legacyAPI(filepath.Base(dir)) {
			t.Errorf("%s: lacks the default flag: %v", dir, lacks)
		} else if lacks {
			for i := range rest {
				rest[i].Default = cli[i].Default
			}
		}
		if !reflect.DeepEqual(rest, cli) {
			t.Errorf("%s partitions:\n restd %+v\n scontrol %+v", dir, rest, cli)
		}
	}
}

// The shapes of v0.0.39 and later: numbers as objects, states as lists,
// nested partitions.
func TestParseRestdNewerShapes(t *testing.T) {
	jobs, err := ParseRestdJobs([]byte(`{"jobs":[
	 {"job_id":7,"job_state":["RUNNING"],"state_reason":"None","user_name":"alice","account":"phys","name":"x",
	  "partition":"gpu","qos":"normal","submit_time":{"set":true,"infinite":false,"number":1000},
	  "start_time":{"set":true,"number":1100},"time_limit":{"set":false,"infinite":true,"number":0},
	  "nodes":"n-[1-2]","node_count":{"set":true,"number":2},"tres_per_node":"gres/gpu:v100:2",
	  "priority":{"set":true,"number":5},"restart_cnt":1,"tasks":{"set":true,"number":4},
	  "nice":-100,"admin_comment":"rota: gpu any->v100 [d=abc]","features":""},
	 {"job_id":8,"job_state":["COMPLETED"]},
	 {"job_id":9,"job_state":["PENDING"],"time_limit":{"set":true,"infinite":false,"number":90},
	  "nice":{"set":true,"number":7},"start_time":{"set":true,"number":5000},"admin_comment":""},
	 {"job_id":10,"job_state":"PENDING","nice":4294967219},
	 {"job_id":11,"job_state":"PENDING","nice":4294967294}]}`), time.Unix(1200, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 {
		t.Fatalf("want 4 jobs, got %+v", jobs)
	}
	// 22.05.8 prints nice -77 as 4294967219; NO_VAL is none.
	if jobs[2].Nice != -77 || jobs[3].Nice != 0 {
		t.Errorf("nice: %d %d", jobs[2].Nice, jobs[3].Nice)
	}
	r, p := jobs[0], jobs[1]
	if r.ID != 7 || r.TimeLimitMin != 0 || r.RunSeconds != 100 || r.NumNodes != 2 || r.NumTasks != 4 || r.Nice != -100 ||
		r.Priority != 5 || r.Restarts != 1 || r.Decision != "abc" || !reflect.DeepEqual(r.Nodes, []string{"n-1", "n-2"}) ||
		r.GPUs() != 4 {
		t.Errorf("running: %+v", r)
	}
	if p.ID != 9 || p.TimeLimitMin != 90 || p.Nice != 7 || !p.Start.IsZero() || p.Reason != "None" {
		t.Errorf("pending: %+v", p)
	}
	nodes, err := ParseRestdNodes([]byte(`{"nodes":[{"name":"n-1","state":["IDLE","DRAIN"],"partitions":["gpu"],
	  "gres":"gpu:a100:8(S:0-1)","gres_used":"gpu:a100:2(IDX:0-1)","features":["a100","ib"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := nodes[0]; n.State != "idle+drain" || n.GPUs["a100"] != 8 || n.GPUsUsed["a100"] != 2 ||
		!reflect.DeepEqual(n.Features, []string{"a100", "ib"}) {
		t.Errorf("node: %+v", n)
	}
	parts, err := ParseRestdPartitions([]byte(`{"partitions":[{"name":"gpu","nodes":{"configured":"n-[1-2]","total":2},
	  "flags":["DEFAULT"],"partition":{"state":["UP"]},"maximums":{"time":{"set":true,"number":120},
	  "nodes":{"set":true,"infinite":true},"cpus_per_node":{"set":false,"number":0},
	  "partition_memory_per_node":{"set":true,"number":64000}},"minimums":{"nodes":1},
	  "defaults":{"time":{"set":true,"number":30}},"cpus":{"total":96}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Partition{Name: "gpu", Default: true, MaxTimeMin: 120, DefaultTimeMin: 30, Nodes: "n-[1-2]", State: "UP",
		MinNodes: 1, MaxMemPerNodeMB: 64000, TotalNodes: 2, TotalCPUs: 96}
	if !reflect.DeepEqual(parts, []Partition{want}) {
		t.Errorf("partition:\n got  %+v\n want %+v", parts, want)
	}
}

func TestParseRestdBadInput(t *testing.T) {
	for _, in := range []string{`{`, `{"jobs":[{"job_id":"x","job_state":"PENDING"}]}`,
		`{"jobs":[{"job_id":-4,"job_state":"PENDING"}]}`, `{"jobs":[{"job_id":4,"job_state":"RUNNING","nodes":"n-[3-1]"}]}`,
		`{"jobs":[{"job_id":4,"job_state":{"a":1}}]}`} {
		if _, err := ParseRestdJobs([]byte(in), time.Now()); err == nil {
			t.Errorf("jobs %s: want an error", in)
		}
	}
	for _, in := range []string{`[]`, `{"nodes":[{"state":"idle"}]}`, `{"nodes":[{"name":"a","gres":"gpu:x:y:z:w"}]}`} {
		if _, err := ParseRestdNodes([]byte(in)); err == nil {
			t.Errorf("nodes %s: want an error", in)
		}
	}
	if _, err := ParseRestdPartitions([]byte(`{"partitions":[{"max_time_limit":5}]}`)); err == nil {
		t.Error("a partition without a name: want an error")
	}
}

func TestAPIVersionNegotiation(t *testing.T) {
	vs, err := ServedAPIVersions(readTestdata(t, "../openapi-22.05.8.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(vs, []string{"v0.0.36", "v0.0.37", "v0.0.38"}) {
		t.Fatalf("22.05.8 serves %v", vs)
	}
	if v, err := PickAPIVersion(vs); err != nil || v != "v0.0.38" {
		t.Errorf("22.05.8: %s %v", v, err)
	}
	// 24.11 lists its paths with a trailing slash.
	if v, err := PickAPIVersion([]string{"v0.0.40", "v0.0.41", "v0.0.42"}); err != nil || v != "v0.0.42" {
		t.Errorf("24.11: %s %v", v, err)
	}
	if v, err := PickAPIVersion([]string{"v0.0.9", "v0.0.10"}); err == nil || !strings.Contains(err.Error(), "none of which") {
		t.Errorf("want a clear error, got %s %v", v, err)
	}
	if v, err := PickAPIVersion([]string{"v0.0.42", "v0.0.99"}); err != nil || v != "v0.0.42" {
		t.Errorf("newer than known: %s %v", v, err)
	}
	vs, err = ServedAPIVersions([]byte(`{"paths":{"/slurm/v0.0.41/jobs/":{},"/slurm/v0.0.42/jobs/":{},"/slurmdb/v0.0.42/jobs/":{},"/slurm/v0.0.42/job/{job_id}":{}}}`))
	if err != nil || !reflect.DeepEqual(vs, []string{"v0.0.41", "v0.0.42"}) {
		t.Errorf("trailing slash: %v %v", vs, err)
	}
	if _, err := ServedAPIVersions([]byte(`<html>`)); err == nil {
		t.Error("want an error for a page that is not OpenAPI")
	}
}

func TestRestdUpdateBody(t *testing.T) {
	feat, prio, nice, lim, exc := "p100", uint32(5000), int32(-20), uint32(45), "n-[1-2]"
	unl := slurmtime.Unlimited
	now := time.Unix(1700000000, 0)
	all := JobUpdate{Features: &feat, Priority: &prio, Nice: &nice, TimeLimitMin: &lim, StartNow: true, ExcNodes: &exc,
		GPU: &GPURequest{PerNode: "gres/gpu:v100:1"}, ResetPriority: true}
	body, rest := RestdUpdateBody("v0.0.38", all, now)
	wantBody := map[string]any{"constraints": "p100", "priority": uint32(5000), "nice": int32(-20), "time_limit": uint32(45)}
	if !reflect.DeepEqual(body, wantBody) {
		t.Errorf("v0.0.38 body %v", body)
	}
	// ExcNodes, the GPU request, the begin time (after the excluded
	// nodes) and the release go through scontrol.
	if got := strings.Join(rest.args(), " "); got != "TresPerNode=gres/gpu:v100:1 ExcNodeList=n-[1-2] StartTime=now" || !rest.ResetPriority {
		t.Errorf("v0.0.38 rest: %q %+v", got, rest)
	}
	body, rest = RestdUpdateBody("v0.0.38", JobUpdate{StartNow: true, TimeLimitMin: &unl}, now)
	if !reflect.DeepEqual(body, map[string]any{"begin_time": "now", "time_limit": "UNLIMITED"}) || rest.args() != nil || rest.ResetPriority {
		t.Errorf("v0.0.38 start now: %v %+v", body, rest)
	}
	body, rest = RestdUpdateBody("v0.0.42", all, now)
	js, _ := json.Marshal(body)
	want := `{"begin_time":{"number":1700000000,"set":true},"constraints":"p100","excluded_nodes":["n-1","n-2"],"nice":-20,` +
		`"priority":{"number":5000,"set":true},"time_limit":{"number":45,"set":true},"tres_per_node":"gres/gpu:v100:1"}`
	if string(js) != want {
		t.Errorf("v0.0.42 body\n got  %s\n want %s", js, want)
	}
	if rest.args() != nil || !rest.ResetPriority {
		t.Errorf("v0.0.42 rest: %+v", rest)
	}
	body, _ = RestdUpdateBody("v0.0.42", JobUpdate{TimeLimitMin: &unl}, now)
	if js, _ := json.Marshal(body); string(js) != `{"time_limit":{"infinite":true,"set":true}}` {
		t.Errorf("unlimited: %s", js)
	}
}

func TestSignJWT(t *testing.T) {
	tok, err := SignJWT([]byte("0123456789abcdef0123456789abcdef"), "root", time.Unix(1000, 0), time.Unix(4600, 0))
	if err != nil {
		t.Fatal(err)
	}
	// Checked against an independent HS256 implementation (python3
	// hmac/hashlib) over the same header and claims.
	want := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQ2MDAsImlhdCI6MTAwMCwic3VuIjoicm9vdCJ9.5kNDFFqnUFY7AtbPS0KWndKlxcgrOH8y99rv80GvyVM"
	if tok != want {
		t.Errorf("token %s", tok)
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "jwt.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	k := &KeyTokens{KeyFile: key, Lifetime: time.Hour, Now: func() time.Time { return now }}
	a, err := k.Token("root")
	if err != nil || a != tok {
		t.Fatalf("KeyTokens: %s %v", a, err)
	}
	now = now.Add(40 * time.Minute)
	if b, _ := k.Token("root"); b != a {
		t.Error("a token with 20 of 60 minutes left was replaced")
	}
	now = now.Add(10 * time.Minute)
	if b, _ := k.Token("root"); b == a {
		t.Error("a token with 10 of 60 minutes left was kept")
	}
	short := filepath.Join(dir, "short.key")
	os.WriteFile(short, []byte("abc"), 0o600)
	if _, err := (&KeyTokens{KeyFile: short}).Token("root"); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("short key: %v", err)
	}
	if _, err := (&KeyTokens{KeyFile: filepath.Join(dir, "none")}).Token("root"); err == nil {
		t.Error("missing key: want an error")
	}
	tf := filepath.Join(dir, "token")
	os.WriteFile(tf, []byte("SLURM_JWT="+tok+"\n"), 0o600)
	if got, err := (&FileTokens{Path: tf}).Token("root"); err != nil || got != tok {
		t.Errorf("FileTokens: %s %v", got, err)
	}
	os.WriteFile(tf, []byte("garbage"), 0o600)
	if _, err := (&FileTokens{Path: tf}).Token("root"); err == nil {
		t.Error("FileTokens garbage: want an error")
	}
}

// fakeRestd serves the captured 22.05 answers and records updates.
func fakeRestd(t *testing.T) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var posts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-SLURM-USER-NAME") == "slurmctld-refuses" {
			// 22.05.8's answer when slurmctld rejects the token.
			w.WriteHeader(http.StatusInternalServerError)
			w.Write(readTestdata(t, "auth-refused.json"))
			return
		}
		if r.Header.Get("X-SLURM-USER-NAME") != "root" || strings.Count(r.Header.Get("X-SLURM-USER-TOKEN"), ".") != 2 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/openapi/v3":
			w.Write(readTestdata(t, "../openapi-22.05.8.json"))
		case r.URL.Path == "/slurm/v0.0.38/jobs" && r.URL.Query().Get("update_time") != "":
			// 22.05.8 answers an unchanged queue so.
			w.WriteHeader(http.StatusNotModified)
		case r.URL.Path == "/slurm/v0.0.38/jobs":
			w.Write(readTestdata(t, "jobs.json"))
		case r.URL.Path == "/slurm/v0.0.38/nodes":
			w.Write(readTestdata(t, "nodes.json"))
		case r.URL.Path == "/slurm/v0.0.38/partitions":
			w.Write(readTestdata(t, "partitions.json"))
		case r.URL.Path == "/slurm/v0.0.38/job/1" && r.Method == http.MethodGet:
			w.Write(readTestdata(t, "job-running.json"))
		case r.URL.Path == "/slurm/v0.0.38/job/99999":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write(readTestdata(t, "job-missing.json"))
		case r.URL.Path == "/slurm/v0.0.38/job/2" && r.Method == http.MethodPost:
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			posts = append(posts, string(b))
			mu.Unlock()
			if strings.Contains(string(b), "begin_time") {
				w.Write(readTestdata(t, "update-refused.json")) // HTTP 200 with errors, as 22.05 answers
				return
			}
			w.Write(readTestdata(t, "update-ok.json"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &posts
}

func TestRestdClient(t *testing.T) {
	srv, posts := fakeRestd(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "jwt.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	r := &Restd{CLI: &CLI{}, URL: srv.URL, User: "root", Token: &KeyTokens{KeyFile: key}, Log: zerolog.Nop()}
	ctx := context.Background()
	if v, err := r.APIVersion(ctx); err != nil || v != "v0.0.38" {
		t.Fatalf("negotiated %s %v", v, err)
	}
	jobs, err := r.Jobs(ctx)
	if err != nil || len(jobs) != 7 {
		t.Fatalf("jobs: %d %v", len(jobs), err)
	}
	// The second read asks for changes only; slurmctld has none, and the
	// same jobs come back, run times brought up to now.
	again, err := r.Jobs(ctx)
	if err != nil || r.Unchanged() != 1 || len(again) != len(jobs) || again[0].ID != jobs[0].ID {
		t.Fatalf("unchanged queue: %d jobs, %d unchanged, %v", len(again), r.Unchanged(), err)
	}
	r.FullReadEvery = time.Nanosecond
	if _, err := r.Jobs(ctx); err != nil || r.Unchanged() != 1 {
		t.Errorf("past FullReadEvery the list is read whole: %d unchanged, %v", r.Unchanged(), err)
	}
	if nodes, err := r.Nodes(ctx); err != nil || len(nodes) != 3 {
		t.Errorf("nodes: %v %v", nodes, err)
	}
	if parts, err := r.Partitions(ctx); err != nil || len(parts) != 1 || !parts[0].Default {
		t.Errorf("partitions: %v %v", parts, err)
	}
	if j, ok, err := r.Job(ctx, 1); err != nil || !ok || j.Decision == "" {
		t.Errorf("job 1: %+v %v %v", j, ok, err)
	}
	if _, ok, err := r.Job(ctx, 99999); err != nil || ok {
		t.Errorf("missing job: ok %v err %v", ok, err)
	}
	if c, err := r.JobAdminComment(ctx, 1); err != nil || !strings.HasPrefix(c, "rota: ") {
		t.Errorf("admin comment %q %v", c, err)
	}
	ids, err := r.DecisionIDs(ctx)
	if err != nil || len(ids) != 6 {
		t.Errorf("decision ids %v %v", ids, err)
	}
	nice := int32(5)
	if err := r.Update(ctx, 2, JobUpdate{Nice: &nice}); err != nil {
		t.Errorf("update: %v", err)
	}
	// A refused update (HTTP 200 with errors) is an error that says why.
	err = r.Update(ctx, 2, JobUpdate{StartNow: true})
	if err == nil || !strings.Contains(err.Error(), "Unable to parse time") {
		t.Errorf("refused update: %v", err)
	}
	if len(*posts) != 2 || (*posts)[0] != `{"nice":5}` {
		t.Errorf("posts %q", *posts)
	}
	bad := &Restd{CLI: &CLI{}, URL: srv.URL, User: "nobody", Token: &KeyTokens{KeyFile: key}, Log: zerolog.Nop()}
	if _, err := bad.Jobs(ctx); err == nil || !strings.Contains(err.Error(), "authentication refused") {
		t.Errorf("refused token: %v", err)
	}
	refused := &Restd{CLI: &CLI{}, URL: srv.URL, User: "slurmctld-refuses", Token: &KeyTokens{KeyFile: key}, Version: "v0.0.38", Log: zerolog.Nop()}
	if _, err := refused.Jobs(ctx); err == nil || !strings.Contains(err.Error(), "Failed while looking for jobs") ||
		!strings.Contains(err.Error(), "JWT key") {
		t.Errorf("a token slurmctld refuses: %v", err)
	}
	if _, err := (&Restd{URL: "ftp://x", Token: &KeyTokens{KeyFile: key}, User: "root"}).Jobs(ctx); err == nil ||
		!strings.Contains(err.Error(), "want http://") {
		t.Errorf("bad URL: %v", err)
	}
	if r.Requests() < 10 {
		t.Errorf("requests %d", r.Requests())
	}
}

// The unix: form of the URL reaches a socket.
func TestRestdUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "restd.sock")
	srv, _ := fakeRestd(t)
	srv.Close()
	l, err := netListenUnix(sock)
	if err != nil {
		t.Skip("no unix sockets here:", err)
	}
	s2 := httptest.NewUnstartedServer(srv.Config.Handler)
	s2.Listener = l
	s2.Start()
	defer s2.Close()
	key := filepath.Join(dir, "jwt.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	r := &Restd{CLI: &CLI{}, URL: "unix:" + sock, User: "root", Token: &KeyTokens{KeyFile: key}, Log: zerolog.Nop()}
	nodes, err := r.Nodes(context.Background())
	if err != nil || len(nodes) != 3 {
		t.Fatalf("nodes over a socket: %v %v", nodes, err)
	}
	names := []string{}
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("unsorted %v", names)
	}
}

func FuzzParseRestdJobs(f *testing.F) {
	for _, name := range []string{"jobs.json", "job-running.json", "job-missing.json"} {
		b, err := os.ReadFile(filepath.Join(restd38, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"jobs":[{"job_id":{"set":true,"number":3},"job_state":["RUNNING"],"nodes":"a[1-3]","start_time":{"set":true,"number":5}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		jobs, err := ParseRestdJobs(b, time.Unix(1e9, 0))
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.ID == 0 || !(j.Pending() || j.Running()) || !j.DecisionRead {
				t.Fatalf("bad job %+v", j)
			}
			_ = j.GPUs()
		}
	})
}

func FuzzParseRestdNodesPartitions(f *testing.F) {
	for _, name := range []string{"nodes.json", "partitions.json"} {
		b, err := os.ReadFile(filepath.Join(restd38, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"partitions":[{"name":"p","nodes":{"configured":"x","total":1},"maximums":{"time":{"infinite":true}}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if nodes, err := ParseRestdNodes(b); err == nil {
			for _, n := range nodes {
				if n.Name == "" {
					t.Fatal("node without a name")
				}
			}
		}
		if parts, err := ParseRestdPartitions(b); err == nil {
			for _, p := range parts {
				if p.Name == "" {
					t.Fatal("partition without a name")
				}
			}
		}
		_, _ = ServedAPIVersions(b)
	})
}

func netListenUnix(path string) (net.Listener, error) { return net.Listen("unix", path) }

// 26.05.5 (v0.0.44) answers an unchanged queue with HTTP 200, no jobs and
// last_update unset; the update_time asked for is its last answer's
// last_update less a second.
func TestRestdUnchangedV44(t *testing.T) {
	dir := "testdata/restd/v0.0.44"
	full := readIn(t, dir, "jobs.json")
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slurm/v0.0.44/jobs/" {
			http.NotFound(w, r)
			return
		}
		asked = append(asked, r.URL.Query().Get("update_time"))
		if r.URL.Query().Get("update_time") != "" {
			w.Write(readIn(t, dir, "jobs-unchanged.json"))
			return
		}
		w.Write(full)
	}))
	defer srv.Close()
	key := filepath.Join(t.TempDir(), "k")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	r := &Restd{CLI: &CLI{}, URL: srv.URL, User: "root", Token: &KeyTokens{KeyFile: key}, Version: "v0.0.44", Log: zerolog.Nop()}
	a, err := r.Jobs(context.Background())
	if err != nil || len(a) < 5 {
		t.Fatalf("full read: %d %v", len(a), err)
	}
	b, err := r.Jobs(context.Background())
	if err != nil || len(b) != len(a) || r.Unchanged() != 1 {
		t.Fatalf("unchanged read: %d jobs, %d unchanged, %v", len(b), r.Unchanged(), err)
	}
	var env struct {
		LastUpdate restNum `json:"last_update"`
	}
	json.Unmarshal(full, &env)
	if len(asked) != 2 || asked[0] != "" || asked[1] != strconv.FormatInt(env.LastUpdate.N-1, 10) {
		t.Errorf("update_time asked: %q (last_update %d)", asked, env.LastUpdate.N)
	}
}

// A QueueSince reader takes slurmrestd's last job list when it fits,
// without a request.
func TestRestdQueueSince(t *testing.T) {
	srv, _ := fakeRestd(t)
	key := filepath.Join(t.TempDir(), "jwt.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	r := &Restd{CLI: &CLI{}, URL: srv.URL, User: "root", Token: &KeyTokens{KeyFile: key}, Version: "v0.0.38", Log: zerolog.Nop()}
	ctx := context.Background()
	before := time.Now()
	time.Sleep(time.Millisecond) // a read strictly after before: the clock is what is tested
	jobs, err := r.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := r.Requests()
	got, at, err := r.JobsAt(QueueSince(ctx, before, time.Hour))
	if err != nil || len(got) != len(jobs) || r.Requests() != n || !at.After(before) || !at.Before(time.Now()) {
		t.Errorf("a fitting read: %d jobs (want %d), %d requests (want %d), read at %v (after %v), %v", len(got), len(jobs), r.Requests(), n, at, before, err)
	}
	for _, q := range []context.Context{QueueSince(ctx, time.Now(), time.Hour), QueueSince(ctx, before, time.Nanosecond),
		Fresh(QueueSince(ctx, before, time.Hour))} {
		n := r.Requests()
		if _, err := r.Jobs(q); err != nil || r.Requests() != n+1 {
			t.Errorf("a read that does not fit: %d requests, want %d (%v)", r.Requests(), n+1, err)
		}
	}
}
