package estimate

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// MemoryConfig tunes Memory. Zero values take the defaults.
type MemoryConfig struct {
	// Margin is the fraction added to a job's observed peak before
	// comparing with a GPU's memory: the peak was sampled (a short spike
	// between samples is missed) and allocators differ a little between
	// GPU generations. Default 0.05; negative means none.
	Margin float64
	// MaxKeys bounds the jobs remembered; beyond it the least recently
	// observed tenth is forgotten. Default 100,000.
	MaxKeys int
}

// Memory keeps each job's peak GPU memory, per GPU, so that no job is
// placed on a GPU type with less memory than it needs. It is safe for
// concurrent use.
type Memory struct {
	cfg MemoryConfig

	mu    sync.Mutex
	peak  map[string]*memEntry
	clock uint64
}

type memEntry struct {
	Peak  uint64 `json:"peak"`
	Touch uint64 `json:"touch"`
}

// NewMemory returns an empty Memory.
func NewMemory(cfg MemoryConfig) *Memory {
	if cfg.Margin == 0 {
		cfg.Margin = 0.05
	} else if cfg.Margin < 0 {
		cfg.Margin = 0
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 100_000
	}
	return &Memory{cfg: cfg, peak: map[string]*memEntry{}}
}

// Observe records a peak of the job's memory on one GPU (the Observer's
// PeakGPUMemoryPerGPU: Fits compares with one GPU's memory); the need is
// the largest ever seen, across requeues and resubmissions.
func (m *Memory) Observe(key string, peakBytes uint64) {
	if key == "" || peakBytes == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clock++
	e := m.peak[key]
	if e == nil {
		if len(m.peak) >= m.cfg.MaxKeys {
			m.forgetOldest()
		}
		e = &memEntry{}
		m.peak[key] = e
	}
	e.Peak = max(e.Peak, peakBytes)
	e.Touch = m.clock
}

func (m *Memory) forgetOldest() {
	type kt struct {
		k string
		t uint64
	}
	all := make([]kt, 0, len(m.peak))
	for k, e := range m.peak {
		all = append(all, kt{k, e.Touch})
	}
	sort.Slice(all, func(a, b int) bool { return all[a].t < all[b].t })
	for _, e := range all[:max(len(all)/10, 1)] {
		delete(m.peak, e.k)
	}
}

// Need is the job's observed peak per GPU, if any.
func (m *Memory) Need(key string) (bytes uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.peak[key]; e != nil {
		return e.Peak, true
	}
	return 0, false
}

// Fits reports whether the job fits a GPU with typeMemBytes of memory:
// its peak plus the margin must not exceed it. A job never observed fits
// (nothing says otherwise; the user's choice stands).
func (m *Memory) Fits(key string, typeMemBytes uint64) bool {
	need, ok := m.Need(key)
	if !ok {
		return true
	}
	return float64(need)*(1+m.cfg.Margin) <= float64(typeMemBytes)
}

type memoryState struct {
	V    int                  `json:"v"`
	Peak map[string]*memEntry `json:"peak"`
}

// Export returns the state as versioned JSON.
func (m *Memory) Export() ([]byte, error) {
	m.mu.Lock()
	st := memoryState{V: stateVersion, Peak: make(map[string]*memEntry, len(m.peak))}
	for k, e := range m.peak {
		c := *e
		st.Peak[k] = &c
	}
	m.mu.Unlock()
	return json.Marshal(st)
}

// Import replaces the state with one Export wrote. On error the state is
// unchanged.
func (m *Memory) Import(data []byte) error {
	var st memoryState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("memory state: %w", err)
	}
	if st.V != stateVersion {
		return fmt.Errorf("memory state: version %d, want %d", st.V, stateVersion)
	}
	peak := make(map[string]*memEntry, len(st.Peak))
	var clock uint64
	for k, e := range st.Peak {
		if k == "" || e == nil || e.Peak == 0 {
			return fmt.Errorf("memory state: bad entry %q", k)
		}
		c := *e
		peak[k] = &c
		clock = max(clock, e.Touch)
	}
	m.mu.Lock()
	m.peak, m.clock = peak, max(m.clock, clock)
	m.mu.Unlock()
	return nil
}
