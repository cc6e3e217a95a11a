// Package placement is Rota's submit-time placement rule as a pure
// function of a wire.PlaceState and a request. The controller
// (controller/placer) and the job_submit plugin (plugin/submit, placement
// = local) run this same code, so a plugin deciding on slurmctld's thread from the state the
// controller pushed decides what the controller would have. It imports
// nothing but wire and small helpers: it is linked into the plugin's .so.
package placement

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rota-hpc/rota/internal/slurmtime"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
	"github.com/rota-hpc/rota/wire/gputype"
)

// Result is a placement with the numbers behind it, for `rota explain`.
type Result struct {
	GPUType      string // "" keeps the request's type
	TimeLimitMin uint32 // 0 keeps the request's time limit
	Reason       string
	Numbers      map[string]float64
	// ByFeature: express GPUType as a node constraint (see
	// cluster.TypeCap.ByFeature).
	ByFeature bool
	// Reserve is what the caller must add to its state (Apply): the GPUs
	// this placement took, and the slots it booked. nil: no type chosen.
	Reserve *wire.Reservation
	// Kind is the job's kind (KindOf) when not a batch job, "" for one.
	Kind string
	// HoldS: let the job start no sooner than this many seconds after
	// submission (wire.PlaceReply.HoldS); 0 none.
	HoldS uint32
	// Learned: the request gave no rate hint and the state's learned
	// speeds for its user and name stood in (wire.PlaceState.Learned).
	Learned bool
}

// Speed is type t's relative speed in r (gputype.Speed: the table's, a
// MIG slice's share of its whole GPU's, else 1).
func Speed(r *wire.PlaceRule, t string) float64 {
	s, _ := gputype.Speed(r.Speed, t)
	return s
}

// Apply adds a placement's reservation to s, which the caller owns:
// its GPUs to Reserved and, for a booking, its slots. Slot lists are
// replaced, never changed in place, so copies of s handed out earlier
// (maps.Clone) stay as they were.
func Apply(s *wire.PlaceState, r wire.Reservation) {
	if r.GPUs <= 0 || r.Type == "" {
		return
	}
	if s.Reserved == nil {
		s.Reserved = map[string]int{}
	}
	s.Reserved[r.Type] += r.GPUs
	if r.Interactive {
		if s.InteractiveHeld == nil {
			s.InteractiveHeld = map[string]int{}
		}
		s.InteractiveHeld[r.Type] += r.GPUs
	}
	if r.FinishS > 0 && len(s.Slots[r.Type]) > 0 {
		s.Slots[r.Type] = book(s.Slots[r.Type], r.GPUs, r.FinishS)
	}
	TakeRoom(s, r)
}

// TakeRoom takes r's GPUs off its user's headroom in s (typed limits),
// when r carries one.
func TakeRoom(s *wire.PlaceState, r wire.Reservation) {
	if h, ok := s.Headroom[r.UID]; ok && r.Room != "" && r.GPUs > 0 {
		if _, limited := h.Left[r.Room][r.Type]; limited {
			// Copies all the way down: states handed out share these maps.
			left := maps.Clone(h.Left[r.Room])
			left[r.Type] -= r.GPUs
			h.Left = maps.Clone(h.Left)
			h.Left[r.Room] = left
			s.Headroom = maps.Clone(s.Headroom)
			s.Headroom[r.UID] = h
		}
	}
}

// book returns a copy of the sorted slots sl with the n earliest held
// until finish: the job runs on them from the n-th earliest on. Slots
// whose end is unknown are not in sl and stay unknown.
func book(sl []float64, n int, finish float64) []float64 {
	out := slices.Clone(sl)
	for i := 0; i < n && i < len(out); i++ {
		out[i] = max(out[i], finish)
	}
	sort.Float64s(out)
	return out
}

