package placement

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

func reserve(r map[string]int, held map[string]int) func(*wire.PlaceState) {
	return func(s *wire.PlaceState) { s.Rule.InteractiveReserve, s.InteractiveHeld = r, held }
}

// The interactive rule, and the reserve as batch jobs see it. state():
// v100 2 of 4 free (speed 5), k80 8 of 8 free (speed 1).
func TestPlaceInteractive(t *testing.T) {
	t.Parallel()
	one := wire.GPUAsk{PerNode: 1}
	ia := func(g wire.GPUAsk) wire.PlaceRequest { return wire.PlaceRequest{NoScript: true, GPU: g} }
	full := []wire.Reservation{{Type: "v100", GPUs: 2}, {Type: "k80", GPUs: 8}}
	for _, c := range []struct {
		name     string
		mod      func(*wire.PlaceState)
		extra    []wire.Reservation
		req      wire.PlaceRequest
		wantType string
		want     *wire.Reservation
		reason   string // in the reason
	}{
		{"room now: the GPU training values least", nil, nil, ia(one), "k80",
			&wire.Reservation{Type: "k80", GPUs: 1, Interactive: true}, "training loses 1 GPUs of speed 1"},
		{"the reserve costs training nothing", reserve(map[string]int{"v100": 1}, nil), nil, ia(one), "v100",
			&wire.Reservation{Type: "v100", GPUs: 1, Interactive: true}, "training loses 0 GPUs"},
		{"a reserve interactive jobs hold already", reserve(map[string]int{"v100": 1}, map[string]int{"v100": 1}), nil, ia(one), "k80",
			&wire.Reservation{Type: "k80", GPUs: 1, Interactive: true}, ""},
		{"the placer's own interactive placements", reserve(map[string]int{"v100": 1}, nil), []wire.Reservation{{Type: "v100", GPUs: 1, Interactive: true}},
			ia(one), "k80", &wire.Reservation{Type: "k80", GPUs: 1, Interactive: true}, ""},
		{"a reserve smaller than the job", reserve(map[string]int{"v100": 1}, nil), nil, ia(wire.GPUAsk{PerNode: 2}), "k80",
			&wire.Reservation{Type: "k80", GPUs: 2, Interactive: true}, ""}, // loses 1x5 on v100, 2x1 on k80
		{"only one type has room", nil, []wire.Reservation{{Type: "k80", GPUs: 8}}, ia(one), "v100",
			&wire.Reservation{Type: "v100", GPUs: 1, Interactive: true}, ""},
		{"no room anywhere: untyped, any GPU that frees", nil, full, ia(one), "", nil, "left untyped"},
		{"no room, types limited: where a GPU frees first", func(s *wire.PlaceState) {
			s.Slots = map[string][]float64{"v100": {300, 900}, "k80": {600, 700}}
		}, full, wire.PlaceRequest{NoScript: true, GPU: one, Hints: wire.Hints{Types: []string{"v100", "k80"}}}, "v100",
			&wire.Reservation{Type: "v100", GPUs: 1, Interactive: true}, "soonest"},
		{"user's type kept", nil, nil, ia(wire.GPUAsk{PerNode: 1, Type: "v100"}), "", nil, "type kept"},
		{"no type holds it", nil, nil, ia(wire.GPUAsk{PerNode: 5}), "", nil, "left as asked"},
		{"--rota-kind=interactive on a batch script", nil, nil,
			wire.PlaceRequest{GPU: one, Hints: wire.Hints{Kind: wire.KindInteractive}}, "k80",
			&wire.Reservation{Type: "k80", GPUs: 1, Interactive: true}, "interactive job (--rota-kind=interactive)"},
		// Batch jobs under the same state: the reserve is not theirs.
		{"batch: the reserve is left out", reserve(map[string]int{"v100": 2}, nil), nil, wire.PlaceRequest{GPU: one}, "k80",
			&wire.Reservation{Type: "k80", GPUs: 1}, "k80 has the most free GPUs"},
		{"batch: a reserve in use by interactive jobs", reserve(map[string]int{"v100": 2}, map[string]int{"v100": 2}), nil,
			wire.PlaceRequest{GPU: one}, "v100", &wire.Reservation{Type: "v100", GPUs: 1}, ""},
		{"batch: where it finishes first, past the reserve", func(s *wire.PlaceState) {
			reserve(map[string]int{"v100": 2}, nil)(s)
			s.Slots = map[string][]float64{"v100": {0, 0, 5000, 6000}, "k80": {0, 0, 0, 0, 0, 0, 0, 0}}
		}, nil, wire.PlaceRequest{GPU: one, Hints: wire.Hints{Steps: 1000, Throughput: map[string]float64{"v100": 5, "k80": 1}}}, "k80",
			&wire.Reservation{Type: "k80", GPUs: 1, FinishS: 1000}, ""},
		// No room for batch anywhere; a reserved v100 is free: Slurm would
		// start a job waiting for v100 on it, so it waits for the k80.
		{"batch: no room, not where the reserve is free", reserve(map[string]int{"v100": 1}, nil),
			[]wire.Reservation{{Type: "v100", GPUs: 1}, {Type: "k80", GPUs: 8}}, wire.PlaceRequest{GPU: one}, "k80",
			&wire.Reservation{Type: "k80", GPUs: 1}, "no type has 1 GPUs free now; k80 has the most capacity"},
		{"batch: no room, the reserve in use", reserve(map[string]int{"v100": 1}, map[string]int{"v100": 1}),
			[]wire.Reservation{{Type: "v100", GPUs: 1}, {Type: "k80", GPUs: 8}}, wire.PlaceRequest{GPU: one}, "v100",
			&wire.Reservation{Type: "v100", GPUs: 1}, ""},
		{"batch: finishing first would wait where the reserve is free", func(s *wire.PlaceState) {
			reserve(map[string]int{"v100": 1}, nil)(s)
			s.Slots = map[string][]float64{"v100": {0, 100, 200, 300}, "k80": {4000, 5000}}
		}, nil, wire.PlaceRequest{GPU: one, Hints: wire.Hints{Steps: 1000, Throughput: map[string]float64{"v100": 5, "k80": 1}}}, "k80",
			&wire.Reservation{Type: "k80", GPUs: 1, FinishS: 5000}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := state()
			if c.mod != nil {
				c.mod(s)
			}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			res := Place(s, c.extra, &c.req)
			if res.GPUType != c.wantType || !reflect.DeepEqual(res.Reserve, c.want) || !strings.Contains(res.Reason, c.reason) {
				t.Fatalf("got %q %+v (%s), want %q %+v with %q", res.GPUType, res.Reserve, res.Reason, c.wantType, c.want, c.reason)
			}
			if d := Decide(s, c.extra, &c.req); d.GPUType != res.GPUType || !reflect.DeepEqual(d.Reserve, res.Reserve) {
				t.Fatalf("Decide %q %+v differs from Place %q %+v", d.GPUType, d.Reserve, res.GPUType, res.Reserve)
			}
			if c.req.Hints.Kind != wire.KindBatch && (c.req.NoScript || c.req.Hints.Kind != "") && (res.Kind != wire.KindInteractive || res.TimeLimitMin != 0) {
				t.Fatalf("kind %q, time limit %d: an interactive job gets no walltime", res.Kind, res.TimeLimitMin)
			}
		})
	}
}

