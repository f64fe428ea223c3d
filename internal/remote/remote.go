// Package remote fetches a file from a URL for cloneFromUrl, safely against
// server-side request forgery.
//
//   - Only http and https, no user info, ports 80 and 443 unless more are
//     configured, and the exact host allowlist when one is configured --
//     on the first URL and on every redirect, with no https -> http
//     downgrade and at most MaxRedirects redirects.
//   - Every host is resolved here and only a global unicast address is
//     dialed (IPv4-mapped IPv6 unmapped, zoned addresses refused, the
//     special-purpose ranges refused), and the connection is pinned to that
//     validated address, so DNS rebinding has no window. net.Dialer.Control
//     checks the address actually connected to once more.
//   - No proxy from the environment, no cookies, no credentials.
//   - One timeout over the whole exchange; the body is cut off past MaxBytes
//     without reading the rest.
//
// Errors say what was refused for the logs; callers must not pass them on
// to clients (they name internal network facts).
package remote

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config bounds a fetch.
type Config struct {
	Timeout      time.Duration // whole exchange; default 5 s
	MaxBytes     int64         // body limit; required
	MaxRedirects int           // 0..5; the caller applies the default of 3
	AllowedHosts []string      // exact host names; empty: any public host
	AllowedPorts []int         // in addition to 80 and 443
}

// ErrRefused is wrapped by every refusal of a URL or an address.
var ErrRefused = errors.New("remote: refused")

// ErrTooLarge means the body is larger than MaxBytes.
var ErrTooLarge = errors.New("remote: body too large")

// Fetcher fetches remote files.
type Fetcher struct {
	cfg       Config
	client    *http.Client
	lookup    func(ctx context.Context, host string) ([]netip.Addr, error)
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsConfig *tls.Config // nil: the system roots
}

// Option adjusts a Fetcher. Only tests construct options (in package
// remotetest): none is a configuration setting.
type Option func(*Fetcher)

// New returns a fetcher for cfg.
func New(cfg Config, opts ...Option) *Fetcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	f := &Fetcher{cfg: cfg, lookup: systemLookup}
	dialer := &net.Dialer{Timeout: cfg.Timeout, Control: controlAddress}
	f.dial = dialer.DialContext
	for _, o := range opts {
		o(f)
	}
	transport := &http.Transport{
		Proxy:                 nil, // never a proxy from the environment
		DialContext:           f.dialValidated,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1,
		IdleConnTimeout:       time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		DisableKeepAlives:     true,
		TLSClientConfig:       f.tlsConfig,
	}
	f.client = &http.Client{Transport: transport, Timeout: cfg.Timeout, CheckRedirect: f.checkRedirect}
	return f
}

// Response is a fetched body, bounded, and what describes it.
type Response struct {
	Body        io.ReadCloser
	ContentType string
	FileName    string
}

// Fetch validates rawURL and fetches it. The caller closes Body; reading it
// fails with ErrTooLarge past MaxBytes.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (*Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: not a URL", ErrRefused)
	}
	if err := f.checkURL(u, nil); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err) //nolint:errorlint // the cause as text: callers match the sentinel, never the network error
	}
	req.Header.Set("User-Agent", "uploadedfile-remote-clone")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("remote: status %d", resp.StatusCode)
	}
	if resp.ContentLength > f.cfg.MaxBytes {
		resp.Body.Close()
		return nil, ErrTooLarge
	}
	return &Response{
		Body:        &limitedBody{r: resp.Body, remaining: f.cfg.MaxBytes},
		ContentType: resp.Header.Get("Content-Type"),
		FileName:    fileName(resp),
	}, nil
}

// checkURL applies the URL rules; via is the request being redirected
// from, if any.
func (f *Fetcher) checkURL(u *url.URL, via *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: scheme %q", ErrRefused, u.Scheme)
	case u.User != nil:
		return fmt.Errorf("%w: user info in the URL", ErrRefused)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%w: no host", ErrRefused)
	case via != nil && via.Scheme == "https" && u.Scheme == "http":
		return fmt.Errorf("%w: https to http downgrade", ErrRefused)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, err := strconv.Atoi(port)
	if err != nil || !(p == 80 || p == 443 || slices.Contains(f.cfg.AllowedPorts, p)) {
		return fmt.Errorf("%w: port %s", ErrRefused, port)
	}
	host := strings.ToLower(u.Hostname())
	if len(f.cfg.AllowedHosts) > 0 && !slices.ContainsFunc(f.cfg.AllowedHosts, func(h string) bool { return strings.EqualFold(h, host) }) {
		return fmt.Errorf("%w: host %q is not allowed", ErrRefused, host)
	}
	if looksNumeric(host) {
		return fmt.Errorf("%w: non-canonical numeric host %q", ErrRefused, host)
	}
	return nil
}

