package estimate

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

type obs struct {
	key, ty string
	v       float64
	dt      time.Duration
}

func mustObserve(t *testing.T, tp *Throughputs, o []obs) {
	t.Helper()
	for _, x := range o {
		if err := tp.Observe(x.key, x.ty, x.v, t0.Add(x.dt)); err != nil {
			t.Fatal(err)
		}
	}
}

func key(user, name, hash string) string { return Identity{user, name, hash}.Key() }

func TestThroughputEstimate(t *testing.T) {
	samePull := math.Exp((math.Log(1.0/3) + 0.5*math.Log(1.0/2)) / 1.5)
	speed := map[string]float64{"v100": 4, "p100": 2, "k80": 1}
	a, b, c, d := key("u", "resnet", "1"), key("u", "resnet", "2"), key("v", "lm", "1"), key("w", "gan", "1")
	// Peers: resnet runs 3x faster on v100 than k80, lm 1.5x, gan 2x.
	peers := []obs{
		{b, "v100", 30, 0}, {b, "v100", 30, time.Minute}, {b, "k80", 10, 0}, {b, "k80", 10, time.Minute},
		{c, "v100", 15, 0}, {c, "v100", 15, time.Minute}, {c, "k80", 10, 0}, {c, "k80", 10, time.Minute},
		{d, "v100", 20, 0}, {d, "v100", 20, time.Minute}, {d, "k80", 10, 0}, {d, "k80", 10, time.Minute},
	}
	twice := func(k, ty string, v float64) []obs { return []obs{{k, ty, v, 0}, {k, ty, v, time.Minute}} }
	for _, tc := range []struct {
		name   string
		cfg    ThroughputConfig
		obs    []obs
		hint   map[string]float64
		ty     string
		want   float64
		source string
		basis  string
	}{
		{name: "nothing known", ty: "v100", source: SourceUnknown},
		{name: "measured", obs: twice(a, "v100", 12), ty: "v100", want: 12, source: SourceMeasured},
		{name: "hint only", hint: map[string]float64{"v100": 9}, ty: "v100", want: 9, source: SourceHint},
		{name: "hint, one sample is not enough to override", obs: []obs{{a, "v100", 12, 0}},
			hint: map[string]float64{"v100": 9}, ty: "v100", want: 9, source: SourceHint, basis: "1 of 2 samples"},
		{name: "hint, two samples override", obs: twice(a, "v100", 12),
			hint: map[string]float64{"v100": 9}, ty: "v100", want: 12, source: SourceMeasured},
		{name: "no hint: first sample used", obs: []obs{{a, "v100", 12, 0}}, ty: "v100", want: 12, source: SourceMeasured},
		// The user said 20 on v100 and 10 on k80; v100 measured 10, so the
		// user is 2x optimistic: k80 becomes 5.
		{name: "hint corrected by measurement", obs: twice(a, "v100", 10),
			hint: map[string]float64{"v100": 20, "k80": 10}, ty: "k80", want: 5, source: SourceHint, basis: "x 0.5"},
		// Completion: k80 from v100 with peers' ratios k80/v100 = 1/3,
		// 2/3, 1/2 (median 1/2) and the same-name peer b (1/3), pooled
		// with weight 0.5: exp((ln(1/3) + 0.5 ln(1/2))/1.5).
		{name: "completed, same name pulls", obs: append(twice(a, "v100", 12), peers...), ty: "k80",
			want: 12 * samePull, source: SourceCompleted, basis: "3 jobs run on both, 1 with the same name"},
		{name: "completed, same name weighs as much as all", cfg: ThroughputConfig{GroupWeight: 1}, obs: append(twice(a, "v100", 12), peers...),
			ty: "k80", want: 12 * math.Sqrt(1.0/6), source: SourceCompleted},
		{name: "completed, pooled only", cfg: ThroughputConfig{GroupWeight: -1}, obs: append(twice(a, "v100", 12), peers...), ty: "k80",
			want: 6, source: SourceCompleted},
		{name: "completion preferred to an unchecked hint", obs: append(twice(a, "v100", 12), peers...),
			hint: map[string]float64{"k80": 100}, ty: "k80", want: 12 * samePull, source: SourceCompleted},
		{name: "too few peers: unchecked hint", cfg: ThroughputConfig{MinPeers: 4}, obs: append(twice(a, "v100", 12), peers...),
			hint: map[string]float64{"k80": 100}, ty: "k80", want: 100, source: SourceHint},
		{name: "too few peers: table", cfg: ThroughputConfig{MinPeers: 4}, obs: append(twice(a, "v100", 12), peers...),
			ty: "k80", want: 3, source: SourceTable},
		{name: "no peers on that pair: table", obs: append(twice(a, "v100", 12), peers...), ty: "p100", want: 6, source: SourceTable},
		{name: "hint on another type, completed", obs: peers, hint: map[string]float64{"v100": 12}, ty: "k80",
			want: 12 * samePull, source: SourceCompleted, basis: "hinted 12"},
		{name: "hint on another type, table", hint: map[string]float64{"v100": 12}, ty: "p100", want: 6, source: SourceTable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Speed = speed
			tp := NewThroughputs(tc.cfg)
			mustObserve(t, tp, tc.obs)
			if tc.hint != nil {
				if err := tp.Hint(a, tc.hint); err != nil {
					t.Fatal(err)
				}
			}
			e := tp.Estimate(a, []string{tc.ty})[0]
			if e.Source != tc.source || !near(e.StepsPerSec, tc.want) || e.GPUType != tc.ty {
				t.Fatalf("got %+v, want %v steps/s from %s", e, tc.want, tc.source)
			}
			if !strings.Contains(e.Basis, tc.basis) {
				t.Errorf("basis %q does not say %q", e.Basis, tc.basis)
			}
		})
	}
}

