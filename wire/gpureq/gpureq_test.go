package gpureq

import (
	"errors"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		count   uint64
		types   []string
		has     bool
		untyped bool
		retyped string // String() after SetType("v100")
		wantErr bool
	}{
		{in: "", has: false, retyped: ""},
		{in: "gres:gpu:1", count: 1, has: true, untyped: true, retyped: "gres:gpu:v100:1"},
		{in: "gres:gpu", count: 1, has: true, untyped: true, retyped: "gres:gpu:v100"},
		{in: "gres:gpu:p100:2", count: 2, types: []string{"p100"}, has: true, retyped: "gres:gpu:v100:2"},
		{in: "gres:gpu:a100", count: 1, types: []string{"a100"}, has: true, retyped: "gres:gpu:v100"},
		{in: "gres/gpu:3", count: 3, has: true, untyped: true, retyped: "gres/gpu:v100:3"},
		{in: "gres/gpu:h100:8", count: 8, types: []string{"h100"}, has: true, retyped: "gres/gpu:v100:8"},
		{in: "gres/gpu=2", count: 2, has: true, untyped: true, retyped: "gres/gpu:v100:2"},
		{in: "gpu:2", count: 2, has: true, untyped: true, retyped: "gpu:v100:2"},
		{in: "gres:gpu:1,gres:nvme:1", count: 1, has: true, untyped: true, retyped: "gres:gpu:v100:1,gres:nvme:1"},
		{in: "gres:nvme:1,gres:gpu:p100:1", count: 1, types: []string{"p100"}, has: true, retyped: "gres:nvme:1,gres:gpu:v100:1"},
		{in: "gres:nvme:1", has: false, retyped: "gres:nvme:1"},
		{in: "gres:shard:2", has: false, retyped: "gres:shard:2"},
		{in: "gres/shard:1,gres/gpu:1", count: 1, has: true, untyped: true, retyped: "gres/shard:1,gres/gpu:v100:1"},
		{in: "cpu=4,gres/gpu:1", count: 1, has: true, untyped: true, retyped: "cpu=4,gres/gpu:v100:1"},
		{in: "gres:gpu:k80:1,gres:gpu:p100:2", count: 3, types: []string{"k80", "p100"}, has: true, retyped: "gres:gpu:v100:1,gres:gpu:v100:2"},
		{in: "gres:gpu:0", count: 0, has: true, untyped: true, retyped: "gres:gpu:v100:0"},
		{in: "gres:gpu:tesla-v100_32g.sxm:4", count: 4, types: []string{"tesla-v100_32g.sxm"}, has: true, retyped: "gres:gpu:v100:4"},
		// Errors: the plugin leaves such a job alone.
		{in: ",", wantErr: true},
		{in: "gres:gpu:1,", wantErr: true},
		{in: "gres:gpu:x:y", wantErr: true},
		{in: "gres:gpu:v100:two", wantErr: true},
		{in: "gres:gpu:v100:1:extra", wantErr: true},
		{in: "gres:gpu:-1", wantErr: true},
		{in: "gres:gpu:99999999999999999999", wantErr: true},
		{in: "gres:gpu:2000000", wantErr: true},
		{in: "gres:gpu::1", wantErr: true},
		{in: "gres:gpu:v 100:1", wantErr: true},
		{in: "gres:gpu:v100\x00:1", wantErr: true},
		{in: "gres/gpu=v100", wantErr: true},
		{in: "gres:", wantErr: true},
		{in: "gres:gpu:a/b:1", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			s, err := Parse(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrSyntax) {
					t.Fatalf("Parse(%q) err = %v, want ErrSyntax", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if got := s.String(); got != tc.in {
				t.Errorf("round trip: %q -> %q", tc.in, got)
			}
			count, types, has := s.GPUs()
			if count != tc.count || has != tc.has || !reflect.DeepEqual(types, tc.types) {
				t.Errorf("GPUs() = %d %v %v, want %d %v %v", count, types, has, tc.count, tc.types, tc.has)
			}
			if got := s.HasUntyped(); got != tc.untyped {
				t.Errorf("HasUntyped() = %v, want %v", got, tc.untyped)
			}
			s.SetType("v100")
			if got := s.String(); got != tc.retyped {
				t.Errorf("after SetType: %q, want %q", got, tc.retyped)
			}
		})
	}
}