// View is a state as one placer sees it: the state plus the placer's own
// reservations that the state does not count yet. Place and Decide build
// one from a list for each call; the plugin keeps one per state and adds
// each of its placements to it (Add), so a decision on slurmctld's thread
// costs the same however many placements wait for the controller to count
// them (a burst's worth: the controller confirms them about once a
// second). Not safe for concurrent use.
type View struct {
	s        *wire.PlaceState
	reserved map[string]int       // extra GPUs per type
	slots    map[string][]float64 // types whose slots extra bookings changed
	types    []string             // the cluster's GPU types, sorted: the order candidates are judged in
	// roomTaken: GPUs extra placements took from users' headroom, by
	// "uid|room key|type" (typed limits: wire.PlaceState.Headroom).
	roomTaken map[string]int
	// iTaken: GPUs extra interactive placements took, per type (out of
	// the interactive reserve first).
	iTaken map[string]int
}

// NewView is s with extra (in the order they were placed) counted too.
// Neither is changed.
func NewView(s *wire.PlaceState, extra []wire.Reservation) *View {
	v := &View{s: s}
	if s != nil && s.Cluster != nil {
		v.types = slices.Sorted(maps.Keys(s.Cluster.Types))
	}
	for _, r := range extra {
		v.Add(r)
	}
	return v
}

// State is the state v adds to.
func (v *View) State() *wire.PlaceState { return v.s }

// Clone is a copy of v that Adds to without changing v: for deciding
// ahead what v would decide for several requests in turn.
func (v *View) Clone() *View {
	// Slot lists are replaced by Add, never changed in place, so
	// sharing them is safe; the maps are not.
	return &View{s: v.s, reserved: maps.Clone(v.reserved), slots: maps.Clone(v.slots), types: v.types,
		roomTaken: maps.Clone(v.roomTaken), iTaken: maps.Clone(v.iTaken)}
}

// Add counts one more of the placer's reservations (Result.Reserve of a
// decision made in v). The state is not changed: booked slots are copied.
func (v *View) Add(r wire.Reservation) {
	if r.GPUs <= 0 {
		return
	}
	if v.reserved == nil {
		v.reserved = map[string]int{}
	}
	v.reserved[r.Type] += r.GPUs
	if r.Interactive {
		if v.iTaken == nil {
			v.iTaken = map[string]int{}
		}
		v.iTaken[r.Type] += r.GPUs
	}
	if r.Room != "" {
		if v.roomTaken == nil {
			v.roomTaken = map[string]int{}
		}
		v.roomTaken[roomID(r.UID, r.Room, r.Type)] += r.GPUs
	}
	if r.FinishS > 0 && len(v.slotsOf(r.Type)) > 0 {
		if v.slots == nil {
			v.slots = map[string][]float64{}
		}
		v.slots[r.Type] = book(v.slotsOf(r.Type), r.GPUs, r.FinishS)
	}
}

// Place is the package's Place in v: the decision with its reason and
// numbers.
func (v *View) Place(req *wire.PlaceRequest) Result { return place(v, req, true) }

// Decide is the package's Decide in v.
func (v *View) Decide(req *wire.PlaceRequest) Result { return place(v, req, false) }

func (v *View) slotsOf(t string) []float64 {
	if sl, ok := v.slots[t]; ok {
		return sl
	}
	if v.s == nil { // no state yet: place keeps every request
		return nil
	}
	return v.s.Slots[t]
}

func (v *View) taken(t string) int { return v.s.Reserved[t] + v.reserved[t] }

func roomID(uid uint32, key, t string) string {
	return strconv.FormatUint(uint64(uid), 10) + "|" + key + "|" + t
}

// room is what the user's typed limits leave of type t to this request,
// less what v's extra placements took; limited false: no limit.
func (v *View) room(req *wire.PlaceRequest, key, t string) (left int, why string, limited bool) {
	left, why, limited = v.s.Room(req.UID, key, t)
	if limited && v.roomTaken != nil {
		left -= v.roomTaken[roomID(req.UID, key, t)]
	}
	return left, why, limited
}

// Place decides one request from state s, counting extra (the caller's
// own placements that s does not count yet; may be nil) as taken too. It
// changes neither: the caller applies Result.Reserve.
//
// The rule: a request that names a type (or several, or a constraint
// naming one) keeps it unless the admin allows retyping. Otherwise, of the
// GPU types that can hold the whole job as asked (Holds: in its
// partition, enough nodes with enough GPUs each and in all, with the
// features it asks for; when none can, it is left as asked): a job whose
// work is known (steps and a rate hint) goes where it would finish first,
// counting the wait for a GPU there (list scheduling over free GPUs, the
// round loop's estimates of when busy ones free, and earlier bookings);
// any other job goes to the type with the most free GPUs weighted by its
// speed there, or, when none has room now, the most capacity weighted by
// speed (it queues where it runs fastest on average). The walltime comes
// from the hints (walltime).
func Place(s *wire.PlaceState, extra []wire.Reservation, req *wire.PlaceRequest) Result {
	return NewView(s, extra).Place(req)
}

