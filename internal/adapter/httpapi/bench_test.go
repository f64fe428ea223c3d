package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/uploadedfile/uploadedfile/bench/floor"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// The benchmarks below run one request through the whole handler as
// `serve` builds it (metrics, guard with its token cache, strict server,
// service, the real database and local store) in the test's process, with
// no network: their allocations per request and CPU profile are the
// server's own share of a lookup or a download, without the load
// generator's noise (docs/performance.md). They assert nothing about time.

// benchHandler is the handler over a fresh database with one stored file
// of size bytes, and a request for path (with the file's id appended) that
// carries a reusable token.
func benchHandler(b *testing.B, size int, path string) (http.Handler, func() *http.Request) {
	h, req, _ := benchFixture(b, size, path)
	return h, req
}

// floorFixture is what the download floor needs: the pool, the local
// root and the stored file's key.
type floorFixture struct {
	pool      *pgxpool.Pool
	root, key string
}

// benchFixture is benchHandler with the floor's fixture.
func benchFixture(tb testing.TB, size int, path string) (http.Handler, func() *http.Request, floorFixture) {
	tb.Helper()
	ctx := context.Background()
	pool := pgtest.New(tb)
	root := tb.TempDir()
	secret := []byte("benchmark-secret-benchmark-secret")
	guard, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: secret, Issuer: "bench", Audience: "uploadedfile"})
	if err != nil {
		tb.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.New(ctx, service.Config{Driver: service.DriverLocal, LocalRoot: root, Host: "http://127.0.0.1"}, pool, service.WithLogger(quiet))
	if err != nil {
		tb.Fatal(err)
	}
	h := httpapi.New(httpapi.Options{Service: svc, Guard: guard, Logger: quiet, Registerer: prometheus.NewRegistry(),
		DownloadPath: svc.EffectiveConfig().DownloadPath})
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "u1", "tenant": "t1", "iss": "bench", "aud": "uploadedfile",
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	if err != nil {
		tb.Fatal(err)
	}
	uctx := service.WithRequestContext(ctx, service.RequestContext{Tenant: "t1", UserID: "u1"})
	r, err := svc.Upload(uctx, bytes.NewReader(bytes.Repeat([]byte("a,b\n"), size/4)), "b.csv", nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE uploaded_file"); err != nil {
		tb.Fatal(err)
	}
	return h, func() *http.Request {
		req := httptest.NewRequest(http.MethodGet, path+r.ID.String(), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return req
	}, floorFixture{pool: pool, root: root, key: r.Key}
}

// discard is a ResponseWriter that keeps the status and drops the body.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(code int)        { d.code = code }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }

// ReadFrom drains r as the connection's sendfile would, without a buffer
// of the benchmark's own.
func (d *discard) ReadFrom(r io.Reader) (int64, error) { return io.Copy(io.Discard, r) }

func runHandler(b *testing.B, h http.Handler, req func() *http.Request) {
	b.Helper()
	b.ReportAllocs()
	for b.Loop() {
		w := &discard{h: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(w, req())
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}

// BenchmarkLookup is GET /uploaded-file/{id} with a cached token.
func BenchmarkLookup(b *testing.B) {
	h, req := benchHandler(b, 4096, "/uploaded-file/")
	runHandler(b, h, req)
}

// BenchmarkDownload is GET /uploaded-file/{id}/download of 64 KiB with a
// cached token.
func BenchmarkDownload(b *testing.B) {
	h, req := benchHandler(b, 64<<10, "/uploaded-file/")
	runHandler(b, h, downloadOf(req))
}

// downloadOf is req with "/download" appended to its path.
func downloadOf(req func() *http.Request) func() *http.Request {
	return func() *http.Request {
		r := req()
		r.URL.Path += "/download"
		return r
	}
}

// BenchmarkDownloadFloor is the download floor of `make bench` (one bare
// SELECT by key, then the file opened by path, fstat and
// http.ServeContent) over the same file in the same way: the difference
// to BenchmarkDownload is the CPU our download adds (guard, middleware,
// the row, the storage driver, the headers).
func BenchmarkDownloadFloor(b *testing.B) {
	_, _, fx := benchFixture(b, 64<<10, "/uploaded-file/")
	h := floor.Download(fx.pool, fx.root)
	runHandler(b, h, func() *http.Request {
		return httptest.NewRequest(http.MethodGet, "/download?key="+url.QueryEscape(fx.key), nil)
	})
}

// BenchmarkLookupFloor is the HTTP lookup floor of `make bench` (one bare
// SELECT by key behind a minimal handler, the key as JSON) over the same
// row: the difference to BenchmarkLookup is the CPU our detail lookup adds
// (guard, middleware, the 21-column row, its URL and JSON).
func BenchmarkLookupFloor(b *testing.B) {
	_, _, fx := benchFixture(b, 4096, "/uploaded-file/")
	h := floor.Lookup(fx.pool)
	runHandler(b, h, func() *http.Request {
		return httptest.NewRequest(http.MethodGet, "/lookup?key="+url.QueryEscape(fx.key), nil)
	})
}

// BenchmarkGrantedDownload is the detail's signed url of a 64 KiB file on
// the local driver (the granted download route: no token, no row read).
func BenchmarkGrantedDownload(b *testing.B) {
	h, req := benchHandler(b, 64<<10, "/uploaded-file/")
	granted := grantedURI(b, h, req)
	runHandler(b, h, func() *http.Request { return httptest.NewRequest(http.MethodGet, granted, nil) })
}

// grantedURI is the request URI of the detail's signed url of the file
// req looks up.
func grantedURI(tb testing.TB, h http.Handler, req func() *http.Request) string {
	tb.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req())
	var d struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil || d.URL == "" {
		tb.Fatalf("detail: %v %s", err, w.Body.String())
	}
	u, err := url.Parse(d.URL)
	if err != nil {
		tb.Fatal(err)
	}
	return u.RequestURI()
}

// TestFileServerWithHeadersAnswersAsAGrantedDownload holds the floor the
// bench measures the signed url against to the granted download's answer:
// the same header names, the sandbox's values. A header added to (or
// dropped from) the granted download fails it until the floor follows.
func TestFileServerWithHeadersAnswersAsAGrantedDownload(t *testing.T) {
	h, req, fx := benchFixture(t, 64<<10, "/uploaded-file/")
	granted := httptest.NewRecorder()
	h.ServeHTTP(granted, httptest.NewRequest(http.MethodGet, grantedURI(t, h, req), nil))
	peer := httptest.NewRecorder()
	floor.FileServerWithHeaders(fx.root).ServeHTTP(peer, httptest.NewRequest(http.MethodGet, "/"+fx.key, nil))
	if granted.Code != http.StatusOK || peer.Code != http.StatusOK {
		t.Fatalf("status: granted %d, floor %d", granted.Code, peer.Code)
	}
	names := func(h http.Header) []string { return slices.Sorted(maps.Keys(h)) }
	if g, p := names(granted.Header()), names(peer.Header()); !slices.Equal(g, p) {
		t.Fatalf("header names differ:\ngranted %q\nfloor   %q", g, p)
	}
	// The disposition names the key's base and the type is the file
	// server's own (with a charset): values of the same shape.
	for _, k := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Cross-Origin-Resource-Policy", "Cache-Control"} {
		if g, p := granted.Header().Get(k), peer.Header().Get(k); g != p {
			t.Errorf("%s: granted %q, floor %q", k, g, p)
		}
	}
	if peer.Body.Len() != 64<<10 {
		t.Errorf("floor body: %d bytes", peer.Body.Len())
	}
}

// BenchmarkFileServer is http.FileServer over the same 64 KiB file: the
// peer the signed url is measured against in `make bench`.
func BenchmarkFileServer(b *testing.B) {
	_, _, fx := benchFixture(b, 64<<10, "/uploaded-file/")
	h := http.FileServer(http.Dir(fx.root))
	runHandler(b, h, func() *http.Request { return httptest.NewRequest(http.MethodGet, "/"+fx.key, nil) })
}

// BenchmarkFileServerWithHeaders is http.FileServer sending the granted
// download's headers (floor.FileServerWithHeaders): the difference to
// BenchmarkGrantedDownload is what the grant, the middleware and the
// storage driver add once the headers are paid.
func BenchmarkFileServerWithHeaders(b *testing.B) {
	_, _, fx := benchFixture(b, 64<<10, "/uploaded-file/")
	h := floor.FileServerWithHeaders(fx.root)
	runHandler(b, h, func() *http.Request { return httptest.NewRequest(http.MethodGet, "/"+fx.key, nil) })
}

// BenchmarkSameWorkLookup is the same-work floor of `make bench` (a cached
// token, the detail's columns, a signed URL, the same JSON; no service)
// over the same row: the difference to BenchmarkLookup is what the
// service's own code adds to the work a detail lookup needs.
func BenchmarkSameWorkLookup(b *testing.B) {
	_, req, fx := benchFixture(b, 4096, "/detail/")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /detail/{id}", floor.SameWorkLookup(fx.pool, []byte("benchmark-secret")))
	runHandler(b, mux, req)
}

// BenchmarkSameWorkDownload is the same-work download floor of `make
// bench` (a cached token, /download's columns and headers, the file opened
// by path and http.ServeContent; no service) over the same file: the
// difference to BenchmarkDownload is what the service's own code adds to
// the work a download needs.
func BenchmarkSameWorkDownload(b *testing.B) {
	_, req, fx := benchFixture(b, 64<<10, "/detail/")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /detail/{id}/download", floor.SameWorkDownload(fx.pool, fx.root))
	runHandler(b, mux, downloadOf(req))
}

// TestSameWorkDownloadAnswersAsTheDownload holds the same-work download
// floor to /download's answer: the same header names and values (but the
// Last-Modified each takes from its own source), the same bytes, and no
// answer for another tenant's token. A header added to (or dropped from)
// /download fails it until the floor follows.
func TestSameWorkDownloadAnswersAsTheDownload(t *testing.T) {
	h, req, fx := benchFixture(t, 64<<10, "/uploaded-file/")
	ours := httptest.NewRecorder()
	h.ServeHTTP(ours, downloadOf(req)())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /detail/{id}/download", floor.SameWorkDownload(fx.pool, fx.root))
	peer := httptest.NewRecorder()
	r := req()
	r.URL.Path = "/detail/" + strings.TrimPrefix(r.URL.Path, "/uploaded-file/") + "/download"
	mux.ServeHTTP(peer, r)
	if ours.Code != http.StatusOK || peer.Code != http.StatusOK {
		t.Fatalf("status: /download %d, floor %d", ours.Code, peer.Code)
	}
	names := func(h http.Header) []string { return slices.Sorted(maps.Keys(h)) }
	if o, p := names(ours.Header()), names(peer.Header()); !slices.Equal(o, p) {
		t.Fatalf("header names differ:\n/download %q\nfloor     %q", o, p)
	}
	for k := range ours.Header() {
		if o, p := ours.Header().Get(k), peer.Header().Get(k); o != p && k != "Last-Modified" {
			t.Errorf("%s: /download %q, floor %q", k, o, p)
		}
	}
	if !bytes.Equal(ours.Body.Bytes(), peer.Body.Bytes()) || peer.Body.Len() != 64<<10 {
		t.Errorf("bodies differ: /download %d bytes, floor %d", ours.Body.Len(), peer.Body.Len())
	}
	other, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "u1", "tenant": "t2"}).SignedString([]byte("any"))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+other)
	peer = httptest.NewRecorder()
	mux.ServeHTTP(peer, r)
	if peer.Code != http.StatusNotFound {
		t.Errorf("another tenant's token: floor answered %d", peer.Code)
	}
}
