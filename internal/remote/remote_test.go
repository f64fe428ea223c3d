package remote_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/remote"
)

// publicIP stands for a public host in the tests; nothing ever dials it:
// the test dialer sends validated connections to the loopback test server.
const publicIP = "93.184.216.34"

// harness is a fetcher whose names resolve through a table and whose
// validated dials go to a loopback test server, recording what was dialed.
type harness struct {
	mu     sync.Mutex
	dialed []string
	srv    *httptest.Server
}

func newHarness(t *testing.T, handler http.Handler, cfg remote.Config, names map[string]string) (*remote.Fetcher, *harness) {
	t.Helper()
	h := &harness{}
	if handler != nil {
		h.srv = httptest.NewServer(handler)
		t.Cleanup(h.srv.Close)
	}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		v, ok := names[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		var out []netip.Addr
		for _, s := range strings.Split(v, ",") {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.mu.Lock()
		h.dialed = append(h.dialed, addr)
		h.mu.Unlock()
		if h.srv == nil {
			return nil, errors.New("no test server")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, h.srv.Listener.Addr().String())
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = 3
	}
	return remote.New(cfg, remote.WithLookup(lookup), remote.WithDialer(dial)), h
}

func (h *harness) dials() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.dialed...)
}

func TestRefusedURLs(t *testing.T) {
	t.Parallel()
	f, h := newHarness(t, nil, remote.Config{}, map[string]string{})
	for _, u := range []string{
		// One address of every refused range, as a literal.
		"http://0.1.2.3/", "http://10.0.0.1/", "http://100.64.0.1/", "http://127.0.0.1/", "http://169.254.169.254/latest/meta-data",
		"http://172.16.0.1/", "http://192.0.0.1/", "http://192.0.2.1/", "http://192.88.99.1/", "http://192.168.1.1/",
		"http://198.18.0.1/", "http://198.51.100.1/", "http://203.0.113.1/", "http://224.0.0.1/", "http://240.0.0.1/",
		"http://255.255.255.255/", "http://[::]/", "http://[::1]/", "http://[fc00::1]/", "http://[fd12:3456::1]/",
		"http://[fe80::1]/", "http://[fec0::1]/", "http://[ff02::1]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[64:ff9b:1::1]/",
		"http://[2001::1]/", "http://[2001:db8::1]/", "http://[2002::1]/",
		// Other spellings of internal addresses.
		"http://2130706433/", "http://0x7f000001/", "http://017700000001/", "http://0x7f.1/",
		"http://[::ffff:127.0.0.1]/", "http://[::ffff:a9fe:a9fe]/", "http://[fe80::1%25eth0]/",
		// URL rules.
		"http://user:pass@" + publicIP + "/", "http://user@" + publicIP + "/", "file:///etc/passwd", "gopher://" + publicIP + "/",
		"ftp://" + publicIP + "/", "http://" + publicIP + ":8080/", "https://" + publicIP + ":22/", "http:///nohost", "//" + publicIP + "/",
		"not a url at all",
	} {
		_, err := f.Fetch(context.Background(), u)
		require.ErrorIs(t, err, remote.ErrRefused, "%s", u)
	}
	require.Empty(t, h.dials(), "no refused URL was ever dialed")
}

func TestAddressRule(t *testing.T) {
	t.Parallel()
	for _, a := range []string{publicIP, "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.216.34"} {
		require.NoError(t, remote.CheckAddr(netip.MustParseAddr(a)), a)
	}
	for _, a := range []string{"127.0.0.1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "fe80::1%eth0", "100.127.255.255", "198.19.255.255"} {
		require.ErrorIs(t, remote.CheckAddr(netip.MustParseAddr(a)), remote.ErrRefused, a)
	}
}

