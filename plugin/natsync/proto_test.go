package natsync

import (
	"errors"
	"testing"
)

func TestParseControl(t *testing.T) {
	for _, c := range []struct {
		line    string
		want    control
		wantErr bool
	}{
		{line: "PING", want: control{op: opPing}},
		{line: "pong", want: control{op: opPong}},
		{line: "+OK", want: control{op: opOK}},
		{line: "-ERR 'Permissions Violation for Publish to \"rota.v1.place\"'", want: control{op: opErr, text: []byte(`Permissions Violation for Publish to "rota.v1.place"`)}},
		{line: `INFO {"server_id":"x","headers":true}`, want: control{op: opInfo, text: []byte(`{"server_id":"x","headers":true}`)}},
		{line: "MSG _INBOX.a.1 1 5", want: control{op: opMsg, subject: []byte("_INBOX.a.1"), sid: 1, totalLen: 5}},
		{line: "MSG  s\t7 r 0", want: control{op: opMsg, subject: []byte("s"), sid: 7, reply: []byte("r"), totalLen: 0}},
		{line: "HMSG _INBOX.a.1 1 16 16", want: control{op: opHMsg, subject: []byte("_INBOX.a.1"), sid: 1, hdrLen: 16, totalLen: 16}},
		{line: "HMSG s 1 r 12 30", want: control{op: opHMsg, subject: []byte("s"), sid: 1, reply: []byte("r"), hdrLen: 12, totalLen: 30}},
		{line: "MSG s 1", wantErr: true},
		{line: "MSG s 1 r x 5", wantErr: true},
		{line: "MSG s x 5", wantErr: true},
		{line: "MSG s 1 -5", wantErr: true},
		{line: "MSG s 1 9999999999", wantErr: true},
		{line: "HMSG s 1 20 10", wantErr: true},
		{line: "HMSG s 1 10", wantErr: true},
		{line: "", wantErr: true},
		{line: "HELLO", wantErr: true},
	} {
		t.Run(c.line, func(t *testing.T) {
			got, err := parseControl([]byte(c.line))
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, want error %v", err, c.wantErr)
			}
			if err != nil {
				if !errors.Is(err, errProtocol) {
					t.Fatalf("error %v does not wrap errProtocol", err)
				}
				return
			}
			if got.op != c.want.op || string(got.subject) != string(c.want.subject) || got.sid != c.want.sid ||
				string(got.reply) != string(c.want.reply) || got.hdrLen != c.want.hdrLen ||
				got.totalLen != c.want.totalLen || string(got.text) != string(c.want.text) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	for _, c := range []struct {
		hdr     string
		code    int
		desc    string
		wantErr bool
	}{
		{hdr: "NATS/1.0 503\r\n\r\n", code: 503},
		{hdr: "NATS/1.0 408 Request Timeout\r\nNats-Pending: 1\r\n\r\n", code: 408, desc: "Request Timeout"},
		{hdr: "NATS/1.0\r\nX: y\r\n\r\n", code: 0},
		{hdr: "NATS/1.0 5\r\n\r\n", wantErr: true},
		{hdr: "NATS/1.0 abc\r\n\r\n", wantErr: true},
		{hdr: "HTTP/1.1 200\r\n\r\n", wantErr: true},
		{hdr: "NATS/1.0 503", wantErr: true},
	} {
		t.Run(c.hdr, func(t *testing.T) {
			code, desc, err := parseStatus([]byte(c.hdr))
			if (err != nil) != c.wantErr || code != c.code || desc != c.desc {
				t.Fatalf("got %d %q %v, want %d %q error %v", code, desc, err, c.code, c.desc, c.wantErr)
			}
		})
	}
}

// The parsers see whatever a peer sends: they must never panic, and what
// they accept must be self-consistent, since the reader slices the buffer
// with these numbers.
func FuzzParseControl(f *testing.F) {
	for _, s := range []string{"PING", "PONG", "+OK", "-ERR 'Stale Connection'", `INFO {"nonce":"abc"}`,
		"MSG a 1 5", "MSG a 1 r 5", "HMSG a 1 12 20", "HMSG a 1 r 12 20", "HMSG a 1 20 12", "MSG a 1 123456789012",
		"msg\ta\t1\t0", "MSG", "", "\x00\xff", "HMSG a 18446744073709551616 1 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := parseControl(line)
		if err != nil {
			if !errors.Is(err, errProtocol) {
				t.Fatalf("error %v does not wrap errProtocol", err)
			}
			return
		}
		switch c.op {
		case opMsg, opHMsg:
			if c.totalLen < 0 || c.hdrLen < 0 || c.hdrLen > c.totalLen || len(c.subject) == 0 {
				t.Fatalf("inconsistent %+v from %q", c, line)
			}
		case opPing, opPong, opOK, opErr, opInfo:
		default:
			t.Fatalf("no op from accepted line %q", line)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	for _, s := range []string{"NATS/1.0 503\r\n\r\n", "NATS/1.0\r\n\r\n", "NATS/1.0 408 Timeout\r\n", "NATS/1.0 99\r\n", "x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, hdr []byte) {
		code, _, err := parseStatus(hdr)
		if err == nil && code != 0 && (code < 100 || code > 999) {
			t.Fatalf("status %d from %q", code, hdr)
		}
	})
}
