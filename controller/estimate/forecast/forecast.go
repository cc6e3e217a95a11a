// Package forecast answers `rota estimate`: for a job and every partition
// and GPU type of the site, does it fit, how long would it run, how long
// would it wait, what would it cost, does it need a chain of jobs, and
// which of them finishes first or costs least. It is arithmetic on the
// knowledge base (controller/site) and on two questions it asks the
// controller through Sources: the job's steps/s per type and the
// predicted queue wait. A number it cannot know is left out with the
// reason, never guessed.
package forecast

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/rota-hpc/rota/controller/site"
	"github.com/rota-hpc/rota/wire"
	"github.com/rota-hpc/rota/wire/gpureq"
)

// Rate is a job's steps/s on one GPU type, or why it is unknown.
type Rate struct {
	StepsPerSec float64 // 0: unknown
	Basis       string  // where it came from, or why unknown
}

// Wait is a predicted queue wait, or why it is unknown.
type Wait struct {
	Minutes float64
	Known   bool
	Basis   string
}

// WaitQuery is one job shape on one partition and GPU type.
type WaitQuery struct {
	Partition, GPUType string
	Nodes, GPUs        int
	LimitMin           uint32 // the limit the job (or one segment) would ask for; 0 unknown
}

// Sources are the controller's estimators.
type Sources interface {
	// Rates returns the job's aggregate steps/s on each of types.
	Rates(types []string) []Rate
	// Wait predicts the queue wait of one job shape now.
	Wait(q WaitQuery) Wait
}

// Fits values.
const (
	Yes     = "yes"
	No      = "no"
	Unknown = "unknown"
)

// shape is the job's size as asked.
type shape struct {
	gpus        int // total; 0 when it depends on the node count
	perNode     int // GPUs per node, 0 when not fixed
	nodes       int // 0: as many as needed
	cores       int
	coresGiven  bool
	gpuMem      uint64
	memPerNode  uint64
	limitMin    uint32
	description string
}

func jobShape(r *wire.EstimateRequest) (shape, error) {
	s := shape{nodes: int(r.Nodes), gpuMem: r.GPUMemBytes, memPerNode: r.MemPerNodeMB, limitMin: r.TimeLimitMin}
	if r.GPUsPerNode == 0 && r.GPUsPerJob == 0 && r.GPUsPerTask == 0 {
		return s, fmt.Errorf("the job asks for no GPUs (give --gpus, or #SBATCH --gres=gpu:N / --gpus / --gpus-per-node / --gpus-per-task)")
	}
	if r.GPUsPerNode > 1<<20 || r.GPUsPerJob > 1<<20 || r.GPUsPerTask > 1<<20 || r.Nodes > 1<<20 || r.Tasks > 1<<20 {
		return s, fmt.Errorf("the job asks for more GPUs, nodes or tasks than a cluster has (over %d): too many to be real", 1<<20)
	}
	// Counted as everywhere else in Rota (gpureq.NeedOf).
	s.gpus = gpureq.NeedOf(wire.GPUAsk{PerNode: r.GPUsPerNode, PerJob: r.GPUsPerJob, PerTask: r.GPUsPerTask, Nodes: r.Nodes, Tasks: r.Tasks}).Total
	switch {
	case r.GPUsPerNode > 0:
		s.perNode = int(r.GPUsPerNode)
		s.nodes = max(s.nodes, 1)
	case s.nodes > 0:
		s.perNode = (s.gpus + s.nodes - 1) / s.nodes
	}
	if s.gpus > 1<<20 || s.nodes > 1<<20 {
		return s, fmt.Errorf("the job asks for %d GPUs on %d nodes: too many to be real", s.gpus, s.nodes)
	}
	// Slurm gives a job one task per node and one CPU per task unless
	// told otherwise.
	tasks := int(r.Tasks)
	if tasks == 0 {
		tasks = max(s.nodes, 1)
	}
	cpt := max(int(r.CPUsPerTask), 1)
	s.cores, s.coresGiven = tasks*cpt, r.Tasks > 0 || r.CPUsPerTask > 0
	return s, nil
}

