package natsync

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// op is one server-to-client protocol operation.
type op int

const (
	opInfo op = iota + 1
	opMsg
	opHMsg
	opPing
	opPong
	opOK
	opErr
)

// maxControlLine bounds one protocol line from the server. INFO is the long
// one (a cluster lists its peers' URLs); 64 KiB is far above what a server
// sends and keeps a broken peer from growing the buffer without end.
const maxControlLine = 64 << 10

// control is one parsed protocol line (without its "\r\n"). For MSG and
// HMSG the payload follows in the stream: hdrLen header bytes (HMSG only)
// then totalLen-hdrLen payload bytes, then "\r\n".
type control struct {
	op       op
	subject  []byte // MSG, HMSG: aliases the line
	sid      uint64
	reply    []byte // MSG, HMSG: may be empty
	hdrLen   int    // HMSG
	totalLen int    // MSG, HMSG: bytes after the line, excluding "\r\n"
	text     []byte // INFO: the JSON; -ERR: the message without quotes
}

var errProtocol = errors.New("NATS protocol error")

// parseControl reads one server protocol line. Operation names are
// case-insensitive (the protocol says so); arguments are separated by
// spaces or tabs.
func parseControl(line []byte) (control, error) {
	name, rest := cutField(line)
	var c control
	switch {
	case eqFold(name, "MSG"):
		c.op = opMsg
		args := fields(rest, 4)
		switch len(args) {
		case 3:
			c.subject, c.totalLen = args[0], atoi(args[2])
		case 4:
			c.subject, c.reply, c.totalLen = args[0], args[2], atoi(args[3])
		default:
			return c, fmt.Errorf("%w: MSG with %d arguments: %q", errProtocol, len(args), clip(line))
		}
		sid, err := strconv.ParseUint(string(args[1]), 10, 64)
		if err != nil || c.totalLen < 0 {
			return c, fmt.Errorf("%w: bad MSG line %q", errProtocol, clip(line))
		}
		c.sid = sid
	case eqFold(name, "HMSG"):
		c.op = opHMsg
		args := fields(rest, 5)
		switch len(args) {
		case 4:
			c.subject, c.hdrLen, c.totalLen = args[0], atoi(args[2]), atoi(args[3])
		case 5:
			c.subject, c.reply, c.hdrLen, c.totalLen = args[0], args[2], atoi(args[3]), atoi(args[4])
		default:
			return c, fmt.Errorf("%w: HMSG with %d arguments: %q", errProtocol, len(args), clip(line))
		}
		sid, err := strconv.ParseUint(string(args[1]), 10, 64)
		if err != nil || c.hdrLen < 0 || c.totalLen < c.hdrLen {
			return c, fmt.Errorf("%w: bad HMSG line %q", errProtocol, clip(line))
		}
		c.sid = sid
	case eqFold(name, "PING"):
		c.op = opPing
	case eqFold(name, "PONG"):
		c.op = opPong
	case eqFold(name, "+OK"):
		c.op = opOK
	case eqFold(name, "-ERR"):
		c.op = opErr
		t := bytes.TrimSpace(rest)
		if len(t) >= 2 && t[0] == '\'' && t[len(t)-1] == '\'' {
			t = t[1 : len(t)-1]
		}
		c.text = t
	case eqFold(name, "INFO"):
		c.op = opInfo
		c.text = bytes.TrimSpace(rest)
	default:
		return c, fmt.Errorf("%w: unknown operation %q", errProtocol, clip(line))
	}
	return c, nil
}

// parseStatus reads the status of an HMSG header block: "NATS/1.0 503\r\n"
// (no responders) or "NATS/1.0 408 Request Timeout\r\n...". code is 0 when
// the block carries headers but no status.
func parseStatus(hdr []byte) (code int, desc string, err error) {
	line, _, ok := bytes.Cut(hdr, []byte("\r\n"))
	if !ok {
		return 0, "", fmt.Errorf("%w: header block without a line end", errProtocol)
	}
	if !bytes.HasPrefix(line, []byte("NATS/1.0")) {
		return 0, "", fmt.Errorf("%w: header block does not start with NATS/1.0: %q", errProtocol, clip(line))
	}
	rest := bytes.TrimSpace(line[len("NATS/1.0"):])
	if len(rest) == 0 {
		return 0, "", nil
	}
	num, d := cutField(rest)
	if len(num) != 3 {
		return 0, "", fmt.Errorf("%w: bad status %q", errProtocol, clip(line))
	}
	code = atoi(num)
	if code < 100 {
		return 0, "", fmt.Errorf("%w: bad status %q", errProtocol, clip(line))
	}
	return code, string(bytes.TrimSpace(d)), nil
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

// cutField splits off the first space-separated field.
func cutField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	return b[i:j], b[j:]
}

// fields splits b into at most max+1 fields (one more than allowed, so a
// caller sees too many).
func fields(b []byte, max int) [][]byte {
	var out [][]byte
	for len(out) <= max {
		f, rest := cutField(b)
		if len(f) == 0 {
			break
		}
		out = append(out, f)
		b = rest
	}
	return out
}

// atoi parses a non-negative decimal of at most 9 digits (sizes far above
// any payload the server allows); anything else is -1.
func atoi(b []byte) int {
	if len(b) == 0 || len(b) > 9 {
		return -1
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func eqFold(b []byte, s string) bool { return len(b) == len(s) && bytes.EqualFold(b, []byte(s)) }

// clip keeps error messages short when a peer sends garbage.
func clip(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}
