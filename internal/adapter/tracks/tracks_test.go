package tracks_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/internal/tracing"
	"github.com/uploadedfile/uploadedfile/service"
)

// t0 is the pinned time of these tests (every process uses it).
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	if os.Getenv("UF_SWEEP_CHILD") != "" {
		os.Exit(sweepChild())
	}
	if os.Getenv("UF_CHAOS_CHILD") != "" {
		os.Exit(chaosWorker())
	}
	if os.Getenv("UF_BATCH_CHILD") != "" {
		os.Exit(batchChild())
	}
	os.Exit(s3test.Main(m))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one test's database, storage and clock.
type env struct {
	t     *testing.T
	url   string
	root  string
	pool  *pgxpool.Pool
	inner *local.Store
	store *storagefault.Store
	now   time.Time
	mu    sync.Mutex
}

func setup(t *testing.T) *env {
	t.Helper()
	url := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	root := t.TempDir()
	inner, err := local.New(local.Config{Root: root})
	require.NoError(t, err)
	t.Cleanup(func() { inner.Close() })
	return &env{t: t, url: url, root: root, pool: pool, inner: inner, store: storagefault.Wrap(inner), now: t0}
}

func (e *env) clock() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }

func (e *env) advance(d time.Duration) { e.mu.Lock(); defer e.mu.Unlock(); e.now = e.now.Add(d) }

// service returns a service on pool (a replica when pool is its own).
func (e *env) service(pool *pgxpool.Pool, batch int) *service.Service {
	e.t.Helper()
	svc, err := service.New(context.Background(), service.Config{LocalRoot: e.root, CleanupBatchSize: batch}, pool,
		service.WithStore(e.store), service.WithClock(e.clock), service.WithLogger(quiet))
	require.NoError(e.t, err)
	return svc
}

func (e *env) replicaPool() *pgxpool.Pool {
	e.t.Helper()
	pool, err := pgxpool.New(context.Background(), e.url)
	require.NoError(e.t, err)
	e.t.Cleanup(pool.Close)
	return pool
}

var alice = service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "alice"})

const pdf = "%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

// temporaries stores n temporary files and moves the clock past their expiry.
func (e *env) temporaries(svc *service.Service, n int) []*service.Result {
	e.t.Helper()
	out := make([]*service.Result, n)
	for i := range out {
		r, err := svc.UploadTemporary(alice, strings.NewReader(pdf), "r.pdf", nil)
		require.NoError(e.t, err)
		out[i] = r
	}
	e.advance(24*time.Hour + time.Minute)
	return out
}

func (e *env) objects() int {
	e.t.Helper()
	n := 0
	require.NoError(e.t, walk(e.root, func() { n++ }))
	return n
}

func TestTrackDrainsUpToTenBatches(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.service(e.pool, 5)
	e.temporaries(svc, 57)
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	r := tracks.New(svc, e.pool, tracks.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registerer: reg})
	backlog := map[string]string{"kind": service.BacklogExpiredTemporary}

	res, err := r.Run(context.Background(), tracks.TrackTemporary)
	require.NoError(t, err)
	require.True(t, res.Ran)
	require.EqualValues(t, 50, res.Done, "ten batches of five")
	require.EqualValues(t, 50, res.Examined)
	require.Equal(t, 7, e.objects())
	// What the ten batches left is the backlog: on /metrics and in a WARN.
	require.Equal(t, 7.0, counter(t, reg, "uploadedfile_sweep_backlog", backlog))
	require.Contains(t, logs.String(), `"level":"WARN","msg":"sweep left eligible rows: run the track more often (docs/operations.md, Sizing the sweeps)","track":"temporary","expired-temporary":7}`)

	logs.Reset()
	res, err = r.Run(context.Background(), tracks.TrackTemporary)
	require.NoError(t, err)
	require.EqualValues(t, 7, res.Done, "the next run takes the rest, and stops when a batch is empty")
	require.Zero(t, e.objects())
	require.Zero(t, counter(t, reg, "uploadedfile_sweep_backlog", backlog))
	require.NotContains(t, logs.String(), "sweep left eligible rows")
	require.Equal(t, 2.0, counter(t, reg, "uploadedfile_sweep_runs_total", map[string]string{"track": "temporary", "outcome": "ok"}))
	require.Equal(t, 57.0, counter(t, reg, "uploadedfile_sweep_rows_total", map[string]string{"track": "temporary", "result": "done"}))
}

