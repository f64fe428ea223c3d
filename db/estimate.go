package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// EstimateRescan is the planner's estimate of how many files a rescan
// reads -- every tenant's files created at or after since (nil: any time),
// or tenant's when it is not nil, after the id after (uuid.Nil: from the
// first; a resumed rescan's checkpoint: the rest) -- from EXPLAIN of the
// selection its batches walk (rescanSelection; nothing is run, nothing is
// read): the total of a progress display, in the time a plan takes rather
// than a count of millions of rows.
func EstimateRescan(ctx context.Context, conn DBTX, after uuid.UUID, since *time.Time, tenant *string) (int64, error) {
	var plan []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+rescanSelection, after, since, tenant).Scan(&plan); err != nil {
		return 0, err
	}
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		}
	}
	if err := json.Unmarshal(plan, &out); err != nil {
		return 0, fmt.Errorf("db: the rescan's plan: %w", err)
	}
	if len(out) == 0 {
		return 0, fmt.Errorf("db: the rescan's plan is empty: %s", plan)
	}
	return int64(out[0].Plan.Rows), nil
}

// rescanSelection is the files a rescan selects (FileRescanBatch and
// FileRescanTenantBatch in queries/file_quarantine.sql, without their
// walk): explained for EstimateRescan, never run.
const rescanSelection = `SELECT id FROM uploaded_file
WHERE id > $1::uuid
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
    AND ($3::text IS NULL OR tenant_code = $3::text)`

// EstimateObjects is about how many objects the store holds: the planner's
// row counts of the files and their variants (pg_class.reltuples, as the
// last ANALYZE left them; nothing of the tables is read), a progress
// display's total for reconcile. A table never analyzed counts 0.
func EstimateObjects(ctx context.Context, conn DBTX) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT (greatest((SELECT reltuples FROM pg_class WHERE oid = 'uploaded_file'::regclass), 0)
    + greatest((SELECT reltuples FROM pg_class WHERE oid = 'uploaded_file_variant'::regclass), 0))::bigint`).Scan(&n)
	return n, err
}

// EstimateEventsSince is the planner's estimate of how many events of the
// outbox occurred at or after since (EXPLAIN: nothing is read), the total
// of a replay's progress display.
func EstimateEventsSince(ctx context.Context, conn DBTX, since time.Time) (int64, error) {
	var plan []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) SELECT 1 FROM uploaded_file_event WHERE occurred_at >= $1", since).Scan(&plan); err != nil {
		return 0, err
	}
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		}
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) == 0 {
		return 0, fmt.Errorf("db: the replay's plan: %w (%s)", err, plan)
	}
	return int64(out[0].Plan.Rows), nil
}