// looksNumeric catches the integer, octal and hex spellings of IPv4 some
// resolvers accept ("2130706433", "0x7f.1", "017700000001") that are not
// canonical dotted quads.
func looksNumeric(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	return strings.Trim(host, "0123456789abcdefx.") == "" && strings.ContainsAny(host, "0123456789") &&
		!strings.ContainsAny(host, "ghijklmnopqrstuvwyz")
}

func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.cfg.MaxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRefused, f.cfg.MaxRedirects)
	}
	// No credentials or cookies travel to the next hop.
	req.Header.Del("Authorization")
	req.Header.Del("Cookie")
	return f.checkURL(req.URL, via[len(via)-1].URL)
}

// dialValidated resolves the host here, keeps only allowed addresses and
// dials the first, so the connection is pinned to a checked address.
func (f *Fetcher) dialValidated(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q", ErrRefused, addr)
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = f.lookup(ctx, strings.ToLower(host)); err != nil {
		return nil, fmt.Errorf("remote: resolve %q: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("remote: %q has no address", host)
	}
	for _, a := range addrs {
		if err := checkAddr(a); err != nil {
			return nil, err // one bad answer refuses the name: no mixing public and private
		}
	}
	return f.dial(ctx, network, net.JoinHostPort(addrs[0].Unmap().String(), port))
}

// controlAddress re-checks the address a socket is about to connect to.
func controlAddress(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: address %q", ErrRefused, address)
	}
	return checkAddr(ap.Addr())
}

// blocked are the special-purpose ranges refused beyond what
// netip.Addr's predicates already catch: every entry of IANA's IPv4 and
// IPv6 Special-Purpose Address Registries (globally reachable or not -- a
// remote file is never served from anycast, AS112 or translation
// infrastructure), multicast, and the deprecated IPv6 ranges that embed an
// IPv4 address (IPv4-compatible ::/96, SIIT's IPv4-translated
// ::ffff:0:0:0/96, 6to4, site-local).
var blocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range []string{
		// IPv4 Special-Purpose Address Registry.
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24",
		"192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
		"240.0.0.0/4", "255.255.255.255/32",
		// Multicast.
		"224.0.0.0/4",
		// IPv6 Special-Purpose Address Registry.
		"::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64",
		"2001::/23", "2001:db8::/32", "2002::/16", "2620:4f:8000::/48", "3fff::/20", "5f00::/16",
		"fc00::/7", "fe80::/10",
		// Deprecated or embedding IPv4, and multicast.
		"::/96", "::ffff:0:0:0/96", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// checkAddr allows only global unicast addresses outside every special
// range; an IPv4-mapped IPv6 address is judged as the IPv4 it carries.
func checkAddr(a netip.Addr) error {
	if a.Zone() != "" {
		return fmt.Errorf("%w: zoned address", ErrRefused)
	}
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return fmt.Errorf("%w: address %s is not public", ErrRefused, a)
	}
	for _, p := range blocked {
		if p.Contains(a) {
			return fmt.Errorf("%w: address %s is in %s", ErrRefused, a, p)
		}
	}
	return nil
}

func systemLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	return ips, err
}

// limitedBody fails once more than its limit is read, without reading on.
type limitedBody struct {
	r         io.ReadCloser
	remaining int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.remaining < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.remaining+1 {
		p = p[:l.remaining+1]
	}
	n, err := l.r.Read(p)
	l.remaining -= int64(n)
	if l.remaining < 0 {
		return 0, ErrTooLarge
	}
	return n, err
}

func (l *limitedBody) Close() error { return l.r.Close() }

// fileName is the Content-Disposition filename, else the last path segment
// of the final URL, else "download".
func fileName(resp *http.Response) string {
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		return params["filename"]
	}
	if base := path.Base(resp.Request.URL.Path); base != "/" && base != "." && base != "" {
		if unescaped, err := url.PathUnescape(base); err == nil {
			return unescaped
		}
	}
	return "download"
}
