package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// DecodeNodeReportView is Decode for a NodeReportView, without
// encoding/json. The controller takes in a NodeReport from every node every
// interval; encoding/json's reflection and its separate validation pass
// made decoding cost a large part of a core at 5,000 nodes, so the views
// are read by a small scanner that validates the JSON as it goes, reads
// the few fields the view has and skips the rest without building it.
//
// It accepts only valid JSON, the same size limit and version rule as
// Decode, and rejects a field of the wrong type. It differs from
// encoding/json where agents never go: keys must match exactly (no
// case-folding, no escapes), and nesting deeper than 64 is refused.
// v's slices are reused.
func DecodeNodeReportView(data []byte, v *NodeReportView) error {
	if err := checkSize(data); err != nil {
		return err
	}
	*v = NodeReportView{GPUs: v.GPUs[:0], Jobs: v.Jobs[:0]}
	s := scanner{b: data}
	for more := s.objectStart(); more; more = s.objectNext() {
		switch string(s.key()) {
		case "v":
			v.V = s.int()
		case "node":
			v.Node = s.str()
		case "gpu_type":
			v.GPUType = s.str()
		case "at":
			v.At = s.time()
		case "seq":
			v.Seq = s.uint(64)
		case "gpus":
			v.GPUs = v.GPUs[:0]
			for more := s.arrayStart(); more; more = s.arrayNext() {
				var g GPUView
				for more := s.objectStart(); more; more = s.objectNext() {
					switch string(s.key()) {
					case "index":
						g.Index = s.int()
					case "memory_total_bytes":
						g.MemoryTotalBytes = s.uint(64)
					case "memory_used_bytes":
						g.MemoryUsedBytes = s.uint(64)
					case "util_gpu_percent":
						g.UtilGPUPercent = uint32(s.uint(32))
					default:
						s.skip(1)
					}
				}
				v.GPUs = append(v.GPUs, g)
			}
		case "jobs":
			v.Jobs = v.Jobs[:0]
			for more := s.arrayStart(); more; more = s.arrayNext() {
				var j JobRef
				for more := s.objectStart(); more; more = s.objectNext() {
					if string(s.key()) == "job_id" {
						j.JobID = uint32(s.uint(32))
					} else {
						s.skip(1)
					}
				}
				v.Jobs = append(v.Jobs, j)
			}
		default:
			s.skip(0)
		}
	}
	return s.finish(v.V)
}

// DecodeJobReportView is DecodeNodeReportView for a JobReportView.
func DecodeJobReportView(data []byte, v *JobReportView) error {
	if err := checkSize(data); err != nil {
		return err
	}
	*v = JobReportView{GPUs: v.GPUs[:0]}
	s := scanner{b: data}
	for more := s.objectStart(); more; more = s.objectNext() {
		switch string(s.key()) {
		case "v":
			v.V = s.int()
		case "node":
			v.Node = s.str()
		case "gpu_type":
			v.GPUType = s.str()
		case "at":
			v.At = s.time()
		case "job_id":
			v.JobID = uint32(s.uint(32))
		case "gpus":
			v.GPUs = v.GPUs[:0]
			for more := s.arrayStart(); more; more = s.arrayNext() {
				v.GPUs = append(v.GPUs, s.int())
			}
		case "gpu_memory_bytes":
			v.GPUMemoryBytes = s.uint(64)
		case "progress":
			for more := s.objectStart(); more; more = s.objectNext() {
				p := &v.Progress
				switch string(s.key()) {
				case "step":
					p.Step = s.uint(64)
				case "total":
					p.Total = s.uint(64)
				case "steps_per_s":
					p.StepsPerSec = s.float()
				case "age_s":
					p.AgeSeconds = s.float()
				case "ready":
					p.Ready = s.boolean()
				default:
					s.skip(1)
				}
			}
		default:
			s.skip(0)
		}
	}
	return s.finish(v.V)
}

