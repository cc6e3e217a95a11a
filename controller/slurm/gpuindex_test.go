package slurm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestParseGRESDetail: every form Slurm prints a node's GPUs in, whole and
// as shards, on each release; what is not one is an error, not a guess.
func TestParseGRESDetail(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "gpu:v100:1(IDX:2)", want: []int{2}},
		{in: "gpu:2(IDX:0-1)", want: []int{0, 1}},
		{in: "gpu:v100:3(IDX:0,2-3)", want: []int{0, 2, 3}},
		{in: "shard:v100:1(0/2,1/2,0/2,0/2)", want: []int{1}},
		{in: "shard:2(2/2,0/2,0/2,0/2)", want: []int{0}},
		{in: "shard:3(1/2,0/2,2/2,0/2)", want: []int{0, 2}},
		{in: "shard:v100:1(IDX:0)", want: []int{0}},
		{in: "gpu:a100_3g.20gb:0(IDX:)", want: nil},
		{in: "nvme:1(IDX:0),gpu:k80:1(IDX:3)", want: []int{3}},
		{in: "", want: nil},
		{in: "gpu:1", bad: true},
		{in: "gpu:1(IDX:x)", bad: true},
		{in: "gpu:1(IDX:3-1)", bad: true},
		{in: "shard:1(1,0/2)", bad: true},
		{in: "shard:1(-1/2)", bad: true},
	} {
		got, err := ParseGRESDetail(c.in)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("ParseGRESDetail(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

// TestParseJobGPUs: the node and GPUs of a running job in `scontrol show
// job -d -o` (24.11's form, read by hand on the dev cluster): the detail's
// Nodes= and GRES=, not the job's NodeList= or TresPerNode=.
func TestParseJobGPUs(t *testing.T) {
	t.Parallel()
	out := "JobId=11 JobName=LM UserId=root(0) JobState=RUNNING NodeList=e2e-v100 BatchHost=e2e-v100 NumNodes=1 " +
		"Nodes=e2e-v100 CPU_IDs=0 Mem=0 GRES=shard:1(0/2,1/2,0/2,0/2) TresPerNode=gres/shard:v100:1\n"
	node, gpus, err := ParseJobGPUs(out)
	if err != nil || node != "e2e-v100" || !slices.Equal(gpus, []int{1}) {
		t.Fatalf("got %q %v %v", node, gpus, err)
	}
	if node, gpus, err := ParseJobGPUs("JobId=12 JobState=PENDING NodeList=(null)\n"); err != nil || node != "" || gpus != nil {
		t.Fatalf("pending job: %q %v %v", node, gpus, err)
	}
}

// TestRestdJobGPUs: slurmrestd's gres_detail, and a form it cannot read
// fails JobGPUs alone.
func TestRestdJobGPUs(t *testing.T) {
	t.Parallel()
	body := `{"jobs":[{"job_id":11,"job_state":["RUNNING"],"nodes":"e2e-v100","gres_detail":["shard:v100:1(0/2,0/2,1/2,0/2)"]},
	{"job_id":12,"job_state":["RUNNING"],"nodes":"e2e-v100","gres_detail":{"odd":1}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
	defer srv.Close()
	key := filepath.Join(t.TempDir(), "k")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	r := &Restd{CLI: &CLI{}, URL: srv.URL, User: "root", Token: &KeyTokens{KeyFile: key}, Version: "v0.0.44", Log: zerolog.Nop()}
	node, gpus, err := r.JobGPUs(context.Background(), 11)
	if err != nil || node != "e2e-v100" || !slices.Equal(gpus, []int{2}) {
		t.Fatalf("job 11: %q %v %v", node, gpus, err)
	}
	if _, _, err := r.JobGPUs(context.Background(), 12); err == nil {
		t.Fatal("job 12's gres_detail is no list, and JobGPUs said nothing")
	}
	if jobs, err := ParseRestdJobs([]byte(body), time.Now()); err != nil || len(jobs) != 2 {
		t.Fatalf("the queue's read failed on a gres_detail it does not need: %v %v", jobs, err)
	}
}