// An interactive placement applied to the controller's state counts
// against the reserve, as one in a plugin's view does.
func TestApplyInteractive(t *testing.T) {
	t.Parallel()
	s := state()
	s.Rule.InteractiveReserve = map[string]int{"v100": 1}
	req := wire.PlaceRequest{NoScript: true, GPU: wire.GPUAsk{PerNode: 1}}
	first := Place(s, nil, &req)
	if first.GPUType != "v100" {
		t.Fatalf("first session on %q, want the reserved v100", first.GPUType)
	}
	Apply(s, *first.Reserve)
	if s.InteractiveHeld["v100"] != 1 || s.Reserved["v100"] != 1 {
		t.Fatalf("held %v reserved %v", s.InteractiveHeld, s.Reserved)
	}
	if second := Place(s, nil, &req); second.GPUType != "k80" {
		t.Fatalf("second session on %q, want k80 (the reserve is in use)", second.GPUType)
	}
	// A batch job sees the v100 left free: the reserve is in use.
	if b := Place(s, nil, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}); b.GPUType != "k80" || b.Numbers["free.v100"] != 1 {
		t.Fatalf("batch on %q with %v free v100s, want k80 and 1", b.GPUType, b.Numbers["free.v100"])
	}
}

func TestCheckRejectsBadReserve(t *testing.T) {
	t.Parallel()
	for _, mod := range []func(*wire.PlaceState){
		reserve(map[string]int{"v100": -1}, nil),
		reserve(nil, map[string]int{"k80": -2}),
	} {
		s := state()
		mod(s)
		if err := s.Check(); err == nil {
			t.Errorf("state %+v %+v accepted", s.Rule.InteractiveReserve, s.InteractiveHeld)
		}
	}
}
