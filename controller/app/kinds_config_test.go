package app

import (
	"reflect"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

func TestLoadConfigKinds(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/c.conf"
	writeFile(t, path, "interactive_partitions = interactive, debug\ninteractive_names = jupyter-*, ood-*\n"+
		"serve_accounts = inference\nserve_qos = serve\n")
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := wire.KindRules{
		Interactive: wire.KindMatch{Partitions: []string{"interactive", "debug"}, Names: []string{"jupyter-*", "ood-*"}},
		Serve:       wire.KindMatch{Accounts: []string{"inference"}, QOS: []string{"serve"}},
	}
	if !reflect.DeepEqual(c.Placement.Kinds, want) || !reflect.DeepEqual(c.Placement.Rule().Kinds, want) {
		t.Fatalf("%+v", c.Placement.Kinds)
	}
	writeFile(t, path, "serve_names = llm-[\n")
	if _, err := LoadConfig(path); err == nil {
		t.Fatal("a broken name pattern accepted")
	}
}
