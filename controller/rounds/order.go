package rounds

import (
	"context"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/slurm"
)

// maxNiceSpan bounds order_nice_span: Slurm takes nice values up to about
// ±2^31, and a span wider than the multifactor weights themselves would
// override every factor anyway.
const maxNiceSpan = 2_000_000

// NiceOrder spreads Rota's order of the pending jobs (the actions' admin
// priorities, highest first; pending says which jobs are) over nice
// values from -span/2 (first) to +span/2 (last), evenly by rank: Slurm's
// priority is its multifactor sum less the nice, so jobs whose factors
// differ by more than the span keep Slurm's order (fair share between
// accounts) and Rota's order decides among the others. A lone job gets 0.
func NiceOrder(actions []Action, pending func(uint32) bool, span uint32) map[uint32]int32 {
	var ids []int
	for i, a := range actions {
		if a.Priority > 0 && pending(a.JobID) {
			ids = append(ids, i)
		}
	}
	sort.SliceStable(ids, func(x, y int) bool { return actions[ids[x]].Priority > actions[ids[y]].Priority })
	out := make(map[uint32]int32, len(ids))
	n := len(ids)
	for rank, i := range ids {
		nice := 0.0
		if n > 1 {
			nice = -float64(span)/2 + float64(rank)*float64(span)/float64(n-1)
		}
		out[actions[i].JobID] = int32(math.Round(nice))
	}
	return out
}

// order puts Rota's order of one pending job into its update, as the
// site chose (Config.Order), and hands back an admin priority Rota set
// earlier when the order is not "priority": a job requeued by a
// migration keeps its priority until it runs again.
func (l *Loop) order(u *slurm.JobUpdate, a *Action, j *slurm.Job, tr *tracked) {
	switch l.cfg.Order {
	case OrderPriority:
		if a.Priority > 0 && a.Priority != j.Priority {
			p := a.Priority
			u.Priority = &p
		}
		return
	case OrderNice:
		if a.Niced {
			want := clampNice(int64(tr.baseNice) + int64(a.Nice))
			// Each job that starts moves every rank behind it by one: a
			// nice within a twentieth of the span of its place is close
			// enough, and saves an update per pending job per round.
			if d := int64(want) - int64(j.Nice); !tr.niceSet || max(d, -d) > int64(l.cfg.OrderNiceSpan/20) {
				u.Nice = &want
			}
		}
	}
	if tr.prioFixed && tr.target == "" {
		u.ResetPriority = true
	}
}

// unfix hands a running job's admin priority, set by Rota for its
// migration, back to Slurm's priority plugin, so that a later requeue
// (a node failure, an admin) queues it by fair share again.
func (l *Loop) unfix(ctx context.Context, j *slurm.Job, v *JobView, tr *tracked) {
	l.mu.Lock()
	fixed := tr.prioFixed && v.Running && l.cfg.Order != OrderPriority
	l.mu.Unlock()
	if !fixed {
		return
	}
	if err := l.sched.Update(ctx, j.ID, slurm.JobUpdate{ResetPriority: true}); err != nil {
		l.log.Info().Err(err).Uint32("job", j.ID).Msg("could not hand the job's priority back to Slurm; next round tries again")
		return
	}
	l.mu.Lock()
	tr.prioFixed = false
	l.mu.Unlock()
}

// niceSpan is the planner's NiceSpan: the order's span with order =
// nice, else 0.
func niceSpan(cfg Config) uint32 {
	if cfg.Order == OrderNice {
		return cfg.OrderNiceSpan
	}
	return 0
}

// clampNice keeps a nice value inside what Slurm accepts.
func clampNice(n int64) int32 {
	const lim = math.MaxInt32 - 3
	return int32(max(-lim, min(n, lim)))
}

// entityWeights are the hierarchical policy's entity weights: each
// account's share of the cluster in Slurm's fair-share tree, re-read
// every sharesRefresh. nil (every entity alike) when shares are off,
// the policy is not hierarchical, or Slurm has no accounting.
func (l *Loop) entityWeights(ctx context.Context, now time.Time) map[string]float64 {
	sr := l.shareReader
	if l.cfg.Shares != SharesSlurm || !strings.HasPrefix(l.pol.Name(), "hierarchical") || sr == nil {
		return nil
	}
	l.mu.Lock()
	if !l.sharesAt.IsZero() && now.Sub(l.sharesAt) < sharesRefresh {
		w := l.shares
		l.mu.Unlock()
		return w
	}
	l.mu.Unlock()
	w, err := sr.Shares(ctx)
	if err != nil {
		l.log.Info().Err(err).Msg("no fair-share shares from Slurm (no accounting?); the policy weighs every account alike")
		w = nil
	} else {
		l.log.Debug().Interface("weights", w).Msg("entity weights from Slurm's shares")
	}
	l.mu.Lock()
	l.shares, l.sharesAt = w, now
	l.mu.Unlock()
	return w
}