// TestPendingRunBoundCoversEveryStep: the pending track's ten batches are a
// bound on the whole run -- expired direct uploads, deletion retries,
// staging cleanup and the age purge together.
func TestPendingRunBoundCoversEveryStep(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc, err := service.New(context.Background(), service.Config{LocalRoot: e.root, CleanupBatchSize: 5, CleanupAfterDays: 1}, e.pool,
		service.WithStore(e.store), service.WithClock(e.clock), service.WithLogger(quiet))
	require.NoError(t, err)
	for range 30 {
		_, err := svc.Upload(alice, strings.NewReader(pdf), "old.pdf", nil) // never used: the age purge's
		require.NoError(t, err)
		_, err = svc.InitiateUpload(alice, service.InitiateInput{OriginalName: "d.pdf", ContentType: "application/pdf", SizeBytes: 10,
			Checksum: "sha256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}, nil) // never written: the pending sweep's
		require.NoError(t, err)
	}
	e.advance(48 * time.Hour)
	r := tracks.New(svc, e.pool, tracks.Options{Logger: quiet})
	r.SetClock(e.clock)
	res, err := r.Run(context.Background(), tracks.TrackPending)
	require.NoError(t, err)
	require.EqualValues(t, 50, res.Examined, "ten batches of five in all: 30 expired uploads, then 20 of the purge")
	res, err = r.Run(context.Background(), tracks.TrackPending)
	require.NoError(t, err)
	require.EqualValues(t, 10, res.Examined, "the next run takes the rest")
}

// TestReconcileTrack: the reconcile track runs under its own lock, counts
// the objects it listed and the repairs it made, and counts findings by
// kind in the metrics.
func TestReconcileTrack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc, err := service.New(context.Background(), service.Config{LocalRoot: e.root, ReconcileInterval: "@daily", ReconcileGrace: 50 * time.Millisecond, ReconcileRepair: true}, e.pool,
		service.WithStore(e.store), service.WithLogger(quiet)) // the database clock: objects carry real times
	require.NoError(t, err)
	kept, err := svc.Upload(alice, strings.NewReader(pdf), "kept.pdf", nil)
	require.NoError(t, err)
	_, err = e.inner.Put(context.Background(), "core/t-x/orphan.pdf", strings.NewReader(pdf), storage.PutOptions{Size: int64(len(pdf))})
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // older than the grace
	reg := prometheus.NewRegistry()
	r := tracks.New(svc, e.pool, tracks.Options{Logger: quiet, Registerer: reg})
	res, err := r.Run(context.Background(), tracks.TrackReconcile)
	require.NoError(t, err)
	require.True(t, res.Ran)
	require.EqualValues(t, 2, res.Examined, "objects listed")
	require.EqualValues(t, 1, res.Done, "orphans repaired")
	require.Equal(t, 1, e.objects())
	_, err = e.inner.Stat(context.Background(), kept.Key)
	require.NoError(t, err)
	require.Equal(t, 1.0, counter(t, reg, "uploadedfile_reconcile_findings_total", map[string]string{"kind": "orphan"}))
}

// TestReconcileTrackCutShort: a reconcile track stopped part way -- serve
// shutting down while the store is listed -- ends with the context's
// error, not as a run that ended, though the object in hand is finished.
func TestReconcileTrackCutShort(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listing := cancelAfterFirst{Store: e.store, cancel: cancel}
	svc, err := service.New(context.Background(), service.Config{LocalRoot: e.root, ReconcileInterval: "@daily"}, e.pool,
		service.WithStore(listing), service.WithLogger(quiet))
	require.NoError(t, err)
	for i := range 3 {
		_, err := svc.Upload(alice, strings.NewReader(pdf), fmt.Sprintf("f%d.pdf", i), nil)
		require.NoError(t, err)
	}
	res, err := tracks.New(svc, e.pool, tracks.Options{Logger: quiet}).Run(ctx, tracks.TrackReconcile)
	require.ErrorIs(t, err, context.Canceled)
	require.EqualValues(t, 1, res.Examined, "the object in hand was finished, no other")
}

// cancelAfterFirst cancels a context once its listing has given the first
// object.
type cancelAfterFirst struct {
	storage.Store
	cancel context.CancelFunc
}

func (c cancelAfterFirst) List(ctx context.Context, prefix, after string, fn func(storage.ObjectInfo) error) error {
	return c.Store.List(ctx, prefix, after, func(oi storage.ObjectInfo) error {
		err := fn(oi)
		c.cancel()
		return err
	})
}

// counter reads one labelled counter from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := true
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					match = false
				}
			}
			if match {
				if g := m.GetGauge(); g != nil {
					return g.GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return 0
}

// TestOneReplicaRunsATrackAtATime: while one replica's run holds the
// track, another replica's run is skipped; afterwards it runs.
func TestOneReplicaRunsATrackAtATime(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svcA := e.service(e.pool, 100)
	svcB := e.service(e.replicaPool(), 100)
	e.temporaries(svcA, 3)

	release := make(chan struct{})
	hit := make(chan struct{}, 1)
	e.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Mode: storagefault.Delay, Nth: 1, Release: release, OnHit: func() { hit <- struct{}{} }})
	a := tracks.New(svcA, e.pool, tracks.Options{Logger: quiet})
	b := tracks.New(svcB, e.replicaPool(), tracks.Options{Logger: quiet})
	done := make(chan tracks.Result, 1)
	go func() { res, _ := a.Run(context.Background(), tracks.TrackTemporary); done <- res }()
	<-hit // replica A is inside its run, holding the track

	res, err := b.Run(context.Background(), tracks.TrackTemporary)
	require.NoError(t, err)
	require.False(t, res.Ran, "replica B is skipped while A runs the track")
	other, err := b.Run(context.Background(), tracks.TrackPending)
	require.NoError(t, err)
	require.True(t, other.Ran, "another track is not blocked")

	close(release)
	resA := <-done
	require.True(t, resA.Ran)
	require.EqualValues(t, 3, resA.Done)
	res, err = b.Run(context.Background(), tracks.TrackTemporary)
	require.NoError(t, err)
	require.True(t, res.Ran, "once A is done, B runs")
}

