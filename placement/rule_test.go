package placement

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rota-hpc/rota/wire"
)

func state() *wire.PlaceState {
	return &wire.PlaceState{V: wire.Version, Rule: wire.PlaceRule{Speed: map[string]float64{"v100": 5, "k80": 1}, WalltimeMargin: 1.5, WalltimeOverheadMin: 5},
		Cluster: &wire.ClusterView{
			Types: map[string]wire.TypeView{
				"v100": {Nodes: 1, Total: 4, Used: 2, MaxPerNode: 4, Partitions: []string{"gpu"}},
				"k80":  {Nodes: 2, Total: 8, Used: 0, MaxPerNode: 4, Partitions: []string{"gpu"}},
			},
			Partitions: map[string]wire.PartitionView{"gpu": {MaxTimeMin: 120}}, DefaultPartition: "gpu"},
		Reserved: map[string]int{}}
}

// roomFor gives uid 7 (default account lab) v100s left under its
// default QOS.
func roomFor(v100 int) func(*wire.PlaceState) {
	return func(s *wire.PlaceState) {
		s.Headroom = map[uint32]wire.UserHeadroom{7: {DefaultAccount: "lab",
			Left: map[string]map[string]int{"lab/": {"v100": v100}},
			Why:  map[string]map[string]string{"lab/": {"v100": "QOS lim MaxTRESPerUser gres/gpu:v100=1"}}}}
	}
}

// learnt has the controller have measured uid 7's job "lm": barely
// faster on a v100 (1.2 steps/s) than on a k80 (1).
func learnt(s *wire.PlaceState) {
	s.Learned = map[string]map[string]float64{wire.LearnedKey(7, "lm"): {"v100": 1.2, "k80": 1}}
}

