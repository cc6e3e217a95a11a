package submit

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nuid"

	"github.com/rota-hpc/rota/placement"
	"github.com/rota-hpc/rota/wire"
)

// Shelf is where the C shim keeps decisions that Local made in advance
// for submissions identical to one it has just placed: the same GPU
// request, partition, account, time limit, constraint and Rota options;
// name, user and script may differ, as they do in a loop of sbatch. A
// submission that matches takes the next decision from the shelf without
// entering Go at all, which on a fresh slurmctld RPC thread costs about
// 50 us before any of Rota's code runs (scripts/bench-cgo-entry); the
// shelf records who took it, and Local's sender takes those records
// (Take), counts the placements and sends their decisions, exactly as for
// a job placed in Go. The shelf compares the fields' bytes; it never
// parses a request (wire/gpureq is the one parser).
//
// Implemented over the shim's C by plugin/shelf, whose tests drive Local
// with it. Local calls it with its lock held, never from two goroutines
// at once.
type Shelf interface {
	// Stock replaces what the shelf holds with changes, for jobs whose
	// decision-relevant fields equal key's, to be taken in order within
	// validFor. It does so only when every decision taken from the shelf
	// so far has been handed over by Take: else it changes nothing and
	// ok is false (Local has not counted those yet; it takes them and
	// tries again). gen names this stock in the Used records it yields.
	Stock(key *Job, changes []Change, validFor time.Duration) (gen uint64, ok bool)
	// Take appends the records of decisions taken since the last Take
	// to dst, in the order taken, and forgets them.
	Take(dst []Used) []Used
	// Renew lets stock gen serve validFor from now; false when the
	// shelf holds another stock, or none.
	Renew(gen uint64, validFor time.Duration) bool
	// Clear empties the shelf under the same condition as Stock.
	Clear() bool
}

// SameRequest says whether b asks what a asks, field for field, as the
// shelf compares them (cgo/rota_shelf.c; plugin/shelf tests that the two
// agree): the fields a decision reads, not name or script. An update
// never matches. The user, account and QOS count: the site's typed GPU
// limits leave each its own room (wire.PlaceState.Headroom).
func SameRequest(a, b *Job) bool {
	return !a.Modify && !b.Modify && a.JobID == b.JobID && a.UID == b.UID && a.QOS == b.QOS &&
		a.TimeLimit == b.TimeLimit && a.MinNodes == b.MinNodes &&
		a.NumTasks == b.NumTasks && a.MaxNodes == b.MaxNodes && a.TasksPerNode == b.TasksPerNode &&
		a.SocketsPerNode == b.SocketsPerNode && a.TresPerJob == b.TresPerJob && a.TresPerNode == b.TresPerNode &&
		a.TresPerSocket == b.TresPerSocket && a.TresPerTask == b.TresPerTask && a.Account == b.Account &&
		a.Partition == b.Partition && a.Features == b.Features && slices.Equal(a.SpankEnv, b.SpankEnv)
}

// Used is the record of one decision a job took from the shelf.
type Used struct {
	Gen   uint64 // Stock's gen
	Index int    // its place in that stock's changes
	At    time.Time
	// The job's own fields, which may differ from the stock's key.
	UID        uint32
	Name       string
	ScriptHash string
}

// Stocking: how many decisions ahead, and for how long. A shelf lives
// while the sender polls (every sendLinger): each poll takes what was
// used and tops the shelf up to twice that (at least minStock), so a burst
// at any pace finds one; shelfIdleTicks polls with none used end it, and
// the next job is placed in Go again. validFor bounds how long a stock
// serves if the sender stops polling (it is renewed at every poll).
// shelfIdleTicks is half a second: a script that runs a command between
// its submissions (sbatch then scontrol show job: 60-70 ms a loop on
// Slurm 26.05 here) keeps its stock; a poll costs a goroutine wake.
const (
	minStock       = 16
	maxStock       = 64
	shelfIdleTicks = 25
	stockValidFor  = 5 * sendLinger
)

// stock is what Local put on the shelf, and how to go on.
type stock struct {
	key  Job               // the job placed in Go that the stock repeats
	req  wire.PlaceRequest // key's request
	s    *wire.PlaceState  // the state the items were decided in
	view *placement.View   // s, ours, and every item's reservation: where more items are decided
	// items are the decisions on the shelf not taken yet, in order.
	items []stocked
	gen   uint64 // the shelf's name for the stock; 0 before it is stocked
	taken int    // items taken from gen's stock
	idle  int    // polls in a row that found none taken
}

// stocked is one decision made in advance, explained.
type stocked struct {
	reply  wire.PlaceReply
	res    placement.Result
	change Change
}

// SetShelf gives Local the shim's shelf: from now on a job placed in Go
// (PlaceJob) stocks it for jobs like it.
func (l *Local) SetShelf(s Shelf) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shelf = s
}

