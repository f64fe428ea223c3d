package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// AsyncCommit is d with each statement run in a transaction of its own whose
// commit does not wait for the WAL flush (synchronous_commit off, for
// that transaction only): the set_config and the statement go in one
// pipelined batch, which PostgreSQL runs as one implicit transaction, in
// one round trip.
//
// The idempotency keys' statements run so (measured: a keyed 64 KiB
// upload ran at 0.62x of an unkeyed one, its claim and its answer each a
// synchronous commit of their own). What that gives up is safe by
// construction:
//   - a claim (or take-over) is followed by the request's own write, whose
//     synchronous commit flushes the WAL past the claim's commit record:
//     the claim is durable before the client can see an answer; a request
//     that fails before writing loses at most a claim nobody acted on;
//   - an answer, a heartbeat or a release lost to a crash of PostgreSQL
//     itself (not of this process) leaves the key running: its retry waits
//     out the lease and then recovers from the file id the claim named,
//     as after a crash of this process.
//
// Query and SendBatch are passed through unchanged (synchronous).
func AsyncCommit(d DBTX) DBTX { return asyncCommit{d} }

// asyncCommit is AsyncCommit's DBTX.
type asyncCommit struct{ DBTX }

// batch queues the setting, then sql.
func (a asyncCommit) batch(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
	b.Queue(sql, args...)
	return a.DBTX.SendBatch(ctx, b)
}

// Exec implements DBTX.
func (a asyncCommit) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br := a.batch(ctx, sql, args)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow implements DBTX.
func (a asyncCommit) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return asyncRow{a.batch(ctx, sql, args)}
}

// asyncRow is the row of an asyncCommit statement: the setting's result
// is read and dropped, then the statement's row scanned.
type asyncRow struct{ br pgx.BatchResults }

// Scan implements pgx.Row.
func (r asyncRow) Scan(dest ...any) error {
	if _, err := r.br.Exec(); err != nil {
		_ = r.br.Close()
		return err
	}
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}
