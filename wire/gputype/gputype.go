// Package gputype is what Rota knows of a GPU type from its name and the
// admin's tables, worked out in one place for the plugin, the controller
// and the CLI: whether it is a MIG slice (and of what), its relative
// speed, and its memory.
//
// Slurm names a MIG slice's GPU type after the MIG profile that
// AutoDetect=nvml reports ("nvidia_a100_3g.20gb"; the type a site puts in
// slurm.conf is a substring of it, conventionally "a100_3g.20gb"): the
// whole GPU's model, the compute slices it holds (3g: three of the A100's
// seven) and its memory (20gb). A slice is a GPU type of its own to Slurm
// (--gres=gpu:a100_3g.20gb:1); Slurm never repartitions, the site does.
package gputype

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Slice is a MIG slice type read from its name.
type Slice struct {
	// Whole is the type of the GPU it is cut from ("a100").
	Whole string
	// Compute is its compute slices (the N of "Ng"), Of the whole GPU's.
	Compute, Of int
	// MemoryBytes is its memory, from the name ("20gb": 20 GiB, as NVIDIA
	// rounds its profiles' memory).
	MemoryBytes uint64
}

// Share is the slice's share of the whole GPU's compute.
func (s Slice) Share() float64 { return float64(s.Compute) / float64(s.Of) }

// sliceRE: <model>_<N>g.<M>gb, with the media-extension suffix "+me"
// and the "<C>c." compute-instance prefix NVIDIA's profiles may carry.
var sliceRE = regexp.MustCompile(`^([a-z0-9][a-z0-9_-]*?)_(?:(\d+)c\.)?(\d+)g\.(\d+)gb(\+me)?$`)

// computeSlices is how many compute slices a MIG-capable model has: 4 on
// the A30, 7 on the others (A100, H100, H200, B200, GH200).
func computeSlices(model string) int {
	if strings.HasPrefix(model, "a30") {
		return 4
	}
	return 7
}

// ParseSlice reads t as a MIG slice type ("a100_3g.20gb",
// "h100_1g.10gb+me", "nvidia_a100_2g.10gb"); false for a whole GPU.
func ParseSlice(t string) (Slice, bool) {
	// Most types are whole GPUs: no regexp for them, and a slice's name is
	// read once (the plugin asks for every type of every submission, on
	// slurmctld's thread).
	if !strings.Contains(t, "g.") && !strings.Contains(t, "G.") {
		return Slice{}, false
	}
	if v, ok := parsed.Load(t); ok {
		r := v.(parsedSlice)
		return r.s, r.ok
	}
	s, ok := parseSlice(t)
	if parsedN.Load() < maxParsed { // names users type must not grow it for ever
		parsedN.Add(1)
		parsed.Store(t, parsedSlice{s, ok})
	}
	return s, ok
}

// parsed caches ParseSlice's answers, up to maxParsed names.
var (
	parsed  sync.Map // string -> parsedSlice
	parsedN atomic.Int64
)

const maxParsed = 1024

type parsedSlice struct {
	s  Slice
	ok bool
}

func parseSlice(t string) (Slice, bool) {
	m := sliceRE.FindStringSubmatch(strings.ToLower(t))
	if m == nil {
		return Slice{}, false
	}
	whole := strings.TrimPrefix(m[1], "nvidia_")
	g, err1 := strconv.Atoi(m[3])
	gb, err2 := strconv.ParseUint(m[4], 10, 32)
	of := computeSlices(whole)
	if err1 != nil || err2 != nil || g < 1 || g > of || gb == 0 {
		return Slice{}, false
	}
	if m[2] != "" { // a compute instance of c slices within the g-slice instance
		c, err := strconv.Atoi(m[2])
		if err != nil || c < 1 || c > g {
			return Slice{}, false
		}
		g = c
	}
	return Slice{Whole: whole, Compute: g, Of: of, MemoryBytes: gb << 30}, true
}

