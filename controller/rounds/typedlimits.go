package rounds

import (
	"context"
	"errors"
	"math"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rota-hpc/rota/controller/limits"
	"github.com/rota-hpc/rota/controller/slurm"
	"github.com/rota-hpc/rota/wire"
)

// LimitReader reads the site's typed GPU limits (slurm.CLI.Limits).
type LimitReader interface {
	Limits(ctx context.Context) (*limits.Set, error)
}

// TypeByGres says whether jobs get their type in the GPU request (not as
// a node constraint): where Slurm can retype a request, or where typed
// limits exist, which count only typed requests.
func (l *Loop) TypeByGres() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retypeGres || l.limitSet.Typed()
}

// Headroom is what the typed limits left each user (nil: none), for the
// placement state, counted from the queue as the last round read it at
// asOf.
func (l *Loop) Headroom() (h map[uint32]wire.UserHeadroom, asOf time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.headroom, l.headroomAt
}

// readLimits reads the limits, keeping the last ones read when
// accounting does not answer (logged once until it answers again).
func (l *Loop) readLimits(ctx context.Context) *limits.Set {
	l.mu.Lock()
	r := l.limitReader
	l.mu.Unlock()
	if r == nil {
		return nil
	}
	s, err := r.Limits(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(err, slurm.ErrNoAccounting) {
		if l.limitSet != nil || !l.noAccounting {
			l.log.Info().Msg("the cluster keeps no accounting: no typed GPU limits to respect")
		}
		l.noAccounting, l.limitSet, l.limitsFailing = true, nil, false
		return nil
	}
	l.noAccounting = false
	if err != nil {
		if !l.limitsFailing {
			l.log.Warn().Err(err).Msg("cannot read the site's limits from accounting (sacctmgr); placing by the last limits read, if any, until it answers")
		}
		l.limitsFailing = true
		return l.limitSet
	}
	if l.limitsFailing {
		l.log.Info().Msg("accounting answers again: typed GPU limits read")
	}
	l.limitsFailing = false
	l.limitSet = s
	return s
}

// limitHeld says Slurm holds a pending job back for a limit of its QOS
// or association (QOSMaxGRESPerUser, AssocGrpGRES, ...).
func limitHeld(reason string) bool {
	return strings.HasPrefix(reason, "QOS") || strings.HasPrefix(reason, "Assoc")
}

// typedUsage counts what the queue holds of the typed limits: running
// jobs, then pending jobs whose type is chosen, in the order Slurm would
// start them (priority, then submission), each only if its limits leave
// room for it (else Slurm keeps it pending). counted lists the pending
// jobs that count.
//
// A running job on shards of a GPU (gres/shard) counts as the fraction of
// a GPU its shards are (shardsPerGPU, by type; a type whose count is not
// known, a whole GPU per job), the fractions of one user's jobs in one
// account and QOS on one type summed and rounded up: Slurm's limits on
// gres/gpu do not count shards, and without this a user at a type's limit
// would get more of it as shards Rota paired.
func typedUsage(s *limits.Set, jobs []slurm.Job, types []string, nodeType map[string]string, shardsPerGPU map[string]int) (*limits.Usage, map[uint32]bool) {
	u := s.NewUsage(nil)
	counted := map[uint32]bool{}
	type waiting struct {
		j    *slurm.Job
		typ  string
		gpus int
	}
	var pending []waiting
	shared := map[limits.Use]float64{} // GPUs 0: the fractions' sum
	for i := range jobs {
		j := &jobs[i]
		req, ok := j.GPURequest()
		if !ok {
			r, err := j.Request()
			if t := j.GPUTypeOf(r, nodeType, types); err == nil && j.Running() && t != "" {
				if n, has := r.Shards(); has {
					frac := 1.0
					if per := shardsPerGPU[t]; per > 0 {
						frac = float64(n) / float64(per)
					}
					shared[limits.Use{User: j.User, Account: j.Account, QOS: j.QOS, Type: t}] += frac
				}
			}
			continue
		}
		gpus := j.GPUs()
		if j.Running() && len(j.Nodes) > 0 {
			u.Add(limits.Use{User: j.User, Account: j.Account, QOS: j.QOS, Type: j.GPUTypeOf(req, nodeType, types), GPUs: gpus})
		} else if t := j.GPUTypeOf(req, nodeType, types); j.Pending() && !limitHeld(j.Reason) && t != "" {
			pending = append(pending, waiting{j, t, gpus})
		}
	}
	for k, f := range shared {
		k.GPUs = int(math.Ceil(f - 1e-9))
		u.Add(k)
	}
	sort.SliceStable(pending, func(a, b int) bool {
		if pending[a].j.Priority != pending[b].j.Priority {
			return pending[a].j.Priority > pending[b].j.Priority
		}
		return pending[a].j.Submit.Before(pending[b].j.Submit)
	})
	for _, w := range pending {
		j := w.j
		if left, _, lim := u.Room(j.User, j.Account, j.QOS, w.typ); lim && left < w.gpus {
			continue
		}
		u.Add(limits.Use{User: j.User, Account: j.Account, QOS: j.QOS, Type: w.typ, GPUs: w.gpus})
		counted[j.ID] = true
	}
	return u, counted
}

// limitFits takes out of fit the types where the job's limits leave too
// little for it (what it holds there itself given back), and says why.
// When that would leave none, fit stays: the job waits at a limit, as if
// its user had named the type.
func limitFits(u *limits.Usage, j *slurm.Job, self string, gpus int, types []string, fit []bool) string {
	var out []string
	keep := make([]bool, len(fit))
	some := false
	for k, t := range types {
		keep[k] = fit[k]
		if !fit[k] {
			continue
		}
		left, why, lim := u.Room(j.User, j.Account, j.QOS, t)
		if t == self {
			left += gpus
		}
		if lim && left < gpus {
			keep[k] = false
			out = append(out, t+" left out: "+why+" reached")
			continue
		}
		some = some || keep[k]
	}
	if len(out) == 0 {
		return ""
	}
	if !some {
		return "every type that holds it is at a limit (" + strings.Join(out, "; ") + "); it waits for one"
	}
	copy(fit, keep)
	return "typed limits: " + strings.Join(out, "; ")
}

// headroomOf is, per user with typed limits (by uid), what they leave of
// each type for each account and QOS the user may submit with: the
// placement state's Headroom.
func headroomOf(s *limits.Set, u *limits.Usage, types []string) map[uint32]wire.UserHeadroom {
	if !s.Typed() {
		return nil
	}
	out := map[uint32]wire.UserHeadroom{}
	for _, name := range s.Users() {
		pw, err := user.Lookup(name)
		if err != nil {
			continue // not a user of this host: it submits nothing here
		}
		uid, err := strconv.ParseUint(pw.Uid, 10, 32)
		if err != nil {
			continue
		}
		h := wire.UserHeadroom{DefaultAccount: s.DefaultAccount[name], Left: map[string]map[string]int{}, Why: map[string]map[string]string{}}
		for _, key := range s.Keys(name) {
			acct, q, _ := strings.Cut(key, "/")
			acct, q = s.Resolve(name, acct, q)
			for _, t := range types {
				left, why, lim := u.Room(name, acct, q, t)
				if !lim {
					continue
				}
				if h.Left[key] == nil {
					h.Left[key], h.Why[key] = map[string]int{}, map[string]string{}
				}
				h.Left[key][t], h.Why[key][t] = left, why
			}
		}
		if len(h.Left) > 0 {
			out[uint32(uid)] = h
		}
	}
	return out
}