// TestFailingObjectDoesNotStopOthers: a storage that keeps failing one
// object leaves the others cleaned in the same run.
func TestFailingObjectDoesNotStopOthers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.service(e.pool, 2)
	files := e.temporaries(svc, 9)
	bad := files[0].Key
	e.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Key: func(k string) bool { return k == bad }})
	res, err := tracks.New(svc, e.pool, tracks.Options{Logger: quiet}).Run(context.Background(), tracks.TrackTemporary)
	require.NoError(t, err)
	require.EqualValues(t, 8, res.Done)
	require.EqualValues(t, 1, res.Failed)
	require.Equal(t, 1, e.objects())
	_, err = e.inner.Stat(context.Background(), bad)
	require.NoError(t, err, "only the failing object is left")
}

func TestPurgeOnlyWithRetention(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, days := range []int{0, 30} {
		svc, err := service.New(context.Background(), service.Config{LocalRoot: e.root, CleanupAfterDays: days}, e.pool,
			service.WithStore(e.store), service.WithClock(e.clock), service.WithLogger(quiet))
		require.NoError(t, err)
		_, err = svc.Upload(alice, strings.NewReader(pdf), "old.pdf", nil)
		require.NoError(t, err)
		e.advance(40 * 24 * time.Hour)
		r := tracks.New(svc, e.pool, tracks.Options{Logger: quiet})
		r.SetClock(e.clock)
		res, err := r.Run(context.Background(), tracks.TrackPending)
		require.NoError(t, err)
		if days == 0 {
			require.Zero(t, res.Done, "no age purge without retention")
		} else {
			require.EqualValues(t, 2, res.Done, "both old unused files are purged")
		}
	}
}

// childDeps opens what a child process works on: the database in UF_DB and
// the local root in UF_ROOT behind a fault-injecting store.
func childDeps(ctx context.Context) (*pgxpool.Pool, *storagefault.Store, error) {
	pool, err := pgxpool.New(ctx, os.Getenv("UF_DB"))
	if err != nil {
		return nil, nil, err
	}
	inner, err := chaosStore(ctx) // the local root, or the S3 bucket, the parent named
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, storagefault.Wrap(inner), nil
}

// sweepChild is a sweep in its own process: it runs the temporary sweep
// with its storage delete blocked at the point the parent names, tells the
// parent, and waits to be killed.
func sweepChild() int {
	ctx := context.Background()
	pool, store, err := childDeps(ctx)
	if err != nil {
		return 2
	}
	mode := storagefault.Delay // killed between the claim and the storage call
	if os.Getenv("UF_SWEEP_CHILD") == "after-storage" {
		mode = storagefault.DelayAfter // killed between the storage call and the settle
	}
	store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Mode: mode, Nth: 1, Release: make(chan struct{}), OnHit: func() {
		fmt.Println("BLOCKED")
	}})
	now, _ := time.Parse(time.RFC3339Nano, os.Getenv("UF_NOW"))
	svc, err := service.New(ctx, chaosConfig(), pool, service.WithStore(store),
		service.WithClock(func() time.Time { return now }), service.WithLogger(quiet))
	if err != nil {
		return 2
	}
	if os.Getenv("UF_SWEEP_JOB") == "reconcile" {
		_, _ = svc.UnsafeSystemReconcile(ctx, service.ReconcileOptions{Repair: true}, nil)
	} else {
		_, _ = svc.CleanupExpiredTemporaryFiles(ctx, nil, 0)
	}
	return 3 // never reached: the parent kills this process
}

