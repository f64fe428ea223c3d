// Package faultproxy is a TCP proxy for the tests that stands between the
// server and one dependency (PostgreSQL, an S3 server, clamd) on loopback
// and can pass the traffic, delay every chunk of it, throttle it to a few
// bytes a second, black-hole it (accept and hold every byte, send nothing
// back -- a paused relay, a dropped route) or reset every connection,
// switched while connections are open.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Mode is what the proxy does with the traffic.
type Mode int

// The modes.
const (
	// Pass forwards both ways.
	Pass Mode = iota
	// BlackHole holds every byte in both directions and closes nothing:
	// the peer's writes succeed, its reads wait forever.
	BlackHole
	// Refuse resets every open connection and each new one as soon as it
	// is accepted: a stopped server, a dependency that is down.
	Refuse
	// Delay holds every chunk, each way, for the proxy's delay before
	// passing it on (SetDelay): a slow or distant link.
	Delay
	// Throttle passes at most the proxy's rate of bytes a second each way
	// (SetRate): a saturated link.
	Throttle
)

// String names the mode.
func (m Mode) String() string {
	return [...]string{"pass", "black-hole", "refuse", "delay", "throttle"}[m]
}

// Proxy forwards connections to Addr's listener on to a target.
type Proxy struct {
	// Addr is the proxy's loopback address (host:port).
	Addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	mode  Mode
	delay time.Duration // Delay: how long each chunk is held
	rate  int           // Throttle: bytes a second, each way
	conns map[net.Conn]struct{}
	// resume is closed when the mode leaves BlackHole.
	resume chan struct{}
}

// Start listens on a free loopback port and forwards to target; the proxy
// stops when t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}, resume: make(chan struct{})}
	close(p.resume)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Set switches the mode for open and new connections.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == p.mode {
		return
	}
	switch {
	case m == BlackHole:
		p.resume = make(chan struct{})
	case p.mode == BlackHole:
		close(p.resume)
	}
	p.mode = m
	if m == Refuse {
		for c := range p.conns {
			abort(c)
		}
	}
}

// SetDelay switches to Delay, holding each chunk d.
func (p *Proxy) SetDelay(d time.Duration) {
	p.Set(Delay)
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// SetRate switches to Throttle at bytesPerSecond (at least 10).
func (p *Proxy) SetRate(bytesPerSecond int) {
	p.Set(Throttle)
	p.mu.Lock()
	p.rate = max(bytesPerSecond, 10)
	p.mu.Unlock()
}

// abort closes c with a reset rather than an orderly close.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// Reset closes every open connection (the peers see a reset or EOF).
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.Set(Pass)
	p.Reset()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	refused := p.mode == Refuse
	p.mu.Unlock()
	if refused {
		abort(c)
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, up)
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c); done <- struct{}{} }()
	go func() { p.copy(c, up); done <- struct{}{} }()
	<-done
}

// copy forwards src to dst, holding each chunk while the proxy
// black-holes.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.forward(dst, buf[:n]) != nil {
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			return
		}
	}
}

// forward writes chunk to dst as the mode says: held while the proxy
// black-holes, after the delay, or a tenth of the rate every 100 ms.
func (p *Proxy) forward(dst net.Conn, chunk []byte) error {
	for len(chunk) > 0 {
		p.mu.Lock()
		mode, resume, delay, rate := p.mode, p.resume, p.delay, p.rate
		p.mu.Unlock()
		<-resume
		part := chunk
		switch mode {
		case Delay:
			time.Sleep(delay)
		case Throttle:
			part = chunk[:min(len(chunk), rate/10)]
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := dst.Write(part); err != nil {
			return err
		}
		chunk = chunk[len(part):]
	}
	return nil
}
