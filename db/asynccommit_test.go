package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// asyncCommit runs its statement with synchronous_commit off for that
// statement's transaction only, commits it (another session sees the
// write), keeps pgx.ErrNoRows, and leaves the session's setting alone.
func TestAsyncCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewEmptyDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, "CREATE TABLE t (k text PRIMARY KEY)")
	require.NoError(t, err)

	a := db.AsyncCommit(pool)
	var setting string
	require.NoError(t, a.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&setting))
	require.Equal(t, "off", setting, "inside the statement's transaction")
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&setting))
	require.Equal(t, "on", setting, "the session's own setting is untouched")

	tag, err := a.Exec(ctx, "INSERT INTO t VALUES ($1)", "a")
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	var k string
	require.NoError(t, a.QueryRow(ctx, "INSERT INTO t VALUES ($1) RETURNING k", "b").Scan(&k))
	require.Equal(t, "b", k)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
	require.Equal(t, 2, n, "both committed")

	err = a.QueryRow(ctx, "SELECT k FROM t WHERE k = $1", "none").Scan(&k)
	require.ErrorIs(t, err, pgx.ErrNoRows)
	_, err = a.Exec(ctx, "INSERT INTO t VALUES ($1)", "a")
	require.Error(t, err, "a refused statement is an error")
	require.NoError(t, a.QueryRow(ctx, "SELECT k FROM t WHERE k = $1", "a").Scan(&k), "the connection is usable after it")
}