// Decide is Place without the reason and the numbers: the same type,
// walltime and reservation, for the plugin's submit path, where every
// microsecond is slurmctld's. Place with the same arguments explains it.
func Decide(s *wire.PlaceState, extra []wire.Reservation, req *wire.PlaceRequest) Result {
	return NewView(s, extra).Decide(req)
}

// notes collects the numbers behind a placement when explaining; when
// not, every set is a no-op and no key is built.
type notes map[string]float64

func (n notes) set(k string, v float64) {
	if n != nil {
		n[k] = v
	}
}

func (n notes) set2(prefix, t string, v float64) {
	if n != nil {
		n[prefix+t] = v
	}
}

func place(v *View, req *wire.PlaceRequest, explain bool) Result {
	var rules *wire.KindRules
	learned := false
	if v.s != nil {
		rules = &v.s.Rule.Kinds
		if len(req.Hints.Throughput) == 0 {
			// The controller measured this user's job of this name: its
			// speeds stand for the hint the user did not give. Steps stay
			// unknown, so no walltime comes of them.
			if rates := v.s.LearnedRates(req.UID, req.Name); len(rates) > 0 {
				r := *req
				r.Hints.Throughput = rates
				req, learned = &r, true
			}
		}
	}
	kind, why := KindOf(req, rules)
	var res Result
	switch kind {
	case wire.KindInteractive:
		res = placeInteractive(v, req, explain)
	case wire.KindServe:
		res = placeServe(v, req, explain)
	default:
		res = placeBatch(v, req, explain)
	}
	if kind != wire.KindBatch {
		res.Kind = kind
		if explain {
			res.Reason = kind + " job (" + why + "); " + res.Reason
		}
	}
	res.Learned = learned
	if learned && explain && kind == wire.KindBatch && res.Reserve != nil {
		// Said only where the speeds chose among types.
		res.Reason += "; its speed per GPU type as measured for this user's latest job named " + strconv.Quote(req.Name) + " (it gave no rate hint)"
	}
	return res
}

// userKeeps says whether req keeps the GPU type its user gave, and why:
// several types named, a type in its constraint, or a named type while
// retyping typed requests is off. t is the type kept ("" for several).
func userKeeps(req *wire.PlaceRequest, cv *wire.ClusterView, r *wire.PlaceRule) (t, why string, keeps bool) {
	switch {
	case len(req.GPU.Types) > 1:
		return "", "several GPU types named (" + strings.Join(req.GPU.Types, ",") + "); request kept", true
	case req.GPU.Type == "":
		if t := constraintType(req.Features, cv); t != "" {
			return t, "user's constraint names type " + t + "; type kept", true
		}
	case !r.RetypeTyped:
		if _, known := cv.Types[req.GPU.Type]; !known {
			return req.GPU.Type, "user named type " + req.GPU.Type + ", which no usable node has; request kept", true
		}
		return req.GPU.Type, "user named type " + req.GPU.Type + " (retyping typed requests is off); type kept", true
	}
	return "", "", false
}

