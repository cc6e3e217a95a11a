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
// for submissions identical to ones it has just placed: the same GPU
// request, partition, account, time limit, constraint and Rota options;
// name and script may differ, as they do in a loop of sbatch. It holds
// them for a few requests at once (its keys: those Local placed lately,
// as a queue fed by many users alternates between a few shapes), as a
// tree: a node is the decision for a job of its key after the jobs of the
// nodes above it, in that order, since each placement changes what the
// next one sees. The shelf stands at the node last taken (at first above
// the tree), and a submission that matches a key takes that node's child
// of that key without entering Go at all, which on a fresh slurmctld RPC
// thread costs about 50 us before any of Rota's code runs
// (scripts/bench-cgo-entry); the shelf records who took it, and Local's
// sender takes those records (Take), counts the placements and sends
// their decisions, exactly as for a job placed in Go. The shelf compares
// the fields' bytes; it never parses a request (wire/gpureq is the one
// parser).
//
// Implemented over the shim's C by plugin/shelf, whose tests drive Local
// with it. Local calls it with its lock held, never from two goroutines
// at once.
type Shelf interface {
	// Stock replaces what the shelf holds with the tree nodes (parents
	// before children), for jobs whose decision-relevant fields equal
	// one of keys' (distinct requests: SameRequest), and stands above
	// the tree; it serves within validFor. It does so only when every
	// decision taken from the shelf so far has been handed over by Take:
	// else it changes nothing and ok is false (Local has not counted
	// those yet; it takes them and tries again). gen names this stock in
	// the Used records it yields.
	Stock(keys []Job, nodes []Node, validFor time.Duration) (gen uint64, ok bool)
	// Take appends the records of decisions taken since the last Take
	// to dst, in the order taken, and forgets them.
	Take(dst []Used) []Used
	// Renew lets stock gen serve validFor from now; false when the
	// shelf holds another stock, or none.
	Renew(gen uint64, validFor time.Duration) bool
	// Clear empties the shelf under the same condition as Stock.
	Clear() bool
}

// Node is one decision of a stock's tree: for a job of Key (an index
// into the stock's keys) once the one of Parent (an earlier node's index,
// -1 for none: the first job) was placed.
type Node struct {
	Parent, Key int
	Change      Change
}

// The shelf's bounds (ROTA_SHELF_KEYS, _NODES and _NOT_NAMES in
// cgo/rota_shim.h): Stock refuses more.
const (
	MaxShelfKeys     = 8
	MaxShelfNodes    = 1024
	MaxShelfNotNames = 16
)

// SameRequest says whether b asks what a asks, field for field, as the
// shelf compares them (cgo/rota_shelf.c; plugin/shelf tests that the two
// agree): the fields a decision reads, not script, nor name unless a
// says so (nameTakes). An update never matches. The user, account and
// QOS count: the site's typed GPU limits leave each its own room
// (wire.PlaceState.Headroom).
func SameRequest(a, b *Job) bool {
	return nameTakes(a, b.Name) && !a.Modify && !b.Modify && a.JobID == b.JobID && a.UID == b.UID && a.QOS == b.QOS &&
		a.TimeLimit == b.TimeLimit && a.MinNodes == b.MinNodes &&
		a.NumTasks == b.NumTasks && a.MaxNodes == b.MaxNodes && a.TasksPerNode == b.TasksPerNode &&
		a.SocketsPerNode == b.SocketsPerNode && a.TresPerJob == b.TresPerJob && a.TresPerNode == b.TresPerNode &&
		a.TresPerSocket == b.TresPerSocket && a.TresPerTask == b.TresPerTask && a.Account == b.Account &&
		a.Partition == b.Partition && a.Features == b.Features && slices.Equal(a.SpankEnv, b.SpankEnv)
}

// Used is the record of one decision a job took from the shelf.
type Used struct {
	Gen   uint64 // Stock's gen
	Index int    // the node taken, an index into that stock's nodes
	At    time.Time
	// The job's own fields, which may differ from the stock's key.
	UID        uint32
	Name       string
	ScriptHash string
}

// Stocking: for how many requests, how many decisions ahead, and for how
// long. A shelf lives while the sender polls (every sendLinger): each poll
// takes what was used and grows the tree again below the node the shelf
// stands at, to the depth that shelfNodes allow for its keys (one key: 64
// jobs ahead; two: 5; four: 2), deciding only the nodes it lacks;
// shelfIdleTicks polls with none used end it, and the next job is placed
// in Go again. validFor bounds how long a stock serves if the sender stops
// polling (it is renewed at every poll). shelfIdleTicks is two seconds:
// a script that runs a command between its submissions (sbatch then
// scontrol show job: 60-70 ms a loop on Slurm 26.05 here) keeps its
// stock, and so does a loop of sbatch on a loaded slurmctld (2 to 25
// submissions a second in bench-submit on the shared 2-core VM, with
// pauses: with half a second, one job in 20 found the shelf emptied); a
// poll costs a goroutine wake, 100 of them after the last job.
const (
	shelfKeys      = 4
	shelfNodes     = 64
	shelfIdleTicks = 100
	stockValidFor  = 5 * sendLinger
)