func TestPlace(t *testing.T) {
	one := wire.GPUAsk{PerNode: 1}
	for _, tc := range []struct {
		name     string
		mod      func(*wire.PlaceState)
		extra    []wire.Reservation
		req      wire.PlaceRequest
		wantType string
		wantTime uint32
		reserve  *wire.Reservation
	}{
		// v100: 2 free x 5 = 10 beats k80: 8 x 1.
		{"fastest free wins", nil, nil, wire.PlaceRequest{GPU: one}, "v100", 0, &wire.Reservation{Type: "v100", GPUs: 1}},
		{"state reservations count", func(s *wire.PlaceState) { s.Reserved["v100"] = 1 }, nil, wire.PlaceRequest{GPU: one}, "k80", 0, &wire.Reservation{Type: "k80", GPUs: 1}},
		{"caller's own reservations count", nil, []wire.Reservation{{Type: "v100", GPUs: 1}}, wire.PlaceRequest{GPU: one}, "k80", 0, &wire.Reservation{Type: "k80", GPUs: 1}},
		{"no room: most capacity by speed", nil, []wire.Reservation{{Type: "v100", GPUs: 2}, {Type: "k80", GPUs: 8}}, wire.PlaceRequest{GPU: one}, "v100", 0, &wire.Reservation{Type: "v100", GPUs: 1}},
		{"no view keeps", func(s *wire.PlaceState) { s.Cluster = nil }, nil, wire.PlaceRequest{GPU: one}, "", 0, nil},
		{"typed kept", nil, nil, wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1, Type: "k80"}}, "", 0, nil},
		{"walltime from hints, capped by partition", nil, nil,
			wire.PlaceRequest{GPU: one, Hints: wire.Hints{Steps: 36000, Throughput: map[string]float64{"v100": 1}}}, "v100", 120, &wire.Reservation{Type: "v100", GPUs: 1}},
		{"walltime scaled by speed", nil, nil,
			wire.PlaceRequest{GPU: one, Hints: wire.Hints{Steps: 3600, Throughput: map[string]float64{"k80": 1}}}, "v100", 23, &wire.Reservation{Type: "v100", GPUs: 1}},
		{"too big for any type", nil, nil, wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 5}}, "", 0, nil},
		// Typed limits: uid 7's QOS leaves no v100 (account lab, default QOS).
		{"limit leaves the fastest out", roomFor(0), nil, wire.PlaceRequest{UID: 7, GPU: one}, "k80", 0,
			&wire.Reservation{Type: "k80", GPUs: 1, UID: 7, Room: "lab/"}},
		{"room enough", roomFor(1), nil, wire.PlaceRequest{UID: 7, GPU: one}, "v100", 0,
			&wire.Reservation{Type: "v100", GPUs: 1, UID: 7, Room: "lab/"}},
		{"own placements take the room", roomFor(1), []wire.Reservation{{Type: "v100", GPUs: 1, UID: 7, Room: "lab/"}},
			wire.PlaceRequest{UID: 7, GPU: one}, "k80", 0, &wire.Reservation{Type: "k80", GPUs: 1, UID: 7, Room: "lab/"}},
		{"another user's limit", roomFor(0), nil, wire.PlaceRequest{UID: 8, GPU: one}, "v100", 0, &wire.Reservation{Type: "v100", GPUs: 1}},
		{"another QOS", roomFor(0), nil, wire.PlaceRequest{UID: 7, QOS: "big", GPU: one}, "v100", 0,
			&wire.Reservation{Type: "v100", GPUs: 1, UID: 7, Room: "lab/big"}},
		{"every type at a limit: waits at one", func(s *wire.PlaceState) {
			roomFor(0)(s)
			s.Headroom[7].Left["lab/"]["k80"] = 0
		}, nil, wire.PlaceRequest{UID: 7, GPU: one}, "v100", 0, &wire.Reservation{Type: "v100", GPUs: 1, UID: 7, Room: "lab/"}},
		// The types the user allows: --rota-types, a constraint of
		// alternatives, or both.
		{"--rota-types leaves the fastest out", nil, nil, wire.PlaceRequest{GPU: one, Hints: wire.Hints{Types: []string{"k80"}}}, "k80", 0,
			&wire.Reservation{Type: "k80", GPUs: 1}},
		{"constraint of alternatives is a choice", nil, nil, wire.PlaceRequest{GPU: one, Features: "k80|v100"}, "v100", 0,
			&wire.Reservation{Type: "v100", GPUs: 1}},
		{"both: what both allow", nil, nil, wire.PlaceRequest{GPU: one, Features: "k80|v100", Hints: wire.Hints{Types: []string{"k80", "p100"}}}, "k80", 0,
			&wire.Reservation{Type: "k80", GPUs: 1}},
		{"no allowed type here: kept", nil, nil, wire.PlaceRequest{GPU: one, Hints: wire.Hints{Types: []string{"a100"}}}, "", 0, nil},
		{"constraint naming one type: kept", nil, nil, wire.PlaceRequest{GPU: one, Features: "k80"}, "", 0, nil},
		// Speeds learned for the user's job of that name stand for a
		// hint: v100 2 free x 1.2 = 2.4 loses to k80 8 x 1.
		{"learned speeds place a job without hints", learnt, nil, wire.PlaceRequest{UID: 7, Name: "lm", GPU: one}, "k80", 0,
			&wire.Reservation{Type: "k80", GPUs: 1}},
		{"learned for another user", learnt, nil, wire.PlaceRequest{UID: 8, Name: "lm", GPU: one}, "v100", 0,
			&wire.Reservation{Type: "v100", GPUs: 1}},
		{"learned for another name", learnt, nil, wire.PlaceRequest{UID: 7, Name: "cnn", GPU: one}, "v100", 0,
			&wire.Reservation{Type: "v100", GPUs: 1}},
		{"the user's hint over what was learned", learnt, nil,
			wire.PlaceRequest{UID: 7, Name: "lm", GPU: one, Hints: wire.Hints{Throughput: map[string]float64{"v100": 5, "k80": 1}}}, "v100", 0,
			&wire.Reservation{Type: "v100", GPUs: 1}},
		{"learned on one type: the speed table for the rest", func(s *wire.PlaceState) {
			s.Learned = map[string]map[string]float64{wire.LearnedKey(7, "lm"): {"k80": 1}}
		}, nil, wire.PlaceRequest{UID: 7, Name: "lm", GPU: one}, "v100", 0, &wire.Reservation{Type: "v100", GPUs: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := state()
			if tc.mod != nil {
				tc.mod(s)
			}
			before, _ := json.Marshal(s)
			extraBefore := slices.Clone(tc.extra)
			reqBefore, _ := json.Marshal(tc.req)
			res := Place(s, tc.extra, &tc.req)
			if after, _ := json.Marshal(tc.req); string(after) != string(reqBefore) {
				t.Fatalf("Place changed the request: %s", after)
			}
			if res.GPUType != tc.wantType || res.TimeLimitMin != tc.wantTime || !reflect.DeepEqual(res.Reserve, tc.reserve) {
				t.Fatalf("got type %q time %d reserve %+v (%s), want %q %d %+v", res.GPUType, res.TimeLimitMin, res.Reserve, res.Reason, tc.wantType, tc.wantTime, tc.reserve)
			}
			// Decide, the plugin's fast path, decides the same.
			if d := Decide(s, tc.extra, &tc.req); d.GPUType != res.GPUType || d.TimeLimitMin != res.TimeLimitMin ||
				d.ByFeature != res.ByFeature || !reflect.DeepEqual(d.Reserve, res.Reserve) || d.Numbers != nil {
				t.Fatalf("Decide gave %+v, Place %+v", d, res)
			}
			// Pure: neither the state nor the caller's reservations change.
			after, _ := json.Marshal(s)
			if string(before) != string(after) {
				t.Fatalf("Place changed the state:\n%s\n%s", before, after)
			}
			if len(tc.extra) > 0 && !reflect.DeepEqual(extraBefore, tc.extra) {
				t.Fatalf("Place changed extra: %v", tc.extra)
			}
		})
	}
}

