package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

// databaseURL is the migrated database the runnable examples use (in your
// application: your own, migrated with `uploadedfile migrate up` or
// migrations.Up).
var databaseURL string

func TestMain(m *testing.M) {
	url, drop, err := pgtest.Temporary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples need PostgreSQL:", err)
		os.Exit(1)
	}
	databaseURL = url
	code := s3test.Main(m)
	drop()
	os.Exit(code)
}

var drivers = []string{service.DriverLocal, service.DriverS3}

// clock is the pinned time every query of a test service uses.
type clock struct {
	mu   sync.Mutex
	now  time.Time
	real bool // running: the wall clock plus what Advance added (useRealClock)
	skew time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real {
		return time.Now().UTC().Truncate(time.Microsecond).Add(c.skew)
	}
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.skew += d
}

// useRealClock makes the bundle's clock run (for tests of concurrent
// traffic, where rows written during a walk must differ in time from the
// walk's start); Advance still moves it on.
func (b *bundle) useRealClock() {
	b.clock.mu.Lock()
	defer b.clock.mu.Unlock()
	b.clock.real = true
}

// wrappedDB counts transactions and can lose the response of one query
// after it committed.
type wrappedDB struct {
	*pgxpool.Pool
	begins   atomic.Int32
	loseNext atomic.Value // query name whose next response is lost
	failNext atomic.Value // query name whose next call fails without running
}

func (w *wrappedDB) Begin(ctx context.Context) (pgx.Tx, error) {
	w.begins.Add(1)
	return w.Pool.Begin(ctx)
}

// fault takes the fault armed for sql's query, if any: fail (the call
// fails without running) or lose (it runs and commits, its response lost).
func (w *wrappedDB) fault(sql string) (fail, lose bool) {
	named := func(v *atomic.Value) bool {
		name, _ := v.Load().(string)
		return name != "" && strings.HasPrefix(sql, "-- name: "+name+" ") && v.CompareAndSwap(name, "")
	}
	if named(&w.failNext) {
		return true, false
	}
	return false, named(&w.loseNext)
}

// errLost is what a call whose connection dropped answers.
var errLost = errors.New("connection reset by peer")

func (w *wrappedDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	switch fail, lose := w.fault(sql); {
	case fail:
		return errRow{errLost}
	case lose:
		rows, err := w.Pool.Query(ctx, sql, args...)
		if err == nil {
			rows.Close() // the statement ran and committed
		}
		return errRow{errLost}
	}
	return w.Pool.QueryRow(ctx, sql, args...)
}

// SendBatch is QueryRow's faults for batches (the :batchone queries),
// armed by the name of the batch's first statement.
func (w *wrappedDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	first := ""
	if len(b.QueuedQueries) > 0 {
		first = b.QueuedQueries[0].SQL
	}
	switch fail, lose := w.fault(first); {
	case fail:
		return errBatch{errLost}
	case lose:
		if err := w.Pool.SendBatch(ctx, b).Close(); err != nil {
			return errBatch{err}
		}
		return errBatch{errLost} // the batch ran and committed
	}
	return w.Pool.SendBatch(ctx, b)
}

// errBatch is a batch whose every result is err.
type errBatch struct{ err error }

func (e errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errBatch) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errBatch) QueryRow() pgx.Row                { return errRow(e) }
func (e errBatch) Close() error                     { return e.err }
func (e errBatch) Tx() pgx.Tx                       { return nil }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

// bundle is one test's service and what it runs on.
type bundle struct {
	t      *testing.T
	driver string
	svc    *service.Service
	db     *wrappedDB
	q      *db.Queries
	store  *storagefault.Store
	inner  storage.Store
	clock  *clock
	root   string // local driver root
	bucket string // s3 bucket
	cfg    service.Config
	opts   []service.Option // further options of every service of the bundle
}

func setup(t *testing.T, driver string, mods ...func(*service.Config)) *bundle {
	t.Helper()
	return setupWith(t, driver, nil, mods...)
}

// setupWith is setup with further service options (a scanner, ...).
func setupWith(t *testing.T, driver string, opts []service.Option, mods ...func(*service.Config)) *bundle {
	t.Helper()
	ctx := context.Background()
	b := &bundle{t: t, driver: driver, db: &wrappedDB{Pool: pgtest.New(t)}, q: db.New(),
		clock: &clock{now: time.Now().UTC().Truncate(time.Microsecond)}}
	cfg := service.Config{Driver: driver, Host: "https://files.example.test"}
	switch driver {
	case service.DriverLocal:
		ls, err := local.New(local.Config{Root: t.TempDir()})
		require.NoError(t, err)
		t.Cleanup(func() { ls.Close() })
		b.inner, b.root = ls, ls.Root()
		cfg.LocalRoot = ls.Root()
	case service.DriverS3:
		s3cfg := s3test.New(t)
		st, err := s3store.New(ctx, s3cfg)
		require.NoError(t, err)
		b.inner, b.bucket = st, s3cfg.Bucket
		cfg.Bucket = s3cfg.Bucket
	}
	for _, m := range mods {
		m(&cfg)
	}
	b.store = storagefault.Wrap(b.inner)
	b.cfg = cfg
	b.opts = opts
	b.svc = b.another()
	return b
}

