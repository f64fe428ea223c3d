package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/faultproxy"
	"github.com/uploadedfile/uploadedfile/internal/testkit/invariant"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/internal/testkit/syncbuf"
	"github.com/uploadedfile/uploadedfile/service"
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
	// status, its problem code ("" on success) and the file it made.
	probe func(t *testing.T) (int, string, string)
	ok    int    // the probe's status when the dependency answers
	code  string // its problem code when it does not (503, Retry-After)
	bound time.Duration
	ready string // what /readyz says of it while it fails ("": nothing)
	// unaffected: the probe succeeds in every mode -- the dependency is
	// not on its path (an event sink; a key set already loaded).
	unaffected bool
	// faulted runs while the dependency fails (nil: nothing more), and
	// delivered once it answers again, with the file the probe made
	// while it failed (nil: nothing to deliver).
	faulted   func(t *testing.T, label, file string)
	delivered func(t *testing.T, label, file string)
	// track, when set, is the cron track whose work meets the dependency:
	// run as `maintenance run-track` through the same link, it ends within
	// trackBound -- failing and naming the dependency, but in a mode the
	// route absorbs -- and runs clean once the link passes.
	track      string
	trackBound time.Duration
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
// and each dependency it uses -- PostgreSQL, the S3 server, clamd, the
// JWKS endpoint, a webhook and NATS -- and every dependency through every
// mode: a short delay the route absorbs; a delay past the bound, a
// throttled link, a black hole and refused connections. A route that
// needs the dependency answers within its documented bound with the
// service's 503 problem and Retry-After, the routes that do not answer as
// before, and /readyz stays 200 and the log says "not answering" naming
// the one that fails. A loaded key
// set is not on a request's path (a token of an unknown kid waits at most
// the fetch's bound), nor is a sink (uploads go on; their events arrive
// once it answers). After each, with the link passing again, the route
// answers with no restart, and after each dependency's faults the
// server's file descriptors, sockets and goroutines are back at their
// baseline.
func TestFaults(t *testing.T) {
	t.Parallel()
	s := startFaultServer(t)
	deps := s.deps()
	for _, d := range deps { // warm every path once
		require.Eventually(t, func() bool { status, _, _ := d.probe(t); return status == d.ok }, 30*time.Second, 200*time.Millisecond, "%s answers", d.name)
	}
	base := s.stats(t)
	var summary []string
	for _, d := range deps {
		for _, m := range faultModes {
			label := fmt.Sprintf("%s, %s", d.name, m.name)
			summary = append(summary, s.fault(t, d, m, label))
		}
		s.requireBaseline(t, base, d.name)
	}
	report := s.settled(t)
	t.Logf("fault matrix: %d dependencies x %d modes, each within its bound, leaks 0; settled: %s:\n%s", len(deps), len(faultModes), report.Summary(), strings.Join(summary, "\n"))
	require.Empty(t, report.Violations, "nothing lost, nothing left behind")
}

// settled runs the sweeps to their end over what the faults left (the
// uploads refused half way, each a deletion claim) and checks the
// invariants: no object without its row, usage equal to the rows, every
// lifecycle complete.
func (s *faultServer) settled(t *testing.T) *invariant.Report {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), s.dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := s3store.New(context.Background(), s.bucket)
	require.NoError(t, err)
	f := &fleet{t: t, store: st, svcCfg: service.Config{Driver: service.DriverS3, Bucket: s.bucket.Bucket}}
	f.settle(pool)
	var keys []string
	require.NoError(t, st.List(context.Background(), "", "", func(oi storage.ObjectInfo) error { keys = append(keys, oi.Key); return nil }))
	report, err := invariant.Check(context.Background(), pool, st, keys)
	require.NoError(t, err)
	return report
}