// placeBatch places req as a batch job.
func placeBatch(v *View, req *wire.PlaceRequest, explain bool) Result {
	var num notes
	if explain {
		num = notes{}
	}
	s := v.s
	if s == nil || s.Cluster == nil {
		return Result{Reason: "no view of the cluster yet (first Slurm refresh pending); request kept", Numbers: num}
	}
	cv, r := s.Cluster, &s.Rule
	need := gpureq.NeedOf(req.GPU)
	total := need.Total
	num.set("need.total", float64(total))
	num.set("need.per_node", float64(need.PerNode))
	num.set("need.nodes", float64(need.Nodes))
	parts := req.Partition
	if parts == "" {
		parts = cv.DefaultPartition
	}
	part := parts
	if i := strings.IndexByte(part, ','); i >= 0 {
		part = part[:i] // several partitions: MaxTime by the first
	}

	var res Result
	if t, why, ok := userKeeps(req, cv, r); ok {
		res.Reason = why
		res.TimeLimitMin = walltime(s, req, t, part, num)
		return withNumbers(res, num)
	}

	var fitsBuf [8]cand // no allocation for the usual handful of types
	fits := fitsBuf[:0]
	cons := readConstraint(req.Features)
	// The user's typed limits: a type whose limit the job would exceed
	// is left out while another can hold it (Slurm would keep it pending
	// there); if every type is at a limit, the job waits at one as if
	// its user had named the type.
	roomKey := s.RoomKey(req.UID, req.Account, req.QOS)
	var limitedBuf [8]cand
	limited, limitWhy, memWhy := limitedBuf[:0], "", ""
	allowed, restricted := AllowedTypes(req.Hints, req.Features, func(f string) bool { _, ok := cv.Types[f]; return ok })
	for _, t := range v.types {
		tc := cv.Types[t]
		if restricted && !slices.Contains(allowed, t) {
			num.set2("allowed.", t, 0)
			continue
		}
		if !holds(&tc, need, parts, cons) {
			// Only types that can hold the whole job as asked: any other
			// would leave it refused or pending for good.
			num.set2("holds.", t, 0)
			continue
		}
		if ok, why := FitsMemory(r, t, req.Hints.GPUMemBytes, nil); !ok {
			num.set2("memory_fits.", t, 0)
			if explain {
				memWhy += "; " + why
			}
			continue
		}
		free := v.batchFree(t) // the interactive reserve is not its to take
		sp := jobSpeed(r, req, t)
		if left, why, lim := v.room(req, roomKey, t); lim && left < total {
			num.set2("limit_left.", t, float64(left))
			limited = append(limited, cand{t: t, free: free, score: float64(free) * sp})
			if explain {
				limitWhy += "; " + t + " left out: " + why + " reached"
			}
			continue
		}
		num.set2("free.", t, float64(free))
		num.set2("speed.", t, Speed(r, t))
		if len(req.Hints.Throughput) > 0 {
			num.set2("job_speed.", t, sp)
		}
		fits = append(fits, cand{t: t, free: free, score: float64(free) * sp})
	}
	if len(fits) == 0 && len(limited) > 0 {
		// Every type that holds it is at one of the user's limits.
		fits = limited
		limitWhy = strings.ReplaceAll(limitWhy, " left out: ", " (waits for its limit): ")
	}
	if len(fits) == 0 {
		res.Reason = "no single GPU type can hold the job as asked; left as asked"
		switch {
		case restricted && r.ElsewhereHoldS > 0 && noneHere(allowed, cv):
			// Multi-cluster (docs/multicluster.md): another cluster may
			// have the types; hold the job for the controller to send it
			// there. Unsent, it starts as asked when the hold ends.
			res.HoldS = r.ElsewhereHoldS
			res.Reason = "none of the GPU types the user allows (" + ChoiceWords(allowed, req.Hints, req.Features) +
				") is on this cluster; held up to " + strconv.FormatUint(uint64(res.HoldS), 10) + " s for another cluster that has them, then left as asked"
		case restricted:
			res.Reason = "none of the GPU types the user allows (" + ChoiceWords(allowed, req.Hints, req.Features) + ") can hold the job as asked; left as asked"
		case explain && memWhy != "":
			res.Reason = "no GPU type with the memory the job needs can hold it as asked (" + memWhy[2:] + "); left as asked"
		case explain:
			res.Reason = NoTypeReason(need, parts, req.Features)
		}
		return withNumbers(res, num)
	}
	if memWhy != "" {
		limitWhy += memWhy
	}
	if restricted && explain {
		limitWhy += "; chosen among the types the user allows (" + ChoiceWords(allowed, req.Hints, req.Features) + ")"
	}
	if r, ok := earliestFinish(v, req, fits, total, part, num); ok {
		return withRoom(r, req, roomKey, limitWhy)
	}
	best, room := fits[0], false
	for _, c := range fits {
		if c.free >= total && (!room || c.score > best.score) {
			best, room = c, true
		}
	}
	switch {
	case !explain:
		if !room {
			f := v.awayFromFreeReserve(fits)
			best = mostCapacity(cv, r, req, f, f[0])
		}
	case room:
		res.Reason = fmt.Sprintf("%s has the most free GPUs weighted by speed: %d free x %.3g = %.3g (of %d types that fit)",
			best.t, best.free, jobSpeed(r, req, best.t), best.score, len(fits))
	default:
		f := v.awayFromFreeReserve(fits)
		best = mostCapacity(cv, r, req, f, f[0])
		res.Reason = fmt.Sprintf("no type has %d GPUs free now; %s has the most capacity weighted by speed (%d x %.3g)",
			total, best.t, cv.Types[best.t].Total, jobSpeed(r, req, best.t))
	}
	res.Reserve = &wire.Reservation{Type: best.t, GPUs: total}
	if explain {
		if _, src := gputype.Speed(r.Speed, best.t); src == gputype.FromSlice {
			// An estimate nobody measured: say where it comes from.
			res.Reason += "; " + best.t + "'s speed " + gputype.SpeedBasis(r.Speed, best.t)
		}
	}
	num.set("chosen.score", best.score)
	if best.t != req.GPU.Type {
		res.GPUType = best.t
		res.ByFeature = cv.TypeByFeature(best.t)
	}
	res.TimeLimitMin = walltime(s, req, best.t, part, num)
	return withRoom(withNumbers(res, num), req, roomKey, limitWhy)
}

