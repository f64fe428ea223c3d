package db

import (
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The persistence boundary: everything above this package -- service, the
// adapters, cmd -- names the database through these, never through pgx
// itself (depguard holds it, .golangci.yml). They are aliases: a Go host's
// own *pgxpool.Pool or pgx.Tx is accepted as it is.

// Pool is a connection pool (OpenPool, OpenPoolFor).
type Pool = pgxpool.Pool

// Tx is a transaction; a host may pass its own to the service's batch
// operations.
type Tx = pgx.Tx

// QueryTracer traces the statements of a pool's connections (OpenPool).
type QueryTracer = pgx.QueryTracer

// ErrNoRows is a one-row statement's zero-row answer: what it means is
// each query's comment (not found, a lost claim).
var ErrNoRows = pgx.ErrNoRows

// IsNoRows reports whether err is a zero-row answer.
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// The SQLSTATEs this schema raises itself (its functions and guards).
const (
	// stateQuotaExceeded: a usage reservation would pass its quota.
	stateQuotaExceeded = "UFQ01"
	// stateExtraDataTooLarge: a merge would make a row's extra data
	// larger than its bound.
	stateExtraDataTooLarge = "UFX01"
	// stateKeyElsewhere: an idempotency key is already held by the other
	// kind of route.
	stateKeyElsewhere = "UFK01"
	// stateUniqueViolation is PostgreSQL's unique_violation.
	stateUniqueViolation = "23505"
)

// QuotaExceeded reports whether err is a statement refused because a
// usage reservation would pass its quota.
func QuotaExceeded(err error) bool { return sqlState(err) == stateQuotaExceeded }

// ExtraDataTooLarge reports whether err is a merge refused for the size
// the row's extra data would reach.
func ExtraDataTooLarge(err error) bool { return sqlState(err) == stateExtraDataTooLarge }

// KeyElsewhere reports whether err is an insert refused because the other
// kind of route holds its idempotency key.
func KeyElsewhere(err error) bool { return sqlState(err) == stateKeyElsewhere }

// UniqueViolation reports whether err is a unique violation of the named
// constraint or index.
func UniqueViolation(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == stateUniqueViolation && pe.ConstraintName == constraint
}

// sqlState is err's SQLSTATE, or "" when err is not PostgreSQL's.
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
