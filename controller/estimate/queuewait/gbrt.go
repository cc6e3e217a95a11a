package queuewait

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
)

// Gradient-boosted regression trees, small and deterministic: features
// are cut into at most maxBins quantile bins once, each tree is grown
// depth-first on histograms of those bins, and a seeded row subsample
// decorrelates the trees.

const maxBins = 64

// tree is one regression tree in flat arrays (compact in JSON). Node 0
// is the root; a node with Feature < 0 is a leaf holding Value. A row
// goes left when x[Feature] <= Threshold.
type tree struct {
	Feature   []int     `json:"f"`
	Threshold []float64 `json:"t"`
	Left      []int     `json:"l"`
	Right     []int     `json:"r"`
	Value     []float64 `json:"v"`
}

func (t *tree) predict(x []float64) float64 {
	i := 0
	for t.Feature[i] >= 0 {
		if x[t.Feature[i]] <= t.Threshold[i] {
			i = t.Left[i]
		} else {
			i = t.Right[i]
		}
	}
	return t.Value[i]
}

// check verifies a loaded tree can be walked for nf features without
// going out of range or looping.
func (t *tree) check(nf int) error {
	n := len(t.Feature)
	if n == 0 || len(t.Threshold) != n || len(t.Left) != n || len(t.Right) != n || len(t.Value) != n {
		return fmt.Errorf("arrays of different lengths or empty")
	}
	for i := 0; i < n; i++ {
		if t.Feature[i] >= nf {
			return fmt.Errorf("node %d: feature %d of %d", i, t.Feature[i], nf)
		}
		if t.Feature[i] < 0 {
			if math.IsNaN(t.Value[i]) || math.IsInf(t.Value[i], 0) {
				return fmt.Errorf("node %d: leaf value %v", i, t.Value[i])
			}
			continue
		}
		// Children always come after their parent, so a walk ends.
		if t.Left[i] <= i || t.Left[i] >= n || t.Right[i] <= i || t.Right[i] >= n {
			return fmt.Errorf("node %d: children %d, %d", i, t.Left[i], t.Right[i])
		}
	}
	return nil
}

// boostOptions are the booster's knobs.
type boostOptions struct {
	Loss         string // "lad" (absolute error) or "l2"
	Trees        int
	Depth        int
	LearningRate float64
	MinLeaf      int
	Subsample    float64
	Seed         int64
}

// binned is the training matrix cut into bins, row-major
// (bins[row*nf+f]) so that one pass over a node's rows fills every
// feature's histogram from contiguous memory.
type binned struct {
	edges [][]float64 // per feature: x <= edges[k] is bin <= k
	bins  []uint8
	nf    int
}

func binMatrix(X [][]float64, nf int) binned {
	b := binned{edges: make([][]float64, nf), bins: make([]uint8, len(X)*nf), nf: nf}
	col := make([]float64, len(X))
	for f := 0; f < nf; f++ {
		for i, x := range X {
			col[i] = x[f]
		}
		sorted := append([]float64(nil), col...)
		sort.Float64s(sorted)
		var edges []float64
		for k := 1; k < maxBins; k++ {
			v := sorted[(len(sorted)-1)*k/maxBins]
			if len(edges) == 0 || v > edges[len(edges)-1] {
				edges = append(edges, v)
			}
		}
		// The largest value is no edge: nothing could go right of it.
		if len(edges) > 0 && edges[len(edges)-1] >= sorted[len(sorted)-1] {
			edges = edges[:len(edges)-1]
		}
		b.edges[f] = edges
		for i, v := range col {
			b.bins[i*nf+f] = uint8(sort.SearchFloat64s(edges, v)) // first edge >= v
		}
	}
	return b
}

// boost fits trees to y on X and returns the initial value and trees.
func boost(X [][]float64, y []float64, opt boostOptions) (float64, []tree, error) {
	n := len(X)
	if n == 0 {
		return 0, nil, fmt.Errorf("no training rows")
	}
	if opt.Loss != "lad" && opt.Loss != "l2" {
		return 0, nil, fmt.Errorf("loss %q: want lad or l2", opt.Loss)
	}
	nf := len(X[0])
	b := binMatrix(X, nf)
	var base float64
	if opt.Loss == "lad" {
		base = median(append([]float64(nil), y...))
	} else {
		for _, v := range y {
			base += v
		}
		base /= float64(n)
	}
	pred := make([]float64, n)
	for i := range pred {
		pred[i] = base
	}
	rng := rand.New(rand.NewSource(opt.Seed))
	grad := make([]float64, n)
	resid := make([]float64, n)
	rows := make([]int, 0, n)
	trees := make([]tree, 0, opt.Trees)
	g := grower{b: b, nf: nf, opt: opt, grad: grad, resid: resid}
	for m := 0; m < opt.Trees; m++ {
		for i := range y {
			resid[i] = y[i] - pred[i]
			if opt.Loss == "lad" {
				// LAD_TreeBoost: fit the trees' shape to the sign of
				// the residual, then give each leaf the median residual.
				grad[i] = sign(resid[i])
			} else {
				grad[i] = resid[i]
			}
		}
		rows = rows[:0]
		for i := 0; i < n; i++ {
			if opt.Subsample >= 1 || rng.Float64() < opt.Subsample {
				rows = append(rows, i)
			}
		}
		if len(rows) < 2*opt.MinLeaf {
			continue
		}
		t := g.grow(rows)
		for i, x := range X {
			pred[i] += opt.LearningRate * t.predict(x)
		}
		// Shrinkage is folded into the stored leaves so prediction is
		// a plain sum.
		for i := range t.Value {
			t.Value[i] *= opt.LearningRate
		}
		trees = append(trees, t)
	}
	return base, trees, nil
}

