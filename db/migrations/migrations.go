// Package migrations embeds the schema migrations of uploaded_file and runs
// them with golang-migrate. The same files are sqlc's schema (sqlc.yaml), so
// the typed queries in gen/db are always compiled against what this package
// applies.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	// Registers the pgx5:// database driver.
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/uploadedfile/uploadedfile/internal/pgurl"
)

// Files holds every NNNN_name.up.sql / .down.sql migration.
//
//go:embed *.sql
var Files embed.FS

// Open returns a migrator for the PostgreSQL database at databaseURL
// (postgres:// or postgresql://). The caller must Close it.
func Open(databaseURL string) (*migrate.Migrate, error) {
	src, err := iofs.New(Files, ".")
	if err != nil {
		return nil, fmt.Errorf("migrations: open embedded files: %w", err)
	}
	u, err := driverURL(databaseURL)
	if err != nil {
		return nil, err
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, u)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	return m, nil
}

// Up applies every migration not yet applied (Apply, without a log).
// Applying none is not an error.
func Up(databaseURL string) error {
	return Apply(context.Background(), databaseURL, nil)
}

// applyLock is the session advisory lock Apply holds for its whole run
// ("uploaded" in ASCII).
const applyLock int64 = 0x75706c6f61646564

// lockRetries and lockBackoff bound how Apply retries a migration that
// timed out waiting for its table lock.
const (
	lockRetries = 5
	lockBackoff = 2 * time.Second
)

// Apply brings the database's schema to Latest, one caller at a time: it
// holds a session advisory lock for the whole run, so replicas started
// together migrate once and the others wait (polling, holding no snapshot
// a concurrent index build would wait for), however long the index builds
// take (golang-migrate's own lock gives up after 15 s).
//
// A migration that timed out waiting for its table lock (its SET LOCAL
// lock_timeout; nothing of it was applied, its transaction rolled back) is
// tried again after a pause, up to lockRetries times. A dirty version left
// by a migration that died is recovered when the migration is safe to run
// again -- an index built or dropped CONCURRENTLY (an INVALID index it left
// is dropped first), or validations -- and otherwise reported as a
// *SchemaError naming the version. logf (may be nil) receives one line per
// recovery or retry.
func Apply(ctx context.Context, databaseURL string, logf func(format string, args ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if _, err := driverURL(databaseURL); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, pgurl.SingleConn(databaseURL))
	if err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if err := takeApplyLock(ctx, conn); err != nil {
		return err
	}
	m, err := Open(databaseURL)
	if err != nil {
		return err
	}
	defer func() { _, _ = m.Close() }()
	if err := recoverDirty(ctx, conn, m, false, logf); err != nil {
		return err
	}
	if err := refuseContract(ctx, conn); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := m.Up()
		if err == nil || errors.Is(err, migrate.ErrNoChange) {
			return nil
		}
		if !lockTimedOut(err) || attempt > lockRetries {
			return fmt.Errorf("migrations: up: %w", err)
		}
		logf("migrations: a migration timed out waiting for its table lock (a long transaction holds it); nothing of it was applied; trying again (%d of %d)", attempt, lockRetries)
		if err := recoverDirty(ctx, conn, m, true, logf); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(lockBackoff * time.Duration(attempt)):
		}
	}
}

// takeApplyLock takes applyLock on conn, polling: a waiter blocked in
// pg_advisory_lock would be a running statement, whose snapshot a
// CONCURRENTLY index build of the holder waits for -- a deadlock
// PostgreSQL does not see. Between tries the waiter holds nothing.
func takeApplyLock(ctx context.Context, conn *pgx.Conn) error {
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", applyLock).Scan(&got); err != nil {
			return fmt.Errorf("migrations: take the migration lock: %w", err)
		}
		if got {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lockTimedOut reports whether a migration failed with lock_not_available.
func lockTimedOut(err error) bool {
	var de database.Error
	if errors.As(err, &de) {
		err = de.OrigErr
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// recoverDirty clears a dirty version so the migration runs again: always
// after a lock timeout (rolledBack), otherwise only when the migration is
// safe to re-run; any other dirty version is a *SchemaError.
func recoverDirty(ctx context.Context, conn *pgx.Conn, m *migrate.Migrate, rolledBack bool, logf func(string, ...any)) error {
	v, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) || (err == nil && !dirty) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("migrations: read the version: %w", err)
	}
	body, err := upFile(v)
	if err != nil {
		return err
	}
	index, again := rerunnable(body)
	if !again && !rolledBack {
		return &SchemaError{Have: v, Want: Latest(), Dirty: true}
	}
	if index != "" {
		var invalid bool
		err := conn.QueryRow(ctx, "SELECT NOT (indisvalid AND indisready) FROM pg_index WHERE indexrelid = to_regclass($1)", index).Scan(&invalid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("migrations: inspect index %s: %w", index, err)
		}
		if invalid {
			logf("migrations: dropping the INVALID index %s a failed build left", index)
			if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgx.Identifier{index}.Sanitize()); err != nil {
				return fmt.Errorf("migrations: drop the invalid index %s: %w", index, err)
			}
		}
	}
	logf("migrations: version %d is dirty; it is run again", v)
	if err := m.Force(previous(v)); err != nil {
		return fmt.Errorf("migrations: clear the dirty version %d: %w", v, err)
	}
	return nil
}

