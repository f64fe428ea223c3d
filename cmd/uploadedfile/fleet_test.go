package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/gen/client"
	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
	"github.com/uploadedfile/uploadedfile/internal/testkit/faultproxy"
	"github.com/uploadedfile/uploadedfile/internal/testkit/invariant"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/service"
	"github.com/uploadedfile/uploadedfile/uploader"
)

// fleetDuration is how long TestFleet drives its load per driver; `make
// fleet` sets it (`-fleet.duration=2m`), `make test` keeps it short.
var fleetDuration = flag.Duration("fleet.duration", 20*time.Second, "how long TestFleet drives its load (per driver)")

// fleetReplicas is how many serve processes run behind the balancer.
const fleetReplicas = 3

// TestFleet: three serve replicas on one database and one store behind
// HAProxy; clients upload (direct and buffer), delete and read through it
// with the uploader's retries and Idempotency-Keys while a random replica
// is SIGKILLed every few seconds and restarted, and the database's
// connections are cut once. Then the sweeps settle everything and:
// every acknowledged upload exists exactly once with its bytes, nothing
// acknowledged as deleted exists, no object outlives its row, the usage
// counters equal the rows, every row has its events. Both drivers (local
// on one shared directory).
func TestFleet(t *testing.T) {
	t.Parallel()
	needHAProxy(t)
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			runFleet(t, driver)
		})
	}
}

// fleet is one run: its replicas, its balancer, what it stores on.
type fleet struct {
	t *testing.T
	// bin is every replica's binary, unless bins names replica i's.
	bin  string
	bins map[int]string
	// size is how many replicas run (fleetReplicas when 0).
	size int
	// retries is how often a client call is tried again.
	retries int
	// serveArgs go to every replica's serve but those of oldBins (a
	// previous release may not know them).
	serveArgs []string
	oldBins   map[string]bool
	// lbLog is HAProxy's log.
	lbLog    string
	dbURL    string
	cfgFile  string
	lb       string // http://127.0.0.1:port of HAProxy
	secret   []byte
	mu       sync.Mutex
	replicas []*exec.Cmd
	ports    []int
	logs     []string
	store    storage.Store
	svcCfg   service.Config
	// storeProxy stands between the replicas and the S3 server.
	storeProxy *faultproxy.Proxy
	keys       func() []string
}

func runFleet(t *testing.T, driver string) {
	bin, err := buildOnce()
	require.NoError(t, err)
	f := &fleet{t: t, bin: bin, dbURL: pgtest.NewDatabase(t), secret: []byte(strings.Repeat("f", 40)), retries: 8,
		serveArgs: []string{"--shutdown-delay", "2s"}}
	f.configure(driver)
	f.startBalancer()
	for i := range fleetReplicas {
		f.start(i)
	}
	f.routed()
	pool, err := pgxpool.New(context.Background(), f.dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// The load, and the faults.
	ledger := newFleetLedger()
	stop := f.load(6, ledger)
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 43))
	kills, outages := 0, []string{}
	begin := time.Now()
	for time.Since(begin) < *fleetDuration {
		time.Sleep(time.Duration(1500+rnd.IntN(2500)) * time.Millisecond)
		if len(outages) == 0 && time.Since(begin) > *fleetDuration/3 {
			f.databaseOutage(pool)
			outages = append(outages, "database")
			continue
		}
		if len(outages) == 1 && f.storeProxy != nil && time.Since(begin) > *fleetDuration*2/3 {
			f.storeOutage()
			outages = append(outages, "store")
			continue
		}
		i := rnd.IntN(fleetReplicas)
		f.kill(i)
		kills++
		time.Sleep(time.Duration(200+rnd.IntN(800)) * time.Millisecond)
		f.start(i)
	}
	stop()
	f.stopAll()
	require.NotEmpty(t, outages, "the database was down once")
	if f.storeProxy != nil {
		require.Len(t, outages, 2, "the store was down once")
	}

	f.check(pool, ledger, driver, fmt.Sprintf("%d kills, %s outages of %s", kills, strings.Join(outages, " and "), *fleetOutage))
	require.Positive(t, ledger.direct, "direct uploads were acknowledged")
	require.Positive(t, ledger.buffer, "buffer uploads were acknowledged")
	require.Positive(t, ledger.deletes, "deletes were acknowledged")
	require.Positive(t, kills, "replicas were killed")
	total := len(ledger.uploads) + ledger.deletes + ledger.reads
	require.Less(t, ledger.failed*10, total, "the clients' retries carried at least nine calls in ten through the faults")
}

