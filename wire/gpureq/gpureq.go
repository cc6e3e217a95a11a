// Package gpureq parses and rewrites the GPU part of a Slurm job request.
//
// Slurm keeps a job's generic-resource request in four TRES strings,
// tres_per_job (--gpus, -G), tres_per_node (--gres, --gpus-per-node),
// tres_per_socket (--gpus-per-socket) and tres_per_task (--gpus-per-task).
// Each is a comma-separated list of entries:
//
//	gres:gpu:v100:2   Slurm up to 23.02 (type v100, count 2)
//	gres/gpu:v100:2   Slurm 23.11 and later
//	gres:gpu          count 1
//	gres:gpu:2        untyped
//	gres:nvme:1       another gres, kept verbatim
//	cpu=4             a non-gres TRES (tres_per_task in newer Slurm), verbatim
//
// The same parser serves the job_submit plugin (which rewrites the strings
// inside slurmctld) and the controller (which reads them back from Slurm),
// so both agree on what a request means. Anything it cannot read is an
// error, and the plugin's answer to an error is to leave the job alone.
package gpureq

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxLen bounds a TRES string; Slurm's own are far shorter.
const MaxLen = 4096

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("gpureq: malformed TRES request")

// Entry is one comma-separated item of a TRES string.
type Entry struct {
	// GPU is true for a gpu gres entry; only those are interpreted.
	GPU bool
	// Prefix is how the entry named its kind: "gres:", "gres/" or "" (the
	// bare "gpu:2" users type; Slurm itself stores a prefix).
	Prefix string
	// Type is the GPU type, "" when untyped.
	Type string
	// Count is the number of GPUs; 1 when the entry gave none.
	Count uint64
	// countGiven records whether the count was written, countText how
	// (leading zeros and all: "gpu:02"), and eq whether it was written
	// "gpu=N", so String gives back exactly what was parsed.
	countGiven bool
	countText  string
	eq         bool
	// raw is the verbatim text of an entry that is not a GPU.
	raw string
	// Shard is true for a gres/shard entry: a part of a GPU that Slurm
	// lets several jobs share. It is kept verbatim (raw); Count is its
	// shard count.
	Shard bool
	// shardType is a shard entry's type ("shard:v100:1"), "" untyped.
	shardType string
}

// Spec is one parsed TRES string.
type Spec struct {
	Entries []Entry
}

// Parse reads one TRES string. The empty string is an empty Spec.
func Parse(s string) (Spec, error) {
	if len(s) > MaxLen {
		return Spec{}, fmt.Errorf("%w: %d bytes, limit %d", ErrSyntax, len(s), MaxLen)
	}
	if s == "" {
		return Spec{}, nil
	}
	// One allocation for the entries and none for the pieces: this runs
	// on slurmctld's submit thread.
	spec := Spec{Entries: make([]Entry, 0, strings.Count(s, ",")+1)}
	for rest, more := s, true; more; {
		var p string
		p, rest, more = strings.Cut(rest, ",")
		e, err := parseEntry(p)
		if err != nil {
			return Spec{}, err
		}
		spec.Entries = append(spec.Entries, e)
	}
	return spec, nil
}

func parseEntry(p string) (Entry, error) {
	if p == "" {
		return Entry{}, fmt.Errorf("%w: empty entry", ErrSyntax)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f {
			return Entry{}, fmt.Errorf("%w: control, space or non-ASCII byte in %q", ErrSyntax, p)
		}
	}
	prefix := ""
	rest := p
	switch {
	case strings.HasPrefix(p, "gres:"):
		prefix, rest = "gres:", p[len("gres:"):]
	case strings.HasPrefix(p, "gres/"):
		prefix, rest = "gres/", p[len("gres/"):]
	}
	name, tail, hasTail := rest, "", false
	if i := strings.IndexAny(rest, ":="); i >= 0 {
		name, tail, hasTail = rest[:i], rest[i+1:], true
	}
	if name != "gpu" {
		if name == "" {
			return Entry{}, fmt.Errorf("%w: entry %q names no resource", ErrSyntax, p)
		}
		if name == "shard" {
			return parseShard(p, prefix, rest[len(name):])
		}
		return Entry{Prefix: prefix, raw: p}, nil
	}
	e := Entry{GPU: true, Prefix: prefix, Count: 1}
	if !hasTail {
		return e, nil
	}
	if rest[len(name)] == '=' {
		// gres/gpu=N: the count-only form newer Slurm writes in places.
		n, err := parseCount(tail, p)
		if err != nil {
			return Entry{}, err
		}
		e.Count, e.countGiven, e.countText, e.eq = n, true, tail, true
		return e, nil
	}
	// gpu:COUNT, gpu:TYPE or gpu:TYPE:COUNT.
	a, b, hasB := strings.Cut(tail, ":")
	switch {
	case hasB:
		if err := checkType(a, p); err != nil {
			return Entry{}, err
		}
		n, err := parseCount(b, p)
		if err != nil {
			return Entry{}, err
		}
		e.Type, e.Count, e.countGiven, e.countText = a, n, true, b
	case isDigits(a):
		n, err := parseCount(a, p)
		if err != nil {
			return Entry{}, err
		}
		e.Count, e.countGiven, e.countText = n, true, a
	default:
		if err := checkType(a, p); err != nil {
			return Entry{}, err
		}
		e.Type = a
	}
	return e, nil
}