// Estimate answers req on the site.
func Estimate(st *wire.Site, req *wire.EstimateRequest, src Sources) *wire.EstimateReply {
	rep := &wire.EstimateReply{V: wire.Version, Unit: st.Charging.Unit}
	sh, err := jobShape(req)
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.GPUs, rep.Cores = sh.gpus, sh.cores
	if req.Partition != "" {
		if _, ok := site.Partition(st, req.Partition); !ok {
			rep.Error = fmt.Sprintf("no partition %q on this cluster (partitions: %s)", req.Partition, partitionNames(st))
			return rep
		}
	}
	// Every (partition, type) pair with GPUs of that type.
	type pair struct {
		p  *wire.SitePartition
		pt wire.SitePartitionType
	}
	var pairs []pair
	typeSet := map[string]bool{}
	for i := range st.Partitions {
		p := &st.Partitions[i]
		if req.Partition != "" && p.Name != req.Partition {
			continue
		}
		for _, pt := range p.Types {
			if req.GPUType != "" && !strings.EqualFold(pt.Type, req.GPUType) {
				continue
			}
			pairs = append(pairs, pair{p, pt})
			typeSet[pt.Type] = true
		}
	}
	if len(pairs) == 0 {
		what := "any partition"
		if req.Partition != "" {
			what = "partition " + req.Partition
		}
		if req.GPUType != "" {
			rep.Error = fmt.Sprintf("no usable %s GPUs in %s", req.GPUType, what)
		} else {
			rep.Error = fmt.Sprintf("no usable typed GPUs in %s", what)
		}
		return rep
	}
	types := make([]string, 0, len(typeSet))
	for t := range typeSet {
		types = append(types, t)
	}
	sort.Strings(types)
	rates := map[string]Rate{}
	for i, r := range src.Rates(types) {
		if i < len(types) {
			rates[types[i]] = r
		}
	}
	for _, x := range pairs {
		rep.Rows = append(rep.Rows, row(st, req, sh, x.p, x.pt, rates[x.pt.Type], src))
	}
	plan(rep)
	return rep
}

func partitionNames(st *wire.Site) string {
	var n []string
	for _, p := range st.Partitions {
		n = append(n, p.Name)
	}
	return strings.Join(n, ", ")
}

func ptr(v float64) *float64 { return &v }

