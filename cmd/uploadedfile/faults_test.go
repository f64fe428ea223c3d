package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/faultproxy"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/internal/testkit/syncbuf"
)

// The bounds the fault matrix runs serve with (docs/configuration.md has
// the defaults): a statement 1 s and a database call 2 s, a store attempt
// 1 s (three attempts), a clamd verdict 2 s.
const (
	faultCallTimeout    = 2 * time.Second
	faultStorageTimeout = time.Second
	faultScanTimeout    = 2 * time.Second
)

// faultDep is one dependency of serve behind its fault proxy, the route
// that needs it and what that route answers when it fails.
type faultDep struct {
	name  string
	proxy *faultproxy.Proxy
	// probe calls the route that needs the dependency and returns its
	// status and problem code ("" on success).
	probe func(t *testing.T) (int, string)
	ok    int    // the probe's status when the dependency answers
	code  string // its problem code when it does not (503, Retry-After)
	bound time.Duration
	ready string // what /readyz says of it while it fails
}

// faultMode is one thing a dependency's link can do, and whether the
// route still succeeds under it.
type faultMode struct {
	name     string
	set      func(p *faultproxy.Proxy)
	succeeds bool
}

var faultModes = []faultMode{
	{"delay 30ms", func(p *faultproxy.Proxy) { p.SetDelay(30 * time.Millisecond) }, true},
	{"delay 5s", func(p *faultproxy.Proxy) { p.SetDelay(5 * time.Second) }, false},
	{"throttle 10 B/s", func(p *faultproxy.Proxy) { p.SetRate(10) }, false},
	{"black-hole", func(p *faultproxy.Proxy) { p.Set(faultproxy.BlackHole) }, false},
	{"refuse", func(p *faultproxy.Proxy) { p.Set(faultproxy.Refuse) }, false},
}

// TestFaults (make faults) runs one serve with a fault proxy between it
// and each dependency it uses -- PostgreSQL, the S3 server, clamd -- and
// every dependency through every mode: a short delay the route absorbs;
// a delay past the bound, a throttled link, a black hole and refused
// connections it answers within its documented bound with the service's
// 503 problem and Retry-After, while the routes that do not need the
// dependency answer as before and /readyz stays 200 naming the one that
// fails. After each, with the link passing again, the route answers with
// no restart, and the server's file descriptors, sockets and goroutines
// are back at their baseline.
func TestFaults(t *testing.T) {
	t.Parallel()
	s := startFaultServer(t)
	deps := s.deps()
	list := func(t *testing.T) (int, string) { return s.call(t, http.MethodGet, "/uploaded-file?limit=1", nil, "") }
	for _, d := range deps { // warm every path once
		require.Eventually(t, func() bool { status, _ := d.probe(t); return status == d.ok }, 30*time.Second, 200*time.Millisecond, "%s answers", d.name)
	}
	base := s.stats(t)
	var summary []string
	for _, d := range deps {
		for _, m := range faultModes {
			m.set(d.proxy)
			start := time.Now()
			status, code := d.probe(t)
			took := time.Since(start)
			label := fmt.Sprintf("%s, %s", d.name, m.name)
			require.Less(t, took, d.bound, "%s: answered within the bound", label)
			if m.succeeds {
				require.Equal(t, d.ok, status, "%s: the route absorbs it (%s)", label, code)
			} else {
				require.Equal(t, http.StatusServiceUnavailable, status, label)
				require.Equal(t, d.code, code, label)
				if d.name != "database" {
					ls, lc := list(t)
					require.Equal(t, http.StatusOK, ls, "%s: a list needs no %s (%s)", label, d.name, lc)
				}
				if m.name == "black-hole" || m.name == "refuse" {
					requireReadyNaming(t, s.base, d.ready)
				}
			}
			d.proxy.Set(faultproxy.Pass)
			require.Eventually(t, func() bool { status, _ := d.probe(t); return status == d.ok }, 30*time.Second, 200*time.Millisecond, "%s: answers again without a restart", label)
			summary = append(summary, fmt.Sprintf("%-34s %3d %-26s in %5.2fs (bound %s), recovered", label, status, code, took.Seconds(), d.bound))
		}
		s.requireBaseline(t, base, d.name)
	}
	t.Logf("fault matrix: %d dependencies x %d modes, each within its bound, leaks 0:\n%s", len(deps), len(faultModes), strings.Join(summary, "\n"))
}

// faultServer is serve --dev (built without -race) with each dependency
// behind a proxy of its own.
type faultServer struct {
	cmd                  *exec.Cmd
	base, metrics, token string
	db, store, scanner   *faultproxy.Proxy
}

