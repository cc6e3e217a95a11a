package placement

import (
	"testing"

	"github.com/rota-hpc/rota/wire"
)

func TestKindOf(t *testing.T) {
	t.Parallel()
	rules := &wire.KindRules{
		Interactive: wire.KindMatch{Partitions: []string{"interactive"}, QOS: []string{"debug"}, Names: []string{"jupyter-*", "ood-*"}},
		Serve:       wire.KindMatch{Accounts: []string{"inference"}},
	}
	for _, c := range []struct {
		name string
		req  wire.PlaceRequest
		want string
	}{
		{"a batch script", wire.PlaceRequest{Partition: "gpu", Name: "train"}, wire.KindBatch},
		{"salloc or srun", wire.PlaceRequest{Partition: "gpu", NoScript: true}, wire.KindInteractive},
		{"the user says batch", wire.PlaceRequest{NoScript: true, Hints: wire.Hints{Kind: wire.KindBatch}}, wire.KindBatch},
		{"the user says serve", wire.PlaceRequest{Partition: "interactive", Hints: wire.Hints{Kind: wire.KindServe}}, wire.KindServe},
		{"one of several partitions", wire.PlaceRequest{Partition: "gpu,interactive"}, wire.KindInteractive},
		{"QOS", wire.PlaceRequest{QOS: "debug"}, wire.KindInteractive},
		{"a portal's job name", wire.PlaceRequest{Name: "jupyter-alice"}, wire.KindInteractive},
		{"a name the pattern does not cover", wire.PlaceRequest{Name: "my-jupyter"}, wire.KindBatch},
		{"serve rules first", wire.PlaceRequest{Account: "inference", Partition: "interactive"}, wire.KindServe},
		{"no rules", wire.PlaceRequest{}, wire.KindBatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, why := KindOf(&c.req, rules)
			if got != c.want || (got != wire.KindBatch && why == "") {
				t.Fatalf("KindOf = %q (%q), want %q", got, why, c.want)
			}
		})
	}
	if k, _ := KindOf(&wire.PlaceRequest{Name: "jupyter-x"}, nil); k != wire.KindBatch {
		t.Fatalf("nil rules: %q", k)
	}
}

func TestCheckKindRules(t *testing.T) {
	t.Parallel()
	if err := CheckKindRules(wire.KindRules{Serve: wire.KindMatch{Names: []string{"llm-[a-z*"}}}); err == nil {
		t.Fatal("a broken pattern accepted")
	}
	if err := CheckKindRules(wire.KindRules{Interactive: wire.KindMatch{Names: []string{"ood-*", "sys/dashboard*"}}}); err != nil {
		t.Fatal(err)
	}
}

// The rule says in its reason why a job is not a batch job, and keeps
// the kind in its result for the reply and the decision record.
func TestPlaceCarriesKind(t *testing.T) {
	t.Parallel()
	s := state()
	res := Place(s, nil, &wire.PlaceRequest{NoScript: true, GPU: wire.GPUAsk{PerNode: 1}})
	if res.Kind != wire.KindInteractive || res.Reason == "" {
		t.Fatalf("%+v", res)
	}
	if res := Place(s, nil, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}); res.Kind != "" {
		t.Fatalf("batch job got kind %q", res.Kind)
	}
}

// A service replica keeps its type open and its time limit, and a named
// one is held for the controller to spread it (docs/serve.md).
func TestPlaceServe(t *testing.T) {
	t.Parallel()
	s := state()
	s.Rule.ServeHoldS = 30
	for _, c := range []struct {
		name string
		req  wire.PlaceRequest
		hold uint32
	}{
		{"named service", wire.PlaceRequest{TimeLimitMin: 60, GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Kind: wire.KindServe, Service: "llm"}}, 30},
		{"unnamed service", wire.PlaceRequest{TimeLimitMin: 60, GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Kind: wire.KindServe}}, 0},
		{"an update", wire.PlaceRequest{Modify: true, TimeLimitMin: 60, GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Kind: wire.KindServe, Service: "llm"}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := Place(s, nil, &c.req)
			if res.Kind != wire.KindServe || res.GPUType != "" || res.TimeLimitMin != 0 || res.Reserve != nil || res.HoldS != c.hold || res.Reason == "" {
				t.Fatalf("%+v", res)
			}
			if d := Decide(s, nil, &c.req); d.HoldS != c.hold || d.GPUType != "" {
				t.Fatalf("Decide differs from Place: %+v", d)
			}
		})
	}
}