// SliceType is the Slurm GPU type of a MIG slice of profile ("3g.20gb") on
// a GPU of type whole ("a100"): "a100_3g.20gb", as a site names it in
// slurm.conf; "" unless that reads back as a slice (ParseSlice).
func SliceType(whole, profile string) string {
	t := whole + "_" + profile
	if _, ok := ParseSlice(t); !ok {
		return ""
	}
	return t
}

// Sources of a speed or a memory size, as `rota explain` and the status
// views name them.
const (
	FromTable   = "table"   // the admin's speed.<type> / gpu_mem.<type>
	FromAgents  = "agents"  // measured by the node agents (NVML)
	FromSlice   = "slice"   // a MIG slice's, from its name and its whole GPU's
	FromDefault = "default" // nothing known: a speed of 1, memory unknown
)

// Speed is type t's relative speed for a typical job and where it comes
// from: the admin's table (speed.<type>); for a MIG slice not in it, its
// whole GPU's speed times the slice's share of that GPU's compute ("a100
// x 3/7"); else 1. A non-positive or infinite entry counts as missing.
func Speed(table map[string]float64, t string) (float64, string) {
	if s, ok := table[t]; ok && s > 0 && !math.IsInf(s, 0) {
		return s, FromTable
	}
	if sl, ok := ParseSlice(t); ok {
		if s, ok := table[sl.Whole]; ok && s > 0 && !math.IsInf(s, 0) {
			return s * sl.Share(), FromSlice
		}
	}
	return 1, FromDefault
}

// SpeedBasis says in words where Speed's figure for t comes from.
func SpeedBasis(table map[string]float64, t string) string {
	s, src := Speed(table, t)
	switch src {
	case FromTable:
		return fmt.Sprintf("%.3g (speed table)", s)
	case FromSlice:
		sl, _ := ParseSlice(t)
		return fmt.Sprintf("%.3g (MIG slice: %s's %.3g x %d/%d of its compute)", s, sl.Whole, table[sl.Whole], sl.Compute, sl.Of)
	}
	return "1 (not in the speed table)"
}

// Memory is type t's memory per GPU in bytes and where it comes from: the
// admin's (gpu_mem.<type>), else what the node agents measured, else a MIG
// slice's from its name; 0 and FromDefault when unknown.
func Memory(t string, configured, measured map[string]uint64) (uint64, string) {
	if b := configured[t]; b > 0 {
		return b, FromTable
	}
	if b := measured[t]; b > 0 {
		return b, FromAgents
	}
	if sl, ok := ParseSlice(t); ok {
		return sl.MemoryBytes, FromSlice
	}
	return 0, FromDefault
}

// DefaultSliceMinMemory is slice_min_gpu_mem's default: a job that says
// nothing of its GPU memory gets no MIG slice under 10 GiB (an A100's
// 1g.5gb is too small for most training; a 2g.10gb holds a notebook).
const DefaultSliceMinMemory = 10 << 30

// Fits says whether a job needing need bytes of GPU memory (0: unknown)
// may go on type t with mem bytes (0: unknown), and why not: a known
// need must fit; a job whose need is unknown never goes on a MIG slice
// smaller than the site's minimum (minSlice; 0: any slice).
func Fits(t string, mem, need, minSlice uint64) (bool, string) {
	switch {
	case need > 0 && mem > 0 && need > mem:
		return false, fmt.Sprintf("needs %s of GPU memory, %s has %s", Size(need), t, Size(mem))
	case need == 0 && minSlice > 0:
		if _, slice := ParseSlice(t); slice && mem < minSlice {
			return false, fmt.Sprintf("GPU memory need unknown and %s is a MIG slice of %s, under the site's minimum %s", t, Size(mem), Size(minSlice))
		}
	}
	return true, ""
}

// Size writes bytes as GiB or MiB.
func Size(b uint64) string {
	if b >= 1<<30 && b%(1<<30) == 0 {
		return strconv.FormatUint(b>>30, 10) + "GiB"
	}
	if b >= 1<<30 {
		return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + "GiB"
	}
	return strconv.FormatUint(b>>20, 10) + "MiB"
}
