package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PlanCachingDB exposes the plan-caching Conn to the tests of package
// db_test.
type PlanCachingDB = planCachingDB

// NewPlanCachingDB is newPlanCachingDB.
func NewPlanCachingDB(c Conn) *PlanCachingDB { return newPlanCachingDB(c) }

// MaxStatementPlans is maxStatementPlans.
const MaxStatementPlans = maxStatementPlans

// PlannedStatements is how many statements conn holds scan plans for (0
// when it holds none).
func PlannedStatements(conn *pgx.Conn) int {
	cp, ok := conn.PgConn().CustomData()[connPlansKey].(*connPlans)
	if !ok {
		return 0
	}
	return len(cp.stmts)
}

// ConnectionsWithPlans is how many of pool's idle connections hold scan
// plans; call it while nothing else uses the pool.
func ConnectionsWithPlans(ctx context.Context, pool *pgxpool.Pool) int {
	n := 0
	for _, c := range pool.AcquireAllIdle(ctx) {
		if PlannedStatements(c.Conn()) > 0 {
			n++
		}
		c.Release()
	}
	return n
}