// row is the job on one partition and type.
func row(st *wire.Site, req *wire.EstimateRequest, sh shape, p *wire.SitePartition, pt wire.SitePartitionType, rate Rate, src Sources) wire.EstimateRow {
	r := wire.EstimateRow{Partition: p.Name, GPUType: pt.Type, Debug: p.Debug, MaxTimeMin: p.MaxTimeMin}
	var no, unknown []string

	// Nodes and GPUs per node on this type.
	perNode, nodes := sh.perNode, sh.nodes
	if nodes == 0 {
		nodes = max((sh.gpus+pt.MaxPerNode-1)/max(pt.MaxPerNode, 1), 1)
		perNode = (sh.gpus + nodes - 1) / nodes
	}
	r.Nodes = nodes
	switch {
	case perNode > pt.MaxPerNode:
		no = append(no, fmt.Sprintf("%d GPUs per node, %s nodes have %d", perNode, pt.Type, pt.MaxPerNode))
	case nodes > pt.Nodes:
		no = append(no, fmt.Sprintf("%d nodes needed, %s has %d usable %s nodes", nodes, p.Name, pt.Nodes, pt.Type))
	}
	if p.MaxNodes > 0 && nodes > int(p.MaxNodes) {
		no = append(no, fmt.Sprintf("%d nodes, partition MaxNodes=%d", nodes, p.MaxNodes))
	}
	if p.MinNodes > 0 && nodes < int(p.MinNodes) {
		no = append(no, fmt.Sprintf("%d nodes, partition MinNodes=%d", nodes, p.MinNodes))
	}
	if p.State != "" && !strings.EqualFold(p.State, "UP") {
		no = append(no, "partition state "+p.State)
	}
	coresPerNode := (sh.cores + nodes - 1) / nodes
	if p.MaxCPUsPerNode > 0 && coresPerNode > int(p.MaxCPUsPerNode) {
		no = append(no, fmt.Sprintf("%d CPUs per node, partition MaxCPUsPerNode=%d", coresPerNode, p.MaxCPUsPerNode))
	}
	if sh.coresGiven {
		if pt.MinCPUsPerNode == 0 {
			unknown = append(unknown, "CPUs of the "+pt.Type+" nodes unknown")
		} else if coresPerNode > pt.MinCPUsPerNode {
			no = append(no, fmt.Sprintf("%d CPUs per node, the %s nodes have %d", coresPerNode, pt.Type, pt.MinCPUsPerNode))
		}
	}
	if sh.memPerNode > 0 {
		if p.MaxMemPerNodeMB > 0 && sh.memPerNode > p.MaxMemPerNodeMB {
			no = append(no, fmt.Sprintf("--mem %d MB, partition MaxMemPerNode=%d MB", sh.memPerNode, p.MaxMemPerNodeMB))
		}
		if pt.MinMemPerNodeMB == 0 {
			unknown = append(unknown, "memory of the "+pt.Type+" nodes unknown")
		} else if sh.memPerNode > pt.MinMemPerNodeMB {
			no = append(no, fmt.Sprintf("--mem %d MB, the %s nodes have %d MB", sh.memPerNode, pt.Type, pt.MinMemPerNodeMB))
		}
	}
	if sh.gpuMem > 0 {
		g, _ := site.GPUType(st, pt.Type)
		if g.MemoryBytes == 0 {
			unknown = append(unknown, fmt.Sprintf("GPU memory of %s unknown (set gpu_mem.%s in the controller's config)", pt.Type, pt.Type))
		} else if sh.gpuMem > g.MemoryBytes {
			no = append(no, fmt.Sprintf("needs %s GPU memory, %s has %s (%s)", gib(sh.gpuMem), pt.Type, gib(g.MemoryBytes), g.MemorySource))
		}
	}
	if sh.limitMin > 0 && p.MaxTimeMin > 0 && sh.limitMin > p.MaxTimeMin {
		no = append(no, fmt.Sprintf("--time %d min above MaxTime %d min", sh.limitMin, p.MaxTimeMin))
	}
	switch {
	case len(no) > 0:
		r.Fits, r.Why = No, append(no, unknown...)
	case len(unknown) > 0:
		r.Fits, r.Why = Unknown, unknown
	default:
		r.Fits = Yes
	}

	// Run time and chain.
	var runMin float64
	runKnown := false
	switch {
	case req.Steps == 0:
		r.RunWhy = "total steps unknown (give --steps or #SBATCH --rota-steps)"
	case !(rate.StepsPerSec > 0):
		r.RunWhy = "steps/s on " + pt.Type + " unknown: " + rate.Basis
	default:
		r.StepsPerSec, r.RateBasis = ptr(rate.StepsPerSec), rate.Basis
		runMin = float64(req.Steps) / rate.StepsPerSec / 60
		runKnown = true
		r.RunMin = ptr(runMin)
		r.Segments = 1
		if seg := segmentLimit(sh.limitMin, p.MaxTimeMin); seg > 0 && runMin > float64(seg) {
			r.Segments = int(math.Ceil(runMin / float64(seg)))
			r.SegmentMin = seg
		}
	}
	if !runKnown && rate.StepsPerSec > 0 {
		r.StepsPerSec, r.RateBasis = ptr(rate.StepsPerSec), rate.Basis
	}

	// Queue wait for the first job (of a chain: its first segment).
	limit := sh.limitMin
	if limit == 0 && runKnown {
		limit = uint32(math.Min(math.Ceil(runMin), math.MaxUint32))
		if p.MaxTimeMin > 0 {
			limit = min(limit, p.MaxTimeMin)
		}
	}
	if limit == 0 {
		limit = p.DefaultTimeMin
	}
	if r.Fits == No {
		r.WaitWhy = "does not fit"
	} else {
		w := src.Wait(WaitQuery{Partition: p.Name, GPUType: pt.Type, Nodes: nodes, GPUs: sh.gpus, LimitMin: limit})
		if w.Known {
			r.WaitMin = ptr(w.Minutes)
		} else {
			r.WaitWhy = w.Basis
		}
	}

	// Cost of the whole run (a chain costs the same hours, split).
	if runKnown {
		if c, basis, ok := site.Cost(st.Charging, p.Name, pt.Type, sh.gpus, sh.cores, runMin/60); ok {
			r.Cost, r.CostBasis = ptr(c), basis
		} else {
			r.CostBasis = "cost unknown: " + basis
		}
	} else {
		r.CostBasis = "cost unknown: run time unknown"
	}
	if runKnown && r.WaitMin != nil {
		// Every segment of a chain queues again; each is taken to wait
		// as long as the first would now.
		r.FinishMin = ptr(*r.WaitMin*float64(r.Segments) + runMin)
	}
	return r
}

