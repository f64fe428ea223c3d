package db

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/uploadedfile/uploadedfile/internal/outage"
)

// Conn is what the service needs of PostgreSQL: queries, pipelined batches
// and transactions. *pgxpool.Pool satisfies it, as does a host's pgx.Tx.
type Conn interface {
	DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Wrap is c as the service runs its statements: every error classified
// (classify) and, when c is a *pgxpool.Pool, single-row reads that reuse
// their scan plans per connection (scanplans.go).
func Wrap(c Conn) Conn { return classifyingDB{withPlanCache(c)} }

// classify is the one place a database error gets its meaning, as river's
// pgx driver does it (interpretError): every statement run through Wrap's
// Conn or ClassifyTx's transaction passes through it.
//
//   - nil, and pgx.ErrNoRows -- the query's zero-row answer, whose meaning
//     each query's comment states (not found, a lost claim) -- pass through;
//   - a statement the schema refused passes through for its caller to name:
//     an integrity or data rule (SQLSTATE classes 22 and 23: a unique key, a
//     row check) or a state this schema raises itself (UF*, the quota's
//     UFQ01);
//   - a statement PostgreSQL aborted to break a deadlock or to keep a
//     serializable transaction serializable (SQLSTATE 40P01, 40001) is a
//     *ConflictError (errors.Is ErrConflict): the database is up, and the
//     same work run again can succeed -- never an outage;
//   - anything else is the database not answering: no connection, a
//     refused or terminated one, a timeout, a server shutting down, a
//     serialization failure, a relation that does not exist (a schema the
//     binary cannot use). It becomes an *outage.Error of outage.Database
//     (the service's *UnavailableError), which no caller mistakes for "not
//     found".
func classify(err error) error {
	if err == nil || errors.Is(err, pgx.ErrNoRows) || errors.Is(err, outage.ErrUnavailable) || errors.Is(err, ErrConflict) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && refusedStatement(pe.Code) {
		return err
	}
	if errors.As(err, &pe) && conflictState(pe.Code) {
		return &ConflictError{cause: err}
	}
	return outage.New(outage.Database, nil, "", err)
}

// refusedStatement: a SQLSTATE that is the schema's answer to a statement
// (the data it was given), not the database failing to answer.
func refusedStatement(state string) bool {
	return strings.HasPrefix(state, "22") || strings.HasPrefix(state, "23") || strings.HasPrefix(state, "UF")
}

// conflictState: a SQLSTATE of a transaction aborted because it met a
// concurrent one (serialization_failure, deadlock_detected).
func conflictState(state string) bool {
	return state == "40001" || state == "40P01"
}

// ErrConflict matches (errors.Is) every *ConflictError.
var ErrConflict = errors.New("uploadedfile: the transaction met a concurrent one and was aborted")

// ConflictError is a statement PostgreSQL aborted because its transaction
// met a concurrent one: a deadlock it broke, or a serialization failure.
// Nothing of the transaction was applied; running it again can succeed.
// The cause (a *pgconn.PgError) is kept for errors.As.
type ConflictError struct{ cause error }

func (e *ConflictError) Error() string { return "database conflict: " + e.cause.Error() }

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap is PostgreSQL's error.
func (e *ConflictError) Unwrap() error { return e.cause }

// classifyingDB is a Conn with every error classified (classify):
// statements, batches, transactions and their rows.
type classifyingDB struct{ Conn }

// Exec implements DBTX.
func (d classifyingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := d.Conn.Exec(ctx, sql, args...)
	return tag, classify(err)
}

// Query implements DBTX.
func (d classifyingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.Conn.Query(ctx, sql, args...)
	if err != nil {
		return rows, classify(err)
	}
	return classifiedRows{rows}, nil
}

// QueryRow implements DBTX.
func (d classifyingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifiedRow{d.Conn.QueryRow(ctx, sql, args...)}
}

// SendBatch implements DBTX.
func (d classifyingDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return classifiedBatch{d.Conn.SendBatch(ctx, b)}
}

// Begin implements Conn.
func (d classifyingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.Conn.Begin(ctx)
	if err != nil {
		return nil, classify(err)
	}
	return classifiedTx{tx}, nil
}

// classifiedTx is a transaction with every error classified.
type classifiedTx struct{ pgx.Tx }

// ClassifyTx is tx with its errors classified (a host's own transaction,
// handed to MarkUsed, included); nil stays nil.
func ClassifyTx(tx pgx.Tx) pgx.Tx {
	if tx == nil {
		return nil
	}
	if _, ok := tx.(classifiedTx); ok {
		return tx
	}
	return classifiedTx{tx}
}

func (t classifiedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, classify(err)
}

func (t classifiedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := t.Tx.Query(ctx, sql, args...)
	if err != nil {
		return rows, classify(err)
	}
	return classifiedRows{rows}, nil
}

func (t classifiedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifiedRow{t.Tx.QueryRow(ctx, sql, args...)}
}

func (t classifiedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return classifiedBatch{t.Tx.SendBatch(ctx, b)}
}

func (t classifiedTx) Commit(ctx context.Context) error { return classify(t.Tx.Commit(ctx)) }

// classifiedRow is a row whose Scan error is classified.
type classifiedRow struct{ pgx.Row }

func (r classifiedRow) Scan(dest ...any) error { return classify(r.Row.Scan(dest...)) }

// classifiedRows are rows whose error is classified.
type classifiedRows struct{ pgx.Rows }

func (r classifiedRows) Err() error { return classify(r.Rows.Err()) }

// classifiedBatch is a batch whose results and outcome are classified.
type classifiedBatch struct{ pgx.BatchResults }

func (b classifiedBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, classify(err)
}

func (b classifiedBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return rows, classify(err)
	}
	return classifiedRows{rows}, nil
}

func (b classifiedBatch) QueryRow() pgx.Row { return classifiedRow{b.BatchResults.QueryRow()} }

func (b classifiedBatch) Close() error { return classify(b.BatchResults.Close()) }