// noneHere says that no type of allowed is on the cluster at all.
func noneHere(allowed []string, cv *wire.ClusterView) bool {
	for _, t := range allowed {
		if _, ok := cv.Types[t]; ok {
			return false
		}
	}
	return true
}

// AllowedTypes are the GPU types a job lets Rota choose from: those of
// --rota-types (hints.Types), those a constraint offers as alternatives
// ("v100|p100", gpureq.TypeChoice), or what both allow. restricted is
// false when the job leaves every type open.
func AllowedTypes(h wire.Hints, features string, isType func(string) bool) (allowed []string, restricted bool) {
	choice := gpureq.TypeChoice(features, isType)
	switch {
	case len(h.Types) == 0 && choice == nil:
		return nil, false
	case len(h.Types) == 0:
		return choice, true
	case choice == nil:
		return h.Types, true
	}
	for _, t := range h.Types {
		if slices.Contains(choice, t) {
			allowed = append(allowed, t)
		}
	}
	return allowed, true
}

// ChoiceWords says which types a job allows and how its user said so
// ("k80,v100: k80|v100 (constraint)"), for placement reasons.
func ChoiceWords(allowed []string, h wire.Hints, features string) string {
	set := strings.Join(allowed, ",")
	if set == "" {
		set = "none in common"
	}
	return set + ": " + HowAllowed(h, features)
}

// HowAllowed says how a user limited the types Rota may choose
// ("p100,v100 (--rota-types) and k80|v100 (constraint)"; "" not at all).
func HowAllowed(h wire.Hints, features string) string {
	var how []string
	if len(h.Types) > 0 {
		how = append(how, strings.Join(h.Types, ",")+" (--rota-types)")
	}
	if strings.Contains(features, "|") {
		how = append(how, features+" (constraint)")
	}
	return strings.Join(how, " and ")
}

// withRoom marks a placement of a user with typed limits, so that its
// GPUs come off the user's headroom too, and adds to the reason which
// types a limit left out.
func withRoom(res Result, req *wire.PlaceRequest, key, why string) Result {
	if key != "" && res.Reserve != nil {
		res.Reserve.UID, res.Reserve.Room = req.UID, key
	}
	if why != "" && res.Reason != "" {
		res.Reason += why
	}
	return res
}

// mostCapacity is the type with the most GPUs in all weighted by the
// job's speed there: where a job that cannot start now queues.
func mostCapacity(cv *wire.ClusterView, r *wire.PlaceRule, req *wire.PlaceRequest, fits []cand, best cand) cand {
	for _, c := range fits {
		capScore := float64(cv.Types[c.t].Total) * jobSpeed(r, req, c.t)
		if capScore > float64(cv.Types[best.t].Total)*jobSpeed(r, req, best.t) {
			best = c
		}
	}
	return best
}