func startFaultServer(t *testing.T) *faultServer {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	s := &faultServer{}
	server, err := url.Parse(pgtest.ServerURL())
	require.NoError(t, err)
	s.db = faultproxy.Start(t, server.Host)
	dbURL, err := url.Parse(pgtest.NewDatabase(t))
	require.NoError(t, err)
	dbURL.Host = s.db.Addr
	srv, err := s3test.StartKind(s3test.Selected())
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c := srv.NewBucket(t)
	endpoint, err := url.Parse(c.Endpoint)
	require.NoError(t, err)
	s.store = faultproxy.Start(t, endpoint.Host)
	s.scanner = faultproxy.Start(t, strings.TrimPrefix(clamdtest.Start(t, 30).Addr, "tcp://"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.metrics = ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, `driver: s3
bucket: %s
region: %s
endpoint: http://%s
forcePathStyle: true
accessId: %s
accessKey: %s
storageTimeout: %s
metricsListen: %s
database:
  callTimeout: %s
  statementTimeout: 1s
scan:
  mode: gate
  clamd: tcp://%s
  timeout: %s
`, c.Bucket, c.Region, s.store.Addr, c.AccessID, c.AccessKey, faultStorageTimeout, s.metrics, faultCallTimeout, s.scanner.Addr, faultScanTimeout), 0o600))
	s.cmd = exec.Command(bin, "--database-url", dbURL.String(), "serve", "--dev", "--listen", "127.0.0.1:0", "--config", cfg, "--no-maintenance")
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncbuf.Buffer
	s.cmd.Stderr = &stderr
	require.NoError(t, s.cmd.Start())
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && (s.base == "" || s.token == "") {
		if m := regexp.MustCompile(`listening on (http://[0-9.:]+)`).FindStringSubmatch(lines.Text()); m != nil {
			s.base = m[1]
		}
		if m := regexp.MustCompile(`export TOKEN=(\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			s.token = m[1]
		}
	}
	require.NotEmpty(t, s.token, "serve --dev printed its token: %s", stderr.String())
	go io.Copy(io.Discard, stdout)
	return s
}

// deps are the dependencies, each with the route that needs it.
func (s *faultServer) deps() []faultDep {
	upload := func(t *testing.T) (int, string) {
		var form bytes.Buffer
		w := multipart.NewWriter(&form)
		part, err := w.CreateFormFile("file", "fault.txt")
		require.NoError(t, err)
		_, _ = part.Write([]byte("a dependency that misbehaves"))
		require.NoError(t, w.Close())
		return s.call(t, http.MethodPost, "/uploaded-file", &form, w.FormDataContentType())
	}
	list := func(t *testing.T) (int, string) { return s.call(t, http.MethodGet, "/uploaded-file?limit=1", nil, "") }
	grace := 2 * time.Second
	return []faultDep{
		{name: "database", proxy: s.db, probe: list, ok: http.StatusOK, code: "core.database.unavailable",
			bound: faultCallTimeout + grace, ready: "database unavailable"},
		// Three attempts of the S3 client, each waiting storageTimeout,
		// with its backoff between them.
		{name: "storage", proxy: s.store, probe: upload, ok: http.StatusCreated, code: "core.storage.unavailable",
			bound: 3*faultStorageTimeout + 3*time.Second, ready: "storage unavailable"},
		{name: "scanner", proxy: s.scanner, probe: upload, ok: http.StatusCreated, code: "core.scanner.unavailable",
			bound: faultScanTimeout + grace, ready: "clamd did not answer"},
	}
}

// call sends one request with the development token and returns its
// status and problem code; a 503 without Retry-After fails the test.
func (s *faultServer) call(t *testing.T, method, path string, body io.Reader, contentType string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	require.NoError(t, err, "answered, not hung")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct{ Code string }
	if resp.StatusCode >= 400 {
		_ = json.Unmarshal(b, &p)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		require.NotEmpty(t, resp.Header.Get("Retry-After"), "a 503 says when to retry: %s", b)
	}
	return resp.StatusCode, p.Code
}

// faultStats is what the server holds: descriptors that are not sockets,
// sockets, and goroutines (its own metric).
type faultStats struct{ files, sockets, goroutines int }

func (s *faultServer) stats(t *testing.T) faultStats {
	t.Helper()
	pid := strconv.Itoa(s.cmd.Process.Pid)
	fds, err := os.ReadDir("/proc/" + pid + "/fd")
	require.NoError(t, err)
	var st faultStats
	for _, f := range fds {
		if target, err := os.Readlink("/proc/" + pid + "/fd/" + f.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			st.sockets++
		} else {
			st.files++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.metrics+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go_goroutines (\d+)`).FindSubmatch(b)
	require.NotNil(t, m, "go_goroutines in /metrics")
	st.goroutines, err = strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return st
}

// requireBaseline: once the faults of one dependency are over, the server
// holds what it held before them -- within a few descriptors, the pools'
// connections, and the goroutines of the connections being closed.
func (s *faultServer) requireBaseline(t *testing.T, base faultStats, dep string) {
	t.Helper()
	within := func(st faultStats) bool {
		return st.files <= base.files+2 && st.sockets <= base.sockets+12 && st.goroutines <= base.goroutines+24
	}
	now := s.stats(t)
	for deadline := time.Now().Add(30 * time.Second); !within(now) && time.Now().Before(deadline); now = s.stats(t) {
		time.Sleep(250 * time.Millisecond)
	}
	require.True(t, within(now), "after the %s faults: back at the baseline %+v, holds %+v", dep, base, now)
}