// ianaSpecialPurpose is every entry of IANA's IPv4 and IPv6
// Special-Purpose Address Registries (iana-ipv4-special-registry,
// iana-ipv6-special-registry), with the ranges the issue named beside them.
var ianaSpecialPurpose = []string{
	// IPv4.
	"0.0.0.0/8", "0.0.0.0/32", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.0.0/29", "192.0.0.8/32", "192.0.0.9/32", "192.0.0.10/32",
	"192.0.0.170/32", "192.0.0.171/32", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24",
	"192.88.99.0/24", "192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24",
	"203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
	// IPv6.
	"::1/128", "::/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64",
	"2001::/23", "2001::/32", "2001:1::1/128", "2001:1::2/128", "2001:1::3/128", "2001:2::/48",
	"2001:3::/32", "2001:4:112::/48", "2001:10::/28", "2001:20::/28", "2001:30::/28", "2001:db8::/32",
	"2002::/16", "2620:4f:8000::/48", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10",
	// Named by the issue beside the registries: IPv4-compatible and
	// IPv4-translated IPv6.
	"::/96", "::ffff:0:0:0/96",
}

// TestIANASpecialPurposeRegistries walks both registries: the first, a
// middle and the last address of every entry is refused, and the public
// neighbours of the IPv4 entries that sit between public ranges are not.
func TestIANASpecialPurposeRegistries(t *testing.T) {
	t.Parallel()
	for _, p := range ianaSpecialPurpose {
		prefix := netip.MustParsePrefix(p)
		first := prefix.Masked().Addr()
		last := lastAddr(prefix)
		middle := first
		for range min(8, prefix.Addr().BitLen()-prefix.Bits()) {
			middle = middle.Next()
		}
		for _, a := range []netip.Addr{first, middle, last} {
			require.ErrorIs(t, remote.CheckAddr(a), remote.ErrRefused, "%s in %s", a, p)
		}
	}
	for _, a := range []string{"192.31.195.255", "192.31.197.0", "192.52.192.255", "192.52.194.0", "192.175.47.255", "192.175.49.0", "2620:4f:7fff:ffff::1", "2620:4f:8001::1"} {
		require.NoError(t, remote.CheckAddr(netip.MustParseAddr(a)), "%s is public", a)
	}
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestNamesResolvingInside(t *testing.T) {
	t.Parallel()
	f, h := newHarness(t, nil, remote.Config{}, map[string]string{
		"loopback.example.com": "127.0.0.1",
		"metadata.example.com": "169.254.169.254",
		"mixed.example.com":    publicIP + ",10.0.0.7",
		"v6.example.com":       "::1",
	})
	for _, u := range []string{"http://loopback.example.com/", "http://metadata.example.com/", "http://mixed.example.com/", "http://v6.example.com/"} {
		_, err := f.Fetch(context.Background(), u)
		require.ErrorIs(t, err, remote.ErrRefused, u)
	}
	require.Empty(t, h.dials())
}

func TestAcceptedPathIsPinned(t *testing.T) {
	t.Parallel()
	f, h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Empty(t, r.Header.Get("Authorization"))
		require.Empty(t, r.Header.Get("Cookie"))
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="rates.csv"`)
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "x"})
		_, _ = io.WriteString(w, "a,b\n1,2\n")
	}), remote.Config{}, map[string]string{"files.example.com": publicIP})

	resp, err := f.Fetch(context.Background(), "http://files.example.com/export?id=7")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "a,b\n1,2\n", string(body))
	require.Equal(t, "rates.csv", resp.FileName)
	require.Equal(t, "text/csv; charset=utf-8", resp.ContentType)
	require.Equal(t, []string{publicIP + ":80"}, h.dials(), "the connection went to the validated address")
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	names := map[string]string{"files.example.com": publicIP, "cdn.example.com": "1.1.1.1", "internal.example.com": "192.168.1.5"}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "final") })
	mux.HandleFunc("/to-cdn", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://cdn.example.com/ok", http.StatusFound)
	})
	mux.HandleFunc("/to-private-literal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.1.2.3/secret", http.StatusFound)
	})
	mux.HandleFunc("/to-private-name", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://internal.example.com/", http.StatusFound)
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/chain1", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/to-cdn", http.StatusFound) })

	f, h := newHarness(t, mux, remote.Config{MaxRedirects: 2}, names)
	resp, err := f.Fetch(context.Background(), "http://files.example.com/chain1")
	require.NoError(t, err, "two redirects to a public host are fine")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "final", string(body))
	require.Equal(t, []string{publicIP + ":80", publicIP + ":80", "1.1.1.1:80"}, h.dials(), "every hop dialed its own validated address")

	for _, path := range []string{"/to-private-literal", "/to-private-name", "/to-file", "/loop"} {
		_, err := f.Fetch(context.Background(), "http://files.example.com"+path)
		require.ErrorIs(t, err, remote.ErrRefused, path)
	}
	for _, d := range h.dials() {
		require.True(t, strings.HasPrefix(d, publicIP) || strings.HasPrefix(d, "1.1.1.1"), "never dialed %s", d)
	}

	// The host allowlist holds on every hop.
	only, _ := newHarness(t, mux, remote.Config{AllowedHosts: []string{"files.example.com"}}, names)
	_, err = only.Fetch(context.Background(), "http://files.example.com/to-cdn")
	require.ErrorIs(t, err, remote.ErrRefused)
	_, err = only.Fetch(context.Background(), "http://cdn.example.com/ok")
	require.ErrorIs(t, err, remote.ErrRefused)
	resp, err = only.Fetch(context.Background(), "http://FILES.example.com/ok")
	require.NoError(t, err, "exact, case-insensitive host match")
	resp.Body.Close()
}

func TestSchemeDowngradeRefused(t *testing.T) {
	t.Parallel()
	https := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://files.example.com/ok", http.StatusFound)
	}))
	t.Cleanup(https.Close)
	names := map[string]string{"secure.example.com": publicIP, "files.example.com": publicIP}
	f := remote.New(remote.Config{MaxBytes: 1 << 20, MaxRedirects: 3},
		remote.WithLookup(func(_ context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(names[host])}, nil
		}),
		remote.WithDialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, https.Listener.Addr().String())
		}),
		remote.WithTLSConfig(https.Client().Transport.(*http.Transport).TLSClientConfig))
	_, err := f.Fetch(context.Background(), "https://secure.example.com/start")
	require.ErrorIs(t, err, remote.ErrRefused, "https -> http is refused")
}

func TestBodyLimitAndTimeout(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "2000")
		_, _ = w.Write(make([]byte, 2000))
	})
	mux.HandleFunc("/big-chunked", func(w http.ResponseWriter, _ *http.Request) {
		for range 20 {
			_, _ = w.Write(make([]byte, 100))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("a"))
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-time.After(5 * time.Second):
		}
	})
	f, _ := newHarness(t, mux, remote.Config{MaxBytes: 1000, Timeout: 300 * time.Millisecond}, map[string]string{"files.example.com": publicIP})
	t.Cleanup(func() { close(stop) }) // registered after the server: runs before its Close

	_, err := f.Fetch(context.Background(), "http://files.example.com/big")
	require.ErrorIs(t, err, remote.ErrTooLarge, "refused on its declared length, unread")

	resp, err := f.Fetch(context.Background(), "http://files.example.com/big-chunked")
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.ErrorIs(t, err, remote.ErrTooLarge)
	require.LessOrEqual(t, n, int64(1000), "never more than the limit handed on")

	resp, err = f.Fetch(context.Background(), "http://files.example.com/slow")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	require.Error(t, err, "a body slower than the timeout fails")
}

// TestNoProxyFromEnvironment: a proxy in the environment is never used.
// Not parallel: it sets environment variables.
func TestNoProxyFromEnvironment(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("http_proxy", "http://127.0.0.1:1")
	f, h := newHarness(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "direct") }),
		remote.Config{}, map[string]string{"files.example.com": publicIP})
	resp, err := f.Fetch(context.Background(), "http://files.example.com/x")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "direct", string(body))
	require.Equal(t, []string{publicIP + ":80"}, h.dials())
}

// TestDialerControl: the socket-level check refuses the address actually
// being connected to, whatever the resolver said.
func TestDialerControl(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "10.0.0.1:80", "[::ffff:169.254.169.254]:80", "not-an-address"} {
		require.ErrorIs(t, remote.ControlAddress("tcp", addr, nil), remote.ErrRefused, addr)
	}
	require.NoError(t, remote.ControlAddress("tcp", publicIP+":443", nil))

	// And a real socket to loopback is stopped by it before connecting.
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the loopback server was reached") }))
	t.Cleanup(srv.Close)
	d := net.Dialer{Control: remote.ControlAddress}
	_, err := d.DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	require.ErrorIs(t, err, remote.ErrRefused)
}