// A View kept up to date with Add decides as Decide does from the whole
// list of reservations, and as a state with the reservations applied
// (Apply: what the controller's next state will hold), booked slots
// included; and leaves the state as it was. The plugin relies on all three
// being the same decision.
func TestViewAddMatchesList(t *testing.T) {
	s := state()
	s.Cluster.Types["v100"] = wire.TypeView{Nodes: 2, Total: 8, Used: 1, MaxPerNode: 4, Partitions: []string{"gpu"}}
	s.Slots = map[string][]float64{"v100": {0, 0, 0, 0, 0, 0, 0, 600}, "k80": {0, 0, 0, 0, 0, 0, 0, 0}}
	before, _ := json.Marshal(s)
	reqs := []wire.PlaceRequest{
		{GPU: wire.GPUAsk{PerNode: 1}},
		{GPU: wire.GPUAsk{PerNode: 2}},
		{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Steps: 6000, Throughput: map[string]float64{"k80": 2}}},
		{GPU: wire.GPUAsk{PerJob: 3}, Hints: wire.Hints{Steps: 90000, Throughput: map[string]float64{"v100": 20}}},
	}
	v := NewView(s, nil)
	var applied wire.PlaceState
	if err := json.Unmarshal(before, &applied); err != nil {
		t.Fatal(err)
	}
	var list []wire.Reservation
	types := map[string]int{}
	for i := range 40 {
		req := &reqs[i%len(reqs)]
		want := Decide(&applied, nil, req)
		got, fromList := v.Decide(req), Decide(s, list, req)
		for _, g := range []Result{got, fromList} {
			if g.GPUType != want.GPUType || g.TimeLimitMin != want.TimeLimitMin || !reflect.DeepEqual(g.Reserve, want.Reserve) {
				t.Fatalf("placement %d: view decided %+v, the list %+v, the applied state %+v", i, got, fromList, want)
			}
		}
		if got.Reserve != nil {
			v.Add(*got.Reserve)
			Apply(&applied, *got.Reserve)
			list = append(list, *got.Reserve)
			types[got.Reserve.Type]++
		}
	}
	if len(types) < 2 {
		t.Fatalf("every placement went to %v: the test no longer exercises the counting", types)
	}
	if after, _ := json.Marshal(s); string(after) != string(before) {
		t.Fatalf("Add changed the state:\n%s\n%s", before, after)
	}
}

// Before the first state there is nothing to decide from: the request is
// kept, whatever the caller's own reservations.
func TestNoStateKeeps(t *testing.T) {
	extra := []wire.Reservation{{Type: "v100", GPUs: 1, FinishS: 60}}
	for _, res := range []Result{Place(nil, extra, &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}}),
		NewView(nil, extra).Decide(&wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}})} {
		if res.GPUType != "" || res.Reserve != nil {
			t.Fatalf("decided %+v without a state", res)
		}
	}
}

// A clone decides as its original would, and Adds to it leave the
// original as it was: the plugin decides ahead on a clone while the
// original keeps counting the placements actually made.
func TestViewClone(t *testing.T) {
	s := state()
	s.Slots = map[string][]float64{"v100": {0, 0, 0, 600}, "k80": {0, 0, 0, 0}}
	req := &wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 1}, Hints: wire.Hints{Steps: 6000, Throughput: map[string]float64{"k80": 2}}}
	v := NewView(s, []wire.Reservation{{Type: "v100", GPUs: 1, FinishS: 100}})
	c := v.Clone()
	var ahead []Result
	for range 6 {
		r := c.Decide(req)
		if r.Reserve == nil {
			t.Fatalf("clone placed nothing: %+v", r)
		}
		ahead = append(ahead, r)
		c.Add(*r.Reserve)
	}
	for i, want := range ahead {
		got := v.Decide(req)
		if !reflect.DeepEqual(got.Reserve, want.Reserve) || got.GPUType != want.GPUType {
			t.Fatalf("placement %d: original decided %+v after the clone's Adds, clone %+v", i, got, want)
		}
		v.Add(*got.Reserve)
	}
	if ahead[0].Reserve.Type == ahead[len(ahead)-1].Reserve.Type && ahead[0].Reserve.FinishS == ahead[len(ahead)-1].Reserve.FinishS {
		t.Fatalf("every decision ahead was the same (%+v): the test no longer exercises the counting", ahead[0])
	}
}