// shape is one request the shelf holds decisions for: a job placed in Go
// and its request.
type shape struct {
	job Job
	req wire.PlaceRequest
}

// stock is what Local put on the shelf, and how to go on.
type stock struct {
	keys []shape
	s    *wire.PlaceState // the state the nodes were decided in
	// nodes are the tree as stocked (gen), parents first; at is the node
	// the shelf stands at (-1: above the tree), the last one taken.
	nodes []tnode
	at    int
	gen   uint64 // the shelf's name for the stock; 0 before it is stocked
	idle  int    // polls in a row that found none taken
}

// tnode is one node of the tree, explained.
type tnode struct {
	parent, key int
	it          stocked
}

// stocked is one decision made in advance, explained.
type stocked struct {
	reply  wire.PlaceReply
	res    placement.Result
	change Change
}

// SetShelf gives Local the shim's shelf: from now on a job placed in Go
// (PlaceJob) like one placed shortly before stocks it for jobs like the
// last few.
func (l *Local) SetShelf(s Shelf) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shelf = s
}

// nameTakes says whether a job named name may take key k's decisions
// (cgo/rota_shelf.c's name_ok): k's name only where NameKeyed, else any
// name but NotNames.
func nameTakes(k *Job, name string) bool {
	if k.NameKeyed {
		return k.Name == name
	}
	return !slices.Contains(k.NotNames, name)
}

// nameKey sets which names key k's decisions, made in s, hold for: a
// name s learned speeds of, that name only; any other, every name but
// the user's learned ones (too many of those: its own name only).
func nameKey(k *Job, s *wire.PlaceState) {
	k.NameKeyed, k.NotNames = false, nil
	names := s.LearnedNames(k.UID)
	switch {
	case len(names) == 0:
	case len(names) > MaxShelfNotNames || slices.Contains(names, k.Name):
		k.NameKeyed = true
	default:
		k.NotNames = names
	}
}

