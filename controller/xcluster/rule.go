// Package xcluster is the estimate and the move rule of several clusters
// under one Rota (docs/multicluster.md), shared by the simulator
// (controller/sim, RunMulti) and the running controller's multi-cluster
// manager (controller/multicluster): one copy of the arithmetic, so what
// the simulator measured is what the controller does.
package xcluster

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Link is the transfer path between two clusters: bandwidth in bytes/s
// and a latency per transfer in seconds. Bandwidth 0 means no link.
type Link struct {
	A, B      string
	Bandwidth float64
	Latency   float64
}

// Transfer is the seconds to copy bytes over the link: latency +
// bytes / bandwidth; +Inf without a link.
func (l Link) Transfer(bytes float64) float64 {
	if l.Bandwidth <= 0 {
		return math.Inf(1)
	}
	return l.Latency + bytes/l.Bandwidth
}

// Joins says whether the link joins clusters a and b (either way).
func (l Link) Joins(a, b string) bool {
	return (l.A == a && l.B == b) || (l.A == b && l.B == a)
}

// String is the link as ParseLink reads it.
func (l Link) String() string {
	return fmt.Sprintf("%s-%s:%gB/s:%s", l.A, l.B, l.Bandwidth, time.Duration(l.Latency*float64(time.Second)))
}

var clusterName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// ParseLink reads "a-b:1GB/s" or "a-b:10Gb/s:20ms" (what `rota sim --link`
// and controller.conf's mc_link take).
func ParseLink(s string) (Link, error) {
	bad := fmt.Errorf("bad link %q (want a-b:bandwidth[:latency], e.g. a-b:1GB/s:20ms)", s)
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Link{}, bad
	}
	a, b, ok := strings.Cut(parts[0], "-")
	if !ok || !clusterName.MatchString(a) || !clusterName.MatchString(b) {
		return Link{}, bad
	}
	bw, err := ParseBandwidth(parts[1])
	if err != nil {
		return Link{}, bad
	}
	l := Link{A: a, B: b, Bandwidth: bw}
	if len(parts) == 3 {
		d, err := time.ParseDuration(parts[2])
		if err != nil || d < 0 {
			return Link{}, bad
		}
		l.Latency = d.Seconds()
	}
	return l, nil
}

// ParseBandwidth reads "1GB/s" (bytes) or "10Gb/s" (bits) into bytes/s;
// prefixes k, M, G, T are decimal.
func ParseBandwidth(s string) (float64, error) {
	m := regexp.MustCompile(`^([0-9.]+)\s*([kKMGT]?)([Bb])/s$`).FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("bad bandwidth %q", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad bandwidth %q", s)
	}
	v *= map[string]float64{"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m[2]]
	if m[3] == "b" {
		v /= 8
	}
	return v, nil
}

// SizeWords is a size in decimal units for people: "20 MB", "1.25 GB".
func SizeWords(b float64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.3g GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.3g MB", b/1e6)
	}
	return fmt.Sprintf("%.3g kB", b/1e3)
}

// RateWords is a bandwidth (bytes/s) for people: "100 MB/s", "922 kB/s".
func RateWords(bps float64) string { return SizeWords(bps) + "/s" }

// TypeRate is one GPU type of a cluster as a job sees it: the job's
// steps/s on it (0: it cannot use the type) and the cluster's GPUs of it.
type TypeRate struct {
	Rate float64
	GPUs int
}

// Rate is a job's estimated steps/s on a cluster when jobs asking for
// others GPUs share it with the job (which asks for scale GPUs): its best
// type while the cluster has room, else an equal share of every GPU it
// can use, as max-min fair policies tend to give. A type counts only if
// it has scale GPUs. 0 where the job cannot run.
func Rate(types []TypeRate, scale int, others float64) float64 {
	best, sum := 0.0, 0.0
	for _, t := range types {
		if t.Rate > 0 && t.GPUs >= scale {
			best = math.Max(best, t.Rate)
			sum += t.Rate * float64(t.GPUs)
		}
	}
	if best == 0 {
		return 0
	}
	return math.Min(best, sum/(others+float64(scale)))
}

// Finish is the seconds to run remaining steps at rate; +Inf at rate 0.
func Finish(remaining, rate float64) float64 {
	if rate <= 0 {
		return math.Inf(1)
	}
	return remaining / rate
}

// Rule is how a job may leave the cluster it is on.
type Rule struct {
	// Planned charges a move of a running job its checkpoint and restart
	// (MoveCost) and asks a margin; greedy (false) counts the transfer only.
	Planned bool
	// MoveCost is checkpoint here + restart there, seconds.
	MoveCost float64
	// Margin (seconds) and MarginFraction (of the finish where the job is)
	// a planned move must gain beyond its cost.
	Margin, MarginFraction float64
}

// PlaceGain is what a pending job gains, in seconds, by being placed on
// another cluster instead of here: here's finish minus (the transfer of
// its data + the finish there). Positive: place it there. +Inf when it
// cannot run here and can there; a placement copies data only, so no
// checkpoint, restart or margin counts (as in the simulator).
func PlaceGain(here, there, transfer float64) float64 {
	if math.IsInf(there, 1) || math.IsInf(transfer, 1) {
		return math.Inf(-1)
	}
	if math.IsInf(here, 1) {
		return math.Inf(1)
	}
	return here - (there + transfer)
}

// MoveScore is what moving a running job gains beyond the rule's costs:
// here's finish minus (there's finish + transfer), less the checkpoint and
// restart, the margin and the margin fraction of here under the planned
// rule. Positive: the move pays.
func (r Rule) MoveScore(here, there, transfer float64) float64 {
	s := here - there - transfer
	if r.Planned {
		s -= r.MoveCost + r.Margin + r.MarginFraction*here
	}
	return s
}

// MinStay is how long a job that moved stays before it may move again:
// minStay, or what its last move cost if longer, so it has used the
// cluster long enough to pay for the move.
func MinStay(minStay, lastMoveCost float64) float64 { return math.Max(minStay, lastMoveCost) }

// DeclaredGB reads "#ROTA --<key>=N" from a batch script (N in GB).
func DeclaredGB(script []byte, key string) (float64, bool) {
	for _, line := range strings.Split(string(script), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#ROTA")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			if v, ok := strings.CutPrefix(f, "--"+key+"="); ok {
				var gb float64
				if _, err := fmt.Sscanf(v, "%g", &gb); err == nil && gb >= 0 {
					return gb, true
				}
			}
		}
	}
	return 0, false
}