// parseShard reads a shard entry's tail ("", "=N", ":N", ":TYPE" or
// ":TYPE:N", as a gpu entry's) for its count.
func parseShard(p, prefix, tail string) (Entry, error) {
	e := Entry{Prefix: prefix, raw: p, Shard: true, Count: 1}
	if tail == "" {
		return e, nil
	}
	a, b, hasB := strings.Cut(tail[1:], ":")
	switch {
	case tail[0] == '=' || (!hasB && isDigits(a)):
		n, err := parseCount(tail[1:], p)
		e.Count = n
		return e, err
	case hasB:
		// An empty type: how a node's GresUsed reads once its "(null)"
		// is dropped (stripParens).
		if a != "" {
			if err := checkType(a, p); err != nil {
				return Entry{}, err
			}
		}
		n, err := parseCount(b, p)
		e.Count, e.shardType = n, a
		return e, err
	}
	e.shardType = a
	return e, checkType(a, p)
}

// ShardType is the GPU type a shard entry names ("" untyped, or not a
// shard entry).
func (e Entry) ShardType() string { return e.shardType }

// Shards sums the shard entries' counts; has is false when there is none.
func (s Spec) Shards() (count uint64, has bool) {
	for _, e := range s.Entries {
		if e.Shard {
			count, has = count+e.Count, true
		}
	}
	return count, has
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// maxCount is far above any real GPU count and keeps sums from overflowing.
const maxCount = 1 << 20

func parseCount(s, entry string) (uint64, error) {
	if !isDigits(s) {
		return 0, fmt.Errorf("%w: GPU count %q in %q is not a whole number", ErrSyntax, s, entry)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > maxCount {
		return 0, fmt.Errorf("%w: GPU count %q in %q is out of range", ErrSyntax, s, entry)
	}
	return n, nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// CheckTypeName reports whether t can be written as a GPU type: what
// gres.conf accepts, and never all digits (that would read as a count).
func CheckTypeName(t string) error {
	return checkType(t, t)
}

func checkType(t, entry string) error {
	if t == "" || len(t) > 64 || isDigits(t) || !isAlnum(t[0]) {
		return fmt.Errorf("%w: bad GPU type %q in %q", ErrSyntax, t, entry)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return fmt.Errorf("%w: bad character %q in GPU type %q", ErrSyntax, c, t)
		}
	}
	return nil
}

// String gives the TRES string back; unchanged entries are byte-identical
// to what was parsed.
func (s Spec) String() string {
	var b strings.Builder
	for i, e := range s.Entries {
		if i > 0 {
			b.WriteByte(',')
		}
		if !e.GPU {
			b.WriteString(e.raw)
			continue
		}
		b.WriteString(e.Prefix)
		b.WriteString("gpu")
		if e.Type != "" {
			b.WriteByte(':')
			b.WriteString(e.Type)
		}
		if e.countGiven {
			if e.eq {
				b.WriteByte('=')
			} else {
				b.WriteByte(':')
			}
			b.WriteString(e.countText)
		}
	}
	return b.String()
}

// GPUs sums the GPU entries: the count, and the distinct types named
// (empty when every entry is untyped). has is false when there is no GPU.
func (s Spec) GPUs() (count uint64, types []string, has bool) {
	for _, e := range s.Entries {
		if !e.GPU {
			continue
		}
		has = true
		count += e.Count
		if e.Type != "" && !slices.Contains(types, e.Type) {
			types = append(types, e.Type)
		}
	}
	return count, types, has
}

// HasUntyped reports whether some GPU entry names no type.
func (s Spec) HasUntyped() bool {
	for _, e := range s.Entries {
		if e.GPU && e.Type == "" {
			return true
		}
	}
	return false
}

// SetType writes t as the type of every GPU entry. Entries of other
// resources are untouched.
func (s *Spec) SetType(t string) {
	for i := range s.Entries {
		if e := &s.Entries[i]; e.GPU {
			e.Type = t
			e.eq = false // "gpu=N" has no room for a type: write gpu:T:N

		}
	}
}