func sign(v float64) float64 {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

type grower struct {
	b     binned
	nf    int
	opt   boostOptions
	grad  []float64
	resid []float64
	t     tree
}

// hist is one node's gradient sums and counts per feature and bin.
type hist struct {
	sum []float64 // [f*maxBins+k]
	cnt []int32
}

func (g *grower) newHist() hist {
	return hist{sum: make([]float64, g.nf*maxBins), cnt: make([]int32, g.nf*maxBins)}
}

func (g *grower) fill(h hist, rows []int) {
	nf := g.nf
	for _, r := range rows {
		gr := g.grad[r]
		bs := g.b.bins[r*nf : r*nf+nf]
		for f, k := range bs {
			h.sum[f*maxBins+int(k)] += gr
			h.cnt[f*maxBins+int(k)]++
		}
	}
}

func (g *grower) grow(rows []int) tree {
	g.t = tree{}
	h := g.newHist()
	g.fill(h, rows)
	g.node(rows, h, 0)
	return g.t
}

func (g *grower) newNode() int {
	g.t.Feature = append(g.t.Feature, -1)
	g.t.Threshold = append(g.t.Threshold, 0)
	g.t.Left = append(g.t.Left, 0)
	g.t.Right = append(g.t.Right, 0)
	g.t.Value = append(g.t.Value, 0)
	return len(g.t.Feature) - 1
}

// node grows the subtree on rows, whose histogram is h, and returns its
// index.
func (g *grower) node(rows []int, h hist, depth int) int {
	id := g.newNode()
	if depth >= g.opt.Depth || len(rows) < 2*g.opt.MinLeaf {
		g.t.Value[id] = g.leafValue(rows)
		return id
	}
	var total float64
	for _, r := range rows {
		total += g.grad[r]
	}
	parent := total * total / float64(len(rows))
	bestGain, bestF, bestK := 1e-12, -1, -1
	for f := 0; f < g.nf; f++ {
		edges := g.b.edges[f]
		sum, cnt := h.sum[f*maxBins:(f+1)*maxBins], h.cnt[f*maxBins:(f+1)*maxBins]
		var sl float64
		nl := 0
		for k := 0; k < len(edges); k++ {
			sl += sum[k]
			nl += int(cnt[k])
			nr := len(rows) - nl
			if nl < g.opt.MinLeaf {
				continue
			}
			if nr < g.opt.MinLeaf {
				break
			}
			sr := total - sl
			gain := sl*sl/float64(nl) + sr*sr/float64(nr) - parent
			if gain > bestGain {
				bestGain, bestF, bestK = gain, f, k
			}
		}
	}
	if bestF < 0 {
		g.t.Value[id] = g.leafValue(rows)
		return id
	}
	var left, right []int
	for _, r := range rows {
		if int(g.b.bins[r*g.nf+bestF]) <= bestK {
			left = append(left, r)
		} else {
			right = append(right, r)
		}
	}
	// Histogram subtraction: count the smaller child, the larger one is
	// the parent minus it. The parent's histogram is not needed again.
	small, large := left, right
	if len(small) > len(large) {
		small, large = large, small
	}
	hs := g.newHist()
	g.fill(hs, small)
	for i := range h.sum {
		h.sum[i] -= hs.sum[i]
		h.cnt[i] -= hs.cnt[i]
	}
	hl, hr := hs, h
	if len(left) > len(right) {
		hl, hr = h, hs
	}
	g.t.Feature[id] = bestF
	g.t.Threshold[id] = g.b.edges[bestF][bestK]
	l := g.node(left, hl, depth+1)
	r := g.node(right, hr, depth+1)
	g.t.Left[id], g.t.Right[id] = l, r
	return id
}

func (g *grower) leafValue(rows []int) float64 {
	if g.opt.Loss == "lad" {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = g.resid[r]
		}
		return median(v)
	}
	var s float64
	for _, r := range rows {
		s += g.resid[r]
	}
	return s / float64(len(rows))
}
