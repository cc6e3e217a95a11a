package slurm

import (
	"strings"
	"testing"
)

// TestShardBilling: fair share counts a shard as its fraction of a GPU only
// where GRES/shard weighs GRES/gpu over the shards per GPU; a partition
// that bills no GPUs, or bills them right, says nothing.
func TestShardBilling(t *testing.T) {
	t.Parallel()
	nodes := []Node{
		{Name: "v1", GPUs: map[string]int{"v100": 4}, Shards: 8},
		{Name: "k1", GPUs: map[string]int{"k80": 4}},
	}
	for _, c := range []struct {
		weights string
		want    string // in the one problem; "" none
	}{
		{"", ""},
		{"CPU=1.0,Mem=0.25G", ""},
		{"CPU=1.0,GRES/gpu=2.0,GRES/shard=1.0", ""},
		{"CPU=1.0,gres/gpu=2,gres/shard=1.005", ""},
		{"CPU=1.0,GRES/gpu=2.0", "counts a job on a shard as 0.00 of a GPU, not the 0.50 it is; GRES/shard=1 would"},
		{"CPU=1.0,GRES/gpu=2.0,GRES/shard=2.0", "as 1.00 of a GPU, not the 0.50"},
		{"GRES/gpu=2.0,GRES/gpu:v100=4,GRES/shard=1", "bills a v100 GPU 4 and one of its 2 shards 1"},
		{"GRES/gpu=2.0,GRES/gpu:v100=4,GRES/shard:v100=2", ""},
		{"CPU=x", "weight of CPU"},
	} {
		got := ShardBilling([]Partition{{Name: "gpu", Nodes: "v1,k1", BillingWeights: c.weights}}, nodes)
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%q: %v, want nothing", c.weights, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%q: %v, want one saying %q", c.weights, got, c.want)
		}
	}
}

// TestPartitionBillingWeights: both backends read TRESBillingWeights:
// scontrol's NAME=VALUE whose value holds '=' itself, slurmrestd's
// billing_weights (v0.0.38) and tres.billing_weights (v0.0.39 and later).
func TestPartitionBillingWeights(t *testing.T) {
	t.Parallel()
	const w = "CPU=1.0,GRES/gpu=2.0,GRES/shard=1.0"
	ps, err := ParsePartitions("PartitionName=gpu Default=YES MaxTime=UNLIMITED Nodes=v1 State=UP TRESBillingWeights=" + w + " TRES=cpu=4\n")
	if err != nil || len(ps) != 1 || ps[0].BillingWeights != w {
		t.Fatalf("scontrol: %+v %v", ps, err)
	}
	for _, body := range []string{
		`{"partitions":[{"name":"gpu","nodes":"v1","billing_weights":"` + w + `"}]}`,
		`{"partitions":[{"name":"gpu","nodes":{"configured":"v1"},"tres":{"billing_weights":"` + w + `","configured":"cpu=4"}}]}`,
	} {
		ps, err := ParseRestdPartitions([]byte(body))
		if err != nil || len(ps) != 1 || ps[0].BillingWeights != w {
			t.Errorf("slurmrestd %s: %+v %v", body, ps, err)
		}
	}
}

// TestNodeShardsPerGPU: the one reading of a node's shards per GPU
// (cluster.Snapshot and ShardBilling both call it): told only for a node
// of one GPU type whose shards divide evenly among its GPUs.
func TestNodeShardsPerGPU(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n   Node
		per int
		typ string
		ok  bool
	}{
		{Node{GPUs: map[string]int{"v100": 4}, Shards: 8}, 2, "v100", true},
		{Node{GPUs: map[string]int{"v100": 4}}, 0, "v100", true},
		{Node{GPUs: map[string]int{"v100": 4}, Shards: 6}, 0, "", false},
		{Node{GPUs: map[string]int{"v100": 2, "k80": 2}, Shards: 4}, 0, "", false},
		{Node{GPUs: map[string]int{"v100": 4, "k80": 0}, Shards: 8}, 2, "v100", true},
		{Node{}, 0, "", false},
	} {
		per, typ, ok := c.n.ShardsPerGPU()
		if per != c.per || typ != c.typ || ok != c.ok {
			t.Errorf("%+v: %d %q %v, want %d %q %v", c.n, per, typ, ok, c.per, c.typ, c.ok)
		}
	}
}
