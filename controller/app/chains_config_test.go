package app

import (
	"reflect"
	"testing"
	"time"
)

func TestLoadConfigChains(t *testing.T) {
	path := t.TempDir() + "/c.conf"
	writeFile(t, path, "checkpoint_grace = 10s\nchain_mode = after_end\nchain_tick = 1s\nchain_checkpoint_lead = 15s\n"+
		"chain_margin = 5s\nchain_max_segments = 5\nchain_dev_partitions = debug, dev\nchain_auto = no\nchain_priority = 4294967000\n")
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Chains
	if ch.Mode != "after_end" || ch.Tick != time.Second || ch.CheckpointLead != 15*time.Second || ch.Margin != 5*time.Second ||
		ch.MaxSegments != 5 || !reflect.DeepEqual(ch.DevPartitions, []string{"debug", "dev"}) || ch.Auto || ch.Grace != 10*time.Second ||
		ch.Priority != 4294967000 {
		t.Fatalf("%+v", ch)
	}
	for _, bad := range []string{
		"chain_mode = later\n",
		"chain_checkpoint_lead = 30s\n", // not more than 10s tick + 60s grace
		"chain_max_segments = 1\n",
		"chain_priority = 0\n",
	} {
		writeFile(t, path, bad)
		if _, err := LoadConfig(path); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// With chains off, their settings are not held against the config.
	writeFile(t, path, "chains_off = true\nchain_checkpoint_lead = 30s\n")
	if _, err := LoadConfig(path); err != nil {
		t.Errorf("chains off: %v", err)
	}
}
