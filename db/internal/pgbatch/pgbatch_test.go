package pgbatch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db/internal/pgbatch"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// results reads a batch as sqlc's generated :batchone QueryRow does: each
// statement's row through f, then Close, its error dropped.
type results struct {
	br pgx.BatchResults
	n  int
}

func (r results) QueryRow(f func(int, int, error)) {
	defer r.br.Close()
	for i := range r.n {
		var v int
		err := r.br.QueryRow().Scan(&v)
		f(i, v, err)
	}
}

// send queues sqls as one batch on conn.
func send(ctx context.Context, sqls ...string) func(pgbatch.DBTX) pgbatch.Results[int] {
	return func(conn pgbatch.DBTX) pgbatch.Results[int] {
		b := &pgx.Batch{}
		for _, s := range sqls {
			b.Queue(s)
		}
		return results{br: conn.SendBatch(ctx, b), n: len(sqls)}
	}
}

func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.New(t)
	_, err := pool.Exec(context.Background(), `
CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE child (id int PRIMARY KEY, parent int REFERENCES parent DEFERRABLE INITIALLY DEFERRED)`)
	require.NoError(t, err)
	return pool
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func TestReadAnswersEachStatementOnceTheBatchCommitted(t *testing.T) {
	t.Parallel()
	pool, ctx := setup(t), context.Background()
	rows, errs, err := pgbatch.Read(pool, send(ctx,
		"INSERT INTO parent VALUES (1) RETURNING id",
		"SELECT id FROM parent WHERE id = 42", // zero rows: that statement's own answer
		"INSERT INTO parent VALUES (3) RETURNING id * 10",
	), 3)
	require.NoError(t, err)
	require.Equal(t, []int{1, 0, 30}, rows)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], pgx.ErrNoRows)
	require.NoError(t, errs[2])
	require.Equal(t, 2, count(t, pool, "parent"))
}

func TestReadFailsTheWholeBatchWhenAStatementFails(t *testing.T) {
	t.Parallel()
	pool, ctx := setup(t), context.Background()
	rows, errs, err := pgbatch.Read(pool, send(ctx,
		"INSERT INTO parent VALUES (1) RETURNING id",
		"INSERT INTO parent VALUES (1) RETURNING id", // a duplicate key
		"INSERT INTO parent VALUES (3) RETURNING id",
	), 3)
	require.ErrorContains(t, err, "parent_pkey")
	require.Nil(t, rows)
	require.Nil(t, errs)
	require.Zero(t, count(t, pool, "parent"), "one transaction: nothing committed")
}

// TestReadFailsWhenOnlyTheCommitFails: every statement answered a row, but
// the commit at the batch's end failed (a deferred foreign key): none of
// the rows counts. sqlc's generated QueryRow drops exactly this error.
func TestReadFailsWhenOnlyTheCommitFails(t *testing.T) {
	t.Parallel()
	pool, ctx := setup(t), context.Background()
	rows, _, err := pgbatch.Read(pool, send(ctx,
		"INSERT INTO parent VALUES (1) RETURNING id",
		"INSERT INTO child VALUES (2, 99) RETURNING id", // no parent 99: checked at commit
	), 2)
	require.ErrorContains(t, err, "child_parent_fkey")
	require.Nil(t, rows)
	require.Zero(t, count(t, pool, "parent"))

	_, err = pgbatch.One(pool, send(ctx, "INSERT INTO child VALUES (2, 99) RETURNING id"))
	require.ErrorContains(t, err, "child_parent_fkey", "One too")
}

// TestReadReleasesTheConnectionOnce: many concurrent batches on a small
// pool, each closed once -- under -race, a batch closed again after its
// connection went back to the pool would touch another caller's
// connection.
func TestReadReleasesTheConnectionOnce(t *testing.T) {
	t.Parallel()
	pool, ctx := setup(t), context.Background()
	small, err := pgxpool.New(ctx, pgtest.WithQuery(pool.Config().ConnString(), "pool_max_conns=2"))
	require.NoError(t, err)
	t.Cleanup(small.Close)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			_, err := pgbatch.One(small, send(ctx, fmt.Sprintf("INSERT INTO parent VALUES (%d), (%d) RETURNING id", i, i))) // fails: duplicate
			if err == nil {
				errs <- fmt.Errorf("batch %d: a duplicate key was not reported", i)
			}
			if _, err := pgbatch.One(small, send(ctx, fmt.Sprintf("INSERT INTO parent VALUES (%d) RETURNING id", i))); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Equal(t, 64, count(t, pool, "parent"))
}
