// Package migrations embeds the schema migrations of uploaded_file and runs
// them with golang-migrate. The same files are sqlc's schema (sqlc.yaml), so
// the typed queries in gen/db are always compiled against what this package
// applies.
package migrations

import (
	"embed"
	"errors"
	"fmt"
	"net/url"
	"strings"

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
