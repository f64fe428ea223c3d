package service

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/gen/db"
	"github.com/uploadedfile/uploadedfile/internal/pgbatch"
)

// PlanCachingDB exposes the service's plan-caching DB to the tests of
// package service_test.
type PlanCachingDB = planCachingDB

// NewPlanCachingDB is newPlanCachingDB.
func NewPlanCachingDB(db DB) *PlanCachingDB { return newPlanCachingDB(db) }

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

// InsertHidden runs FileInsertHidden for one upload, as the service does
// for an upload alone.
func InsertHidden(ctx context.Context, conn db.DBTX, p db.FileInsertHiddenParams) (db.FileInsertHiddenRow, error) {
	return pgbatch.One(conn, insertHiddenBatch(ctx, db.New(), []db.FileInsertHiddenParams{p}))
}

// ActivateUpload runs FileActivateUpload for one upload, as the service
// does for an upload alone.
func ActivateUpload(ctx context.Context, conn db.DBTX, p db.FileActivateUploadParams) (db.FileActivateUploadRow, error) {
	return pgbatch.One(conn, activateUploadBatch(ctx, db.New(), []db.FileActivateUploadParams{p}))
}

// QueuedInserts is how many buffer uploads wait for a batch of their
// FileInsertHidden.
func (s *Service) QueuedInserts() int { return s.uploads.insert.Queued() }

// QueuedActivations is how many buffer uploads wait for a batch of their
// FileActivateUpload.
func (s *Service) QueuedActivations() int { return s.uploads.activate.Queued() }

// SetCompletionBeat sets how often s's running completions extend their
// lease.
func SetCompletionBeat(s *Service, d time.Duration) { s.completionBeat = d }

// CompletionLease is completionLease.
const CompletionLease = completionLease

// AsyncCommit is asyncCommit over d, for package service_test.
func AsyncCommit(d db.DBTX) db.DBTX { return asyncCommit{d} }
