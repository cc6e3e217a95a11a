package rounds

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rota-hpc/rota/controller/state"
)

// Keys of the saved state.
const (
	stateLoop      = "loop"      // jobs, moves, counters
	stateEstimates = "estimates" // the estimator's learned figures
	statePlan      = "plan"      // the last allocation, for status after a restart
)

const stateVersion = 1

type savedLoop struct {
	V     int                   `json:"v"`
	Jobs  map[uint32]savedJob   `json:"jobs"`
	Stats Stats                 `json:"stats"`
	At    time.Time             `json:"at"`
	Moves map[uint32]savedMoved `json:"moving,omitempty"`
	// Pairs is what sharers were measured to keep of their speed
	// (Loop.pairSeen), so a restart does not go back to the table.
	Pairs []savedPair `json:"pairs,omitempty"`
}

type savedPair struct {
	Model string  `json:"model"`
	Other string  `json:"other"`
	Type  string  `json:"type"`
	Keeps float64 `json:"keeps"`
}

type savedJob struct {
	Decision string    `json:"decision"`
	Key      string    `json:"key"`
	Moved    time.Time `json:"moved,omitempty"`
	Moves    int       `json:"moves,omitempty"`
	LastType string    `json:"last_type,omitempty"`
	MoveCost float64   `json:"move_cost_s,omitempty"`
	// Followed is the limit Rota last raised the job's to, so a restarted
	// controller goes on following it.
	Followed uint32 `json:"followed_min,omitempty"`
	// PrioFixed: Rota set an admin priority the loop hands back to Slurm
	// (order = nice or none); BaseNice: the job's own nice before Rota's.
	PrioFixed bool  `json:"prio_fixed,omitempty"`
	BaseNice  int32 `json:"base_nice,omitempty"`
	NiceSet   bool  `json:"nice_set,omitempty"`
	// Partner is the job it shares a GPU with (share.go), NoShare that it
	// was split from a pair, SameNode that it was requeued onto a type on
	// a node it ran on (it waits out Slurm's requeue delay).
	Partner  uint32 `json:"partner,omitempty"`
	NoShare  bool   `json:"no_share,omitempty"`
	SameNode bool   `json:"same_node,omitempty"`
}

type savedMoved struct {
	Since time.Time `json:"since"`
}

// Exporter is an Estimator whose learned state can be saved.
type Exporter interface {
	Export() ([]byte, error)
	Import([]byte) error
}

// save writes the loop's state; a round's changes are durable once it
// returns.
func (l *Loop) save(ctx context.Context) error {
	if l.store == nil {
		return nil
	}
	l.mu.Lock()
	st := savedLoop{V: stateVersion, Jobs: map[uint32]savedJob{}, Stats: l.stats, At: time.Now()}
	for id, tr := range l.known {
		if tr == nil || tr.decision == nil {
			continue
		}
		st.Jobs[id] = savedJob{Decision: tr.decision.ID, Key: tr.key, Moved: tr.moved, Moves: tr.moves,
			LastType: tr.lastType, MoveCost: tr.moveCost.Seconds(), Followed: tr.followed,
			PrioFixed: tr.prioFixed, BaseNice: tr.baseNice, NiceSet: tr.niceSet,
			Partner: tr.partner, NoShare: tr.noShare, SameNode: tr.sameNode}
	}
	for k, f := range l.pairSeen {
		st.Pairs = append(st.Pairs, savedPair{Model: k.model, Other: k.other, Type: k.gpuType, Keeps: f})
	}
	plan := l.last
	l.mu.Unlock()
	if err := state.PutJSON(ctx, l.store, stateLoop, st); err != nil {
		return fmt.Errorf("saving the loop's state: %w", err)
	}
	if ex, ok := l.est.(Exporter); ok {
		b, err := ex.Export()
		if err != nil {
			return fmt.Errorf("exporting estimates: %w", err)
		}
		if err := l.store.Put(ctx, stateEstimates, b); err != nil {
			return fmt.Errorf("saving estimates: %w", err)
		}
	}
	if plan != nil {
		if err := state.PutJSON(ctx, l.store, statePlan, plan); err != nil {
			return fmt.Errorf("saving the plan: %w", err)
		}
	}
	return nil
}

// restore reads what an earlier controller saved. Jobs whose decision
// cannot be read are bound again from Slurm's annotations next round.
func (l *Loop) restore(ctx context.Context) error {
	if l.store == nil {
		return nil
	}
	var st savedLoop
	if found, err := state.GetJSON(ctx, l.store, stateLoop, &st); err != nil {
		return fmt.Errorf("reading the loop's state: %w", err)
	} else if !found {
		return nil
	}
	if st.V != stateVersion {
		return fmt.Errorf("the saved loop state has version %d; this controller reads %d", st.V, stateVersion)
	}
	restored := 0
	for id, sj := range st.Jobs {
		d, err := l.dec.Get(ctx, sj.Decision)
		if err != nil {
			continue
		}
		l.mu.Lock()
		l.known[id] = &tracked{decision: d, key: sj.Key, moved: sj.Moved, moves: sj.Moves, lastType: sj.LastType,
			moveCost: time.Duration(sj.MoveCost * float64(time.Second)), followed: sj.Followed,
			prioFixed: sj.PrioFixed, baseNice: sj.BaseNice, niceSet: sj.NiceSet, niceRead: true,
			partner: sj.Partner, noShare: sj.NoShare, sameNode: sj.SameNode}
		l.mu.Unlock()
		restored++
	}
	l.mu.Lock()
	// The counters go on from where they were (a round in progress at the
	// crash is not counted).
	l.stats = st.Stats
	for _, p := range st.Pairs {
		if p.Keeps > 0 {
			l.pairSeen[pairKey{p.Model, p.Other, p.Type}] = p.Keeps
		}
	}
	l.mu.Unlock()
	if ex, ok := l.est.(Exporter); ok {
		if b, err := l.store.Get(ctx, stateEstimates); err == nil {
			if err := ex.Import(b); err != nil {
				return fmt.Errorf("restoring estimates: %w", err)
			}
		} else if !errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("reading estimates: %w", err)
		}
	}
	var p Plan
	if found, err := state.GetJSON(ctx, l.store, statePlan, &p); err == nil && found {
		l.mu.Lock()
		l.last = &p
		l.mu.Unlock()
	}
	l.log.Info().Int("jobs", restored).Uint64("rounds", st.Stats.Rounds).Uint64("migrations", st.Stats.Migrations).
		Time("saved_at", st.At).Msg("restored the round loop's state")
	return nil
}