// ReplicaAlive is how recent a replica's heartbeat must be for migrate up
// to count it as running (serve heartbeats every replicaHeartbeat).
const ReplicaAlive = time.Minute

// ContractError refuses a migration that removes or changes what older
// binaries use while replicas running such a binary heartbeat.
type ContractError struct {
	// Version is the contract migration; Oldest the oldest binary it runs
	// with; Replicas how many live replicas run an older one, the oldest of
	// them Running.
	Version, Oldest, Running uint
	Replicas                 int
}

func (e *ContractError) Error() string {
	return fmt.Sprintf("migration %d needs binaries of version %d or newer, and %d running replica(s) run an older one (the oldest: %d): roll every replica to a binary of version %d or newer first, then run uploadedfile migrate up again (nothing was applied)",
		e.Version, e.Oldest, e.Replicas, e.Running, e.Oldest)
}

// refuseContract returns a *ContractError when a migration not yet
// applied declares an oldest binary that live replicas are older than.
// Nothing is refused before the replica table exists (no replica of a
// binary that registers has run yet).
func refuseContract(ctx context.Context, conn *pgx.Conn) error {
	var have int64
	err := conn.QueryRow(ctx, "SELECT version FROM schema_migrations").Scan(&have)
	switch {
	case errors.Is(err, pgx.ErrNoRows), missingTable(err):
		have = 0
	case err != nil:
		return fmt.Errorf("migrations: read the version: %w", err)
	}
	for _, v := range versions() {
		oldest := declaredOldest(v)
		if v <= uint(have) || oldest == 0 {
			continue
		}
		if err := olderReplicas(ctx, conn, v, oldest); err != nil {
			return err
		}
	}
	return nil
}

// olderReplicas is a *ContractError when replicas whose binary is older
// than oldest heartbeat (migration v needs binaries from oldest on); nil
// when none do, or no replica table exists yet.
func olderReplicas(ctx context.Context, conn Querier, v, oldest uint) error {
	var replicas int
	var running int64
	err := conn.QueryRow(ctx, `SELECT count(*), coalesce(min(binary_version), 0) FROM uploaded_file_replica
WHERE heartbeat_at > now() - $1::interval AND binary_version < $2`, ReplicaAlive, int64(oldest)).Scan(&replicas, &running)
	switch {
	case missingTable(err):
		return nil
	case err != nil:
		return fmt.Errorf("migrations: read the running replicas: %w", err)
	case replicas > 0:
		return &ContractError{Version: v, Oldest: oldest, Running: uint(running), Replicas: replicas}
	}
	return nil
}

// compatInsert finds a migration's declaration of the schema window and
// compatRow each (version, oldest binary) pair in it.
var (
	compatInsert = regexp.MustCompile(`(?is)INSERT INTO uploaded_file_schema_compat\s*\(version, oldest_binary\)\s*VALUES\s*([^;]*)`)
	compatRow    = regexp.MustCompile(`\((\d+),\s*(\d+)\)`)
)

// declaredOldest is the oldest binary version v's migration declares it
// runs with (its row in uploaded_file_schema_compat), 0 when it declares
// none (migrations from before the window). The row is in v's own
// migration, or -- for an index built CONCURRENTLY, which stands alone in
// its migration -- in the nearest one before it that declares it.
func declaredOldest(v uint) uint {
	all := versions()
	for i := slices.Index(all, v); i >= 0; i-- {
		if oldest := declaredIn(all[i], v); oldest != 0 {
			return oldest
		}
	}
	return 0
}

