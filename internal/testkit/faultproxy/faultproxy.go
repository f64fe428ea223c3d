// Package faultproxy is a TCP proxy for the tests that stands between the
// server and one dependency (PostgreSQL, an S3 server, clamd) on loopback
// and can pass the traffic, black-hole it (accept and hold every byte, send
// nothing back -- a paused relay, a dropped route) or reset every
// connection, switched while connections are open.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
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
)

// Proxy forwards connections to Addr's listener on to a target.
type Proxy struct {
	// Addr is the proxy's loopback address (host:port).
	Addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	mode  Mode
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
		if n > 0 {
			p.mu.Lock()
			resume := p.resume
			p.mu.Unlock()
			<-resume
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			return
		}
	}
}
