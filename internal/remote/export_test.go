package remote

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
)

// WithLookup replaces DNS resolution (test code only: this file is compiled
// into the tests of this package and nowhere else).
func WithLookup(fn func(ctx context.Context, host string) ([]netip.Addr, error)) Option {
	return func(f *Fetcher) { f.lookup = fn }
}

// WithDialer replaces the final dial of an already validated address, so a
// test can reach its loopback server behind a public test address (test
// code only).
func WithDialer(fn func(ctx context.Context, network, validatedAddr string) (net.Conn, error)) Option {
	return func(f *Fetcher) { f.dial = fn }
}

// CheckAddr exposes the address rule to the tests.
var CheckAddr = checkAddr

// WithTLSConfig trusts a test server's certificate (test code only).
func WithTLSConfig(c *tls.Config) Option {
	return func(f *Fetcher) { f.tlsConfig = c }
}

// ControlAddress exposes the socket-level re-check to the tests.
var ControlAddress = controlAddress
