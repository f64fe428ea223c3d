// Package pgbatch reads the batches of sqlc's :batchone queries whole: each
// statement's row or its own error, and the outcome of the batch itself.
//
// pgx runs a batch's statements in one implicit transaction that commits
// when the batch is read to its end (its Sync), so a statement's row counts
// only once the batch has closed without an error. sqlc's generated
// QueryRow closes the batch when it has read the rows and drops that error;
// Read keeps it.
package pgbatch

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what sqlc's generated queries run on: its DBTX, which has
// SendBatch once a query is a :batch one.
type DBTX interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// Results is what sqlc generates for a :batchone query's batch.
type Results[R any] interface {
	QueryRow(f func(int, R, error))
}

// Read sends the batch that send queues on conn and reads its n statements:
// rows[i] and errs[i] are statement i's row and the error of its own that
// did not abort the batch (pgx.ErrNoRows for zero rows). err is the batch's
// own outcome: any error means none of it committed, or that whether it did
// is unknown -- rows and errs are then nil.
func Read[R any](conn DBTX, send func(DBTX) Results[R], n int) (rows []R, errs []error, err error) {
	c := &outcome{DBTX: conn}
	rows, errs = make([]R, n), make([]error, n)
	send(c).QueryRow(func(i int, row R, err error) { rows[i], errs[i] = row, err })
	if c.batch == nil {
		return nil, nil, errNotSent
	}
	if err := c.batch.Close(); err != nil {
		return nil, nil, err
	}
	return rows, errs, nil
}

// One is Read of one statement, answering as its :one query would: its
// row, its error, or the batch's.
func One[R any](conn DBTX, send func(DBTX) Results[R]) (R, error) {
	rows, errs, err := Read(conn, send, 1)
	if err != nil {
		var zero R
		return zero, err
	}
	return rows[0], errs[0]
}

// errNotSent: the query queued nothing (a bug, not a database answer).
var errNotSent = errors.New("pgbatch: no batch was sent")

// outcome is a DBTX whose batch remembers its Close: the generated
// QueryRow closes it (releasing a pool's connection), Read asks again.
type outcome struct {
	DBTX
	batch *closeOnce
}

// SendBatch implements DBTX.
func (o *outcome) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	o.batch = &closeOnce{BatchResults: o.DBTX.SendBatch(ctx, b)}
	return o.batch
}

// closeOnce closes its batch the first time and answers every later Close
// with that error, without touching the connection again (by then it may
// be another caller's).
type closeOnce struct {
	pgx.BatchResults
	closed bool
	err    error
}

// Close implements pgx.BatchResults.
func (c *closeOnce) Close() error {
	if !c.closed {
		c.closed, c.err = true, c.BatchResults.Close()
	}
	return c.err
}