// check settles the store far past every lease, expiry and upload window,
// then holds what the clients were told against what is there: every
// acknowledged upload present once with its bytes, nothing acknowledged as
// deleted still there, and the invariants (no orphan, usage equal to the
// rows, every row's events). label names the run, faults what it went
// through.
func (f *fleet) check(pool *pgxpool.Pool, ledger *fleetLedger, label, faults string) {
	t := f.t
	driver := label
	// Settle: far past every lease, expiry and upload window.
	f.settle(pool)
	r, err := invariant.Check(context.Background(), pool, f.store, f.keys())
	require.NoError(t, err)

	// What the clients were told, against what is there.
	present, duplicates, deletedButThere, lost := 0, 0, 0, 0
	byName := map[string]int{}
	rows, err := pool.Query(context.Background(), `
SELECT original_name FROM uploaded_file
WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		byName[name]++
	}
	require.NoError(t, rows.Err())
	for name, n := range byName {
		if n > 1 {
			duplicates += n - 1
			r.Violations = append(r.Violations, fmt.Sprintf("logical upload %s made %d visible files", name, n))
		}
	}
	for id, u := range ledger.uploads {
		key, visible := r.Visible[id]
		switch {
		case u.deleted && visible:
			deletedButThere++
			r.Violations = append(r.Violations, fmt.Sprintf("file %s was acknowledged as deleted and is still there", id))
		case u.deleted || u.maybeDeleted:
		case !visible:
			lost++
			r.Violations = append(r.Violations, fmt.Sprintf("acknowledged upload %s (%s) is not there", id, u.name))
		default:
			present++
			if got := f.sum(key); got != u.sum {
				r.Violations = append(r.Violations, fmt.Sprintf("acknowledged upload %s holds other bytes", id))
			}
		}
	}
	r.Violations = append(r.Violations, ledger.violations...)
	t.Logf("fleet[%s]: %d replicas behind HAProxy, %s; acknowledged %d uploads (%d direct, %d buffer), %d deletes, %d reads; %d client calls failed after their retries",
		driver, f.size, faults, len(ledger.uploads), ledger.direct, ledger.buffer, ledger.deletes, ledger.reads, ledger.failed)
	kinds := func(part string) int {
		n := 0
		for _, v := range r.Violations {
			if strings.Contains(v, part) {
				n++
			}
		}
		return n
	}
	t.Logf("fleet[%s]: acknowledged and kept %d, present %d, lost %d, duplicates %d, deleted but present %d, orphans %d, usage drift %d, lifecycles broken %d; checked %s",
		driver, present+lost, present, lost, duplicates, deletedButThere, kinds("has no row that owns it"), kinds("usage of "), kinds(": events "), r.Summary())
	if len(ledger.failures) > 0 {
		t.Logf("fleet[%s]: calls failed after their retries: %v", driver, ledger.failures)
	}
	require.Empty(t, r.Violations, "fleet[%s]", driver)
}

// configure writes the replicas' configuration for driver and opens the
// store the checks read.
func (f *fleet) configure(driver string) {
	t := f.t
	lbPort := freePort(t)
	f.lb = fmt.Sprintf("http://127.0.0.1:%d", lbPort)
	if f.size == 0 {
		f.size = fleetReplicas
	}
	for range f.size {
		f.ports = append(f.ports, freePort(t))
	}
	f.replicas = make([]*exec.Cmd, f.size)
	var storeCfg string
	switch driver {
	case service.DriverLocal:
		root := t.TempDir()
		storeCfg = "localRoot: " + root + "\n"
		st, err := local.New(local.Config{Root: root})
		require.NoError(t, err)
		f.store, f.svcCfg = st, service.Config{LocalRoot: root}
		f.keys = func() []string { return walkKeys(t, root) }
	default:
		srv, err := s3test.StartKind(s3test.Selected())
		require.NoError(t, err)
		t.Cleanup(srv.Stop)
		c := srv.NewBucket(t)
		u, err := url.Parse(c.Endpoint)
		require.NoError(t, err)
		f.storeProxy = faultproxy.Start(t, u.Host)
		storeCfg = fmt.Sprintf("driver: s3\nbucket: %s\nregion: %s\nendpoint: http://%s\nforcePathStyle: true\naccessId: %s\naccessKey: %s\n",
			c.Bucket, c.Region, f.storeProxy.Addr, c.AccessID, c.AccessKey)
		st, err := s3store.New(context.Background(), c)
		require.NoError(t, err)
		f.store, f.svcCfg = st, service.Config{Driver: service.DriverS3, Bucket: c.Bucket}
		f.keys = func() []string {
			var keys []string
			require.NoError(t, st.List(context.Background(), "", "", func(oi storage.ObjectInfo) error { keys = append(keys, oi.Key); return nil }))
			return keys
		}
	}
	f.cfgFile = filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(f.cfgFile, []byte(storeCfg+fmt.Sprintf(`host: %s
auth:
  hmacSecret: %s
pendingCleanupInterval: '@every 2s'
temporaryCleanupInterval: '@every 2s'
accessLog: false
`, f.lb, f.secret)), 0o600))
}

// needHAProxy fails t when Debian's haproxy is missing: the balancer's
// tests run the real one.
func needHAProxy(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatalf("%s needs Debian's haproxy (apt-get install haproxy; .ci/run installs it)", t.Name())
	}
}

// startBalancer starts HAProxy in front of the replicas with
// docs/haproxy.cfg -- the configuration the operations guide gives --
// its server lines replaced by the replicas'. Its log (health checks
// included) is kept in f.lbLog.
func (f *fleet) startBalancer() {
	t := f.t
	doc, err := os.ReadFile("../../docs/haproxy.cfg")
	require.NoError(t, err)
	var cfgText strings.Builder
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "server ") {
			continue
		}
		cfgText.WriteString(line + "\n")
	}
	for i, p := range f.ports {
		fmt.Fprintf(&cfgText, "    server r%d 127.0.0.1:%d check\n", i, p)
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, os.WriteFile(cfg, []byte(cfgText.String()), 0o600))
	f.lbLog = filepath.Join(t.TempDir(), "haproxy.log")
	logFile, err := os.Create(f.lbLog)
	require.NoError(t, err)
	cmd := exec.Command("haproxy", "-db", "-f", cfg)
	cmd.Env = append(os.Environ(), "UPLOADEDFILE_LB_BIND="+strings.TrimPrefix(f.lb, "http://"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logFile.Close() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", strings.TrimPrefix(f.lb, "http://"))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "haproxy listens (log: %s)", f.lbLog)
}

// start starts replica i on its port and waits until it is ready.
func (f *fleet) start(i int) {
	t := f.t
	bin := f.bin
	if b, ok := f.bins[i]; ok {
		bin = b
	}
	args := []string{"--database-url", f.dbURL, "serve", "--config", f.cfgFile, "--listen", fmt.Sprintf("127.0.0.1:%d", f.ports[i])}
	if !f.oldBins[bin] {
		args = append(args, f.serveArgs...)
	}
	cmd := exec.Command(bin, args...)
	logFile, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprintf("replica-%d.log", i)))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = io.Discard, logFile
	require.NoError(t, cmd.Start())
	f.mu.Lock()
	f.replicas[i] = cmd
	f.logs = append(f.logs, logFile.Name())
	f.mu.Unlock()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logFile.Close() })
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", f.ports[i])
	require.Eventually(t, func() bool {
		resp, err := http.Get(ready)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "replica %d became ready (log: %s)", i, logFile.Name())
}

// routed waits until the balancer sends requests to a replica: HAProxy
// takes a server in after its rise checks, so the replicas started after
// it are not yet in its pool when they answer /readyz.
func (f *fleet) routed() {
	require.Eventually(f.t, func() bool {
		resp, err := http.Get(f.lb + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the balancer routes to a replica (log: %s)", f.lbLog)
}

// kill SIGKILLs replica i.
func (f *fleet) kill(i int) {
	f.mu.Lock()
	cmd := f.replicas[i]
	f.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// stopAll stops every replica with SIGTERM (a drain), as a deploy does.
func (f *fleet) stopAll() {
	for _, cmd := range f.replicas {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

// settle runs the tracks in rounds, each 48 hours further on, until a
// round has nothing left to do but reschedule upload tombstones.
func (f *fleet) settle(pool *pgxpool.Pool) {
	t := f.t
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now()
	for round := 1; round <= 30; round++ {
		clock := func() time.Time { return now.Add(time.Duration(round) * 48 * time.Hour) }
		svc, err := service.New(context.Background(), f.svcCfg, pool, service.WithStore(f.store), service.WithClock(clock), service.WithLogger(quiet))
		require.NoError(t, err)
		r := tracks.New(svc, pool, tracks.Options{Logger: quiet})
		r.SetClock(clock)
		p, err := r.Run(context.Background(), tracks.TrackPending)
		require.NoError(t, err)
		tmp, err := r.Run(context.Background(), tracks.TrackTemporary)
		require.NoError(t, err)
		var unsettled int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM uploaded_file
			WHERE (deletion_pending_at IS NOT NULL OR upload_pending_at IS NOT NULL OR staging_cleanup_at IS NOT NULL)
				AND NOT (upload_pending_at IS NOT NULL AND upload_expires_at IS NULL AND deleted_at IS NOT NULL)`).Scan(&unsettled))
		if p.Examined+tmp.Examined == 0 || (round > 3 && unsettled == 0) {
			return
		}
	}
}