// declaredIn is the oldest binary migration file's compatibility insert
// declares for version v, 0 when it declares none.
func declaredIn(file, v uint) uint {
	body, err := upFile(file)
	if err != nil {
		return 0
	}
	m := compatInsert.FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	for _, row := range compatRow.FindAllStringSubmatch(m[1], -1) {
		if row[1] == strconv.FormatUint(uint64(v), 10) {
			oldest, _ := strconv.ParseUint(row[2], 10, 64)
			return uint(oldest)
		}
	}
	return 0
}

// upFile is the body of the up migration of version v.
func upFile(v uint) (string, error) {
	names, _ := fs.Glob(Files, fmt.Sprintf("%d_*.up.sql", v))
	if len(names) != 1 {
		return "", fmt.Errorf("migrations: version %d is not one of this binary's migrations", v)
	}
	body, err := fs.ReadFile(Files, names[0])
	return string(body), err
}

// previous is the version before v (-1: none, golang-migrate's nil version).
func previous(v uint) int {
	prev := -1
	for _, have := range versions() {
		if have < v {
			prev = int(have)
		}
	}
	return prev
}

// versions lists the embedded versions in order.
func versions() []uint {
	names, _ := fs.Glob(Files, "*.up.sql")
	var out []uint
	for _, n := range names {
		if v, err := strconv.ParseUint(n[:strings.IndexByte(n, '_')], 10, 64); err == nil {
			out = append(out, uint(v))
		}
	}
	slices.Sort(out)
	return out
}

// Known reports whether v is one of the embedded versions.
func Known(v uint) bool {
	return slices.Contains(versions(), v)
}

var (
	concurrentIndex = regexp.MustCompile(`(?is)^CREATE (?:UNIQUE )?INDEX CONCURRENTLY IF NOT EXISTS (\w+) ON `)
	concurrentDrop  = regexp.MustCompile(`(?is)^DROP INDEX CONCURRENTLY IF EXISTS \w+$`)
	validateOnly    = regexp.MustCompile(`(?is)^ALTER TABLE \w+\s+VALIDATE CONSTRAINT \w+(\s*,\s*VALIDATE CONSTRAINT \w+)*$`)
)

// rerunnable reports whether a migration may be run again after it died
// half way: a lone index build or drop CONCURRENTLY IF (NOT) EXISTS (index
// names the index a build creates, which may be left INVALID), or
// validations only.
func rerunnable(body string) (index string, ok bool) {
	stmts := statements(body)
	if len(stmts) == 1 {
		if m := concurrentIndex.FindStringSubmatch(stmts[0]); m != nil {
			return m[1], true
		}
		if concurrentDrop.MatchString(stmts[0]) {
			return "", true
		}
	}
	for _, s := range stmts {
		if !validateOnly.MatchString(s) {
			return "", false
		}
	}
	return "", len(stmts) > 0
}