// cand is a GPU type that can hold the job.
type cand struct {
	t     string
	free  int
	score float64
}

// earliestFinish places a job whose work is known on the type where it
// would finish first, counting the wait for a GPU there. The slots are
// sorted, so the total-th earliest is when the job could start; a type
// with fewer known slots than the job needs is left out. ok is false when
// the job's work is unknown or no type has enough known slots.
func earliestFinish(v *View, req *wire.PlaceRequest, fits []cand, total int, part string, num notes) (Result, bool) {
	if req.Hints.Steps == 0 || len(req.Hints.Throughput) == 0 || total <= 0 {
		return Result{}, false
	}
	r := &v.s.Rule
	best, bestFinish, bestStart := "", math.Inf(1), 0.0
	for _, c := range fits {
		sl := v.slotsOf(c.t)
		// The earliest GPUs stand for the interactive reserve.
		sl = sl[min(v.reserveLeft(c.t), len(sl)):]
		rate := jobSpeed(r, req, c.t)
		if len(sl) < total || rate <= 0 {
			continue
		}
		start := sl[total-1]
		if start > 0 && v.reserveLeft(c.t) > 0 {
			// It would wait for c.t, where Slurm would start it on the
			// free reserved GPU at once.
			continue
		}
		run := float64(req.Hints.Steps) / rate
		num.set2("start_s.", c.t, start)
		num.set2("run_s.", c.t, run)
		if f := start + run; f < bestFinish {
			best, bestFinish, bestStart = c.t, f, start
		}
	}
	if best == "" {
		return Result{}, false
	}
	var res Result
	if num != nil {
		res.Reason = fmt.Sprintf("%s finishes it soonest: a GPU there in %.0f s, then %.0f s of work (of %d types that fit)",
			best, bestStart, bestFinish-bestStart, len(fits))
	}
	res.Reserve = &wire.Reservation{Type: best, GPUs: total, FinishS: bestFinish}
	if best != req.GPU.Type {
		res.GPUType = best
		res.ByFeature = v.s.Cluster.TypeByFeature(best)
	}
	res.TimeLimitMin = walltime(v.s, req, best, part, num)
	return withNumbers(res, num), true
}

// jobSpeed is how fast this job runs on type t relative to the others:
// its hinted steps/s there (wire.Hints.StepsPerSecond, scaled by the speed
// table); without hints the speed table itself. Only the ratios between
// types matter to the rule.
func jobSpeed(r *wire.PlaceRule, req *wire.PlaceRequest, t string) float64 {
	if v := req.Hints.StepsPerSecond(t, func(ty string) float64 { return Speed(r, ty) }); v > 0 {
		return v
	}
	return Speed(r, t)
}

// constraintType is the GPU type a job's constraint names, if any.
func constraintType(features string, cv *wire.ClusterView) string {
	return gpureq.FeatureType(features, func(f string) bool { _, ok := cv.Types[f]; return ok })
}

func withNumbers(r Result, num notes) Result {
	r.Numbers = num
	return r
}

// walltime estimates the run time on type t from the user's hints: total
// steps over steps/s on t (given for t, or scaled from another type by the
// speed table), times the margin, plus overhead; capped by the user's limit
// and the partition's MaxTime. 0 means "no estimate: keep".
func walltime(s *wire.PlaceState, req *wire.PlaceRequest, t, part string, num notes) uint32 {
	r := &s.Rule
	steps := req.Hints.Steps
	if steps == 0 || len(req.Hints.Throughput) == 0 || t == "" {
		return 0
	}
	rate := jobSpeed(r, req, t)
	if !(rate > 0) {
		return 0
	}
	est := float64(steps)/rate*r.WalltimeMargin/60 + float64(r.WalltimeOverheadMin)
	num.set("est.steps_per_s", rate)
	num.set("est.minutes_uncapped", est)
	m := uint32(math.Min(math.Ceil(est), float64(slurmtime.Unlimited-1)))
	if pt, ok := s.Cluster.Partitions[part]; ok && pt.MaxTimeMin > 0 && m > pt.MaxTimeMin {
		m = pt.MaxTimeMin
	}
	if req.TimeLimitMin > 0 && m > req.TimeLimitMin {
		m = req.TimeLimitMin
	}
	return m
}