// sum is the SHA-256 of the object at key.
func (f *fleet) sum(key string) [32]byte {
	rc, err := f.store.Open(context.Background(), key, nil)
	require.NoError(f.t, err)
	defer rc.Close()
	h := sha256.New()
	_, err = io.Copy(h, rc)
	require.NoError(f.t, err)
	return [32]byte(h.Sum(nil))
}

// fleetUpload is one acknowledged upload.
type fleetUpload struct {
	name         string
	sum          [32]byte
	owner        int // the worker that made it
	deleted      bool
	maybeDeleted bool // a delete failed after its retries: it may have happened
}

// fleetLedger is what the clients were told.
type fleetLedger struct {
	mu                                     sync.Mutex
	uploads                                map[uuid.UUID]fleetUpload
	names                                  map[string]uuid.UUID
	direct, buffer, deletes, reads, failed int
	violations                             []string
	failures                               map[string]int // why calls failed after their retries
	phase                                  string         // what the run was doing, for the failures' report
}

// at names what the run does from now on (a failure's report says it).
func (l *fleetLedger) at(phase string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = phase
}

// fail counts a call that failed after its retries (the caller holds mu).
func (l *fleetLedger) fail(what string, err error) {
	l.failed++
	if l.failures == nil {
		l.failures = map[string]int{}
	}
	msg := what + ": " + signedQuery.ReplaceAllString(err.Error(), "?…")
	if l.phase != "" {
		msg = l.phase + ": " + msg
	}
	if len(msg) > 240 {
		msg = msg[:240]
	}
	l.failures[msg]++
}