// fault runs d's probe with its link in mode m, then again once the link
// passes, and returns the summary's line.
func (s *faultServer) fault(t *testing.T, d faultDep, m faultMode, label string) string {
	t.Helper()
	m.set(d.proxy)
	start := time.Now()
	status, code, file := d.probe(t)
	took := time.Since(start)
	require.Less(t, took, d.bound, "%s: answered within the bound", label)
	switch {
	case m.succeeds || d.unaffected:
		require.Equal(t, d.ok, status, "%s: the route does not wait on it (%s)", label, code)
	default:
		require.Equal(t, http.StatusServiceUnavailable, status, label)
		require.Equal(t, d.code, code, label)
		if d.name != "database" {
			ls, lc, _ := s.list(t)
			require.Equal(t, http.StatusOK, ls, "%s: a list needs no %s (%s)", label, d.name, lc)
		}
	}
	if !m.succeeds && d.ready != "" && (m.name == "black-hole" || m.name == "refuse") {
		requireReadyNaming(t, s.base, d.ready)
		require.Eventually(t, func() bool {
			return strings.Contains(s.log.String(), `"msg":"not answering","check":"`+d.name+`"`)
		}, 5*time.Second, 50*time.Millisecond, "%s: the log names the dependency", label)
	}
	if !m.succeeds && d.faulted != nil {
		d.faulted(t, label, file)
	}
	tracked := ""
	if d.track != "" {
		tracked = s.runTrack(t, d, m, label)
	}
	d.proxy.Set(faultproxy.Pass)
	require.Eventually(t, func() bool { status, _, _ := d.probe(t); return status == d.ok }, 30*time.Second, 200*time.Millisecond, "%s: answers again without a restart", label)
	if d.track != "" {
		out, err := s.track(d.track)
		require.NoError(t, err, "%s: the %s track runs clean once the link passes: %s", label, d.track, out)
	}
	if d.delivered != nil {
		d.delivered(t, label, file)
	}
	return fmt.Sprintf("%-34s %3d %-26s in %5.2fs (bound %s)%s, recovered", label, status, code, took.Seconds(), d.bound, tracked)
}

// runTrack runs d's track through the faulted link: within its bound,
// failing with the dependency named unless mode m is one the route
// absorbs. It returns the summary's addition.
func (s *faultServer) runTrack(t *testing.T, d faultDep, m faultMode, label string) string {
	t.Helper()
	start := time.Now()
	out, err := s.track(d.track)
	took := time.Since(start)
	require.Less(t, took, d.trackBound, "%s: the %s track ended within its bound: %s", label, d.track, out)
	if m.succeeds {
		require.NoError(t, err, "%s: the %s track absorbs it: %s", label, d.track, out)
		return fmt.Sprintf("; %s track ok in %.2fs", d.track, took.Seconds())
	}
	require.Error(t, err, "%s: the %s track fails: %s", label, d.track, out)
	require.Contains(t, out, d.name, "%s: the %s track names the dependency", label, d.track)
	return fmt.Sprintf("; %s track failed in %.2fs", d.track, took.Seconds())
}

// track runs `maintenance run-track name` with serve's configuration and
// database link and returns what it printed.
func (s *faultServer) track(name string) (string, error) {
	out, err := exec.Command(s.bin, "--database-url", s.proxiedDB, "maintenance", "--config", s.cfg, "run-track", name).CombinedOutput()
	return string(out), err
}

// faultServer is serve (built without -race) with each dependency behind
// a proxy of its own, its tokens signed by a key of the JWKS it fetches,
// its events relayed to a webhook and a NATS stream.
type faultServer struct {
	dbURL                 string         // the database, not through its proxy
	bucket                s3store.Config // the S3 server, not through its proxy
	cmd                   *exec.Cmd
	base, metrics         string
	key                   *ecdsa.PrivateKey // the JWKS's key, kid "k1"
	token                 string
	db, store, scanner    *faultproxy.Proxy
	jwks, hook, bus       *faultproxy.Proxy
	hookEvents, busEvents *faultEvents
	log                   *syncbuf.Buffer // what serve logged
	bin, cfg, proxiedDB   string          // the binary, serve's configuration, the database through its proxy
}

// faultEvents are the files whose events a sink received.
type faultEvents struct {
	mu    sync.Mutex
	files map[string]bool
}

func (e *faultEvents) add(file string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.files[file] = true
}

func (e *faultEvents) has(file string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.files[file]
}

func startFaultServer(t *testing.T) *faultServer {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	s := &faultServer{hookEvents: &faultEvents{files: map[string]bool{}}, busEvents: &faultEvents{files: map[string]bool{}}}
	s.key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	s.token = s.sign(t, "k1", s.key)
	server, err := url.Parse(pgtest.ServerURL())
	require.NoError(t, err)
	s.db = faultproxy.Start(t, server.Host)
	s.dbURL = pgtest.NewDatabase(t)
	dbURL, err := url.Parse(s.dbURL)
	require.NoError(t, err)
	dbURL.Host = s.db.Addr
	cfg := s.config(t)
	s.bin, s.cfg, s.proxiedDB = bin, cfg, dbURL.String()
	s.cmd = exec.Command(bin, "--database-url", dbURL.String(), "serve", "--listen", "127.0.0.1:0", "--config", cfg, "--no-maintenance")
	stdout, err := s.cmd.StdoutPipe()
	require.NoError(t, err)
	s.log = &syncbuf.Buffer{}
	s.cmd.Stderr = s.log
	require.NoError(t, s.cmd.Start())
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	for s.base == "" && lines.Scan() {
		if m := regexp.MustCompile(`listening on (http://[0-9.:]+)`).FindStringSubmatch(lines.Text()); m != nil {
			s.base = m[1]
		}
	}
	require.NotEmpty(t, s.base, "serve started: %s", s.log.String())
	go io.Copy(io.Discard, stdout)
	return s
}