func TestThroughputSmoothing(t *testing.T) {
	tp := NewThroughputs(ThroughputConfig{Smoothing: time.Minute})
	k := key("u", "j", "")
	mustObserve(t, tp, []obs{{k, "v100", 10, 0}, {k, "v100", 20, time.Minute}, {k, "v100", 40, time.Minute}})
	// second: 10 + (1-e^-1)*10; third: same time, weight 0.
	want := 10 + (1-math.Exp(-1))*10
	if e := tp.Estimate(k, []string{"v100"})[0]; !near(e.StepsPerSec, want) {
		t.Errorf("smoothed %v, want %v", e.StepsPerSec, want)
	}
}

func TestThroughputInvalid(t *testing.T) {
	tp := NewThroughputs(ThroughputConfig{})
	for _, v := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if err := tp.Observe("u/j", "v100", v, t0); err == nil {
			t.Errorf("Observe(%v) accepted", v)
		}
	}
	if err := tp.Observe("", "v100", 1, t0); err == nil {
		t.Error("Observe without key accepted")
	}
	err := tp.Hint("u/j", map[string]float64{"v100": 5, "k80": -2, "": 3})
	if err == nil || !strings.Contains(err.Error(), `"k80"=-2`) {
		t.Errorf("Hint with bad entries: err %v", err)
	}
	// The good part of the hint is kept.
	if e := tp.Estimate("u/j", []string{"v100"})[0]; e.Source != SourceHint || e.StepsPerSec != 5 {
		t.Errorf("got %+v, want the hint 5", e)
	}
}

func TestHintErrors(t *testing.T) {
	tp := NewThroughputs(ThroughputConfig{})
	a, b := key("u", "a", ""), key("u", "b", "")
	_ = tp.Hint(a, map[string]float64{"v100": 20, "k80": 10})
	_ = tp.Hint(b, map[string]float64{"v100": 5})
	mustObserve(t, tp, []obs{{a, "v100", 10, 0}, {a, "v100", 10, time.Minute}, {b, "v100", 7.5, 0}})
	got := tp.HintErrors()
	// b has one sample only: not yet a verdict on its hint.
	want := []HintError{{Key: a, GPUType: "v100", Hinted: 20, Measured: 10, Ratio: 0.5}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("HintErrors = %+v, want %+v", got, want)
	}
	mustObserve(t, tp, []obs{{b, "v100", 7.5, time.Minute}})
	if got := tp.HintErrors(); len(got) != 2 || got[1].Key != b || got[1].Ratio != 1.5 {
		t.Errorf("HintErrors = %+v, want b at ratio 1.5 too", got)
	}
}

func TestThroughputExportImport(t *testing.T) {
	tp := NewThroughputs(ThroughputConfig{})
	a, b := key("u", "a", "h"), key("u", "b", "")
	_ = tp.Hint(a, map[string]float64{"v100": 20, "k80": 10})
	mustObserve(t, tp, []obs{{a, "v100", 10, 0}, {a, "v100", 12, time.Minute}, {b, "k80", 3, 0}, {b, "v100", 6, 0}})
	data, err := tp.Export()
	if err != nil {
		t.Fatal(err)
	}
	back := NewThroughputs(ThroughputConfig{})
	if err := back.Import(data); err != nil {
		t.Fatal(err)
	}
	types := []string{"v100", "k80", "p100"}
	for _, k := range []string{a, b} {
		if g, w := fmt.Sprint(back.Estimate(k, types)), fmt.Sprint(tp.Estimate(k, types)); g != w {
			t.Errorf("%s after import: %s, want %s", k, g, w)
		}
	}
	if fmt.Sprint(back.HintErrors()) != fmt.Sprint(tp.HintErrors()) {
		t.Error("hint errors differ after import")
	}
	again, _ := back.Export()
	if string(again) != string(data) {
		t.Errorf("export not stable:\n%s\n%s", data, again)
	}
	for _, bad := range []string{
		`{"v":2,"jobs":[]}`, `not json`,
		`{"v":1,"jobs":[{"key":"u/a","rates":{"v100":{"sps":-1,"n":1}}}]}`,
		`{"v":1,"jobs":[{"key":"u/a","hint":{"v100":0}}]}`,
		`{"v":1,"jobs":[{"key":""}]}`,
		`{"v":1,"jobs":[{"key":"u/a"},{"key":"u/a"}]}`,
	} {
		if err := back.Import([]byte(bad)); err == nil {
			t.Errorf("Import(%s) accepted", bad)
		}
	}
	// A failed import left the state alone.
	if e := back.Estimate(a, []string{"v100"})[0]; e.Source != SourceMeasured {
		t.Errorf("state changed by a failed import: %+v", e)
	}
}