// maxDepth bounds the nesting skip follows.
const maxDepth = 64

// scanner reads one JSON document. After the first error every method
// returns zero values and the error stays the first one.
type scanner struct {
	b   []byte
	i   int
	err error
}

func (s *scanner) fail(what string) {
	if s.err == nil {
		s.err = fmt.Errorf("wire: malformed message at byte %d: %s", s.i, what)
	}
	s.i = len(s.b)
}

func (s *scanner) finish(version int) error {
	s.ws()
	if s.err == nil && s.i != len(s.b) {
		s.fail("data after the message")
	}
	if s.err != nil {
		return s.err
	}
	if version != Version {
		return fmt.Errorf("%w: got v=%d, want v=%d", ErrVersion, version, Version)
	}
	return nil
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// null consumes a null literal if one comes next.
func (s *scanner) null() bool {
	s.ws()
	if s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// objectStart enters an object; false for null, {} or an error.
func (s *scanner) objectStart() bool { return s.open('{', '}', "want an object") }

// objectNext moves past a member; false at the object's end.
func (s *scanner) objectNext() bool { return s.next('}', "want , or }") }

// arrayStart enters an array; false for null, [] or an error.
func (s *scanner) arrayStart() bool { return s.open('[', ']', "want an array") }

// arrayNext moves past an element; false at the array's end.
func (s *scanner) arrayNext() bool { return s.next(']', "want , or ]") }

// open enters a container that starts with open; false for null, an empty
// container, or an error (recorded with what).
func (s *scanner) open(open, close byte, what string) bool {
	if s.null() {
		return false
	}
	if s.i >= len(s.b) || s.b[s.i] != open {
		s.fail(what)
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return false
	}
	return true
}

// next moves past a ',' (true) or the closing byte (false).
func (s *scanner) next(close byte, what string) bool {
	s.ws()
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case ',':
			s.i++
			return true
		case close:
			s.i++
			return false
		}
	}
	s.fail(what)
	return false
}

// key reads a member's name and its colon.
func (s *scanner) key() []byte {
	s.ws()
	raw, _ := s.rawString()
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		s.fail("want :")
		return nil
	}
	s.i++
	return raw
}

// rawString reads a string token and returns what is between the quotes;
// plain is false when it holds escapes or bytes outside printable ASCII.
func (s *scanner) rawString() (raw []byte, plain bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.fail("want a string")
		return nil, false
	}
	start := s.i + 1
	plain = true
	for i := start; i < len(s.b); i++ {
		c := s.b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], plain
		case c < 0x20:
			s.i = i
			s.fail("control character in string")
			return nil, false
		case c == '\\':
			plain = false
			i++
			if i >= len(s.b) {
				break
			}
			switch s.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.b) || !isHex(s.b[i+1]) || !isHex(s.b[i+2]) || !isHex(s.b[i+3]) || !isHex(s.b[i+4]) {
					s.i = i
					s.fail("bad \\u escape")
					return nil, false
				}
				i += 4
			default:
				s.i = i
				s.fail("bad escape")
				return nil, false
			}
		case c >= 0x80:
			plain = false
		}
	}
	s.fail("unterminated string")
	return nil, false
}

func isHex(c byte) bool { return c-'0' < 10 || c|0x20-'a' < 6 }

// str reads a string (null reads ""); escapes and non-ASCII go through
// encoding/json so they mean exactly what they mean to every other reader.
func (s *scanner) str() string {
	if s.null() {
		return ""
	}
	start := s.i
	raw, plain := s.rawString()
	if s.err != nil {
		return ""
	}
	if plain {
		return string(raw)
	}
	var out string
	if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
		s.fail("bad string")
	}
	return out
}

