package serve

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/state"
	"github.com/rota-hpc/rota/wire"
)

// Overlap is how long job i of r was ready while its predecessor still
// ran (ok false for the first job or while unknown); a negative value is
// a gap: the predecessor ended that long before job i was ready.
func (r *Replica) Overlap(i int) (time.Duration, bool) {
	if i <= 0 || i >= len(r.Jobs) {
		return 0, false
	}
	p, g := r.Jobs[i-1], r.Jobs[i]
	if p.EndedAt.IsZero() || g.ReadyAt.IsZero() {
		return 0, false
	}
	return p.EndedAt.Sub(g.ReadyAt), true
}

// publish makes the services' current state what readers see.
func (m *Manager) publish() {
	pub := map[string]*wire.ServiceStatus{}
	of := map[uint32]string{}
	for _, r := range m.sorted() {
		st := pub[r.Service]
		if st == nil {
			st = &wire.ServiceStatus{Name: r.Service, User: r.User, Spread: m.cfg.Spread}
			pub[r.Service] = st
		}
		rs := wire.ServiceReplica{ID: r.ID, State: r.State, Why: r.Why}
		for i, g := range r.Jobs {
			sj := wire.ServiceJob{JobID: g.JobID, N: g.N, State: g.State, Nodes: strings.Join(g.Nodes, ","), Excluded: g.Excluded,
				Submitted: rfc(g.Submitted), Started: rfc(g.Started), Ready: rfc(g.ReadyAt), Ended: rfc(g.EndedAt), Why: g.Why}
			if d, ok := r.Overlap(i); ok {
				v := d.Seconds()
				if v >= 0 {
					sj.OverlapSeconds = &v
				} else {
					v = -v
					sj.GapSeconds = &v
				}
			}
			rs.Jobs = append(rs.Jobs, sj)
			of[g.JobID] = r.Service
		}
		st.Replicas = append(st.Replicas, rs)
	}
	m.mu.Lock()
	m.pub, m.pubOf = pub, of
	m.mu.Unlock()
}

func rfc(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// Status lists the services, those with a running replica first, by name.
func (m *Manager) Status() []wire.ServiceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]wire.ServiceStatus, 0, len(m.pub))
	for _, s := range m.pub {
		out = append(out, *s)
	}
	running := func(s *wire.ServiceStatus) bool {
		for _, r := range s.Replicas {
			if r.State == StateRunning {
				return true
			}
		}
		return false
	}
	sort.Slice(out, func(a, b int) bool {
		ra, rb := running(&out[a]), running(&out[b])
		if ra != rb {
			return ra
		}
		return out[a].Name < out[b].Name
	})
	if len(out) > wire.MaxStatusJobs {
		out = out[:wire.MaxStatusJobs]
	}
	return out
}

// Explain is the service job id is a replica of, nil when none.
func (m *Manager) Explain(id uint32) *wire.ServiceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.pubOf[id]
	if !ok {
		return nil
	}
	st := *m.pub[s]
	return &st
}

type saved struct {
	V        int        `json:"v"`
	Replicas []*Replica `json:"replicas"`
	Stats    Stats      `json:"stats"`
}

func (m *Manager) save(ctx context.Context) error {
	if m.store == nil {
		return nil
	}
	st := saved{V: stateVersion, Replicas: m.sorted(), Stats: m.Stats()}
	if err := state.PutJSON(ctx, m.store, stateKey, st); err != nil {
		return fmt.Errorf("saving services: %w", err)
	}
	return nil
}

func (m *Manager) restore(ctx context.Context) error {
	if m.store == nil {
		return nil
	}
	var st saved
	if found, err := state.GetJSON(ctx, m.store, stateKey, &st); err != nil || !found {
		return err
	}
	if st.V != stateVersion {
		return fmt.Errorf("saved services have version %d; this controller reads %d", st.V, stateVersion)
	}
	for _, r := range st.Replicas {
		m.replicas[r.ID] = r
		for _, g := range r.Jobs {
			m.byJob[g.JobID] = r.ID
		}
	}
	m.mu.Lock()
	m.stats = st.Stats
	m.mu.Unlock()
	m.publish()
	return nil
}