// signedQuery is a URL's query in an error: a signed URL's signature is
// left out of the failures, and so is its length, so the cause after it
// (a reset, a status) stays in the message.
var signedQuery = regexp.MustCompile(`\?[^"\s]*`)

// newFleetLedger is an empty ledger.
func newFleetLedger() *fleetLedger {
	return &fleetLedger{uploads: map[uuid.UUID]fleetUpload{}, names: map[string]uuid.UUID{}}
}

// load runs workers clients (f.work, each under its own number) until the
// returned stop, which waits for their calls in flight.
func (f *fleet) load(workers int, l *fleetLedger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.work(ctx, w, l)
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// work is one client: uploads (direct and buffer), deletes of its own
// acknowledged files, and reads of them, until ctx ends.
func (f *fleet) work(ctx context.Context, w int, l *fleetLedger) {
	tenant := fmt.Sprintf("tenant-%d", w%2)
	user := fmt.Sprintf("user-%d", w%3)
	token := func(context.Context) (string, error) {
		return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": user, "tenant": tenant, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(f.secret)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	up, err := uploader.New(f.lb, token, uploader.WithHTTPClient(hc), uploader.WithRetries(f.retries, 200*time.Millisecond))
	require.NoError(f.t, err)
	api, err := client.NewClientWithResponses(f.lb, client.WithHTTPClient(hc), client.WithRequestEditorFn(func(ctx context.Context, r *http.Request) error {
		tok, _ := token(ctx)
		r.Header.Set("Authorization", "Bearer "+tok)
		return nil
	}))
	require.NoError(f.t, err)
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
	var mine []uuid.UUID
	for n := 0; ctx.Err() == nil; n++ {
		// Calls run on a context of their own: the end of the run lets a
		// call in flight finish (its answer is what the ledger records).
		call, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		switch op := rnd.IntN(100); {
		case op < 35 || len(mine) == 0:
			name := fmt.Sprintf("w%d-%d.txt", w, n)
			body := fleetBody(rnd)
			file, err := up.Upload(call, uploader.File{Name: name, ContentType: "text/plain", Body: bytes.NewReader(body), Size: int64(len(body))})
			if id, ok := l.acknowledge(w, name, body, file, err); ok {
				mine = append(mine, id)
				l.count(&l.direct)
			}
		case op < 55:
			name := fmt.Sprintf("w%d-%d.txt", w, n)
			body := fleetBody(rnd)
			file, err := up.BufferUpload(call, name, bytes.NewReader(body))
			if id, ok := l.acknowledge(w, name, body, file, err); ok {
				mine = append(mine, id)
				l.count(&l.buffer)
			}
		case op < 75:
			i := rnd.IntN(len(mine))
			id := mine[i]
			mine = append(mine[:i], mine[i+1:]...)
			err := up.Delete(call, id)
			l.mu.Lock()
			u := l.uploads[id]
			switch {
			case err == nil:
				u.deleted = true
				l.deletes++
			case deleteNotFound(err):
				u.maybeDeleted = true
				l.violations = append(l.violations, fmt.Sprintf("delete of acknowledged file %s answered 404", id))
			default:
				u.maybeDeleted = true
				l.fail("delete", err)
			}
			l.uploads[id] = u
			l.mu.Unlock()
		default:
			id := mine[rnd.IntN(len(mine))]
			body, err := f.read(call, api, hc, token, id)
			l.mu.Lock()
			u := l.uploads[id]
			switch {
			case err == nil && sha256.Sum256(body) == u.sum:
				l.reads++
			case err == nil:
				l.violations = append(l.violations, fmt.Sprintf("read of %s returned other bytes", id))
			case errors.Is(err, errFleetNotFound):
				l.violations = append(l.violations, fmt.Sprintf("read of acknowledged file %s answered 404", id))
			default:
				l.fail("read", err)
			}
			l.mu.Unlock()
		}
		cancel()
	}
}

// acknowledge records an upload the server acknowledged (err nil).
func (l *fleetLedger) acknowledge(w int, name string, body []byte, file *client.UploadedFile, err error) (uuid.UUID, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || file == nil {
		if err == nil {
			err = errors.New("no file in the answer")
		}
		l.fail("upload", err)
		return uuid.UUID{}, false
	}
	id := uuid.UUID(file.Id)
	if _, dup := l.uploads[id]; dup {
		l.violations = append(l.violations, fmt.Sprintf("upload %s acknowledged with the id of an earlier one (%s)", name, id))
	}
	l.uploads[id] = fleetUpload{name: name, sum: sha256.Sum256(body), owner: w}
	l.names[name] = id
	return id, true
}

func (l *fleetLedger) count(n *int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*n++
}

var errFleetNotFound = errors.New("404")

// read reads a file through its detail's URL, retrying what a client
// retries (a network error, 502, 503, 504).
func (f *fleet) read(ctx context.Context, api *client.ClientWithResponses, hc *http.Client, token func(context.Context) (string, error), id uuid.UUID) ([]byte, error) {
	var last error
	for attempt := range f.retries + 1 {
		if attempt > 0 {
			time.Sleep(time.Duration(100<<min(attempt, 5)) * time.Millisecond)
		}
		d, err := api.GetFileWithResponse(ctx, id)
		if err != nil {
			last = err
			continue
		}
		switch {
		case d.StatusCode() == http.StatusNotFound:
			return nil, errFleetNotFound
		case d.JSON200 == nil || d.JSON200.Url == nil:
			last = fmt.Errorf("detail: %d", d.StatusCode())
			continue
		}
		// A private file's URL on the service itself is authenticated (it
		// takes the caller's token); a presigned store URL carries its own.
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, *d.JSON200.Url, nil)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(*d.JSON200.Url, f.lb+"/") {
			tok, _ := token(ctx)
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			last = err
		case resp.StatusCode == http.StatusOK:
			return body, nil
		case resp.StatusCode == http.StatusNotFound:
			return nil, errFleetNotFound
		case resp.StatusCode < 500:
			return nil, fmt.Errorf("download: %d", resp.StatusCode)
		default:
			last = fmt.Errorf("download: %d", resp.StatusCode)
		}
	}
	return nil, last
}

func deleteNotFound(err error) bool {
	var ue *uploader.Error
	return errors.As(err, &ue) && ue.Status == http.StatusNotFound
}

// fleetBody is 1 to 64 KiB of random text.
func fleetBody(rnd *rand.Rand) []byte {
	b := make([]byte, 1024+rnd.IntN(63*1024))
	for i := range b {
		b[i] = 'a' + byte(rnd.IntN(26))
		if i%80 == 79 {
			b[i] = '\n'
		}
	}
	return b
}

// freePort is a loopback port free right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// walkKeys lists every object under a local root (a temporary write file
// left behind is a key too: nothing owns it).
func walkKeys(t *testing.T, root string) []string {
	t.Helper()
	var keys []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	}))
	return keys
}

// TestFleetLedgerKeepsTheCause: a failed call's entry keeps what failed
// after a signed URL, and not the URL's signature.
func TestFleetLedgerKeepsTheCause(t *testing.T) {
	t.Parallel()
	l := newFleetLedger()
	l.phase = "old replica killed"
	l.fail("upload", errors.New(`uploader: Put "http://127.0.0.1:1/uploaded-file/`+uuid.NewString()+`/content?expires=1795922612&signature=`+strings.Repeat("s", 64)+`": read tcp: connection reset by peer`))
	require.Equal(t, 1, l.failed)
	for msg := range l.failures {
		require.Contains(t, msg, "connection reset by peer")
		require.NotContains(t, msg, "signature")
	}
}
