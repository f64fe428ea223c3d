package db_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// explainRows is the size of the table the plans are checked on.
const explainRows = 100_000

// explainer is a db.DBTX that runs EXPLAIN of every statement it is given,
// with the real arguments, instead of the statement itself.
type explainer struct {
	t     *testing.T
	conn  *pgx.Conn
	mu    sync.Mutex
	plans map[string]string // query name -> JSON plan
	unrun []string          // queries explained without running them
	// generic explains the plan PostgreSQL makes without the arguments'
	// values -- the one a prepared statement may switch to after five
	// calls. An EXPLAIN given parameters plans with their values (they
	// are constants to it) whatever plan_cache_mode says, so the statement
	// is prepared and EXPLAIN EXECUTE runs it under force_generic_plan.
	generic bool
}

var queryName = regexp.MustCompile(`^-- name: (\w+) :`)

func (e *explainer) explain(ctx context.Context, sql string, args []any) {
	e.t.Helper()
	m := queryName.FindStringSubmatch(sql)
	require.NotNil(e.t, m, "statement without a sqlc name: %s", sql)
	// Run for real (EXPLAIN ANALYZE, rolled back) for the row counts of
	// every node; a statement that fails with these arguments (a sample
	// that breaks a constraint or raises) is explained without running.
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.generic {
		sql, args = e.prepareGeneric(ctx, m[1], sql, args)
		defer func() { require.NoError(e.t, e.conn.Deallocate(ctx, genericName(m[1]))) }()
	}
	var plan string
	tx, err := e.conn.Begin(ctx)
	require.NoError(e.t, err)
	err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan)
	require.NoError(e.t, tx.Rollback(ctx))
	if err != nil {
		require.NoError(e.t, e.conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan), m[1])
		e.unrun = append(e.unrun, m[1])
	}
	e.plans[m[1]] = plan
}

func genericName(query string) string { return "generic_" + strings.ToLower(query) }

// prepareGeneric prepares sql as a named statement and returns the
// EXECUTE of it with args written as typed literals (no parameters, so
// nothing is folded into the plan), which the session's
// plan_cache_mode = force_generic_plan makes run its generic plan.
func (e *explainer) prepareGeneric(ctx context.Context, query, sql string, args []any) (string, []any) {
	e.t.Helper()
	_, err := e.conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(e.t, err)
	sd, err := e.conn.Prepare(ctx, genericName(query), sql)
	require.NoError(e.t, err, query)
	require.Len(e.t, sd.ParamOIDs, len(args), query)
	if len(args) == 0 {
		return "EXECUTE " + genericName(query), nil
	}
	lits := make([]string, len(args))
	for i, a := range args {
		var typ string
		require.NoError(e.t, e.conn.QueryRow(ctx, "SELECT format_type($1, NULL)", sd.ParamOIDs[i]).Scan(&typ))
		var text []byte
		if a != nil {
			text, err = e.conn.TypeMap().Encode(sd.ParamOIDs[i], pgtype.TextFormatCode, a, nil)
			require.NoError(e.t, err, "%s: argument %d", query, i+1)
		}
		if text == nil {
			lits[i] = "NULL::" + typ
			continue
		}
		lits[i] = "'" + strings.ReplaceAll(string(text), "'", "''") + "'::" + typ
	}
	return "EXECUTE " + genericName(query) + "(" + strings.Join(lits, ", ") + ")", nil
}

func (e *explainer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	e.explain(ctx, sql, args)
	return pgconn.CommandTag{}, nil
}

func (e *explainer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	e.explain(ctx, sql, args)
	return e.conn.Query(ctx, "SELECT 1 WHERE false")
}

func (e *explainer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	e.explain(ctx, sql, args)
	return e.conn.QueryRow(ctx, "SELECT 1 WHERE false")
}

// SendBatch explains each statement of b (the :batchone queries) and
// answers each with no row.
func (e *explainer) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	empty := &pgx.Batch{}
	for _, q := range b.QueuedQueries {
		e.explain(ctx, q.SQL, q.Arguments)
		empty.Queue("SELECT 1 WHERE false")
	}
	return e.conn.SendBatch(ctx, empty)
}
