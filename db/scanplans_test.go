package db_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// onePool is a pool of one connection over a fresh database, configured as
// serve's is.
func onePool(t *testing.T) *pgxpool.Pool { t.Helper(); return poolOf(t, 1) }

// poolOf is a pool of conns connections over a fresh database, configured
// as serve's is.
func poolOf(t *testing.T, conns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	require.NoError(t, err)
	cfg.MaxConns = conns
	db.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

const mixedRow = `SELECT $1::uuid, $2::text, $3::bigint, $4::timestamptz, $5::jsonb, $6::text`

type mixed struct {
	id   uuid.UUID
	name string
	size int64
	at   time.Time
	data []byte
	opt  *string
}

func scanMixed(conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, args ...any) (mixed, error) {
	var m mixed
	err := conn.QueryRow(context.Background(), mixedRow, args...).Scan(&m.id, &m.name, &m.size, &m.at, &m.data, &m.opt)
	return m, err
}

// The cached scan answers what pgx's own QueryRow answers, on the first
// call and on the calls that reuse its plans, including NULLs after
// non-NULLs in the same column.
func TestPlanCachingDBScansAsPgx(t *testing.T) {
	pool := onePool(t)
	pc := db.NewPlanCachingDB(pool)
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	opt := "x"
	for i, args := range [][]any{
		{uuid.New(), "a.csv", 10, at, `{"a":1}`, &opt},
		{uuid.New(), "b.csv", 20, at.Add(time.Hour), `[1,2]`, nil},
		{uuid.New(), "", 0, at, `null`, &opt},
	} {
		want, err := scanMixed(pool, args...)
		require.NoError(t, err)
		got, err := scanMixed(pc, args...)
		require.NoError(t, err, "call %d", i)
		require.Equal(t, want.id, got.id)
		require.Equal(t, want.name, got.name)
		require.Equal(t, want.size, got.size)
		require.True(t, want.at.Equal(got.at))
		require.JSONEq(t, string(want.data), string(got.data))
		require.Equal(t, want.opt, got.opt, "call %d", i)
	}
	require.Equal(t, 1, db.ConnectionsWithPlans(context.Background(), pool))
}

// A destination of another type for the same statement is planned again,
// not scanned with the plan of the type before it.
func TestPlanCachingDBReplansANewDestinationType(t *testing.T) {
	pc := db.NewPlanCachingDB(onePool(t))
	ctx := context.Background()
	var n int64
	require.NoError(t, pc.QueryRow(ctx, "SELECT 42::int4").Scan(&n))
	require.Equal(t, int64(42), n)
	var s string
	err := pc.QueryRow(ctx, "SELECT 42::int4").Scan(&s)
	require.NoError(t, err)
	require.Equal(t, "42", s)
	var f float64
	require.NoError(t, pc.QueryRow(ctx, "SELECT 42::int4").Scan(&f))
	require.Equal(t, 42.0, f)
}

// No row, a scan that fails and a failing statement answer pgx's errors,
// and each gives the connection back (the pool has one).
func TestPlanCachingDBErrorsReleaseTheConnection(t *testing.T) {
	pc := db.NewPlanCachingDB(onePool(t))
	ctx := context.Background()
	var s string
	for range 3 {
		require.ErrorIs(t, pc.QueryRow(ctx, "SELECT 'a' WHERE false").Scan(&s), pgx.ErrNoRows)
		var n int64
		err := pc.QueryRow(ctx, "SELECT NULL::int8").Scan(&n)
		var scanErr pgx.ScanArgError
		require.True(t, errors.As(err, &scanErr), "%v", err)
		require.Equal(t, 0, scanErr.ColumnIndex)
		require.Error(t, pc.QueryRow(ctx, "SELECT * FROM no_such_table").Scan(&s))
		require.ErrorContains(t, pc.QueryRow(ctx, "SELECT 1, 2").Scan(&n), "number of field descriptions")
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, pc.QueryRow(tctx, "SELECT 'ok'").Scan(&s))
	require.Equal(t, "ok", s)
}

// A connection remembers plans for at most MaxStatementPlans statements:
// past that it starts over, and what it scans is still right.
func TestPlanCachingDBBoundsItsStatements(t *testing.T) {
	pool := onePool(t)
	pc := db.NewPlanCachingDB(pool)
	ctx := context.Background()
	for i := range db.MaxStatementPlans + 10 {
		var n int64
		require.NoError(t, pc.QueryRow(ctx, fmt.Sprintf("SELECT %d::int8", i)).Scan(&n))
		require.Equal(t, int64(i), n)
	}
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	planned := db.PlannedStatements(conn.Conn())
	require.Positive(t, planned)
	require.LessOrEqual(t, planned, db.MaxStatementPlans)
	require.Less(t, planned, db.MaxStatementPlans+10)
}

// Goroutines sharing a pool of four connections each get their own
// values from every statement (run with -race: a connection's plans are
// touched only by its holder).
func TestPlanCachingDBConcurrentReads(t *testing.T) {
	pool := poolOf(t, 4)
	pc := db.NewPlanCachingDB(pool)
	var g errgroup.Group
	for w := range 8 {
		g.Go(func() error {
			for i := range 200 {
				var n int64
				var s string
				if err := pc.QueryRow(context.Background(), "SELECT $1::int8, $2::text", w*1000+i, fmt.Sprint(w, i)).Scan(&n, &s); err != nil {
					return err
				}
				if n != int64(w*1000+i) || s != fmt.Sprint(w, i) {
					return fmt.Errorf("worker %d call %d read %d %q", w, i, n, s)
				}
				var at time.Time
				if err := pc.QueryRow(context.Background(), "SELECT to_timestamp($1::int8)", int64(i)).Scan(&at); err != nil {
					return err
				}
				if at.Unix() != int64(i) {
					return fmt.Errorf("worker %d call %d read %v", w, i, at)
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	held := db.ConnectionsWithPlans(context.Background(), pool)
	require.LessOrEqual(t, held, 4)
	require.Positive(t, held)
}

// mixedRows is mixedRow over three rows, NULLs after non-NULLs in the
// optional column.
const mixedRows = `SELECT gen_random_uuid(), 'n' || i, i::int8, to_timestamp(i), jsonb_build_object('i', i), CASE WHEN i % 2 = 1 THEN 'o' || i END
FROM generate_series(1, $1::int) AS i ORDER BY i`

func queryMixed(conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, n int) ([]mixed, error) {
	rows, err := conn.Query(context.Background(), mixedRows, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var all []mixed
	for rows.Next() {
		var m mixed
		if err := rows.Scan(&m.id, &m.name, &m.size, &m.at, &m.data, &m.opt); err != nil {
			return nil, err
		}
		all = append(all, m)
	}
	return all, rows.Err()
}

// Query's rows scan as pgx's do, on the first query and on the queries
// that reuse its plans, and a scan that fails is the rows' Err and gives
// the connection back.
func TestPlanCachingDBQueryScansAsPgx(t *testing.T) {
	pool := onePool(t)
	pc := db.NewPlanCachingDB(pool)
	for _, n := range []int{3, 1, 4} {
		want, err := queryMixed(pool, n)
		require.NoError(t, err)
		got, err := queryMixed(pc, n)
		require.NoError(t, err)
		require.Len(t, got, n)
		for i := range want {
			require.Equal(t, want[i].name, got[i].name)
			require.Equal(t, want[i].size, got[i].size)
			require.True(t, want[i].at.Equal(got[i].at))
			require.JSONEq(t, string(want[i].data), string(got[i].data))
			require.Equal(t, want[i].opt, got[i].opt, "row %d of %d", i, n)
		}
	}
	require.Equal(t, 1, db.ConnectionsWithPlans(context.Background(), pool))

	ctx := context.Background()
	for range 3 {
		rows, err := pc.Query(ctx, "SELECT unnest(ARRAY[1, 2, NULL, 3]::int8[])")
		require.NoError(t, err)
		var sum int64
		for rows.Next() {
			var n int64
			if rows.Scan(&n) != nil {
				break
			}
			sum += n
		}
		more, err := rows.Next(), rows.Err()
		rows.Close()
		require.False(t, more, "the rows end at the failed scan")
		var scanErr pgx.ScanArgError
		require.True(t, errors.As(err, &scanErr), "%v", err)
		require.Equal(t, int64(3), sum)
		var s string
		rows, err = pc.Query(ctx, "SELECT 42::int4")
		require.NoError(t, err)
		require.True(t, rows.Next())
		require.NoError(t, rows.Scan(&s), "a new destination type is planned again")
		require.Equal(t, "42", s)
		rows.Close()
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var s string
	require.NoError(t, pc.QueryRow(tctx, "SELECT 'ok'").Scan(&s))
}

// Wrap keeps scan plans on every pool of the Conn serve composes -- the
// requests' pool behind Shared and Bounded, the sweeps' behind Bounded,
// both under Route -- and the Shared it rebuilds around the cache limits
// the same keys as the one it was given: a transaction of tenant a's
// through the original holds the slot a call of a's through Wrap waits for.
func TestWrapCachesPlansBehindEveryLayer(t *testing.T) {
	requests, sweeps := poolOf(t, 2), poolOf(t, 2)
	shared := db.Shared(requests, 1, shareKeyOf)
	c := db.Wrap(db.Route(db.Bounded(shared, time.Minute), db.Bounded(sweeps, time.Minute)))
	ctx := withShareKey(context.Background(), "a")
	var s string
	require.NoError(t, c.QueryRow(ctx, "SELECT 'a request'").Scan(&s))
	require.NoError(t, c.QueryRow(db.ForSweeps(ctx), "SELECT 'a sweep'").Scan(&s))
	require.Equal(t, 1, db.ConnectionsWithPlans(ctx, requests), "the requests' pool, behind Shared")
	require.Equal(t, 1, db.ConnectionsWithPlans(ctx, sweeps), "the sweeps' pool")

	tx, err := shared.Begin(ctx)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { waited <- c.QueryRow(ctx, "SELECT 'a again'").Scan(&s) }()
	select {
	case err := <-waited:
		t.Fatalf("a's call ran while a's transaction held its one slot (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, tx.Rollback(context.Background()))
	require.NoError(t, <-waited)
	require.Equal(t, "a again", s)
}
