package db_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

func ids[R db.UploadedFile | changedRow](rows []R) []uuid.UUID {
	out := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		out[i] = db.UploadedFile(r).ID
	}
	return out
}

func TestDeletionClaimElapsed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	claim := func(f db.UploadedFile) db.UploadedFile {
		row, err := asFile(b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: f.ID, TenantCode: f.TenantCode, DeletionLease: deletionLease, Now: at(0)}))
		require.NoError(t, err)
		return row
	}
	elapsed := claim(b.ready(t, fileOpts{})) // claim lease runs out at t0+5m
	otherTenant := claim(b.ready(t, fileOpts{Owner: owner{Tenant: "globex", User: "bob"}}))
	b.ready(t, fileOpts{}) // active: never eligible
	live := b.ready(t, fileOpts{})
	_, err := b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: live.ID, TenantCode: "acme", DeletionLease: time.Hour, Now: at(0)})
	require.NoError(t, err)
	b.hidden(t, fileOpts{Now: t0.Add(-time.Hour)}) // expired tombstone: the other sweep's

	rows, err := b.q.DeletionClaimElapsed(b.ctx, b.pool, db.DeletionClaimElapsedParams{Max: 1, DeletionLease: deletionLease, Now: at(deletionLease)})
	require.NoError(t, err)
	require.Len(t, rows, 1, "bounded by max")
	rows2, err := b.q.DeletionClaimElapsed(b.ctx, b.pool, db.DeletionClaimElapsedParams{Max: 10, DeletionLease: deletionLease, Now: at(deletionLease)})
	require.NoError(t, err)
	require.Len(t, rows2, 1, "the row claimed first is out of the window; the other tenant's row comes next")
	require.ElementsMatch(t, []uuid.UUID{elapsed.ID, otherTenant.ID}, append(ids(rows), ids(rows2)...), "cross-tenant maintenance")
	for _, r := range append(rows, rows2...) {
		require.Equal(t, t0.Add(2*deletionLease), r.DeletionPendingAt.UTC(), "claimed again with a fresh lease")
	}
}

func TestDeletionClaimExpiredTombstones(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := activationLease + time.Minute

	writerDied := b.hidden(t, fileOpts{})                         // lease expired at t0+15m
	b.hidden(t, fileOpts{Now: t0.Add(2 * time.Minute)})           // lease live until t0+17m
	rescheduled := b.hidden(t, fileOpts{Now: t0.Add(-time.Hour)}) // tombstone, retry elapsed
	b.exec(t, "UPDATE uploaded_file SET deleted_at = $2, deletion_pending_at = $3 WHERE id = $1", rescheduled.ID, t0, t0.Add(now-time.Second))
	liveClaim := b.hidden(t, fileOpts{Now: t0.Add(-time.Hour)}) // tombstone, retry in the future
	b.exec(t, "UPDATE uploaded_file SET deleted_at = $2, deletion_pending_at = $3 WHERE id = $1", liveClaim.ID, t0, t0.Add(now+time.Second))
	b.ready(t, fileOpts{})
	staleCompleting := b.completing(t, fileOpts{Now: t0.Add(-2 * cleanupLease)}) // completer died long ago
	b.completing(t, fileOpts{})                                                  // live completer

	rows, err := b.q.DeletionClaimExpiredTombstones(b.ctx, b.pool, db.DeletionClaimExpiredTombstonesParams{Max: 10, PassLimit: 10, DeletionLease: deletionLease, Now: at(now)})
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{writerDied.ID, rescheduled.ID, staleCompleting.ID}, ids(rows))
	for _, r := range rows {
		require.Nil(t, r.DeletedAt, "restored to hidden pending while claimed")
		require.Equal(t, t0.Add(now+deletionLease), r.DeletionPendingAt.UTC())
		require.NotNil(t, r.UploadPendingAt, "the upload marker stays until the claim settles")
	}

	again, err := b.q.DeletionClaimExpiredTombstones(b.ctx, b.pool, db.DeletionClaimExpiredTombstonesParams{Max: 10, PassLimit: 10, DeletionLease: deletionLease, Now: at(now)})
	require.NoError(t, err)
	require.Empty(t, again, "a claimed tombstone is not claimed twice")

	// A buffer tombstone is rescheduled with its marker; the completing row
	// settles as failed.
	tomb, err := b.q.FileRescheduleTombstone(b.ctx, b.pool, db.FileRescheduleTombstoneParams{
		ID: writerDied.ID, Claim: t0.Add(now + deletionLease), UploadMarker: *writerDied.UploadPendingAt, Backoff: retryBackoff, Now: at(now),
	})
	require.NoError(t, err)
	require.Equal(t, t0.Add(now+retryBackoff), tomb.DeletionPendingAt.UTC())
	require.Equal(t, t0.Add(now), tomb.DeletedAt.UTC())
	require.Equal(t, *writerDied.UploadPendingAt, *tomb.UploadPendingAt)

	var completingRow db.UploadedFile
	for _, r := range rows {
		if r.ID == staleCompleting.ID {
			completingRow = db.UploadedFile(r)
		}
	}
	done, err := b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: staleCompleting.ID, Claim: *completingRow.DeletionPendingAt, UploadMarker: completingRow.UploadPendingAt, Now: at(now)})
	require.NoError(t, err)
	require.Equal(t, "failed", done.Status)
	require.Nil(t, done.CompletionLeaseUntil)
}

