// Package netrelay is a TCP relay that stands for the WAN link between
// two dev clusters on one host (docs/multicluster.md): it forwards every
// connection to one address, at a bandwidth that can be lowered, and can
// be cut and restored as a link fails and comes back. The integration
// tests hold one in process; scripts/clusters runs it as
// bin/rota-linkrelay.
package netrelay

import (
	"net"
	"sync"
	"time"
)

// Relay forwards connections accepted on its listener to To.
type Relay struct {
	To string

	mu    sync.Mutex
	ln    net.Listener
	addr  string
	conns map[net.Conn]struct{}
	cut   bool
	up    *pace // a -> To
	down  *pace // To -> a
}

// Listen starts a relay on addr ("127.0.0.1:0" for any port) to to, at
// rate bytes/s each way (0: unlimited).
func Listen(addr, to string, rate float64) (*Relay, error) {
	r := &Relay{To: to, conns: map[net.Conn]struct{}{}, up: &pace{rate: rate}, down: &pace{rate: rate}}
	if err := r.listen(addr); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Relay) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.ln, r.addr, r.cut = ln, ln.Addr().String(), false
	r.mu.Unlock()
	go r.accept(ln)
	return nil
}

// Addr is where the relay listens.
func (r *Relay) Addr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

// SetDelay holds each chunk relayed from now on d before passing it on,
// each way: a link's latency (a slow or far link). Chunks of one
// connection pass one at a time, so it also bounds that connection's
// throughput to 16 KiB per d.
func (r *Relay) SetDelay(d time.Duration) {
	r.up.setDelay(d)
	r.down.setDelay(d)
}

// SetRate sets the bandwidth each way, bytes/s (0: unlimited), for bytes
// relayed from now on, on open connections too.
func (r *Relay) SetRate(rate float64) {
	r.up.set(rate)
	r.down.set(rate)
}

// Cut closes the listener and every relayed connection: both ends see
// the link drop, and new connections are refused until Restore.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut {
		return
	}
	r.cut = true
	if r.ln != nil {
		r.ln.Close()
	}
	for c := range r.conns {
		c.Close()
	}
	r.conns = map[net.Conn]struct{}{}
}

// Restore listens again on the same address after Cut.
func (r *Relay) Restore() error {
	r.mu.Lock()
	cut, addr := r.cut, r.addr
	r.mu.Unlock()
	if !cut {
		return nil
	}
	// The port was just closed; another process may take it, or the
	// kernel may hold it a moment.
	var err error
	for i := 0; i < 50; i++ {
		if err = r.listen(addr); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Close cuts the link for good.
func (r *Relay) Close() { r.Cut() }

func (r *Relay) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go r.serve(c)
	}
}

func (r *Relay) serve(c net.Conn) {
	t, err := net.DialTimeout("tcp", r.To, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	if r.cut {
		r.mu.Unlock()
		c.Close()
		t.Close()
		return
	}
	r.conns[c], r.conns[t] = struct{}{}, struct{}{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.pump(t, c, r.up) }()
	go func() { defer wg.Done(); r.pump(c, t, r.down) }()
	wg.Wait()
	r.mu.Lock()
	delete(r.conns, c)
	delete(r.conns, t)
	r.mu.Unlock()
}

// pump copies src to dst at p's pace; when either side ends, both close.
func (r *Relay) pump(dst, src net.Conn, p *pace) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait(n)
			if d := p.latency(); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or the link cut
		}
	}
}

// pace spaces the bytes of one direction of the link, shared by every
// connection on it as a link's bandwidth is.
type pace struct {
	mu    sync.Mutex
	rate  float64   // bytes/s; 0: unlimited
	free  time.Time // when the link has sent what it was given
	delay time.Duration
}

func (p *pace) setDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *pace) latency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

func (p *pace) set(rate float64) {
	p.mu.Lock()
	p.rate = rate
	p.mu.Unlock()
}

func (p *pace) wait(n int) {
	p.mu.Lock()
	if p.rate <= 0 {
		p.mu.Unlock()
		return
	}
	now := time.Now()
	if p.free.Before(now) {
		p.free = now
	}
	p.free = p.free.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	until := p.free
	p.mu.Unlock()
	time.Sleep(time.Until(until))
}