// noteRecentLocked puts job first among the requests placed lately and
// says whether it was one of them already. learned: it was placed by the
// speeds learned for its name (placement.Result.Learned), so that name is
// a request of its own.
func (l *Local) noteRecentLocked(job *Job, req *wire.PlaceRequest, learned bool) bool {
	k := *job
	k.NameKeyed = learned
	job = &k
	i := 0
	for i < l.nRecent && !(SameRequest(&l.recent[i].job, job) && l.recent[i].job.NameKeyed == learned) {
		i++
	}
	seen := i < l.nRecent
	if !seen {
		if l.nRecent < len(l.recent) {
			l.nRecent++
		}
		i = l.nRecent - 1
	}
	copy(l.recent[1:i+1], l.recent[:i])
	l.recent[0] = shape{job: *job, req: *req}
	return seen
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
		if u.Gen != st.gen || u.Index < 0 || u.Index >= len(st.nodes) || st.nodes[u.Index].parent != st.at {
			// The shelf gave out a decision Local did not stock: a bug,
			// and its job carries an id the controller will not learn.
			l.sendError(fmt.Errorf("a job took node %d of stock %d from the shelf, but Local stands at %d of %d; its record is lost", u.Index, u.Gen, st.at, st.gen))
			continue
		}
		n := &st.nodes[u.Index]
		st.at = u.Index
		l.seq++
		if r := n.it.res.Reserve; r != nil && len(l.pending) < maxPending {
			l.pending = append(l.pending, pendingRes{seq: l.seq, res: *r})
			if l.view != nil {
				l.view.Add(*r)
			}
		}
		req := st.keys[n.key].req
		req.UID, req.Name, req.ScriptHash = u.UID, u.Name, u.ScriptHash
		select {
		case l.out <- outgoing{s: st.s, res: &n.it.res, req: req, reply: n.it.reply, at: u.At, seq: l.seq}:
		default:
			l.sendError(fmt.Errorf("decision %s (job placed from the shelf, record not queued: %w)", n.it.reply.DecisionID, ErrQueueFull))
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
// decisions used from the shelf (queueing their records) and grows the
// tree again, or, after shelfIdleTicks polls with none used, empties it.
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
	l.restockLocked(st)
	return true
}

// treeDepth is how many jobs ahead a tree over k keys decides within
// shelfNodes nodes (at least 1).
func treeDepth(k int) int {
	if k <= 1 {
		return shelfNodes
	}
	d, total, level := 0, 0, 1
	for {
		level *= k
		if total+level > shelfNodes {
			return max(d, 1)
		}
		total += level
		d++
	}
}

// restockLocked grows the tree below the node the shelf stands at (decided
// afresh when a new state came) unless nothing was taken from it since it
// was stocked, and renews the stock's time either way.
func (l *Local) restockLocked(st *stock) {
	valid := min(stockValidFor, l.MaxAge-l.now().Sub(l.state.Load().got))
	if st.gen != 0 && st.s == l.state.Load().s && st.at == -1 && l.shelf.Renew(st.gen, valid) {
		return // as full as it gets, decided in the latest state
	}
	for range 3 { // the shelf refuses while jobs take from it; rare
		s := l.state.Load().s
		var old []tnode
		if s == st.s {
			old = st.nodes
		}
		nodes, err := l.growLocked(st, s, old, st.at)
		if err != nil || len(nodes) == 0 {
			// Jobs like these are placed in Go one by one, which fails
			// them open with the reason in the log.
			l.emptyShelfLocked()
			return
		}
		keys := make([]Job, len(st.keys))
		for i := range st.keys {
			keys[i] = st.keys[i].job
			nameKey(&keys[i], s)
		}
		ns := make([]Node, len(nodes))
		for i := range nodes {
			ns[i] = Node{Parent: nodes[i].parent, Key: nodes[i].key, Change: nodes[i].it.change}
		}
		if gen, ok := l.shelf.Stock(keys, ns, valid); ok {
			st.s, st.nodes, st.at, st.gen = s, nodes, -1, gen
			return
		}
		l.takeLocked()
	}
}

// growLocked is the tree of decisions ahead for st's keys in s, from
// Local's view as it stands (every placement counted): to treeDepth below
// its root, breadth first. The subtree of old (the tree stocked in s)
// below node at, the one last taken, was decided in that same view, so
// its decisions are kept and only the missing nodes decided.
func (l *Local) growLocked(st *stock, s *wire.PlaceState, old []tnode, at int) ([]tnode, error) {
	k := len(st.keys)
	depth := treeDepth(k)
	// oldKids[i+1][key]: old node i's child of key (index 0: the root's).
	var oldKids [][]int
	if old != nil {
		oldKids = make([][]int, len(old)+1)
		for i := range oldKids {
			oldKids[i] = slices.Repeat([]int{-1}, k)
		}
		for i, n := range old {
			oldKids[n.parent+1][n.key] = i
		}
	}
	type open struct {
		old, idx, depth int
		view            *placement.View // with every decision above it and its own
	}
	queue := []open{{old: at, idx: -1, view: l.viewLocked(s).Clone()}}
	if old == nil {
		queue[0].old = -2 // nothing to keep
	}
	var nodes []tnode
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for key := range k {
			var it stocked
			o := -2
			if q.old >= -1 {
				o = oldKids[q.old+1][key]
			}
			if o >= 0 {
				it = old[o].it
			} else {
				var err error
				if it, err = l.decideAhead(&st.keys[key], s, q.view); err != nil {
					if errors.Is(err, errNamesDecideKinds) {
						return nil, err
					}
					continue // jobs of this key go to Go here
				}
				o = -2
			}
			nodes = append(nodes, tnode{parent: q.idx, key: key, it: it})
			if q.depth+1 < depth {
				v := q.view.Clone()
				if r := it.res.Reserve; r != nil {
					v.Add(*r)
				}
				queue = append(queue, open{old: o, idx: len(nodes) - 1, depth: q.depth + 1, view: v})
			}
		}
	}
	return nodes, nil
}

var errNamesDecideKinds = errors.New("job names decide kinds: placed one by one")

// decideAhead decides, explains and renders the decision for a job of sh
// in v (which it leaves as it was).
func (l *Local) decideAhead(sh *shape, s *wire.PlaceState, v *placement.View) (stocked, error) {
	if k := &s.Rule.Kinds; len(k.Interactive.Names)+len(k.Serve.Names) > 0 {
		// The shelf's key leaves out the job's name, which these rules read.
		return stocked{}, errNamesDecideKinds
	}
	res := v.Place(&sh.req)
	if res.Kind != "" {
		return stocked{}, errors.New("not a batch job: placed one by one")
	}
	reply := wire.PlaceReply{V: wire.Version, DecisionID: nuid.Next(), GPUType: res.GPUType, TimeLimitMin: res.TimeLimitMin,
		ByFeature: res.ByFeature, Policy: policyName(s), Reason: res.Reason, Kind: res.Kind, HoldS: res.HoldS}
	ch, err := changeFor(&sh.job, &sh.req, &reply)
	if err != nil {
		return stocked{}, err
	}
	if ch.AdminComment == "" {
		return stocked{}, errors.New("no annotation: not a submission")
	}
	return stocked{reply: reply, res: res, change: ch}, nil
}