func TestFileClaimExpiredDirectUploads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	expired := b.pending(t, fileOpts{Now: t0.Add(-cleanupLease)})
	deadCompleter := b.completing(t, fileOpts{Now: t0.Add(-cleanupLease - completionLease)})
	b.pending(t, fileOpts{})                                            // in flight
	b.completing(t, fileOpts{Now: t0.Add(-cleanupLease + time.Second)}) // lease pushed the cleanup lease out
	b.hidden(t, fileOpts{Now: t0.Add(-time.Hour)})                      // buffer upload: the tombstone sweep's
	aborted := b.pending(t, fileOpts{Now: t0.Add(-cleanupLease)})
	_, err := b.q.FileClaimAbort(b.ctx, b.pool, db.FileClaimAbortParams{ID: aborted.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)

	rows, err := b.q.FileClaimExpiredDirectUploads(b.ctx, b.pool, db.FileClaimExpiredDirectUploadsParams{Max: 10, DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{expired.ID, deadCompleter.ID}, ids(rows))
	for _, r := range rows {
		require.Equal(t, t0.Add(deletionLease), r.DeletionPendingAt.UTC())
	}
}

func TestFileClaimExpiredTemporary(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exact := b.ready(t, fileOpts{Temporary: true, Now: t0.Add(-24 * time.Hour)})
	older := b.ready(t, fileOpts{Temporary: true, Now: t0.Add(-48 * time.Hour)})
	b.ready(t, fileOpts{Temporary: true, Now: t0.Add(-24*time.Hour + time.Microsecond)}) // one microsecond short
	b.ready(t, fileOpts{Now: t0.Add(-48 * time.Hour)})                                   // permanent
	b.hidden(t, fileOpts{Temporary: true, Now: t0.Add(-48 * time.Hour)})                 // never activated

	rows, err := b.q.FileClaimExpiredTemporary(b.ctx, b.pool, db.FileClaimExpiredTemporaryParams{Max: 1, DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{older.ID}, ids(rows), "oldest expiry first, bounded by max")
	rows, err = b.q.FileClaimExpiredTemporary(b.ctx, b.pool, db.FileClaimExpiredTemporaryParams{Max: 10, DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{exact.ID}, ids(rows), "expired exactly at its expired_at")
}

func TestFileClaimUnusedBefore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.ready(t, fileOpts{Now: t0.Add(-10 * 24 * time.Hour)})
	used := b.ready(t, fileOpts{Now: t0.Add(-10 * 24 * time.Hour)})
	_, err := b.q.FileMarkUsedByIDs(b.ctx, b.pool, db.FileMarkUsedByIDsParams{IDs: []uuid.UUID{used.ID}, TenantCode: "acme", Now: at(0)})
	require.NoError(t, err)
	b.ready(t, fileOpts{Now: t0.Add(-time.Hour)})                            // young
	b.ready(t, fileOpts{Temporary: true, Now: t0.Add(-10 * 24 * time.Hour)}) // temporary: its own sweep
	b.hidden(t, fileOpts{Now: t0.Add(-10 * 24 * time.Hour)})                 // never activated

	rows, err := b.q.FileClaimUnusedBefore(b.ctx, b.pool, db.FileClaimUnusedBeforeParams{Cutoff: t0.Add(-7 * 24 * time.Hour), Max: 10, DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{old.ID}, ids(rows))
}

func TestStagingClaimSettleRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	finalize := func(retain bool) db.UploadedFile {
		c := b.completing(t, fileOpts{})
		row, err := asFile(b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{ID: c.ID, Lease: *c.CompletionLeaseUntil, RetainStaging: retain, ClockSkew: clockSkew, Now: at(0)}))
		require.NoError(t, err)
		return row
	}
	s3a, s3b := finalize(true), finalize(true)
	finalize(false) // local: nothing retained
	deleting := finalize(true)
	_, err := b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: deleting.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)
	deleted := finalize(true)
	claim, err := b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: deleted.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)
	_, err = b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: deleted.ID, Claim: *claim.DeletionPendingAt, Now: at(time.Second)})
	require.NoError(t, err)

	due := uploadTTL + clockSkew
	rows, err := b.q.StagingClaimCompleted(b.ctx, b.pool, db.StagingClaimCompletedParams{Max: 10, StagingLease: deletionLease, Now: at(due - time.Second)})
	require.NoError(t, err)
	require.Empty(t, rows, "not while the upload target can still land")
	rows, err = b.q.StagingClaimCompleted(b.ctx, b.pool, db.StagingClaimCompletedParams{Max: 10, StagingLease: deletionLease, Now: at(due)})
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{s3a.ID, s3b.ID, deleted.ID}, ids(rows),
		"a row with a live deletion claim is left to it; a deleted row's staging key is still swept")
	again, err := b.q.StagingClaimCompleted(b.ctx, b.pool, db.StagingClaimCompletedParams{Max: 10, StagingLease: deletionLease, Now: at(due)})
	require.NoError(t, err)
	require.Empty(t, again)

	claimOf := func(id uuid.UUID) time.Time {
		for _, r := range rows {
			if r.ID == id {
				return *r.StagingCleanupAt
			}
		}
		t.Fatalf("no claim for %s", id)
		return time.Time{}
	}
	_, err = b.q.StagingSettle(b.ctx, b.pool, db.StagingSettleParams{ID: s3a.ID, Claim: claimOf(s3a.ID), PendingKey: "wrong", Now: at(due + time.Second)})
	requireNoRows(t, err, "settles only the staging key it deleted")
	settled, err := b.q.StagingSettle(b.ctx, b.pool, db.StagingSettleParams{ID: s3a.ID, Claim: claimOf(s3a.ID), PendingKey: *s3a.PendingKey, Now: at(due + time.Second)})
	require.NoError(t, err)
	require.Nil(t, settled.PendingKey)
	require.Nil(t, settled.StagingCleanupAt)

	released, err := b.q.StagingRelease(b.ctx, b.pool, db.StagingReleaseParams{ID: s3b.ID, Claim: claimOf(s3b.ID), Backoff: retryBackoff, Now: at(due + time.Second)})
	require.NoError(t, err)
	require.Equal(t, t0.Add(due+time.Second+retryBackoff), released.StagingCleanupAt.UTC())
	_, err = b.q.StagingSettle(b.ctx, b.pool, db.StagingSettleParams{ID: s3b.ID, Claim: claimOf(s3b.ID), PendingKey: *s3b.PendingKey, Now: at(due + 2*time.Second)})
	requireNoRows(t, err, "a released claim no longer settles")
}

