// Package pgtest gives each test a throw-away PostgreSQL database with the
// uploaded_file schema migrated.
//
// The schema is migrated once into a template database whose name carries a
// hash of the migration files, so a changed migration builds a new template
// and an unchanged one is reused across test runs and test binaries. Each
// test then gets a fresh database cloned from that template (CREATE DATABASE
// ... TEMPLATE, a file-level copy that costs tens of milliseconds), dropped
// when the test ends.
//
// The server is TEST_DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable. A test that
// needs the database fails, never skips, when it cannot be reached.
//
// With UPLOADEDFILE_TEST_ICU_LOCALE set (make test runs the database suite
// again with "en-US"), every database is created with that ICU collation
// instead of the server's default, so nothing may depend on the order the
// database's collation gives to text. NewICU gives one test such a
// database whatever the environment says.
package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/db/migrations"
)

// DefaultURL is the server used when TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// templateLockKey serializes template builds across concurrently running
// test binaries (go test runs packages in parallel processes).
const templateLockKey = 0x75706c6f6164 // "upload"

var (
	templatesMu sync.Mutex
	// templates is the template database built for each collation ("":
	// the server's default; else an ICU locale), once per test binary.
	templates   = map[string]string{}
	databaseSeq atomic.Int64
)

// defaultLocale is the ICU locale of every database New makes ("": the
// server's default collation).
func defaultLocale() string { return os.Getenv("UPLOADEDFILE_TEST_ICU_LOCALE") }

// template returns the migrated template database of the collation
// locale (""), building it once per test binary.
func template(ctx context.Context, locale string) (string, error) {
	templatesMu.Lock()
	defer templatesMu.Unlock()
	if name, ok := templates[locale]; ok {
		return name, nil
	}
	name, err := ensureTemplate(ctx, locale)
	if err != nil {
		return "", err
	}
	templates[locale] = name
	return name, nil
}

// WithQuery appends query parameters (already encoded, "a=1&b=2") to a
// database URL.
func WithQuery(databaseURL, query string) string {
	if strings.Contains(databaseURL, "?") {
		return databaseURL + "&" + query
	}
	return databaseURL + "?" + query
}

// ServerURL returns TEST_DATABASE_URL or DefaultURL.
func ServerURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// NewDatabase creates a fresh, migrated database for t, drops it when t ends,
// and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, defaultLocale())
}

func newDatabase(t testing.TB, locale string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := template(ctx, locale)
	require.NoError(t, err, "pgtest: build the template database on %s", redact(ServerURL()))
	return createDatabase(t, name)
}

// Temporary creates a fresh, migrated database outside any test (for
// runnable examples, set up in TestMain) and returns its URL and a function
// that drops it.
func Temporary() (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	templateName, err := template(ctx, defaultLocale())
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("uploadedfile_example_%d_%d", os.Getpid(), databaseSeq.Add(1))
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return "", nil, fmt.Errorf("pgtest: connect to %s: %w", redact(ServerURL()), err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{templateName}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if admin, err := pgx.Connect(ctx, ServerURL()); err == nil {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			_ = admin.Close(ctx)
		}
	}
	return withDatabase(ServerURL(), name), drop, nil
}

// NewEmptyDatabase creates a database with no schema at all (for migration
// tests), drops it when t ends, and returns its URL.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return createDatabase(t, "template0")
}

func createDatabase(t testing.TB, template string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("uploadedfile_test_%d_%d", os.Getpid(), databaseSeq.Add(1))
	admin, err := pgx.Connect(ctx, ServerURL())
	require.NoError(t, err, "pgtest: connect to %s", redact(ServerURL()))
	defer func() { _ = admin.Close(ctx) }()
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize())
	require.NoError(t, err, "pgtest: create database %s", name)

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		admin, err := pgx.Connect(ctx, ServerURL())
		if err != nil {
			t.Errorf("pgtest: connect to drop %s: %v", name, err)
			return
		}
		defer func() { _ = admin.Close(ctx) }()
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(ServerURL(), name)
}

// New creates a fresh, migrated database for t and returns a pool connected
// to it. The pool is closed and the database dropped when t ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return connect(t, NewDatabase(t))
}

// NewICU is New with a database whose collation is the ICU locale (such
// as "en-US", where "a" sorts before "B" though its byte is greater).
func NewICU(t testing.TB, locale string) *pgxpool.Pool {
	t.Helper()
	return connect(t, newDatabase(t, locale))
}

func connect(t testing.TB, databaseURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(databaseURL)
	require.NoError(t, err)
	// Enough connections for concurrency tests to hold one per goroutine.
	cfg.MaxConns = 16
	db.ConfigurePool(cfg) // as serve's pool is

	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	// Registered after NewDatabase's cleanup, so it runs first: the pool is
	// closed before the database is dropped.
	t.Cleanup(pool.Close)
	return pool
}

// ensureTemplate returns the name of the template database for the current
// migrations, building it if no test binary has yet.
func ensureTemplate(ctx context.Context, locale string) (string, error) {
	sum, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "uploadedfile_tmpl_" + sum[:16]
	create := ""
	if locale != "" {
		if strings.ContainsAny(locale, "'\\") {
			return "", fmt.Errorf("pgtest: ICU locale %q", locale)
		}
		name += "_icu_" + strings.ToLower(strings.ReplaceAll(locale, "-", "_"))
		create = " TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE '" + locale + "'"
	}

	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return "", err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey) //nolint:errcheck // the lock ends with the connection anyway

	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}

	// Build under a temporary name and rename when complete, so a build that
	// dies half way never leaves a half-migrated template behind.
	building := name + "_build"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()+create); err != nil {
		return "", err
	}
	if err := migrations.Up(withDatabase(ServerURL(), building)); err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return name, nil
}

// migrationsHash is the SHA-256 of every migration file name and content.
func migrationsHash() (string, error) {
	names, err := fs.Glob(migrations.Files, "*.sql")
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(migrations.Files, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// withDatabase returns serverURL with its database name replaced.
func withDatabase(serverURL, name string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		panic("pgtest: TEST_DATABASE_URL is not a URL")
	}
	u.Path = "/" + name
	return u.String()
}

// redact drops the password of a URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// CutConnections makes the database pool is connected to refuse every
// connection, as an outage would: new connections are refused
// (ALLOW_CONNECTIONS false) and the open ones terminated. The returned
// function allows connections again; it also runs when t ends.
func CutConnections(t testing.TB, pool *pgxpool.Pool) (restore func()) {
	t.Helper()
	name := pool.Config().ConnConfig.Database
	admin := func(sql string, args ...any) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, ServerURL())
		require.NoError(t, err, "pgtest: connect to %s", redact(ServerURL()))
		defer func() { _ = conn.Close(ctx) }()
		_, err = conn.Exec(ctx, sql, args...)
		require.NoError(t, err, "pgtest: %s", sql)
	}
	ident := pgx.Identifier{name}.Sanitize()
	admin("ALTER DATABASE " + ident + " ALLOW_CONNECTIONS false")
	admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
	var once sync.Once
	restore = func() { once.Do(func() { admin("ALTER DATABASE " + ident + " ALLOW_CONNECTIONS true") }) }
	t.Cleanup(restore)
	return restore
}