// rota explain says which types the user allowed, or why none could do.
func TestPlaceSaysWhatTheUserAllows(t *testing.T) {
	t.Parallel()
	one := wire.GPUAsk{PerNode: 1}
	for _, tc := range []struct {
		req  wire.PlaceRequest
		want string
	}{
		{wire.PlaceRequest{GPU: one, Hints: wire.Hints{Types: []string{"k80"}}},
			"chosen among the types the user allows (k80: k80 (--rota-types))"},
		{wire.PlaceRequest{GPU: one, Features: "k80|v100"},
			"chosen among the types the user allows (k80,v100: k80|v100 (constraint))"},
		{wire.PlaceRequest{GPU: one, Features: "k80|v100", Hints: wire.Hints{Types: []string{"p100"}}},
			"none of the GPU types the user allows (none in common: p100 (--rota-types) and k80|v100 (constraint)) can hold the job as asked; left as asked"},
	} {
		res := Place(state(), nil, &tc.req)
		if !strings.Contains(res.Reason, tc.want) {
			t.Errorf("%+v: reason %q, want it to say %q", tc.req, res.Reason, tc.want)
		}
	}
}

// With a multi-cluster manager (ElsewhereHoldS), a job whose allowed
// types are on no node here is held for it; one whose types are here but
// busy or too small is not.
func TestPlaceHoldsForAnotherCluster(t *testing.T) {
	t.Parallel()
	one := wire.GPUAsk{PerNode: 1}
	for _, tc := range []struct {
		name  string
		req   wire.PlaceRequest
		holdS uint32
		hold  uint32
		want  string
	}{
		{"type only elsewhere", wire.PlaceRequest{GPU: one, Hints: wire.Hints{Types: []string{"p100"}}}, 60, 60,
			"is on this cluster; held up to 60 s for another cluster"},
		{"no manager", wire.PlaceRequest{GPU: one, Hints: wire.Hints{Types: []string{"p100"}}}, 0, 0, "left as asked"},
		{"type here but too small", wire.PlaceRequest{GPU: wire.GPUAsk{PerNode: 8}, Hints: wire.Hints{Types: []string{"v100"}}}, 60, 0,
			"can hold the job as asked; left as asked"},
		{"type here", wire.PlaceRequest{GPU: one, Hints: wire.Hints{Types: []string{"k80"}}}, 60, 0, "chosen among"},
	} {
		s := state()
		s.Rule.ElsewhereHoldS = tc.holdS
		res := Place(s, nil, &tc.req)
		if res.HoldS != tc.hold || !strings.Contains(res.Reason, tc.want) {
			t.Errorf("%s: hold %d, reason %q; want hold %d and %q", tc.name, res.HoldS, res.Reason, tc.hold, tc.want)
		}
		if d := Decide(s, nil, &tc.req); d.HoldS != res.HoldS {
			t.Errorf("%s: Decide holds %d, Place %d", tc.name, d.HoldS, res.HoldS)
		}
	}
}

// explain says when the speeds that chose the type were learned, not
// given, and only then.
func TestPlaceSaysSpeedsWereLearned(t *testing.T) {
	t.Parallel()
	s := state()
	learnt(s)
	one := wire.GPUAsk{PerNode: 1}
	const said = `measured for this user's latest job named "lm"`
	for _, tc := range []struct {
		req           wire.PlaceRequest
		says, learned bool
	}{
		{wire.PlaceRequest{UID: 7, Name: "lm", GPU: one}, true, true},
		{wire.PlaceRequest{UID: 8, Name: "lm", GPU: one}, false, false},
		{wire.PlaceRequest{UID: 7, Name: "lm", GPU: wire.GPUAsk{PerNode: 1, Type: "k80"}}, false, true}, // type kept: speeds chose nothing
		{wire.PlaceRequest{UID: 7, Name: "lm", GPU: one, Hints: wire.Hints{Throughput: map[string]float64{"k80": 1}}}, false, false},
	} {
		if r := Place(s, nil, &tc.req); strings.Contains(r.Reason, said) != tc.says || r.Learned != tc.learned {
			t.Errorf("uid %d type %q: reason %q, learned %v; want it said: %v, learned %v", tc.req.UID, tc.req.GPU.Type, r.Reason, r.Learned, tc.says, tc.learned)
		}
		if d := Decide(s, nil, &tc.req); d.Learned != tc.learned {
			t.Errorf("uid %d type %q: Decide's learned %v, want %v", tc.req.UID, tc.req.GPU.Type, d.Learned, tc.learned)
		}
	}
}