// TestReconcileRepairKilledMidway: a reconcile repair killed with SIGKILL
// between an orphan's claim and its storage delete, or between the delete
// and the claim's removal, leaves only its claim; the next reconcile does
// not report that object again, and the pending sweep finishes it once the
// claim's lease has run out. On both drivers.
func TestReconcileRepairKilledMidway(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		for _, point := range []string{"before-storage", "after-storage"} {
			t.Run(driver+"/"+point, func(t *testing.T) {
				t.Parallel()
				e := setup(t)
				c := newChaosStore(t, e, driver)
				svc, err := service.New(context.Background(), c.cfg, e.pool, service.WithStore(c.store), service.WithClock(e.clock), service.WithLogger(quiet))
				require.NoError(t, err)
				for i := range 3 {
					_, err := c.store.Put(context.Background(), fmt.Sprintf("core/t-x/%d.pdf", i), strings.NewReader(pdf), storage.PutOptions{Size: int64(len(pdf))})
					require.NoError(t, err)
				}
				killBlockedChild(t, append([]string{"UF_SWEEP_CHILD=" + point, "UF_SWEEP_JOB=reconcile", "UF_DB=" + e.url, "UF_NOW=" + e.clock().Format(time.RFC3339Nano)}, c.env...))

				var claims int
				require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file_orphan_claim").Scan(&claims))
				require.Equal(t, 1, claims, "the dead repair's claim is durable")
				require.Len(t, c.list(), map[string]int{"before-storage": 3, "after-storage": 2}[point])

				counts, err := svc.UnsafeSystemReconcile(context.Background(), service.ReconcileOptions{Repair: true}, nil)
				require.NoError(t, err)
				require.EqualValues(t, 2, counts.Orphans, "the claimed object is a repair in progress, not a new orphan")
				require.EqualValues(t, 2, counts.Repaired)

				e.advance(6 * time.Minute)
				_, err = svc.CleanupPendingUploads(context.Background(), 0)
				require.NoError(t, err)
				require.Empty(t, c.list(), "the sweep finished the dead repair")
				require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file_orphan_claim").Scan(&claims))
				require.Zero(t, claims)
			})
		}
	}
}

// TestSweepKilledMidway: a sweep process killed with SIGKILL between its
// claim and its storage call, or between the storage call and the settle,
// is finished correctly by the next sweep once its lease has run out.
func TestSweepKilledMidway(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"before-storage", "after-storage"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			svc := e.service(e.pool, 100)
			f := e.temporaries(svc, 1)[0]

			killBlockedChild(t, []string{"UF_SWEEP_CHILD=" + point, "UF_DB=" + e.url, "UF_ROOT=" + e.root, "UF_KEY=" + f.Key,
				"UF_NOW=" + e.clock().Format(time.RFC3339Nano)})

			// The row is claimed by a dead process.
			var claimed bool
			require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT deletion_pending_at IS NOT NULL AND deleted_at IS NULL FROM uploaded_file WHERE id = $1", f.ID).Scan(&claimed))
			require.True(t, claimed)
			_, statErr := e.inner.Stat(context.Background(), f.Key)
			require.Equal(t, point == "before-storage", statErr == nil, "the object is still there only if the kill came before the storage call")

			n, err := svc.UnsafeSystemRetryPendingDeletions(context.Background(), 0)
			require.NoError(t, err)
			require.Zero(t, n, "not while the dead process's lease is live")
			e.advance(6 * time.Minute)
			n, err = svc.UnsafeSystemRetryPendingDeletions(context.Background(), 0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			_, statErr = e.inner.Stat(context.Background(), f.Key)
			require.ErrorIs(t, statErr, storage.ErrNotFound)
			var settled bool
			require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT deletion_pending_at IS NULL AND deleted_at IS NOT NULL FROM uploaded_file WHERE id = $1", f.ID).Scan(&settled))
			require.True(t, settled)
		})
	}
}

// killBlockedChild starts a sweep child (sweepChild) with env, waits until
// it reports that its storage call is blocked, and kills it with SIGKILL.
func killBlockedChild(t *testing.T, env []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "BLOCKED\n", line)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
}