// statements splits a migration into its statements, comments removed (a
// ';' inside a dollar-quoted body does not end a statement).
func statements(body string) []string {
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	text := strings.Join(lines, "\n")
	var out []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(text); i++ {
		if strings.HasPrefix(text[i:], "$$") {
			quoted = !quoted
			cur.WriteString("$$")
			i++
			continue
		}
		if text[i] == ';' && !quoted {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, s)
			}
			cur.Reset()
			continue
		}
		cur.WriteByte(text[i])
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// driverURL rewrites a postgres:// URL to the pgx5:// scheme golang-migrate
// uses to select its pgx/v5 driver, without the pool's parameters.
func driverURL(databaseURL string) (string, error) {
	u, err := url.Parse(pgurl.SingleConn(databaseURL))
	if err != nil {
		return "", errors.New("migrations: the database URL is not a valid URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql", "pgx5":
		u.Scheme = "pgx5"
		return u.String(), nil
	default:
		return "", fmt.Errorf("migrations: unsupported database URL scheme %q (want postgres://)", u.Scheme)
	}
}

// Latest is the version of the newest embedded migration: the schema this
// binary needs.
func Latest() uint {
	names, _ := fs.Glob(Files, "*.up.sql")
	var latest uint
	for _, n := range names {
		v, err := strconv.ParseUint(n[:strings.IndexByte(n, '_')], 10, 64)
		if err == nil && uint(v) > latest {
			latest = uint(v)
		}
	}
	return latest
}

// SchemaError says how the database's schema differs from the one this
// binary needs; its message names both versions and the fix.
type SchemaError struct {
	// Have is the database's version (0: no migration applied); Want is
	// Latest().
	Have, Want uint
	Dirty      bool
	// Oldest is, for a schema ahead of the binary, the oldest binary its
	// migrations declare they run with (0: none declared).
	Oldest uint
}

func (e *SchemaError) Error() string {
	switch {
	case e.Dirty && safeAgain(e.Have):
		return fmt.Sprintf("the database schema is dirty at version %d (its migration died half way: no migration holds the lock): run uploadedfile migrate up, which runs it again", e.Have)
	case e.Dirty:
		return fmt.Sprintf("the database schema is dirty at version %d (its migration died half way: no migration holds the lock, and it cannot simply run again): complete or undo what it applied by hand (db/migrations/%d_*.up.sql), then run uploadedfile migrate force %s and uploadedfile migrate up", e.Have, e.Have, forceTarget(e.Have))
	case e.Have == 0:
		return fmt.Sprintf("the database has no schema; this binary needs version %d: run uploadedfile migrate up", e.Want)
	case e.Have < e.Want:
		return fmt.Sprintf("the database schema is at version %d, behind this binary's %d: run uploadedfile migrate up, then roll the replicas", e.Have, e.Want)
	case e.Oldest > 0:
		return fmt.Sprintf("the database schema is at version %d, ahead of this binary's %d, and runs only binaries from version %d on: run a binary of version %d or newer", e.Have, e.Want, e.Oldest, e.Oldest)
	default:
		return fmt.Sprintf("the database schema is at version %d, ahead of this binary's %d, and its migrations do not declare this binary compatible: run the binary that migrated it (or newer)", e.Have, e.Want)
	}
}

// safeAgain reports whether version v's migration may simply run again.
func safeAgain(v uint) bool {
	body, err := upFile(v)
	if err != nil {
		return false
	}
	_, ok := rerunnable(body)
	return ok
}

// forceTarget is what to force a dirty version v back to once its
// migration was undone: the version before it ("none" for the first).
func forceTarget(v uint) string {
	if p := previous(v); p >= 0 {
		return strconv.Itoa(p)
	}
	return "none"
}

// Querier runs one query (a pool, a connection).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check tells whether this binary can serve on the database's schema
// (golang-migrate's schema_migrations): nil for its own version, for a
// later version whose migrations declare this binary compatible (the
// schema window: uploaded_file_schema_compat), and while a migration is
// running (its lock's holder is alive: the schema it started from still
// serves, and each migration keeps the window of the release before it).
// A *SchemaError when it cannot: no schema, behind, ahead outside the
// window, or dirty with no migration running (one died half way); the
// database's error when it did not answer.
func Check(ctx context.Context, db Querier) error {
	var version int64
	var dirty bool
	err := db.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows), missingTable(err):
		return &SchemaError{Have: 0, Want: Latest()}
	case err != nil:
		return err
	}
	have := uint(version)
	if dirty {
		running, err := Running(ctx, db)
		switch {
		case err != nil:
			return err
		case running:
			return nil
		}
		return &SchemaError{Have: have, Want: Latest(), Dirty: true}
	}
	switch {
	case have == Latest():
		return nil
	case have < Latest():
		return &SchemaError{Have: have, Want: Latest()}
	}
	oldest, err := OldestBinary(ctx, db, have)
	switch {
	case err != nil:
		return err
	case oldest > 0 && oldest <= Latest():
		return nil
	}
	return &SchemaError{Have: have, Want: Latest(), Oldest: oldest}
}

// Running reports whether a migration holds the migration lock now (its
// session is alive): a dirty version then is a migration under way, not
// one that died.
func Running(ctx context.Context, db Querier) (bool, error) {
	var held bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1)`,
		int64(uint64(applyLock)>>32), int64(uint64(applyLock)&0xffffffff)).Scan(&held)
	return held, err
}

// OldestBinary is the oldest binary the schema at version runs with, as
// its migration declared it (uploaded_file_schema_compat); 0 when it
// declared none (a migration from before the window, or no window table).
func OldestBinary(ctx context.Context, db Querier, version uint) (uint, error) {
	var oldest int64
	err := db.QueryRow(ctx, "SELECT oldest_binary FROM uploaded_file_schema_compat WHERE version = $1", int64(version)).Scan(&oldest)
	switch {
	case errors.Is(err, pgx.ErrNoRows), missingTable(err):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return uint(oldest), nil
}

// missingTable: the relation does not exist (SQLSTATE 42P01).
func missingTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}
