package estimate

import (
	"fmt"
	"sync"
	"testing"
)

const gib = 1 << 30

func TestMemoryFits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   MemoryConfig
		peaks []uint64
		mem   uint64
		fits  bool
	}{
		{name: "unknown fits", mem: 1, fits: true},
		{name: "small job", peaks: []uint64{4 * gib}, mem: 12 * gib, fits: true},
		{name: "too big", peaks: []uint64{14 * gib}, mem: 12 * gib, fits: false},
		{name: "largest peak counts", peaks: []uint64{4 * gib, 14 * gib, 6 * gib}, mem: 12 * gib, fits: false},
		// 15.5 GiB + 5% = 16.3 > 16.
		{name: "within the margin does not fit", peaks: []uint64{15.5 * gib}, mem: 16 * gib, fits: false},
		{name: "no margin", cfg: MemoryConfig{Margin: -1}, peaks: []uint64{15.5 * gib}, mem: 16 * gib, fits: true},
		{name: "exactly need plus margin", cfg: MemoryConfig{Margin: 0.25}, peaks: []uint64{8 * gib}, mem: 10 * gib, fits: true},
		{name: "zero peak is no observation", peaks: []uint64{0}, mem: 1, fits: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory(tc.cfg)
			for _, p := range tc.peaks {
				m.Observe("u/j", p)
			}
			if got := m.Fits("u/j", tc.mem); got != tc.fits {
				need, ok := m.Need("u/j")
				t.Errorf("Fits = %v, want %v (need %d, %v)", got, tc.fits, need, ok)
			}
		})
	}
}

func TestMemoryExportImport(t *testing.T) {
	m := NewMemory(MemoryConfig{})
	m.Observe("u/a", 3*gib)
	m.Observe("u/b", 20*gib)
	data, err := m.Export()
	if err != nil {
		t.Fatal(err)
	}
	back := NewMemory(MemoryConfig{})
	if err := back.Import(data); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"u/a", "u/b", "u/c"} {
		gn, gok := back.Need(k)
		wn, wok := m.Need(k)
		if gn != wn || gok != wok {
			t.Errorf("%s: need %d %v after import, want %d %v", k, gn, gok, wn, wok)
		}
	}
	for _, bad := range []string{`{"v":2}`, `{"v":1,"peak":{"u/a":{"peak":0}}}`, `{"v":1,"peak":{"":{"peak":1}}}`, `x`} {
		if err := back.Import([]byte(bad)); err == nil {
			t.Errorf("Import(%s) accepted", bad)
		}
	}
}

func TestMemoryBoundedAndConcurrent(t *testing.T) {
	m := NewMemory(MemoryConfig{MaxKeys: 10})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := fmt.Sprintf("u/%d", (i*7+g)%40)
				m.Observe(k, uint64(i+1))
				_ = m.Fits(k, gib)
				if i%100 == 0 {
					d, _ := m.Export()
					_ = m.Import(d)
				}
			}
		}()
	}
	wg.Wait()
	m.mu.Lock()
	n := len(m.peak)
	m.mu.Unlock()
	if n > 10 {
		t.Errorf("%d jobs kept, cap 10", n)
	}
}
