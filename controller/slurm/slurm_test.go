package slurm

import (
	"maps"
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
		{Name: "gpu", Default: true, MaxTimeMin: 2880, Nodes: "node-k80,node-p100,node-v100", State: "UP"},
		{Name: "debug", MaxTimeMin: 120, DefaultTimeMin: 30, Nodes: "node-k80"},
		{Name: "long", DefaultTimeMin: 1440, Nodes: "ALL"},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("got %+v", ps)
	}
	for _, bad := range []string{"MaxTime=soon", "MaxNodes=-1", "MaxCPUsPerNode=many", "MaxMemPerNode=12Q", "TotalNodes=1e3"} {
		if _, err := ParsePartitions("PartitionName=x " + bad + "\n"); err == nil {
			t.Errorf("%s accepted", bad)
		}
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

func TestParsePartitionLimits(t *testing.T) {
	// Captured on the dev cluster (scripts/dev-cluster), debug partition
	// created with scontrol create.
	out := `PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=NO QoS=N/A DefaultTime=00:10:00 DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=1 MaxTime=00:30:00 MinNodes=1 LLN=NO MaxCPUsPerNode=8 Nodes=node-k80,node-v100 PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=32 TotalNodes=2 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED TRES=cpu=32,mem=32000M,node=2,billing=32
PartitionName=big MaxNodes=UNLIMITED MaxTime=UNLIMITED State=DRAIN MaxMemPerCPU=4000 MaxCPUsPerNode=UNLIMITED TotalNodes=100 TotalCPUs=12800 Nodes=c[001-100]
`
	ps, err := ParsePartitions(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Partition{
		{Name: "debug", MaxTimeMin: 30, DefaultTimeMin: 10, Nodes: "node-k80,node-v100", State: "UP", MaxNodes: 1, MinNodes: 1,
			MaxCPUsPerNode: 8, TotalNodes: 2, TotalCPUs: 32},
		{Name: "big", Nodes: "c[001-100]", State: "DRAIN", MaxMemPerCPUMB: 4000, TotalNodes: 100, TotalCPUs: 12800},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("got  %+v\nwant %+v", ps, want)
	}
}

func TestParseNodeDetails(t *testing.T) {
	// The first line as the dev cluster prints it (OS= holds blanks);
	// the second an older Slurm without CPUEfctv, down with a reason.
	out := `NodeName=node-k80 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=1.54 AvailableFeatures=k80 ActiveFeatures=k80 Gres=gpu:k80:4,nvme:1 NodeAddr=127.0.0.1 NodeHostName=vm Port=27820 Version=22.05.8 OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=16000 AllocMem=0 FreeMem=15286 Sockets=16 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu,debug  BootTime=2026-11-22T03:17:50
NodeName=g01 CPUTot=64 RealMemory=512000 Gres=gpu:a100:4(S:0-1) State=DOWN+DRAIN Reason=Not responding [slurm@2026-01-01T00:00:00] Partitions=gpu-a100 AvailableFeatures=(null)
`
	nodes, err := ParseNodeDetails(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []NodeDetail{
		{Name: "g01", State: "down+drain", CPUs: 64, RealMemoryMB: 512000, GPUs: map[string]int{"a100": 4}, Partitions: []string{"gpu-a100"}},
		{Name: "node-k80", State: "idle", CPUs: 16, RealMemoryMB: 16000, GPUs: map[string]int{"k80": 4}, Partitions: []string{"gpu", "debug"}, Features: []string{"k80"}},
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Fatalf("got  %+v\nwant %+v", nodes, want)
	}
	for _, bad := range []string{"CPUTot=16", "NodeName=x CPUTot=lots", "NodeName=x RealMemory=1e9", "NodeName=x Gres=gpu:v100:x"} {
		if _, err := ParseNodeDetails(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Active reservations' nodes are marked reserved (MAGNETIC ones and ones
// not yet started are not); a node list is expanded.
func TestParseReservedNodes(t *testing.T) {
	t.Parallel()
	out := `ReservationName=maint StartTime=2026-12-06T05:18:01 EndTime=2026-12-06T05:23:01 Duration=00:05:00 Nodes=gpu-[01-02],k80a NodeCnt=3 CoreCnt=48 Features=(null) PartitionName=(null) Flags=IGNORE_JOBS,SPEC_NODES TRES=cpu=48 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
ReservationName=later StartTime=2030-01-01T00:00:00 EndTime=2030-01-02T00:00:00 Duration=1-00:00:00 Nodes=gpu-03 NodeCnt=1 CoreCnt=16 Features=(null) PartitionName=(null) Flags=SPEC_NODES TRES=cpu=16 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
ReservationName=mag StartTime=2026-12-06T05:18:01 EndTime=2026-12-06T05:23:01 Duration=00:05:00 Nodes=gpu-04 NodeCnt=1 CoreCnt=16 Features=(null) PartitionName=(null) Flags=MAGNETIC,SPEC_NODES TRES=cpu=16 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
`
	got, err := ParseReservedNodes(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"gpu-01": true, "gpu-02": true, "k80a": true}
	if !maps.Equal(got, want) {
		t.Fatalf("reserved %v, want %v", got, want)
	}
	if got, err := ParseReservedNodes("No reservations in the system\n"); err != nil || len(got) != 0 {
		t.Fatalf("none: %v %v", got, err)
	}
	if _, err := ParseReservedNodes("garbage here\n"); err == nil {
		t.Fatal("a line without ReservationName was read")
	}
	nodes := MarkReserved([]Node{{Name: "gpu-01", State: "mixed"}, {Name: "gpu-05", State: "idle"}}, got)
	if nodes[0].State != "mixed+reserved" || nodes[1].State != "idle" {
		t.Fatalf("marked %+v", nodes)
	}
}

// NodeGres: a GPU that holds shards of some job is in use; shards count
// on the node's one GPU type, never past its GPUs, and on a node of
// several types on none.
func TestNodeGres(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, gres, used string
		want             map[string]int // used
	}{
		{"no shards", "gpu:v100:4,nvme:1", "gpu:v100:1(IDX:0),nvme:0", map[string]int{"v100": 1}},
		{"22.05's form: the GPUs holding shards", "gpu:v100:4,shard:8", "gpu:v100:0(IDX:N/A),shard:(null):1(IDX:0)", map[string]int{"v100": 1}},
		{"24.11's form", "gpu:v100:4,shard:8", "gpu:v100:0(IDX:N/A),shard:(null):2(1/2,1/2,0/2,0/2)", map[string]int{"v100": 2}},
		{"shards on two GPUs beside one whole", "gpu:v100:4,shard:8,nvme:1", "gpu:v100:1(IDX:3),shard:3(2/2,1/2,0/2,-/2),nvme:0", map[string]int{"v100": 3}},
		{"shards listed, none in use", "gpu:v100:4,shard:8", "gpu:v100:0(IDX:N/A),shard:0(0/2,0/2,0/2,0/2)", map[string]int{"v100": 0}},
		{"typed shards, gres/ prefix", "gres/gpu:v100:4,gres/shard:v100:8", "gres/gpu:v100:0(IDX:N/A),gres/shard:v100:1(0/2,1/2,0/2,0/2)", map[string]int{"v100": 1}},
		{"no list: each shard a GPU", "gpu:v100:4,shard:8", "gpu:v100:1(IDX:0),shard:2", map[string]int{"v100": 3}},
		{"no list: never past the node's GPUs", "gpu:v100:4,shard:8", "gpu:v100:3(IDX:0-2),shard:5", map[string]int{"v100": 4}},
		{"two types: shards on neither", "gpu:a100:2,gpu:v100:2,shard:8", "gpu:a100:0(IDX:N/A),gpu:v100:0(IDX:N/A),shard:1(1/2,0/2,0/2,0/2)", map[string]int{"a100": 0, "v100": 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, used, err := NodeGres(c.gres, c.used)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(used, c.want) {
				t.Errorf("used %v, want %v", used, c.want)
			}
		})
	}
}

// NodeShards reads the shards a node's Gres offers, in sinfo's and
// slurmrestd's forms.
func TestNodeShards(t *testing.T) {
	t.Parallel()
	for gres, want := range map[string]int{
		"gpu:v100:4,nvme:1":                     0,
		"gpu:v100:4,nvme:1,shard:v100:8":        8,
		"gpu:v100:4(S:0-1),shard:v100:8(S:0-1)": 8,
		"gres/gpu:v100:4,gres/shard:8":          8,
		"(null)":                                0,
		"gpu:v100:4,shard:v 100:8":              0, // unreadable: none
	} {
		if got := NodeShards(gres); got != want {
			t.Errorf("NodeShards(%q) = %d, want %d", gres, got, want)
		}
	}
}