// Shards: the shard entries (gres/shard, a part of a GPU several jobs
// share) and their counts, in every form Slurm and users write; a shard
// entry is never a GPU and is given back as written.
func TestShards(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in      string
		count   uint64
		has     bool
		wantErr bool
		typ     string // ShardTypes' one type
	}{
		{in: "gres:shard:2", count: 2, has: true},
		{in: "gres/shard:2", count: 2, has: true},
		{in: "gres/shard=3", count: 3, has: true},
		{in: "shard", count: 1, has: true},
		{in: "gres:shard:v100:4", count: 4, has: true, typ: "v100"},
		{in: "gres:shard:v100", count: 1, has: true, typ: "v100"},
		{in: "shard::2", count: 2, has: true}, // a node's "shard:(null):2" without its "(null)"
		{in: "gres:shard:1,gres:shard:2", count: 3, has: true},
		{in: "gres:gpu:1,gres:nvme:1", has: false},
		{in: "gres:shards:1", has: false},                       // another gres
		{in: "gres:shard:two", count: 1, has: true, typ: "two"}, // a type, as gpu:two
		{in: "gres/shard=", wantErr: true},
		{in: "gres:shard:v 100:1", wantErr: true},
		{in: "gres:shard:99999999999999999999", wantErr: true},
	} {
		t.Run(c.in, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(c.in)
			if c.wantErr {
				if !errors.Is(err, ErrSyntax) {
					t.Fatalf("Parse(%q) err = %v, want ErrSyntax", c.in, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n, has := s.Shards(); n != c.count || has != c.has {
				t.Errorf("Shards() = %d %v, want %d %v", n, has, c.count, c.has)
			}
			if s.String() != c.in {
				t.Errorf("round trip: %q", s.String())
			}
			r := Request{PerNode: s}
			if r.HasShard() != c.has {
				t.Errorf("HasShard() = %v", r.HasShard())
			}
			if ts := r.ShardTypes(); (c.typ == "" && len(ts) > 0) || (c.typ != "" && (len(ts) != 1 || ts[0] != c.typ)) {
				t.Errorf("ShardTypes() = %v, want %q", ts, c.typ)
			}
		})
	}
}

func TestParseTooLong(t *testing.T) {
	long := make([]byte, MaxLen+1)
	for i := range long {
		long[i] = 'a'
	}
	if _, err := Parse(string(long)); !errors.Is(err, ErrSyntax) {
		t.Fatalf("err = %v, want ErrSyntax", err)
	}
}

func TestRequestAsk(t *testing.T) {
	tests := []struct {
		name                      string
		job, node, socket, task   string
		nodes, tasks              uint32
		wantPerJob, wantPerNode   uint32
		wantPerSocket, wantPerTsk uint32
		wantType                  string
		wantTypes                 []string
		hasGPU                    bool
	}{
		{name: "gres", node: "gres:gpu:2", wantPerNode: 2, hasGPU: true},
		{name: "gres typed", node: "gres:gpu:k80:1", wantPerNode: 1, wantType: "k80", hasGPU: true},
		{name: "gpus", job: "gres:gpu:4", wantPerJob: 4, hasGPU: true},
		{name: "gpus per task", task: "gres:gpu:1", tasks: 4, wantPerTsk: 1, hasGPU: true},
		{name: "gpus per socket", socket: "gres:gpu:1", wantPerSocket: 1, hasGPU: true},
		{name: "typed job untyped task", job: "gres:gpu:v100:2", task: "gres:gpu:1", wantPerJob: 2, wantPerTsk: 1, wantType: "v100", hasGPU: true},
		{name: "two types", node: "gres:gpu:v100:1,gres:gpu:k80:1", wantPerNode: 2, wantTypes: []string{"v100", "k80"}, hasGPU: true},
		{name: "no gpu", node: "gres:nvme:1"},
		{name: "nothing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest(tc.job, tc.node, tc.socket, tc.task)
			if err != nil {
				t.Fatal(err)
			}
			if r.HasGPU() != tc.hasGPU {
				t.Fatalf("HasGPU = %v", r.HasGPU())
			}
			a := r.Ask(tc.nodes, tc.tasks)
			if a.PerJob != tc.wantPerJob || a.PerNode != tc.wantPerNode || a.PerSocket != tc.wantPerSocket || a.PerTask != tc.wantPerTsk {
				t.Errorf("counts = %+v", a)
			}
			if a.Type != tc.wantType || !reflect.DeepEqual(a.Types, tc.wantTypes) {
				t.Errorf("type = %q types = %v, want %q %v", a.Type, a.Types, tc.wantType, tc.wantTypes)
			}
			if a.Nodes != tc.nodes || a.Tasks != tc.tasks {
				t.Errorf("nodes/tasks = %d/%d", a.Nodes, a.Tasks)
			}
		})
	}
}

func TestParseRequestNamesField(t *testing.T) {
	_, err := ParseRequest("", "gres:gpu:x:y", "", "")
	if err == nil || !errors.Is(err, ErrSyntax) {
		t.Fatalf("err = %v", err)
	}
	if want := "tres_per_node: "; err.Error()[:len(want)] != want {
		t.Errorf("error %q does not name the field", err)
	}
}
