package estimate

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

func TestWalltimeEstimate(t *testing.T) {
	const k = "u/train/h"
	// History of k: 10 runs of 10..100 minutes; p90 = 90 min.
	var hist []float64
	for i := 1; i <= 10; i++ {
		hist = append(hist, float64(i)*600)
	}
	for _, tc := range []struct {
		name     string
		cfg      WalltimeConfig
		hist     []float64
		in       WalltimeInput
		want     uint32
		source   string
		cappedBy string
		basis    string
	}{
		// 36000 steps at 10/s = 60 min x 1.5 + 5 = 95.
		{name: "steps", in: WalltimeInput{Key: k, RemainingSteps: 36000, StepsPerSec: 10}, want: 95, source: WalltimeSteps},
		{name: "steps, custom margin and overhead", cfg: WalltimeConfig{Margin: 2, OverheadMin: 1},
			in: WalltimeInput{Key: k, RemainingSteps: 36000, StepsPerSec: 10}, want: 121, source: WalltimeSteps},
		{name: "margin below 1 is 1", cfg: WalltimeConfig{Margin: 0.5, OverheadMin: 1},
			in: WalltimeInput{Key: k, RemainingSteps: 36000, StepsPerSec: 10}, want: 91, source: WalltimeSteps},
		{name: "rounded up", in: WalltimeInput{Key: k, RemainingSteps: 100, StepsPerSec: 10}, want: 6, source: WalltimeSteps},
		{name: "capped by user limit", in: WalltimeInput{Key: k, RemainingSteps: 36000, StepsPerSec: 10, UserLimitMin: 60, MaxTimeMin: 80},
			want: 60, source: WalltimeSteps, cappedBy: CappedByUser, basis: "capped by the user limit (60 min)"},
		{name: "capped by MaxTime", in: WalltimeInput{Key: k, RemainingSteps: 36000, StepsPerSec: 10, UserLimitMin: 120, MaxTimeMin: 80},
			want: 80, source: WalltimeSteps, cappedBy: CappedByMaxTime},
		{name: "under both caps", in: WalltimeInput{Key: k, RemainingSteps: 36000, StepsPerSec: 10, UserLimitMin: 120, MaxTimeMin: 100},
			want: 95, source: WalltimeSteps},
		{name: "absurd estimate stays below INFINITE", in: WalltimeInput{Key: k, RemainingSteps: 1e300, StepsPerSec: 1e-300},
			want: math.MaxUint32 - 1, source: WalltimeSteps},
		{name: "steps unknown, no history", in: WalltimeInput{Key: k, StepsPerSec: 10, UserLimitMin: 60}, source: WalltimeUnknown},
		{name: "rate unknown, no history", in: WalltimeInput{Key: k, RemainingSteps: 100}, source: WalltimeUnknown},
		// p90 of history = 90 min x 1.5 = 135.
		{name: "steps unknown, history", hist: hist, in: WalltimeInput{Key: k}, want: 135, source: WalltimeHistory, basis: "p90 of 10 past runs"},
		{name: "history capped by user", hist: hist, in: WalltimeInput{Key: k, UserLimitMin: 100}, want: 100, source: WalltimeHistory, cappedBy: CappedByUser},
		{name: "history of another job is not used", hist: hist, in: WalltimeInput{Key: "u/other"}, source: WalltimeUnknown},
		{name: "too little history", cfg: WalltimeConfig{MinHistory: 11}, hist: hist, in: WalltimeInput{Key: k}, source: WalltimeUnknown, basis: "need 11"},
		{name: "history bounded to the latest", cfg: WalltimeConfig{MaxHistory: 3, HistoryQuantile: 0.5}, hist: hist,
			in: WalltimeInput{Key: k}, want: 135, source: WalltimeHistory, basis: "of 3 past runs"},
		{name: "steps beat history", hist: hist, in: WalltimeInput{Key: k, RemainingSteps: 36000, StepsPerSec: 10}, want: 95, source: WalltimeSteps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWalltimes(tc.cfg)
			for i, s := range tc.hist {
				if err := w.Finished(k, uint32(i+1), 0, s); err != nil {
					t.Fatal(err)
				}
			}
			got := w.Estimate(tc.in)
			if got.Minutes != tc.want || got.Source != tc.source || got.CappedBy != tc.cappedBy {
				t.Fatalf("got %+v, want %d min from %s capped by %q", got, tc.want, tc.source, tc.cappedBy)
			}
			if !strings.Contains(got.Basis, tc.basis) {
				t.Errorf("basis %q does not say %q", got.Basis, tc.basis)
			}
		})
	}
}

