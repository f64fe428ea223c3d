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
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/golang-migrate/migrate/v4"
	// Registers the pgx5:// database driver.
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"

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

// Up applies every migration not yet applied. Applying none is not an error.
func Up(databaseURL string) error {
	m, err := Open(databaseURL)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
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
}

func (e *SchemaError) Error() string {
	switch {
	case e.Dirty:
		return fmt.Sprintf("the database schema is dirty at version %d (a migration failed half way): fix it, then run uploadedfile migrate up", e.Have)
	case e.Have == 0:
		return fmt.Sprintf("the database has no schema; this binary needs version %d: run uploadedfile migrate up", e.Want)
	case e.Have < e.Want:
		return fmt.Sprintf("the database schema is at version %d, behind this binary's %d: run uploadedfile migrate up, then roll the replicas", e.Have, e.Want)
	default:
		return fmt.Sprintf("the database schema is at version %d, ahead of this binary's %d: run the binary that migrated it (or newer)", e.Have, e.Want)
	}
}

// Querier runs one query (a pool, a connection).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Check compares the database's schema version (golang-migrate's
// schema_migrations) with Latest: nil when they are the same, a
// *SchemaError when they differ, the database's error when it did not
// answer.
func Check(ctx context.Context, db Querier) error {
	var version int64
	var dirty bool
	err := db.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty)
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pe) && pe.Code == "42P01": // no row, no table
		return &SchemaError{Have: 0, Want: Latest()}
	case err != nil:
		return err
	case dirty || uint(version) != Latest():
		return &SchemaError{Have: uint(version), Want: Latest(), Dirty: dirty}
	}
	return nil
}