func TestThroughputForgetsOldest(t *testing.T) {
	tp := NewThroughputs(ThroughputConfig{MaxKeys: 10})
	for i := range 25 {
		mustObserve(t, tp, []obs{{key("u", fmt.Sprint(i), ""), "v100", 1, 0}})
	}
	tp.mu.Lock()
	n := len(tp.jobs)
	tp.mu.Unlock()
	if n > 10 {
		t.Errorf("%d jobs kept, cap 10", n)
	}
	if e := tp.Estimate(key("u", "24", ""), []string{"v100"})[0]; e.Source != SourceMeasured {
		t.Error("the newest job was forgotten")
	}
	if e := tp.Estimate(key("u", "0", ""), []string{"v100"})[0]; e.Source != SourceUnknown {
		t.Error("the oldest job was kept")
	}
}

// TestThroughputConcurrent: four writers and readers at once (go test
// -race checks the locking); nothing errs, and every key ends with a
// measured rate on both observed types within what was observed, and the
// p100 hint one of the hints given.
func TestThroughputConcurrent(t *testing.T) {
	tp := NewThroughputs(ThroughputConfig{})
	var wg sync.WaitGroup
	errs := make(chan error, 4*200*4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := key("u", fmt.Sprint(i%7), "")
				errs <- tp.Observe(k, []string{"v100", "k80"}[i%2], float64(1+i%5), t0.Add(time.Duration(i)*time.Second))
				errs <- tp.Hint(k, map[string]float64{"p100": float64(g + 1)})
				_ = tp.Estimate(k, []string{"v100", "k80", "p100"})
				_ = tp.HintErrors()
				if i%50 == 0 {
					data, err := tp.Export()
					errs <- err
					errs <- tp.Import(data)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		k := key("u", fmt.Sprint(i), "")
		for _, e := range tp.Estimate(k, []string{"v100", "k80", "p100"}) {
			switch e.GPUType {
			case "v100", "k80":
				if e.Source != SourceMeasured || e.StepsPerSec < 1 || e.StepsPerSec > 5 {
					t.Errorf("%s on %s: %+v, want measured within 1-5 steps/s", k, e.GPUType, e)
				}
			case "p100":
				if e.StepsPerSec < 1 || e.StepsPerSec > 4 {
					t.Errorf("%s on p100: %+v, want one of the hints 1-4", k, e)
				}
			}
		}
	}
}

// A MIG slice the speed table does not name counts as its whole GPU's
// share (wire/gputype): a job hinted on a V100 is estimated on
// a100_3g.20gb at 6.72 x 3/7 over 3.36, and SpeedOf calls the slice known.
func TestEstimateOnMIGSlice(t *testing.T) {
	t.Parallel()
	tp := NewThroughputs(ThroughputConfig{Speed: map[string]float64{"v100": 3.36, "a100": 6.72}})
	if s, ok := tp.SpeedOf("a100_3g.20gb"); !ok || math.Abs(s-2.88) > 1e-9 {
		t.Fatalf("SpeedOf(a100_3g.20gb) = %g, %v; want 2.88, known", s, ok)
	}
	if _, ok := tp.SpeedOf("h100_3g.40gb"); ok {
		t.Fatal("a slice of a GPU the table does not name counts as known")
	}
	est := tp.EstimateHinted("resnet", map[string]float64{"v100": 10}, []string{"a100_3g.20gb", "a100_1g.5gb"})
	for i, want := range []float64{10 * 2.88 / 3.36, 10 * 0.96 / 3.36} {
		if math.Abs(est[i].StepsPerSec-want) > 1e-6 {
			t.Errorf("%s: %g steps/s (%s: %s), want %g", est[i].GPUType, est[i].StepsPerSec, est[i].Source, est[i].Basis, want)
		}
	}
}