func TestFileRetireTombstone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	retire := func(id uuid.UUID, now time.Duration) (db.UploadedFile, error) {
		return asFile(b.q.FileRetireTombstone(b.ctx, b.pool, db.FileRetireTombstoneParams{ID: id, Now: at(now)}))
	}

	live := b.hidden(t, fileOpts{})
	_, err := retire(live.ID, activationLease-time.Second)
	requireNoRows(t, err, "refuses a live upload lease")

	_, err = retire(b.ready(t, fileOpts{}).ID, time.Hour)
	requireNoRows(t, err, "an active file is not a tombstone")

	tomb := b.hidden(t, fileOpts{})
	b.exec(t, "UPDATE uploaded_file SET deleted_at = $2, deletion_pending_at = $3 WHERE id = $1", tomb.ID, t0.Add(activationLease), t0.Add(activationLease+time.Minute))
	_, err = retire(tomb.ID, activationLease+time.Second)
	requireNoRows(t, err, "refuses to take over a live deletion lease")

	row, err := retire(tomb.ID, activationLease+time.Minute)
	require.NoError(t, err)
	require.Nil(t, row.UploadPendingAt)
	require.Equal(t, t0.Add(activationLease+time.Minute), row.DeletionPendingAt.UTC(), "ordinary elapsed deletion-retry state")

	_, err = retire(tomb.ID, activationLease+2*time.Minute)
	requireNoRows(t, err, "no longer a tombstone")

	rows, err := b.q.DeletionClaimElapsed(b.ctx, b.pool, db.DeletionClaimElapsedParams{Max: 10, DeletionLease: deletionLease, Now: at(activationLease + time.Minute)})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{tomb.ID}, ids(rows), "the retry sweep settles it for good")
	_, err = retire(uuid.New(), time.Hour)
	requireNoRows(t, err, "unknown id")
}