// takeLocked counts the placements made from the shelf since the last
// call and queues their records, as Place does for its own.
func (l *Local) takeLocked() int {
	if l.stock == nil {
		return 0 // nothing was stocked, so nothing can have been taken
	}
	l.used = l.shelf.Take(l.used[:0])
	l.shelfTaken += len(l.used)
	st := l.stock
	for _, u := range l.used {
		if u.Gen != st.gen || u.Index != st.taken || len(st.items) == 0 {
			// The shelf gave out a decision Local did not stock: a bug,
			// and its job carries an id the controller will not learn.
			l.sendError(fmt.Errorf("a job took decision %d of stock %d from the shelf, but Local expected %d of %d; its record is lost", u.Index, u.Gen, st.taken, st.gen))
			continue
		}
		it := &st.items[0]
		st.items = st.items[1:]
		st.taken++
		l.seq++
		if r := it.res.Reserve; r != nil && len(l.pending) < maxPending {
			l.pending = append(l.pending, pendingRes{seq: l.seq, res: *r})
			if l.view != nil {
				l.view.Add(*r)
			}
		}
		req := st.req
		req.UID, req.Name, req.ScriptHash = u.UID, u.Name, u.ScriptHash
		select {
		case l.out <- outgoing{s: st.s, res: &it.res, req: req, reply: it.reply, at: u.At, seq: l.seq}:
		default:
			l.sendError(fmt.Errorf("decision %s (job placed from the shelf, record not queued: %w)", it.reply.DecisionID, ErrQueueFull))
		}
	}
	return len(l.used)
}

// emptyShelfLocked takes what was used and empties the shelf: before any
// decision in Go, which the stock did not count on.
func (l *Local) emptyShelfLocked() {
	if l.stock == nil {
		return
	}
	for l.takeLocked(); !l.shelf.Clear(); l.takeLocked() {
	}
	l.stock = nil
}

// tick runs on the sender's goroutine at every poll: it takes the
// decisions used from the shelf (queueing their records) and tops the
// shelf up, or, after shelfIdleTicks polls with none used, empties it.
// busy: the shelf still holds a stock, so the sender must keep polling
// (nothing else would take what is used from it).
func (l *Local) tick() (busy bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shelf == nil || l.stock == nil {
		return false
	}
	st := l.stock
	l.takeLocked()
	n := l.shelfTaken // a miss may have taken some since the last tick
	l.shelfTaken = 0
	if st.gen != 0 && n == 0 {
		if st.idle++; st.idle >= shelfIdleTicks {
			l.emptyShelfLocked()
			return false
		}
	} else {
		st.idle = 0
	}
	if err := l.unusable(l.state.Load(), l.now()); err != nil {
		l.emptyShelfLocked() // the next job goes to Go, which says why
		return false
	}
	l.restockLocked(st, min(max(minStock, 2*n), maxStock))
	return true
}

// restockLocked puts want decisions ahead on the shelf (decided afresh
// when a new state came) unless it holds them already, and renews the
// stock's time either way.
func (l *Local) restockLocked(st *stock, want int) {
	valid := min(stockValidFor, l.MaxAge-l.now().Sub(l.state.Load().got))
	if st.gen != 0 && st.s == l.state.Load().s && len(st.items) >= want && l.shelf.Renew(st.gen, valid) {
		return // enough on the shelf, decided in the latest state
	}
	for range 3 { // the shelf refuses while jobs take from it; rare
		s := l.state.Load().s
		items, v := st.items, st.view
		if s != st.s || v == nil {
			items, v = nil, l.viewLocked(s)
		}
		v = v.Clone() // kept only if the shelf takes the stock
		items = slices.Clip(items)
		for len(items) < want {
			it, err := l.decideAhead(st, s, v)
			if err != nil {
				break
			}
			items = append(items, it)
		}
		if len(items) == 0 {
			// Jobs like it are placed in Go one by one, which fails
			// them open with the reason in the log.
			l.emptyShelfLocked()
			return
		}
		changes := make([]Change, len(items))
		for i := range items {
			changes[i] = items[i].change
		}
		if gen, ok := l.shelf.Stock(&st.key, changes, valid); ok {
			st.s, st.view, st.items, st.gen, st.taken = s, v, items, gen, 0
			return
		}
		l.takeLocked()
	}
}

// decideAhead decides, explains and renders the next decision for a job
// like st's in v, and adds it to v.
func (l *Local) decideAhead(st *stock, s *wire.PlaceState, v *placement.View) (stocked, error) {
	if k := &s.Rule.Kinds; len(k.Interactive.Names)+len(k.Serve.Names) > 0 {
		// The shelf's key leaves out the job's name, which these rules read.
		return stocked{}, errors.New("job names decide kinds: placed one by one")
	}
	res := v.Place(&st.req)
	if res.Kind != "" {
		return stocked{}, errors.New("not a batch job: placed one by one")
	}
	reply := wire.PlaceReply{V: wire.Version, DecisionID: nuid.Next(), GPUType: res.GPUType, TimeLimitMin: res.TimeLimitMin,
		ByFeature: res.ByFeature, Policy: policyName(s), Reason: res.Reason, Kind: res.Kind}
	ch, err := changeFor(&st.key, &st.req, &reply)
	if err != nil {
		return stocked{}, err
	}
	if ch.AdminComment == "" {
		return stocked{}, errors.New("no annotation: not a submission")
	}
	if res.Reserve != nil {
		v.Add(*res.Reserve)
	}
	return stocked{reply: reply, res: res, change: ch}, nil
}