// config starts the dependencies and their proxies and writes serve's
// configuration.
func (s *faultServer) config(t *testing.T) string {
	t.Helper()
	srv, err := s3test.StartKind(s3test.Selected())
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c := srv.NewBucket(t)
	s.bucket = c
	endpoint, err := url.Parse(c.Endpoint)
	require.NoError(t, err)
	s.store = faultproxy.Start(t, endpoint.Host)
	s.scanner = faultproxy.Start(t, strings.TrimPrefix(clamdtest.Start(t, 30).Addr, "tcp://"))
	s.jwks = faultproxy.Start(t, strings.TrimPrefix(s.jwksServer(t), "http://"))
	hookURL, secret := s.webhook(t)
	s.hook = faultproxy.Start(t, strings.TrimPrefix(hookURL, "http://"))
	stream, prefix := s.natsStream(t)
	s.bus = faultproxy.Start(t, strings.TrimPrefix(natsURL, "nats://"))
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
auth:
  jwksUrl: http://%s/jwks
database:
  callTimeout: %s
  statementTimeout: 1s
  connectTimeout: 2s
  sweeps: {callTimeout: 3s, statementTimeout: 2s}
scan:
  mode: gate
  clamd: tcp://%s
  timeout: %s
events:
  interval: 50ms
  lease: 2s
  sinks:
    hook:
      maxAttempts: 1000
      backoff: 50ms
      maxBackoff: 500ms
      webhook: {url: "http://%s/hook", secret: "%s", timeout: 2s}
    bus:
      maxAttempts: 1000
      backoff: 50ms
      maxBackoff: 500ms
      nats: {url: "nats://%s", subjectPrefix: %s, stream: %s, timeout: 2s}
`, c.Bucket, c.Region, s.store.Addr, c.AccessID, c.AccessKey, faultStorageTimeout, s.metrics, s.jwks.Addr,
		faultCallTimeout, s.scanner.Addr, faultScanTimeout, s.hook.Addr, secret, s.bus.Addr, prefix, stream), 0o600))
	return cfg
}

// jwksServer serves a key set of s.key under kid "k1".
func (s *faultServer) jwksServer(t *testing.T) string {
	t.Helper()
	jwk, err := jwkset.NewJWKFromKey(s.key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", ALG: jwkset.AlgES256}})
	require.NoError(t, err)
	set, err := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// webhook is a receiver that checks each delivery's signature with the
// Standard Webhooks library and records its file.
func (s *faultServer) webhook(t *testing.T) (string, string) {
	t.Helper()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("fault-matrix-secret-0123456789ab"))
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var e cloudevents.Event
		if json.Unmarshal(body, &e) == nil {
			s.hookEvents.add(e.Subject())
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, secret
}

// natsStream names a stream of its own and records the files of the
// events published to it (read on a connection that bypasses the proxy).
func (s *faultServer) natsStream(t *testing.T) (stream, prefix string) {
	t.Helper()
	stream = fmt.Sprintf("UFFAULTS_%d", time.Now().UnixNano())
	prefix = strings.ToLower(stream)
	nc, err := natsgo.Connect(natsURL)
	require.NoError(t, err, "the NATS server with JetStream on 127.0.0.1:4222")
	t.Cleanup(nc.Close)
	jsc, err := js.New(nc)
	require.NoError(t, err)
	t.Cleanup(func() { _ = jsc.DeleteStream(context.Background(), stream) })
	sub, err := nc.Subscribe(prefix+".>", func(m *natsgo.Msg) {
		var e cloudevents.Event
		if json.Unmarshal(m.Data, &e) == nil {
			s.busEvents.add(e.Subject())
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return stream, prefix
}

// sign is a token of alice at acme signed by key under kid.
func (s *faultServer) sign(t *testing.T, kid string, key *ecdsa.PrivateKey) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "alice", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = kid
	signed, err := tok.SignedString(key)
	require.NoError(t, err)
	return signed
}

func (s *faultServer) list(t *testing.T) (int, string, string) {
	return s.call(t, s.token, http.MethodGet, "/uploaded-file?limit=1", nil, "")
}

func (s *faultServer) upload(t *testing.T) (int, string, string) {
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	part, err := w.CreateFormFile("file", "fault.txt")
	require.NoError(t, err)
	_, _ = part.Write([]byte("a dependency that misbehaves"))
	require.NoError(t, w.Close())
	return s.call(t, s.token, http.MethodPost, "/uploaded-file", &form, w.FormDataContentType())
}

// deps are the dependencies, each with the route that needs it.
func (s *faultServer) deps() []faultDep {
	grace := 2 * time.Second
	// held: for a while the sink's link fails, the event does not arrive
	// (the relay meets the fault: it is on the sink's path).
	held := func(events *faultEvents) func(t *testing.T, label, file string) {
		return func(t *testing.T, label, file string) {
			time.Sleep(1500 * time.Millisecond)
			require.False(t, events.has(file), "%s: not delivered while the link fails", label)
		}
	}
	arrives := func(events *faultEvents) func(t *testing.T, label, file string) {
		return func(t *testing.T, label, file string) {
			require.Eventually(t, func() bool { return events.has(file) }, 30*time.Second, 100*time.Millisecond, "%s: the event of the upload made meanwhile arrives", label)
		}
	}
	return []faultDep{
		// The pending track's statements run on the sweeps' bounds
		// (database.sweeps: a 3 s call here), after a 2 s connect.
		{name: "database", proxy: s.db, probe: s.list, ok: http.StatusOK, code: "core.database.unavailable",
			bound: faultCallTimeout + grace, ready: "database unavailable", track: "pending", trackBound: 2*time.Second + 3*time.Second + grace},
		// Three attempts of the S3 client, each waiting storageTimeout,
		// with its backoff between them.
		// The reconcile track lists the store: the three attempts, at most
		// 1 s apart, after the process starts and connects.
		{name: "storage", proxy: s.store, probe: s.upload, ok: http.StatusCreated, code: "core.storage.unavailable",
			bound: 3*faultStorageTimeout + 3*time.Second, ready: "storage unavailable", track: "reconcile", trackBound: 3*faultStorageTimeout + 2*time.Second + grace},
		{name: "scanner", proxy: s.scanner, probe: s.upload, ok: http.StatusCreated, code: "core.scanner.unavailable",
			bound: faultScanTimeout + grace, ready: "clamd did not answer"},
		// The key set is loaded: a known key's token never waits on the
		// JWKS; a token of an unknown kid waits at most the fetch's 5 s.
		{name: "jwks", proxy: s.jwks, probe: s.list, ok: http.StatusOK, bound: grace, unaffected: true,
			faulted: func(t *testing.T, label, _ string) {
				other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				require.NoError(t, err)
				start := time.Now()
				status, code, _ := s.call(t, s.sign(t, "k2", other), http.MethodGet, "/uploaded-file?limit=1", nil, "")
				require.Less(t, time.Since(start), 5*time.Second+grace, "%s: an unknown kid within the fetch's bound", label)
				require.Equal(t, http.StatusUnauthorized, status, "%s: %s", label, code)
			}},
		// The sinks are not on any request's path: uploads go on, and
		// their events arrive once the sink answers again.
		{name: "webhook", proxy: s.hook, probe: s.upload, ok: http.StatusCreated, bound: grace, unaffected: true, faulted: held(s.hookEvents), delivered: arrives(s.hookEvents)},
		{name: "nats", proxy: s.bus, probe: s.upload, ok: http.StatusCreated, bound: grace, unaffected: true, faulted: held(s.busEvents), delivered: arrives(s.busEvents)},
	}
}

// call sends one request with token and returns its status, its problem
// code and the id of the file it answered with; a 503 without
// Retry-After fails the test.
func (s *faultServer) call(t *testing.T, token, method, path string, body io.Reader, contentType string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	require.NoError(t, err, "answered, not hung")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct{ Code, ID string }
	_ = json.Unmarshal(b, &p)
	if resp.StatusCode == http.StatusServiceUnavailable {
		require.NotEmpty(t, resp.Header.Get("Retry-After"), "a 503 says when to retry: %s", b)
	}
	return resp.StatusCode, p.Code, p.ID
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
