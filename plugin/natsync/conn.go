package natsync

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// conn is one TCP connection to a NATS server, driven by plain non-blocking
// syscalls and ppoll(2) on whatever thread calls it. It is not safe for
// concurrent use; Client serialises access.
type conn struct {
	fd         int
	url        string
	buf        []byte // bytes read, unconsumed in buf[r:w]
	r, w       int
	out        []byte // reused for outgoing lines
	inbox      string // "<prefix>.<nuid>.": our replies arrive on inbox+<seq>
	maxPayload int
	headers    bool // the server speaks HMSG (and so reports "no responders")
	pingsOut   int  // our PINGs not yet answered
}

// dial opens a TCP connection to addr within timeout. The socket stays
// non-blocking: every wait is an explicit ppoll with the caller's deadline.
func dial(addr *net.TCPAddr, timeout time.Duration) (int, error) {
	var sa unix.Sockaddr
	family := unix.AF_INET
	if ip4 := addr.IP.To4(); ip4 != nil {
		s := &unix.SockaddrInet4{Port: addr.Port}
		copy(s.Addr[:], ip4)
		sa = s
	} else {
		family = unix.AF_INET6
		s := &unix.SockaddrInet6{Port: addr.Port}
		copy(s.Addr[:], addr.IP.To16())
		sa = s
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	// Requests are small and latency is the point: never wait for an ACK
	// before sending (Go's net package sets this too).
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("TCP_NODELAY: %w", err)
	}
	err = unix.Connect(fd, sa)
	if errors.Is(err, unix.EINPROGRESS) || errors.Is(err, unix.EINTR) {
		if err = waitFD(fd, unix.POLLOUT, time.Now().Add(timeout)); err == nil {
			var soErr int
			soErr, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err == nil && soErr != 0 {
				err = unix.Errno(soErr)
			}
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect %s: %w", addr, err)
	}
	return fd, nil
}

// waitFD waits until fd is ready for events or deadline passes. A deadline
// in the past still polls once, without waiting.
func waitFD(fd int, events int16, deadline time.Time) error {
	for {
		d := time.Until(deadline)
		if d < 0 {
			d = 0
		}
		ts := unix.NsecToTimespec(d.Nanoseconds())
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Ppoll(fds[:], &ts, nil)
		if errors.Is(err, unix.EINTR) {
			continue // slurmctld's signals; the deadline still holds
		}
		if err != nil {
			return fmt.Errorf("ppoll: %w", err)
		}
		if n == 0 {
			return ErrTimeout
		}
		return nil // ready, or POLLERR/POLLHUP: the next read or write says which
	}
}

// write sends all of p by deadline. MSG_NOSIGNAL: a peer that closed must
// not raise SIGPIPE inside slurmctld.
func (c *conn) write(p []byte, deadline time.Time) error {
	for len(p) > 0 {
		n, err := unix.SendmsgN(c.fd, p, nil, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		switch {
		case err == nil:
			p = p[n:]
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			if err := waitFD(c.fd, unix.POLLOUT, deadline); err != nil {
				return err
			}
		default:
			return fmt.Errorf("writing to %s: %w", c.url, err)
		}
	}
	return nil
}

// send makes one non-blocking attempt to send p: how much the kernel
// took, 0 when its buffer is full.
func (c *conn) send(p []byte) (int, error) {
	for {
		n, err := unix.SendmsgN(c.fd, p, nil, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0, nil
		default:
			return 0, fmt.Errorf("writing to %s: %w", c.url, err)
		}
	}
}

// fill reads what the socket has, waiting for it until deadline.
func (c *conn) fill(deadline time.Time, need int) error {
	c.makeRoom(need)
	for {
		if err := waitFD(c.fd, unix.POLLIN, deadline); err != nil {
			return err
		}
		n, err := unix.Read(c.fd, c.buf[c.w:])
		switch {
		case n > 0:
			c.w += n
			return nil
		case err == nil: // n == 0
			return fmt.Errorf("%s closed the connection", c.url)
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue // spurious readiness
		default:
			return fmt.Errorf("reading from %s: %w", c.url, err)
		}
	}
}

// makeRoom compacts the buffer so there is space to read into and a frame
// of need bytes (counted from the first unconsumed byte) fits, growing it
// only when one frame is larger than the buffer.
func (c *conn) makeRoom(need int) {
	if c.r == c.w {
		c.r, c.w = 0, 0
	}
	if c.w < len(c.buf) && c.r+need <= len(c.buf) {
		return
	}
	size := len(c.buf)
	for size < need || size == c.w-c.r {
		size *= 2
	}
	nb := c.buf
	if size != len(c.buf) {
		nb = make([]byte, size)
	}
	c.w = copy(nb, c.buf[c.r:c.w])
	c.r = 0
	c.buf = nb
}

// readFrame returns the next complete protocol operation, waiting for it
// until deadline. Only complete frames are consumed, so a timeout leaves
// the stream intact and the connection usable. payload (MSG/HMSG: headers
// then body) and the slices in ctl alias the buffer until the next call.
func (c *conn) readFrame(deadline time.Time) (control, []byte, error) {
	for {
		data := c.buf[c.r:c.w]
		i := bytes.Index(data, []byte("\r\n"))
		need := 0
		if i >= 0 {
			ctl, err := parseControl(data[:i])
			if err != nil {
				return ctl, nil, err
			}
			need = i + 2
			if ctl.op == opMsg || ctl.op == opHMsg {
				if ctl.totalLen > c.maxPayload {
					return ctl, nil, fmt.Errorf("%w: %d-byte message, above the server's max_payload %d", errProtocol, ctl.totalLen, c.maxPayload)
				}
				need += ctl.totalLen + 2
			}
			if len(data) >= need {
				var payload []byte
				if ctl.op == opMsg || ctl.op == opHMsg {
					payload = data[i+2 : i+2+ctl.totalLen]
					if !bytes.Equal(data[need-2:need], []byte("\r\n")) {
						return ctl, nil, fmt.Errorf("%w: message payload not followed by CRLF", errProtocol)
					}
				}
				c.r += need
				return ctl, payload, nil
			}
		} else if len(data) > maxControlLine {
			return control{}, nil, fmt.Errorf("%w: protocol line longer than %d bytes", errProtocol, maxControlLine)
		}
		if err := c.fill(deadline, need); err != nil {
			return control{}, nil, err
		}
	}
}

func (c *conn) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}