// TestExpiredTemporaryClaimReadsItsBatch: when many temporary files share
// one expiry (a burst of uploads, or rows loaded together), a claim of 100
// reads the expiry index in its order and stops at its batch, under
// custom and generic plans alike -- it never sorts every file that shares
// the first expiry to break the tie.
func TestExpiredTemporaryClaimReadsItsBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at,
    is_temporary, expired_at)
SELECT gen_random_uuid(), 'tenant-t', 'user-' || (i % 50), 'core/tenant-t/' || i || '.csv', 'f-' || i || '.csv', 1000, 'text/csv', 'ready',
    $1::timestamptz - interval '2 days', $1::timestamptz - interval '2 days', $1::timestamptz,
    true, $1::timestamptz - interval '1 hour'
FROM generate_series(1, 5000) AS i`, t0)
	b.exec(t, "ANALYZE uploaded_file")
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, generic := range []bool{false, true} {
		e := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}, generic: generic}
		_, err := b.q.FileClaimExpiredTemporary(b.ctx, e, db.FileClaimExpiredTemporaryParams{Max: 100, DeletionLease: deletionLease, Now: at(0)})
		require.NoError(t, err)
		plan := e.plans["FileClaimExpiredTemporary"]
		var nodes []any
		require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
		require.Empty(t, append(wastefulFilters(nodes), wastefulSorts(nodes)...), "generic %v:\n%s", generic, plan)
	}
}

// TestSweepClaimsReadTheirBatch: the claims that order by a marker shared by
// many rows (uploads abandoned together, deletions claimed by one request,
// rows loaded in one statement) read their marker's index in its order and
// stop at their batch, under custom and generic plans -- none sorts every
// row that shares the first marker to break the tie by id.
func TestSweepClaimsReadTheirBatch(t *testing.T) {
	t.Parallel()
	later := at(48 * time.Hour)
	cases := []struct {
		name  string
		row   func(b *bundle) db.UploadedFile
		claim func(b *bundle, e db.DBTX) error
	}{
		{"DeletionClaimElapsed", func(b *bundle) db.UploadedFile {
			f, err := asFile(b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: b.ready(t, fileOpts{}).ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)}))
			require.NoError(t, err)
			return f
		}, func(b *bundle, e db.DBTX) error {
			_, err := b.q.DeletionClaimElapsed(b.ctx, e, db.DeletionClaimElapsedParams{Max: 100, DeletionLease: deletionLease, Now: later})
			return err
		}},
		{"DeletionClaimExpiredTombstones/abandoned", func(b *bundle) db.UploadedFile { return b.hidden(t, fileOpts{}) },
			func(b *bundle, e db.DBTX) error {
				_, err := b.q.DeletionClaimExpiredTombstones(b.ctx, e, db.DeletionClaimExpiredTombstonesParams{Max: 100, PassLimit: 50, DeletionLease: deletionLease, Now: later})
				return err
			}},
		{"DeletionClaimExpiredTombstones/passes", func(b *bundle) db.UploadedFile {
			f := b.hidden(t, fileOpts{})
			b.exec(t, "UPDATE uploaded_file SET deleted_at = $2, deletion_pending_at = $2 WHERE id = $1", f.ID, t0.Add(time.Hour))
			return f
		}, func(b *bundle, e db.DBTX) error {
			_, err := b.q.DeletionClaimExpiredTombstones(b.ctx, e, db.DeletionClaimExpiredTombstonesParams{Max: 100, PassLimit: 100, DeletionLease: deletionLease, Now: later})
			return err
		}},
		{"FileClaimExpiredDirectUploads", func(b *bundle) db.UploadedFile { return b.pending(t, fileOpts{}) },
			func(b *bundle, e db.DBTX) error {
				_, err := b.q.FileClaimExpiredDirectUploads(b.ctx, e, db.FileClaimExpiredDirectUploadsParams{Max: 100, DeletionLease: deletionLease, Now: later})
				return err
			}},
		{"StagingClaimCompleted", func(b *bundle) db.UploadedFile {
			c := b.completing(t, fileOpts{})
			f, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{ID: c.ID, Lease: *c.CompletionLeaseUntil, RetainStaging: true, ClockSkew: clockSkew, Now: at(0)})
			require.NoError(t, err)
			return db.UploadedFile{ID: f.ID}
		}, func(b *bundle, e db.DBTX) error {
			_, err := b.q.StagingClaimCompleted(b.ctx, e, db.StagingClaimCompletedParams{Max: 100, StagingLease: deletionLease, Now: later})
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			// 5,000 copies of one row: the same markers, keys of their own.
			b.exec(t, `INSERT INTO uploaded_file
SELECT (jsonb_populate_record(NULL::uploaded_file, to_jsonb(f) || jsonb_build_object(
    'id', gen_random_uuid(), 'key', f.key || i, 'pending_key', f.pending_key || i, 'cdn', f.cdn || i))).*
FROM uploaded_file f, generate_series(1, 5000) AS i WHERE f.id = $1`, c.row(b).ID)
			b.exec(t, "ANALYZE uploaded_file")
			conn, err := b.pool.Acquire(b.ctx)
			require.NoError(t, err)
			defer conn.Release()
			name := strings.Split(c.name, "/")[0]
			for _, generic := range []bool{false, true} {
				e := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}, generic: generic}
				require.NoError(t, c.claim(b, e))
				var nodes []any
				require.NoError(t, json.Unmarshal([]byte(e.plans[name]), &nodes))
				require.Empty(t, append(wastefulFilters(nodes), wastefulSorts(nodes)...), "generic %v:\n%s", generic, e.plans[name])
			}
		})
	}
}