// time reads an RFC 3339 time as time.Time's UnmarshalJSON does.
func (s *scanner) time() time.Time {
	var t time.Time
	if s.null() {
		return t
	}
	raw, plain := s.rawString()
	if s.err != nil {
		return t
	}
	if !plain || t.UnmarshalText(raw) != nil {
		s.fail("bad time")
	}
	return t
}

// digits reads an integer's digits (no sign), refusing a leading zero.
func (s *scanner) digits() (n uint64, ok bool) {
	start := s.i
	for s.i < len(s.b) && s.b[s.i]-'0' < 10 {
		d := uint64(s.b[s.i] - '0')
		if n > (1<<64-1-d)/10 {
			s.fail("number out of range")
			return 0, false
		}
		n = n*10 + d
		s.i++
	}
	if s.i == start || (s.b[start] == '0' && s.i-start > 1) {
		s.fail("bad number")
		return 0, false
	}
	return n, true
}

// uint reads an unsigned integer of the given bit size (null reads 0).
func (s *scanner) uint(bits int) uint64 {
	if s.null() {
		return 0
	}
	n, ok := s.digits()
	if !ok {
		return 0
	}
	if bits < 64 && n >= 1<<bits {
		s.fail("number out of range")
		return 0
	}
	s.integerEnd()
	return n
}

// int reads a signed integer that fits an int (null reads 0).
func (s *scanner) int() int {
	if s.null() {
		return 0
	}
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	n, ok := s.digits()
	if !ok {
		return 0
	}
	const maxInt = uint64(1<<(strconv.IntSize-1) - 1)
	if n > maxInt+1 || (!neg && n > maxInt) {
		s.fail("number out of range")
		return 0
	}
	s.integerEnd()
	if neg {
		return -int(n)
	}
	return int(n)
}

// integerEnd refuses a fraction or exponent after an integer field, as
// encoding/json does.
func (s *scanner) integerEnd() {
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			s.fail("want an integer")
		}
	}
}

func (s *scanner) someDigits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i]-'0' < 10 {
		s.i++
	}
	if s.i == start {
		s.fail("bad number")
		return false
	}
	return true
}

// float reads a number (null reads 0).
func (s *scanner) float() float64 {
	if s.null() {
		return 0
	}
	txt := s.numberText()
	if s.err != nil {
		return 0
	}
	f, err := strconv.ParseFloat(string(txt), 64)
	if err != nil {
		s.fail("number out of range")
		return 0
	}
	return f
}

// skip consumes any value, checking it is valid JSON.
func (s *scanner) skip(depth int) {
	if depth > maxDepth {
		s.fail("nested too deep")
		return
	}
	s.ws()
	if s.i >= len(s.b) {
		s.fail("want a value")
		return
	}
	switch c := s.b[s.i]; {
	case c == '{':
		for more := s.objectStart(); more; more = s.objectNext() {
			s.key()
			s.skip(depth + 1)
		}
	case c == '[':
		for more := s.arrayStart(); more; more = s.arrayNext() {
			s.skip(depth + 1)
		}
	case c == '"':
		s.rawString()
	case c == '-' || c-'0' < 10:
		s.numberText()
	case s.literal("true"), s.literal("false"), s.literal("null"):
	default:
		s.fail("want a value")
	}
}

// boolean reads true or false.
func (s *scanner) boolean() bool {
	s.ws()
	switch {
	case s.err != nil:
	case s.literal("true"):
		return true
	case s.literal("false"):
	default:
		s.fail("want true or false")
	}
	return false
}

func (s *scanner) literal(w string) bool {
	if s.i+len(w) <= len(s.b) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// numberText consumes a number of any length and returns its text.
func (s *scanner) numberText() []byte {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) || s.b[s.i]-'0' >= 10 || (s.b[s.i] == '0' && s.i+1 < len(s.b) && s.b[s.i+1]-'0' < 10) {
		s.fail("bad number")
		return nil
	}
	s.someDigits()
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		s.someDigits()
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		s.someDigits()
	}
	return s.b[start:s.i]
}
