package submit

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rota-hpc/rota/controller/cluster"
	"github.com/rota-hpc/rota/controller/placer"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// holdState is the state the controller publishes for nodes (each
// carrying its GPU type as a feature, as on the dev cluster), all free,
// in partition gpu, with the dev cluster's speed table.
func holdState(t *testing.T, nodes []slurm.Node) []byte {
	t.Helper()
	cfg := placer.DefaultConfig()
	cfg.Speed, cfg.Name = map[string]float64{"v100": 3.36, "p100": 3.17, "k80": 1}, "las"
	p := placer.New(cfg)
	p.Update(cluster.Build(time.Now(), nodes, []slurm.Partition{{Name: "gpu", Default: true, MaxTimeMin: 2880}}))
	b, err := json.Marshal(p.State(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gpuNodes is n nodes of gpus GPUs of type typ, with features feats too.
func gpuNodes(typ string, n, gpus int, feats ...string) []slurm.Node {
	var out []slurm.Node
	for i := range n {
		out = append(out, slurm.Node{Name: typ + "-" + string(rune('a'+i)), State: "idle", Partitions: []string{"gpu"},
			GPUs: map[string]int{typ: gpus}, Features: append([]string{typ}, feats...)})
	}
	return out
}

// Every request form, typed and untyped, on clusters of several shapes:
// the plugin gives a job a type only when that type's nodes can hold the
// whole job as asked (node count, GPUs per node, in all, features), and
// otherwise leaves it as asked, its decision saying why. Jobs are given
// as the shim passes them (Slurm 22.05's TRES strings, NO_VAL unset).
func TestPlacedOnlyWhereTheJobHolds(t *testing.T) {
	t.Parallel()
	shapes := map[string][]slurm.Node{
		// The dev cluster: sbatch -N2 ... runs there across two types.
		"one node per type": append(append(gpuNodes("v100", 1, 4), gpuNodes("p100", 1, 4)...), gpuNodes("k80", 1, 4)...),
		// Free x speed: v100 4 x 3.36, p100 4 x 3.17, k80 12 x 1.
		"several nodes per type": append(append(gpuNodes("v100", 1, 4, "ib"), gpuNodes("p100", 2, 2)...), gpuNodes("k80", 3, 4, "ib")...),
		"one type only":          gpuNodes("k80", 3, 4),
	}
	job := func(edit func(j *Job)) *Job {
		j := &Job{UID: 1000, Partition: "gpu", TimeLimit: NoVal, MinNodes: NoVal, NumTasks: NoVal, MaxNodes: NoVal, ScriptHash: "5c71",
			TasksPerNode: 0xfffe, SocketsPerNode: 0xfffe}
		edit(j)
		return j
	}
	n2 := func(j *Job) { j.MinNodes, j.MaxNodes = 2, 2 }
	type want struct{ typ, why string } // typ "": left as asked
	for _, tc := range []struct {
		name                  string
		job                   *Job
		perType, several, one want
	}{
		{"--gres=gpu:1", job(func(j *Job) { j.TresPerNode = "gres:gpu:1" }),
			want{typ: "v100"}, want{typ: "v100"}, want{typ: "k80"}},
		{"--gres=gpu:2 -N2", job(func(j *Job) { j.TresPerNode = "gres:gpu:2"; n2(j) }),
			want{why: "no single GPU type has 2 nodes with 2 GPUs each in partition gpu; left as asked"},
			want{typ: "p100"}, want{typ: "k80"}},
		{"--gpus-per-node=4 -N2", job(func(j *Job) { j.TresPerNode = "gres:gpu:4"; n2(j) }),
			want{why: "2 nodes with 4 GPUs each"}, want{typ: "k80"}, want{typ: "k80"}},
		{"--gpus=8 -N2", job(func(j *Job) { j.TresPerJob = "gres:gpu:8"; n2(j) }),
			want{why: "no single GPU type has 2 nodes with 8 GPUs in all in partition gpu; left as asked"},
			want{typ: "k80"}, want{typ: "k80"}},
		// k80 has 12 GPUs, but not on two nodes.
		{"--gpus=12 -N2", job(func(j *Job) { j.TresPerJob = "gres:gpu:12"; n2(j) }),
			want{why: "2 nodes with 12 GPUs in all"}, want{why: "2 nodes with 12 GPUs in all"}, want{why: "2 nodes with 12 GPUs in all"}},
		{"--gpus=8", job(func(j *Job) { j.TresPerJob = "gres:gpu:8" }),
			want{why: "8 GPUs in all in partition gpu"}, want{typ: "k80"}, want{typ: "k80"}},
		{"--gpus=16", job(func(j *Job) { j.TresPerJob = "gres:gpu:16" }),
			want{why: "16 GPUs in all"}, want{why: "16 GPUs in all"}, want{why: "16 GPUs in all"}},
		{"--gres=gpu:1 -N4", job(func(j *Job) { j.TresPerNode = "gres:gpu:1"; j.MinNodes, j.MaxNodes = 4, 4 }),
			want{why: "4 nodes with 1 GPU each"}, want{why: "4 nodes with 1 GPU each"}, want{why: "4 nodes with 1 GPU each"}},
		{"--gpus-per-task=1 -n4 --ntasks-per-node=2", job(func(j *Job) { j.TresPerTask = "gres:gpu:1"; j.NumTasks, j.TasksPerNode = 4, 2 }),
			want{typ: "v100"}, want{typ: "v100"}, want{typ: "k80"}},
		{"--gpus-per-task=2 -n4 --ntasks-per-node=2", job(func(j *Job) { j.TresPerTask = "gres:gpu:2"; j.NumTasks, j.TasksPerNode = 4, 2 }),
			want{why: "8 GPUs in all, 4 on a node"}, want{typ: "k80"}, want{typ: "k80"}},
		{"--gpus-per-task=1 -n8 -N2 --ntasks-per-node=4", job(func(j *Job) {
			j.TresPerTask = "gres:gpu:1"
			j.NumTasks, j.TasksPerNode = 8, 4
			n2(j)
		}), want{why: "2 nodes with 4 GPUs each"}, want{typ: "k80"}, want{typ: "k80"}},
		{"--gpus-per-socket=2 --sockets-per-node=2", job(func(j *Job) { j.TresPerSocket = "gres:gpu:2"; j.SocketsPerNode = 2 }),
			want{typ: "v100"}, want{typ: "v100"}, want{typ: "k80"}},
		{"--gpus-per-socket=2 --sockets-per-node=2 -N2", job(func(j *Job) { j.TresPerSocket = "gres:gpu:2"; j.SocketsPerNode = 2; n2(j) }),
			want{why: "2 nodes with 4 GPUs each"}, want{typ: "k80"}, want{typ: "k80"}},
		{"-C ib --gres=gpu:2 -N2", job(func(j *Job) { j.TresPerNode = "gres:gpu:2"; j.Features = "ib"; n2(j) }),
			want{why: "2 nodes with 2 GPUs each with features ib in partition gpu"}, want{typ: "k80"},
			want{why: "with features ib"}},
		// The user's type stands, even where it cannot hold the job:
		// that is the user's request, as asked.
		{"--gres=gpu:v100:2 -N2", job(func(j *Job) { j.TresPerNode = "gres:gpu:v100:2"; n2(j) }),
			want{why: "user named type v100"}, want{why: "user named type v100"}, want{why: "which no usable node has"}},
		{"--gpus=k80:8 -N2", job(func(j *Job) { j.TresPerJob = "gres:gpu:k80:8"; n2(j) }),
			want{why: "user named type k80"}, want{why: "user named type k80"}, want{why: "user named type k80"}},
	} {
		for _, shape := range []struct {
			name string
			want want
		}{{"one node per type", tc.perType}, {"several nodes per type", tc.several}, {"one type only", tc.one}} {
			t.Run(shape.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				var mu sync.Mutex
				var sent [][]byte
				l := NewLocal(30*time.Second, func(batch [][]byte) error {
					mu.Lock()
					defer mu.Unlock()
					sent = append(sent, batch...)
					return nil
				})
				defer l.Close()
				if err := l.Feed(holdState(t, shapes[shape.name])); err != nil {
					t.Fatal(err)
				}
				h := &Handler{Config: DefaultConfig(), Placer: l}
				j := *tc.job
				ch, o, err := h.Handle(context.Background(), &j)
				if err != nil {
					t.Fatal(err)
				}
				if ch.TresPerJob != nil || ch.TresPerNode != nil || ch.TresPerSocket != nil || ch.TresPerTask != nil {
					t.Errorf("GPU request rewritten (%v %v %v %v): the type goes into the constraint", ch.TresPerJob, ch.TresPerNode, ch.TresPerSocket, ch.TresPerTask)
				}
				w := shape.want
				switch {
				case w.typ == "":
					if o != Kept || ch.Features != nil || ch.TimeLimit != nil {
						t.Errorf("%v, constraint %v: want the job left as asked", o, ptrStr(ch.Features))
					}
				default:
					f := w.typ
					if j.Features != "" {
						f = j.Features + "&" + w.typ
					}
					if o != Rewritten || ch.Features == nil || *ch.Features != f {
						t.Errorf("%v, constraint %v: want %q", o, ptrStr(ch.Features), f)
					}
				}
				l.Flush()
				mu.Lock()
				defer mu.Unlock()
				var d wire.Decision
				if len(sent) != 1 || wire.Decode(sent[0], &d) != nil {
					t.Fatalf("%d decisions sent, want 1", len(sent))
				}
				if d.Given.GPUType != w.typ || !strings.Contains(d.Given.Reason, w.why) {
					t.Errorf("decision: %q because %q; want %q because %q", d.Given.GPUType, d.Given.Reason, w.typ, w.why)
				}
			})
		}
	}
}

func ptrStr(p *string) string {
	if p == nil {
		return "unset"
	}
	return *p
}
