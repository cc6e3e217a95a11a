package slurm

import (
	"reflect"
	"testing"
)

func TestParseSinfoNodes(t *testing.T) {
	// Captured from the dev cluster (Slurm 22.05.8), plus a node with two
	// GPU types and socket/IDX annotations holding commas.
	out := `node-k80                                gpu:k80:4,nvme:1                                                                gpu:k80:2(IDX:0-1),nvme:0                                                       mixed               gpu*
node-p100                               gpu:p100:4,nvme:1                                                               gpu:p100:0(IDX:N/A),nvme:0                                                      idle                gpu*
node-mix  gpu:a100:2(S:0),gpu:v100:2(S:1)  gpu:a100:1(IDX:0),gpu:v100:2(IDX:2,3)  allocated  gpu*
node-mix  gpu:a100:2(S:0),gpu:v100:2(S:1)  gpu:a100:1(IDX:0),gpu:v100:2(IDX:2,3)  allocated  debug
node-cpu  (null)  gpu:0  idle  cpu
`
	nodes, err := ParseSinfoNodes(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "node-cpu", State: "idle", Partitions: []string{"cpu"}, GPUs: map[string]int{}, GPUsUsed: map[string]int{"": 0}},
		{Name: "node-k80", State: "mixed", Partitions: []string{"gpu"}, GPUs: map[string]int{"k80": 4}, GPUsUsed: map[string]int{"k80": 2}},
		{Name: "node-mix", State: "allocated", Partitions: []string{"gpu", "debug"}, GPUs: map[string]int{"a100": 2, "v100": 2}, GPUsUsed: map[string]int{"a100": 1, "v100": 2}},
		{Name: "node-p100", State: "idle", Partitions: []string{"gpu"}, GPUs: map[string]int{"p100": 4}, GPUsUsed: map[string]int{"p100": 0}},
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Fatalf("got  %+v\nwant %+v", nodes, want)
	}
	if _, err := ParseSinfoNodes("node-x gpu:v100:x gpu:0 idle gpu\n"); err == nil {
		t.Fatal("bad gres accepted")
	}
	if _, err := ParseSinfoNodes("node-x gpu:v100:1\n"); err == nil {
		t.Fatal("short line accepted")
	}
}

func TestParsePartitions(t *testing.T) {
	out := `PartitionName=gpu AllowGroups=ALL Default=YES QoS=N/A DefaultTime=NONE MaxTime=2-00:00:00 Nodes=node-k80,node-p100,node-v100 State=UP
PartitionName=debug Default=NO DefaultTime=00:30:00 MaxTime=02:00:00 Nodes=node-k80
PartitionName=long Default=NO DefaultTime=1-00:00:00 MaxTime=UNLIMITED Nodes=ALL
`
	ps, err := ParsePartitions(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Partition{
		{Name: "gpu", Default: true, MaxTimeMin: 2880, Nodes: "node-k80,node-p100,node-v100"},
		{Name: "debug", MaxTimeMin: 120, DefaultTimeMin: 30, Nodes: "node-k80"},
		{Name: "long", DefaultTimeMin: 1440, Nodes: "ALL"},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("got %+v", ps)
	}
	if _, err := ParsePartitions("PartitionName=x MaxTime=soon\n"); err == nil {
		t.Fatal("bad MaxTime accepted")
	}
}

func TestParseAdminComment(t *testing.T) {
	out := "JobId=5 JobName=wrap\n   Priority=1 Nice=0\n   AdminComment=rota: gpu any->v100, time none->none (interim) [d=abc] \n   Comment=user\n"
	if got := ParseAdminComment(out); got != "rota: gpu any->v100, time none->none (interim) [d=abc]" {
		t.Fatalf("got %q", got)
	}
	if got := ParseAdminComment("JobId=5\n   AdminComment=(null)\n"); got != "" {
		t.Fatalf("got %q", got)
	}
}
