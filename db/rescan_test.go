package db_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

// TestRescanBatchesReadAtMostTheirBudget: a rescan --since that matches 30
// of 25,030 files, every tenant's or one tenant's, reads at most its
// budget a statement under custom and generic plans -- never the whole
// table for one batch -- and, batch after batch from where each walk
// ended, finds the 30 once each, in id order.
func TestRescanBatchesReadAtMostTheirBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const old, recent, scan = 25_000, 30, 10_000
	b.exec(t, `INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at)
SELECT gen_random_uuid(), 'acme', 'user-' || (i % 50), 'core/acme/' || i || '.pdf', 'f-' || i || '.pdf', 1000, 'application/pdf', 'ready',
    $1::timestamptz, CASE WHEN i <= $3 THEN $1::timestamptz ELSE $1::timestamptz - interval '1 year' END, $1::timestamptz
FROM generate_series(1, $2::int) AS i`, t0, old+recent, recent)
	b.exec(t, "ANALYZE uploaded_file")
	since := t0.Add(-time.Hour)
	batch := func(e db.DBTX, tenant string, after uuid.UUID) ([]db.FileListOwnerByCreatedFilteredRow, error) {
		var out []db.FileListOwnerByCreatedFilteredRow
		if tenant == "" {
			rows, err := b.q.FileRescanBatch(b.ctx, e, db.FileRescanBatchParams{AfterID: after, Since: &since, Scan: scan, Max: 100})
			for _, r := range rows {
				out = append(out, db.FileListOwnerByCreatedFilteredRow(r))
			}
			return out, err
		}
		rows, err := b.q.FileRescanTenantBatch(b.ctx, e, db.FileRescanTenantBatchParams{Tenant: tenant, AfterID: after, Since: &since, Scan: scan, Max: 100})
		for _, r := range rows {
			out = append(out, db.FileListOwnerByCreatedFilteredRow(r))
		}
		return out, err
	}
	all, err := db.EstimateRescan(b.ctx, b.pool, uuid.Nil, nil, nil)
	require.NoError(t, err)
	require.InDelta(t, old+recent, all, (old+recent)/5, "the progress total of a whole rescan")
	few, err := db.EstimateRescan(b.ctx, b.pool, uuid.Nil, &since, ptr("acme"))
	require.NoError(t, err)
	require.InDelta(t, recent, few, 100, "the progress total of a rescan --since")
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, tenant := range []string{"", "acme"} {
		name := map[string]string{"": "FileRescanBatch", "acme": "FileRescanTenantBatch"}[tenant]
		for _, generic := range []bool{false, true} {
			e := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}, generic: generic}
			_, err := batch(e, tenant, uuid.Nil)
			require.NoError(t, err)
			var nodes []any
			require.NoError(t, json.Unmarshal([]byte(e.plans[name]), &nodes))
			require.LessOrEqual(t, rowsRead(nodes), float64(scan+1), "%s, generic %v:\n%s", name, generic, e.plans[name])
		}
		var found []uuid.UUID
		after, statements := uuid.Nil, 0
		for {
			rows, err := batch(b.pool, tenant, after)
			require.NoError(t, err)
			statements++
			for _, r := range rows {
				if r.Matched {
					found = append(found, r.ID)
				}
			}
			if len(rows) == 0 || (rows[len(rows)-1].Walked < scan && len(rows) < 100) {
				break
			}
			after = rows[len(rows)-1].ID
		}
		require.Len(t, found, recent, name)
		require.IsIncreasing(t, uuidStrings(found), name)
		require.Equal(t, (old+recent+scan-1)/scan, statements, "%s: a statement per budget", name)
	}
}

func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