// walk counts the regular files under root.
func walk(root string, each func()) error {
	return filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			each()
		}
		return err
	})
}

// TestSweepRunIsTraced: with a tracer, a run of a track is one span, and
// the SQL statements of the run are spans under it.
func TestSweepRunIsTraced(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc := e.service(e.pool, 5)
	e.temporaries(svc, 3)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	pcfg, err := pgxpool.ParseConfig(e.url)
	require.NoError(t, err)
	pcfg.ConnConfig.Tracer = tracing.NewPGX(tp)
	traced, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	require.NoError(t, err)
	t.Cleanup(traced.Close)
	r := tracks.New(e.service(traced, 5), traced, tracks.Options{Logger: quiet, TracerProvider: tp})
	res, err := r.Run(context.Background(), tracks.TrackTemporary)
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Done)

	var run sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "sweep temporary" {
			run = s
		}
	}
	require.NotNil(t, run, "the run is a span")
	var claims int
	for _, s := range rec.Ended() {
		if s.Name() == "FileClaimExpiredTemporary" {
			require.Equal(t, run.SpanContext().TraceID(), s.SpanContext().TraceID(), "in the run's trace")
			require.Equal(t, run.SpanContext().SpanID(), s.Parent().SpanID(), "under the run")
			claims++
		}
	}
	require.Positive(t, claims)
}

// TestTemporaryTrackRemovesDueStaging (S3): a completed direct upload's
// staging copy is kept while its upload target could still write, then
// removed by the temporary track (every 15 minutes by default), not left to
// the daily pending track: one target lifetime after a burst of uploads
// the bucket holds each ready file once.
func TestTemporaryTrackRemovesDueStaging(t *testing.T) {
	t.Parallel()
	e := setup(t)
	target := newChaosStore(t, e, service.DriverS3)
	cfg := target.cfg
	cfg.CleanupBatchSize = 5
	svc, err := service.New(context.Background(), cfg, e.pool, service.WithStore(target.store), service.WithClock(e.clock), service.WithLogger(quiet))
	require.NoError(t, err)
	const burst = 7
	sum := sha256.Sum256([]byte(pdf))
	for range burst {
		init, err := svc.InitiateUpload(alice, service.InitiateInput{OriginalName: "d.pdf", ContentType: "application/pdf",
			SizeBytes: int64(len(pdf)), Checksum: "sha256:" + base64.StdEncoding.EncodeToString(sum[:])}, nil)
		require.NoError(t, err)
		status, err := sendToTarget(http.DefaultClient, init.Upload, []byte(pdf))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		_, err = svc.CompleteUpload(alice, init.ID.String())
		require.NoError(t, err)
	}
	require.Len(t, target.list(), 2*burst, "each ready file and its staging copy, while the targets can write")

	r := tracks.New(svc, e.pool, tracks.Options{Logger: quiet})
	r.SetClock(e.clock)
	_, err = r.Run(context.Background(), tracks.TrackTemporary)
	require.NoError(t, err)
	require.Len(t, target.list(), 2*burst, "the targets are still valid: the copies stay (the re-PUT guarantee)")

	e.advance(time.Duration(service.DefaultUploadURLTTLSeconds)*time.Second + 15*time.Minute + time.Second)
	res, err := r.Run(context.Background(), tracks.TrackTemporary)
	require.NoError(t, err)
	require.EqualValues(t, burst, res.Done)
	require.Len(t, target.list(), burst, "one object per ready file")
}

// TestBacklogIsCountedAtStart: the backlog gauges exist, with what is
// waiting, as soon as the schedule starts -- not only after a track's first
// run, which for the daily pending track may be hours away.
func TestBacklogIsCountedAtStart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	svc, err := service.New(context.Background(), service.Config{LocalRoot: e.root,
		PendingCleanupInterval: "0 0 1 1 *", TemporaryCleanupInterval: "0 0 1 1 *"}, e.pool,
		service.WithStore(e.store), service.WithClock(e.clock), service.WithLogger(quiet))
	require.NoError(t, err)
	e.temporaries(svc, 3)
	reg := prometheus.NewRegistry()
	r := tracks.New(svc, e.pool, tracks.Options{Logger: quiet, Registerer: reg})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Schedule(ctx) }()
	require.Eventually(t, func() bool {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "uploadedfile_sweep_backlog" {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the backlog gauge exists before any run")
	require.Equal(t, 3.0, counter(t, reg, "uploadedfile_sweep_backlog", map[string]string{"kind": service.BacklogExpiredTemporary}))
	cancel()
	require.NoError(t, <-done)
}
