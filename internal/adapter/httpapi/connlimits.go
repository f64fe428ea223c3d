package httpapi

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// BodyDeadline bounds, for every request that may carry a body (declared
// with a length or chunked), the time the client may send nothing: the
// connection's read deadline is set to now + idle before any handler runs.
// limitBodies moves it as a body arrives (bodyTimeouts) and lifts it once
// the body is read; a body that never comes is cut off by it -- also on
// routes that never read their body (health, the pages), where net/http
// would otherwise wait for up to 256 KiB of it to drain before answering.
// Wrap the whole handler with it, pages included.
func BodyDeadline(next http.Handler, idle time.Duration) http.Handler {
	if idle <= 0 {
		idle = DefaultBodyIdleTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(idle))
		}
		next.ServeHTTP(w, r)
	})
}

// DefaultMaxConnectionsPerClient is how many connections one client
// address may hold open at once by default.
const DefaultMaxConnectionsPerClient = 256

// LimitConnectionsPerClient returns ln accepting at most max connections
// from one client address at a time (max <= 0: no limit). A connection
// over the limit is closed as soon as it is accepted, before anything is
// read from it. Behind a proxy every connection comes from the proxy's
// address: raise the limit there, or switch it off and let the proxy
// limit clients.
func LimitConnectionsPerClient(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &clientLimitListener{Listener: ln, max: max, open: map[netip.Addr]int{}}
}

type clientLimitListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[netip.Addr]int
}

// Accept implements net.Listener.
func (l *clientLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c)
		l.mu.Lock()
		if l.open[addr] >= l.max {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		l.open[addr]++
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: func() { l.release(addr) }}, nil
	}
}

func (l *clientLimitListener) release(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
}

// clientAddr is the address a connection comes from (the zero address for
// a non-IP one: they share one limit).
func clientAddr(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// limitedConn gives its place back once, when it is closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// ReadFrom keeps the connection's own ReadFrom (sendfile for a download
// from the local driver), which net/http looks for.
func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }

// CloseWrite keeps the connection's half-close, which net/http uses before
// closing a connection with unread request bytes.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