// segmentLimit is the longest one job of a chain may run: the job's own
// --time (Rota never raises it) within the partition's MaxTime; 0 none.
func segmentLimit(userMin, maxTimeMin uint32) uint32 {
	switch {
	case userMin > 0 && maxTimeMin > 0:
		return min(userMin, maxTimeMin)
	case userMin > 0:
		return userMin
	}
	return maxTimeMin
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// plan picks the fastest and the cheapest of the rows that fit. A debug
// partition is recommended only for a job that needs no chain: such
// queues are for short tests, not for a run cut into pieces.
func plan(rep *wire.EstimateReply) {
	var cands []*wire.EstimateRow
	var skipped []string
	for i := range rep.Rows {
		r := &rep.Rows[i]
		switch {
		case r.Fits != Yes:
			continue
		case r.Debug && r.Segments > 1:
			skipped = append(skipped, fmt.Sprintf("%s/%s (debug partition, would need a chain)", r.Partition, r.GPUType))
			continue
		}
		cands = append(cands, r)
	}
	if len(cands) == 0 {
		rep.Notes = append(rep.Notes, "no partition and GPU type is known to fit this job: see each row's reasons")
		return
	}
	if len(skipped) > 0 {
		rep.Notes = append(rep.Notes, "not recommended: "+strings.Join(skipped, ", "))
	}
	toPlan := func(r *wire.EstimateRow, why string) *wire.Plan {
		return &wire.Plan{Partition: r.Partition, GPUType: r.GPUType, Segments: r.Segments, RunMin: r.RunMin,
			WaitMin: r.WaitMin, FinishMin: r.FinishMin, Cost: r.Cost, Why: why}
	}
	less := func(a, b *float64) int {
		switch {
		case a != nil && b != nil:
			if *a < *b {
				return -1
			} else if *a > *b {
				return 1
			}
			return 0
		case a != nil:
			return -1
		case b != nil:
			return 1
		}
		return 0
	}
	byName := func(a, b *wire.EstimateRow) int {
		return strings.Compare(a.Partition+"/"+a.GPUType, b.Partition+"/"+b.GPUType)
	}

	// Fastest: by finish (wait + run); where no wait is known, by run
	// time alone, and the plan says so.
	withFinish, withRun := 0, 0
	for _, r := range cands {
		if r.FinishMin != nil {
			withFinish++
		}
		if r.RunMin != nil {
			withRun++
		}
	}
	switch {
	case withFinish > 0:
		f := slicesMin(cands, func(a, b *wire.EstimateRow) int {
			if c := less(a.FinishMin, b.FinishMin); c != 0 {
				return c
			}
			if c := less(a.Cost, b.Cost); c != 0 {
				return c
			}
			return byName(a, b)
		})
		why := fmt.Sprintf("finishes first: queue wait %s + run %s", Minutes(*f.WaitMin), Minutes(*f.RunMin))
		if f.Segments > 1 {
			why = fmt.Sprintf("finishes first: %d segments, each waiting about %s, run %s", f.Segments, Minutes(*f.WaitMin), Minutes(*f.RunMin))
		}
		if withFinish < len(cands) {
			why += fmt.Sprintf(" (of the %d rows whose wait and run time are known)", withFinish)
		}
		rep.Fastest = toPlan(f, why)
	case withRun > 0:
		f := slicesMin(cands, func(a, b *wire.EstimateRow) int {
			if c := less(a.RunMin, b.RunMin); c != 0 {
				return c
			}
			return byName(a, b)
		})
		rep.Fastest = toPlan(f, fmt.Sprintf("shortest run (%s); queue wait unknown, so the finish time is not known", Minutes(*f.RunMin)))
	default:
		rep.Notes = append(rep.Notes, "no fastest plan: the run time is unknown on every row that fits")
	}

	// Cheapest: by cost, then by finish.
	withCost := 0
	for _, r := range cands {
		if r.Cost != nil {
			withCost++
		}
	}
	if withCost == 0 {
		rep.Notes = append(rep.Notes, "no cheapest plan: the cost is unknown on every row that fits")
		return
	}
	c := slicesMin(cands, func(a, b *wire.EstimateRow) int {
		if c := less(a.Cost, b.Cost); c != 0 {
			return c
		}
		if c := less(a.FinishMin, b.FinishMin); c != 0 {
			return c
		}
		if c := less(a.RunMin, b.RunMin); c != 0 {
			return c
		}
		return byName(a, b)
	})
	why := fmt.Sprintf("costs least: %.4g %s", *c.Cost, rep.Unit)
	if withCost < len(cands) {
		why += fmt.Sprintf(" (of the %d rows whose cost is known)", withCost)
	}
	rep.Cheapest = toPlan(c, strings.TrimSpace(why))
}

func slicesMin(rs []*wire.EstimateRow, cmp func(a, b *wire.EstimateRow) int) *wire.EstimateRow {
	best := rs[0]
	for _, r := range rs[1:] {
		if cmp(r, best) < 0 {
			best = r
		}
	}
	return best
}

// Minutes is a duration in minutes as `rota estimate` prints it, in the
// table and in its plans alike: seconds under a minute, minutes under two
// hours, hours under two days, then days.
func Minutes(m float64) string {
	switch {
	case m < 1:
		return fmt.Sprintf("%.0fs", m*60)
	case m < 120:
		return fmt.Sprintf("%.0fm", m)
	case m < 48*60:
		return fmt.Sprintf("%.1fh", m/60)
	}
	return fmt.Sprintf("%.1fd", m/1440)
}
