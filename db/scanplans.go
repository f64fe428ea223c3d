package db

import (
	"context"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// maxStatementPlans bounds the statements a connection remembers scan plans
// for; past it the connection starts over. The service runs fewer distinct
// statements that read than this.
const maxStatementPlans = 256

// planCachingDB is a Conn with reads (QueryRow and Query) that remember
// their scan plans. pgx plans how each column of a result scans into its
// destination once per result -- for a single-row read, once per query:
// about a fifth of a lookup's allocations and 5 % of its CPU. Here a
// connection keeps, per statement, the plan it built the first time, and
// reuses it while the column's type, format and destination type are the
// ones it was built for, as pgx does for the rows of one result. Plans stay
// with their connection (in its pgconn CustomData), whose type map they
// were built from and which only one goroutine uses at a time; they are
// dropped with it.
//
// Everything else (Exec, Begin, and the errors of QueryRow and Query) is
// the wrapped pool's. Only a *pgxpool.Pool is wrapped (withPlanCache): a Conn of
// the host's own keeps its own QueryRow.
type planCachingDB struct {
	Conn
}

// connPlansKey is the key of a connection's plans in its CustomData.
const connPlansKey = "uploadedfile/db.connPlans"

// connPlans are one connection's scan plans by statement. Only the
// goroutine holding the connection reads or writes them.
type connPlans struct {
	stmts map[string][]columnPlan
}

// columnPlan is how one column scans, and what it was planned for.
type columnPlan struct {
	oid    uint32
	format int16
	typ    reflect.Type
	plan   pgtype.ScanPlan
}

func newPlanCachingDB(c Conn) *planCachingDB { return &planCachingDB{Conn: c} }

// withPlanCache is c with cached scan plans on every pool it runs its
// calls on: a pool is wrapped, one of this package's Conns around others
// (Bounded, Route, Shared) is rebuilt around theirs, anything else is c.
func withPlanCache(c Conn) Conn {
	switch c := c.(type) {
	case *pgxpool.Pool:
		return newPlanCachingDB(c)
	case around:
		return c.rewrap(withPlanCache)
	}
	return c
}

// around is a Conn of this package that runs its calls on other Conns
// (Bounded, Route, Shared: each has its rewrap beside it). A new such
// layer implements it, or Wrap's plan cache stops at it.
type around interface {
	// rewrap is the same Conn around f of each of its Conns.
	rewrap(f func(Conn) Conn) Conn
}

// QueryRow runs sql like the wrapped pool's QueryRow; its Scan reuses the
// connection's plans for sql.
func (d *planCachingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := d.Conn.Query(ctx, sql, args...)
	return &cachedRow{sql: sql, rows: rows, err: err}
}

// plansFor returns conn's plans by statement, kept in the connection's
// CustomData: they live and die with it, and only its holder touches them.
func plansFor(conn *pgx.Conn) *connPlans {
	data := conn.PgConn().CustomData()
	if cp, ok := data[connPlansKey].(*connPlans); ok {
		return cp
	}
	cp := &connPlans{stmts: map[string][]columnPlan{}}
	data[connPlansKey] = cp
	return cp
}

// statement returns the plans of sql's n columns, updated in place by the
// scan; a statement seen for the first time (or with another column count)
// gets empty ones, and past maxStatementPlans the connection starts over.
func (cp *connPlans) statement(sql string, n int) []columnPlan {
	if plans := cp.stmts[sql]; len(plans) == n {
		return plans
	}
	if len(cp.stmts) >= maxStatementPlans {
		clear(cp.stmts)
	}
	plans := make([]columnPlan, n)
	cp.stmts[sql] = plans
	return plans
}

// cachedRow is QueryRow's row: pgx's connRow.Scan with remembered plans.
type cachedRow struct {
	sql  string
	rows pgx.Rows
	err  error
}

// Scan scans the first row into dest, or answers pgx.ErrNoRows, exactly as
// pgx's QueryRow does (same errors, ScanArgError included).
func (r *cachedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	rows := r.rows
	defer rows.Close()
	for _, d := range dest {
		if _, ok := d.(*pgtype.DriverBytes); ok {
			return fmt.Errorf("cannot scan into *pgtype.DriverBytes from QueryRow")
		}
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.scanRow(rows, dest); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// scanRow scans the current row into dest with the connection's plans for
// the statement, planning the columns whose type, format or destination
// type changed; a pgx.RowScanner scans itself, as in pgx.
func (r *cachedRow) scanRow(rows pgx.Rows, dest []any) error {
	var plans []columnPlan
	return scanPlanned(rows, r.sql, &plans, dest)
}

// scanPlanned scans rows' current row into dest with *plans, the
// statement's plans on the connection (looked up there while *plans does
// not have a plan per destination), updated in place where a column's
// type, format or destination type changed.
func scanPlanned(rows pgx.Rows, sql string, plans *[]columnPlan, dest []any) error {
	if len(dest) == 1 {
		if _, ok := dest[0].(pgx.RowScanner); ok {
			return rows.Scan(dest...)
		}
	}
	fields, values := rows.FieldDescriptions(), rows.RawValues()
	if len(fields) != len(dest) || len(values) != len(dest) {
		return fmt.Errorf("number of field descriptions must equal number of destinations, got %d and %d", len(fields), len(dest))
	}
	conn := rows.Conn()
	if len(*plans) != len(dest) {
		*plans = plansFor(conn).statement(sql, len(dest))
	}
	for i, dst := range dest {
		if dst == nil {
			continue
		}
		p := &(*plans)[i]
		if t := reflect.TypeOf(dst); p.plan == nil || p.typ != t || p.oid != fields[i].DataTypeOID || p.format != fields[i].Format {
			*p = columnPlan{oid: fields[i].DataTypeOID, format: fields[i].Format, typ: t,
				plan: conn.TypeMap().PlanScan(fields[i].DataTypeOID, fields[i].Format, dst)}
		}
		if err := p.plan.Scan(values[i], dst); err != nil {
			return pgx.ScanArgError{ColumnIndex: i, FieldName: fields[i].Name, Err: err}
		}
	}
	return nil
}

// Query runs sql like the wrapped pool's Query; its rows scan with the
// connection's plans for sql, as QueryRow's row does (a page of a list
// planned its 22 columns on every request: about 20 allocations and 3 %
// of the route's CPU).
func (d *planCachingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.Conn.Query(ctx, sql, args...)
	if err != nil {
		return rows, err
	}
	return &cachedRows{Rows: rows, sql: sql}, nil
}

// cachedRows are Query's rows: pgx's, with Scan planned as cachedRow's.
// A scan that fails closes the rows and is their Err, as in pgx.
type cachedRows struct {
	pgx.Rows
	sql   string
	plans []columnPlan
	err   error
}

// Scan implements pgx.Rows.
func (r *cachedRows) Scan(dest ...any) error {
	if err := scanPlanned(r.Rows, r.sql, &r.plans, dest); err != nil {
		r.err = err
		r.Rows.Close()
		return err
	}
	return nil
}

// Err implements pgx.Rows: a failed scan's error, else pgx's.
func (r *cachedRows) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.Rows.Err()
}