func TestWalltimeErrors(t *testing.T) {
	w := NewWalltimes(WalltimeConfig{MaxErrors: 3})
	if e := w.Errors(); e.Count != 0 || e.MedianRatio != 0 || len(e.Jobs) != 0 {
		t.Errorf("empty: %+v", e)
	}
	for _, f := range []struct {
		id       uint32
		est, act float64
	}{
		{1, 100, 6000}, // ratio 1: dropped by the bound below
		{2, 50, 6000},  // 0.5: under
		{3, 0, 6000},   // no estimate: history only
		{4, 200, 6000}, // 2
		{5, 300, 6000}, // 3
	} {
		if err := w.Finished("u/j", f.id, f.est, f.act); err != nil {
			t.Fatal(err)
		}
	}
	e := w.Errors()
	var ids []uint32
	for _, j := range e.Jobs {
		ids = append(ids, j.JobID)
	}
	if e.Count != 3 || fmt.Sprint(ids) != "[2 4 5]" || e.MedianRatio != 2 || !near(e.Under, 1.0/3) {
		t.Errorf("Errors = %+v (ids %v), want jobs 2, 4, 5, median ratio 2, a third under", e, ids)
	}
	for _, bad := range []struct {
		key      string
		est, act float64
	}{{"", 1, 1}, {"u/j", 1, 0}, {"u/j", -1, 60}, {"u/j", math.NaN(), 60}, {"u/j", 1, math.Inf(1)}} {
		if err := w.Finished(bad.key, 9, bad.est, bad.act); err == nil {
			t.Errorf("Finished(%q, %v, %v) accepted", bad.key, bad.est, bad.act)
		}
	}
}

func TestWalltimeExportImport(t *testing.T) {
	w := NewWalltimes(WalltimeConfig{})
	for i, s := range []float64{600, 1200, 1800} {
		_ = w.Finished("u/a", uint32(i+1), 30, s)
	}
	_ = w.Finished("u/b", 9, 0, 60)
	data, err := w.Export()
	if err != nil {
		t.Fatal(err)
	}
	back := NewWalltimes(WalltimeConfig{})
	if err := back.Import(data); err != nil {
		t.Fatal(err)
	}
	for _, in := range []WalltimeInput{{Key: "u/a"}, {Key: "u/b"}, {Key: "u/c"}} {
		if g, w := back.Estimate(in), w.Estimate(in); g != w {
			t.Errorf("%s after import: %+v, want %+v", in.Key, g, w)
		}
	}
	if g, w := fmt.Sprint(back.Errors()), fmt.Sprint(w.Errors()); g != w {
		t.Errorf("errors after import: %s, want %s", g, w)
	}
	again, _ := back.Export()
	if string(again) != string(data) {
		t.Errorf("export not stable:\n%s\n%s", data, again)
	}
	// A smaller Walltimes keeps the latest.
	small := NewWalltimes(WalltimeConfig{MaxErrors: 1, MaxHistory: 1})
	if err := small.Import(data); err != nil {
		t.Fatal(err)
	}
	if e := small.Errors(); e.Count != 1 || e.Jobs[0].JobID != 3 {
		t.Errorf("trimmed import: %+v, want job 3 only", e)
	}
	if e := small.Estimate(WalltimeInput{Key: "u/a"}); e.Minutes != 45 { // 30 min x 1.5
		t.Errorf("trimmed history: %+v, want 45 min from the latest run", e)
	}
	for _, bad := range []string{`{"v":0}`, `[]`, `{"v":1,"history":{"u/a":{"secs":[-1]}}}`,
		`{"v":1,"errors":[{"job_id":1,"estimated_min":0,"actual_min":1,"ratio":0}]}`} {
		if err := back.Import([]byte(bad)); err == nil {
			t.Errorf("Import(%s) accepted", bad)
		}
	}
}

func TestWalltimeConcurrent(t *testing.T) {
	w := NewWalltimes(WalltimeConfig{MaxErrors: 50, MaxKeys: 20})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				k := fmt.Sprintf("u/%d", (i+g)%30)
				_ = w.Finished(k, uint32(i), float64(i%7+1), float64(60*(i%5+1)))
				_ = w.Estimate(WalltimeInput{Key: k, UserLimitMin: 10})
				_ = w.Errors()
				if i%100 == 0 {
					data, _ := w.Export()
					_ = w.Import(data)
				}
			}
		}()
	}
	wg.Wait()
	if n := len(w.Errors().Jobs); n != 50 {
		t.Errorf("%d errors kept, want the bound 50", n)
	}
}