// another returns a second service on the same database, storage and
// clock, with mods applied to the configuration (another replica, or the
// same data under another policy).
func (b *bundle) another(mods ...func(*service.Config)) *service.Service {
	b.t.Helper()
	cfg := b.cfg
	for _, m := range mods {
		m(&cfg)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := append([]service.Option{service.WithStore(b.store), service.WithClock(b.clock.Now), service.WithLogger(quiet)}, b.opts...)
	svc, err := service.New(context.Background(), cfg, b.db, opts...)
	require.NoError(b.t, err)
	return svc
}

// as returns a context acting as user in tenant (and department).
func as(tenant, user string, dept ...string) context.Context {
	rc := service.RequestContext{Tenant: tenant, UserID: user}
	if len(dept) > 0 {
		rc.Custom = map[string]any{"departmentCode": dept[0]}
	}
	return service.WithRequestContext(context.Background(), rc)
}

var alice = as("acme", "alice", "sales")

const pdf = "%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

// upload stores a small PDF as ctx's user and returns it.
func (b *bundle) upload(ctx context.Context, opts ...func(*service.UploadOptions)) *service.Result {
	b.t.Helper()
	o := &service.UploadOptions{}
	for _, f := range opts {
		f(o)
	}
	r, err := b.svc.Upload(ctx, strings.NewReader(pdf), "report.pdf", o)
	require.NoError(b.t, err)
	return r
}

// row reads a file's raw state.
func (b *bundle) row(id uuid.UUID) db.UploadedFile {
	b.t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), "SELECT * FROM uploaded_file WHERE id = $1", id)
	require.NoError(b.t, err)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[db.UploadedFile])
	require.NoError(b.t, err)
	return r
}

func (b *bundle) rowCount() int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file").Scan(&n))
	return n
}

// objects lists every object key in the store.
func (b *bundle) objects() []string {
	b.t.Helper()
	var keys []string
	switch b.driver {
	case service.DriverLocal:
		require.NoError(b.t, filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(b.root, p)
				keys = append(keys, filepath.ToSlash(rel))
			}
			return err
		}))
	case service.DriverS3:
		out, err := s3test.Shared(b.t).Client().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: aws.String(b.bucket)})
		require.NoError(b.t, err)
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	sort.Strings(keys)
	return keys
}

func (b *bundle) hasObject(key string) bool {
	b.t.Helper()
	_, err := b.inner.Stat(context.Background(), key)
	if errors.Is(err, storage.ErrNotFound) {
		return false
	}
	require.NoError(b.t, err)
	return true
}

func (b *bundle) readObject(key string) string {
	b.t.Helper()
	rc, err := b.inner.Open(context.Background(), key, nil)
	require.NoError(b.t, err)
	defer rc.Close()
	data, err := io.ReadAll(rc)
	require.NoError(b.t, err)
	return string(data)
}

// settle runs the sweeps, moving the clock past every lease and backoff,
// until a round does nothing.
func (b *bundle) settle() {
	b.t.Helper()
	ctx := context.Background()
	idle := 0
	for range 20 {
		b.clock.Advance(2 * time.Hour)
		n1, err := b.svc.CleanupPendingUploads(ctx, 100)
		require.NoError(b.t, err)
		n2, err := b.svc.UnsafeSystemRetryPendingDeletions(ctx, 100)
		require.NoError(b.t, err)
		// Two rounds in a row with nothing to do: a row a request that
		// just timed out still held locked for a moment (its statement
		// cancelled, its connection closing) is skipped by one round's
		// SKIP LOCKED, never by two.
		if n1+n2 == 0 {
			if idle++; idle == 2 {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		idle = 0
	}
}

// checkInvariants: no visible row without its object; no object without a
// row that is not settled-deleted (or a tombstone that still holds a claim).
func (b *bundle) checkInvariants() {
	b.t.Helper()
	ctx := context.Background()
	rows, err := b.db.Pool.Query(ctx, "SELECT * FROM uploaded_file")
	require.NoError(b.t, err)
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[db.UploadedFile])
	require.NoError(b.t, err)
	owned := map[string]bool{}
	for _, r := range all {
		visible := r.Status == "ready" && r.UploadPendingAt == nil && r.DeletionPendingAt == nil && r.DeletedAt == nil
		if visible {
			require.True(b.t, b.hasObject(r.Key), "visible row %s has no object", r.ID)
		}
		settledDeleted := r.DeletedAt != nil && r.DeletionPendingAt == nil
		if !settledDeleted {
			owned[r.Key] = true
		}
		if r.PendingKey != nil && (!settledDeleted || r.StagingCleanupAt != nil) {
			owned[*r.PendingKey] = true // a deleted S3 upload's staging key stays the staging sweep's
		}
	}
	vrows, err := b.db.Pool.Query(ctx, "SELECT key, status FROM uploaded_file_variant")
	require.NoError(b.t, err)
	for vrows.Next() {
		var key, status string
		require.NoError(b.t, vrows.Scan(&key, &status))
		owned[key] = true // a variant row owns its key in every state
		if status == "ready" {
			require.True(b.t, b.hasObject(key), "ready variant %s has no object", key)
		}
	}
	require.NoError(b.t, vrows.Err())
	crows, err := b.db.Pool.Query(ctx, "SELECT key FROM uploaded_file_chunk")
	require.NoError(b.t, err)
	chunkKeys, err := pgx.CollectRows(crows, pgx.RowTo[string])
	require.NoError(b.t, err)
	for _, k := range chunkKeys {
		owned[k] = true // a chunk row owns its key until it is removed
	}
	for _, k := range b.objects() {
		require.True(b.t, owned[k], "object %s has no row or pending claim", k)
	}
}

func requireNotFound(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, service.ErrNotFound, msgAndArgs...)
	require.Equal(t, "core.file.not-found", err.Error(), msgAndArgs...)
}

func uuidOf(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	require.NoError(t, err)
	return id
}

// exec runs raw SQL to put a row in a state no operation produces directly.
func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), sql, args...)
	require.NoError(b.t, err)
}

func bytesReader(s string) *strings.Reader { return strings.NewReader(s) }
