package db_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

// populate fills uploaded_file with explainRows rows in a realistic mix of
// states: mostly active files over many tenants and owners, and a few of
// every in-flight, temporary and deleted kind.
func populate(t *testing.T, b *bundle) {
	t.Helper()
	b.exec(t, `
INSERT INTO uploaded_file (
    id, tenant_code, department_code, user_id, key, cdn, original_name, size_bytes, content_type,
    visibility, is_temporary, status, upload_pending_at, deletion_pending_at, deleted_at, expired_at,
    completed_at, used_at, module, entity, entity_id, pending_key, upload_expires_at,
    completion_lease_until, staging_cleanup_at, created_at, updated_at)
SELECT
    gen_random_uuid(),
    'tenant-' || (i % 500),
    CASE WHEN i % 3 = 0 THEN 'dept-' || (i % 7) END,
    'user-' || (i % 5000),
    'core/tenant-' || (i % 500) || '/' || i || '.pdf',
    'uploaded-file/' || i,
    'file-' || i || '.pdf',
    1000 + i,
    'application/pdf',
    'private',
    kind = 'temporary',
    CASE kind WHEN 'hidden' THEN 'pending' WHEN 'pending' THEN 'pending' WHEN 'completing' THEN 'completing' ELSE 'ready' END,
    CASE WHEN kind IN ('hidden', 'pending', 'completing') THEN $1::timestamptz + ((i % 200) - 100) * interval '1 minute' END,
    CASE WHEN kind = 'claimed' THEN $1::timestamptz + ((i % 200) - 100) * interval '1 minute' END,
    CASE WHEN kind = 'deleted' THEN $1::timestamptz - interval '1 day' END,
    CASE WHEN kind = 'temporary' THEN $1::timestamptz + ((i % 48) - 4) * interval '1 hour' END,
    CASE WHEN kind NOT IN ('hidden', 'pending', 'completing') THEN $1::timestamptz - interval '30 days' END,
    CASE WHEN kind = 'used' THEN $1::timestamptz - interval '20 days' END,
    CASE WHEN kind = 'used' THEN 'crm' END,
    CASE WHEN kind = 'used' THEN 'invoice' END,
    CASE WHEN kind = 'used' THEN 'entity-' || i END,
    CASE WHEN kind IN ('pending', 'completing', 'staging') THEN 'core/tenant-' || (i % 500) || '/staging/' || i END,
    CASE WHEN kind IN ('pending', 'completing', 'staging') THEN $1::timestamptz + ((i % 200) - 100) * interval '1 minute' END,
    CASE WHEN kind = 'completing' THEN $1::timestamptz + ((i % 200) - 100) * interval '1 minute' END,
    CASE WHEN kind = 'staging' THEN $1::timestamptz + ((i % 200) - 100) * interval '1 minute' END,
    $1::timestamptz - (i % 1000) * interval '1 hour',
    $1::timestamptz
FROM (
    SELECT i, CASE
        WHEN i % 100 < 70 THEN 'used'
        WHEN i % 100 < 85 THEN 'active'
        WHEN i % 100 < 90 THEN 'temporary'
        WHEN i % 100 < 92 THEN 'hidden'
        WHEN i % 100 < 94 THEN 'pending'
        WHEN i % 100 < 95 THEN 'completing'
        WHEN i % 100 < 96 THEN 'staging'
        WHEN i % 100 < 98 THEN 'claimed'
        ELSE 'deleted' END AS kind
    FROM generate_series(1, $2::integer) AS i
) AS s`, t0, explainRows)
	// The outbox: one event per file, as many as the table has rows.
	b.exec(t, `
INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, data)
SELECT 'file.ready', tenant_code, id, updated_at - (row_number() OVER ()) * interval '1 second', '{}'
FROM uploaded_file`)
	b.exec(t, "INSERT INTO uploaded_file_event_sink (name, after_tx, after_seq) SELECT 'hook', tx, seq FROM uploaded_file_event ORDER BY tx DESC, seq DESC LIMIT 1")
	// Variants: two presets of every tenth ready file, a few generating or
	// being deleted under a lease.
	b.exec(t, `
INSERT INTO uploaded_file_variant (id, file_id, preset, key, status, content_type, width, height, size_bytes, lease_until, created_at, updated_at)
SELECT gen_random_uuid(), f.id, p.preset, f.key || '.' || p.preset, s.status, 'image/webp',
    CASE WHEN s.status = 'ready' THEN 64 END, CASE WHEN s.status = 'ready' THEN 64 END,
    CASE WHEN s.status = 'ready' THEN 100 END,
    CASE WHEN s.status <> 'ready' THEN $1::timestamptz + ((row_number() OVER ()) % 200 - 100) * interval '1 minute' END,
    $1::timestamptz, $1::timestamptz
FROM (SELECT id, key, row_number() OVER (ORDER BY id) AS n FROM uploaded_file WHERE status = 'ready' AND used_at IS NOT NULL) AS f
CROSS JOIN (VALUES ('thumb'), ('avatar')) AS p (preset)
CROSS JOIN LATERAL (SELECT CASE WHEN f.n % 50 = 0 THEN 'generating' ELSE 'ready' END AS status) AS s
WHERE f.n % 10 = 0`, t0)
	b.exec(t, "ANALYZE uploaded_file")
	b.exec(t, "ANALYZE uploaded_file_variant")
	b.exec(t, "ANALYZE uploaded_file_event")
	b.exec(t, "ANALYZE uploaded_file_event_sink")
}

// TestQueryPlansUseIndexes: on a table of 100k rows, no query -- lookup,
// transition or sweep -- scans uploaded_file sequentially. Every query in
// db/queries must be explained here; a new query without a case fails.
func TestQueryPlansUseIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	populate(t, b)

	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	e := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}}

	var sample db.UploadedFile
	rows, err := b.pool.Query(b.ctx, "SELECT * FROM uploaded_file WHERE used_at IS NOT NULL LIMIT 1")
	require.NoError(t, err)
	sample, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[db.UploadedFile])
	require.NoError(t, err)

	var (
		q     = b.q
		ctx   = b.ctx
		now   = at(0)
		now0  = *now
		id    = sample.ID
		ten   = sample.TenantCode
		user  = &sample.UserID
		dept  = ptr("dept-1")
		ids   = []uuid.UUID{id, uuid.New(), uuid.New()}
		refs  = []string{sample.Key, "uploaded-file/17", "core/tenant-3/3.pdf"}
		lease = t0.Add(time.Minute)
	)
	calls := []func() error{
		func() error {
			_, err := q.FileMarkUsedByIDs(ctx, e, db.FileMarkUsedByIDsParams{IDs: ids, TenantCode: ten, OwnerUserID: user, Now: now})
			return err
		},
		func() error {
			_, err := q.FileMarkUsedByReferences(ctx, e, db.FileMarkUsedByReferencesParams{Refs: refs, TenantCode: ten, DepartmentCode: dept, Now: now})
			return err
		},
		func() error {
			_, err := q.FileMergeExtraData(ctx, e, db.FileMergeExtraDataParams{MaxBytes: maxExtraData, ID: id, TenantCode: ten, Patch: []byte(`{}`)})
			return err
		},
		func() error {
			_, err := insertHidden(ctx, e, db.FileInsertHiddenParams{ID: uuid.New(), TenantCode: ten, UserID: "u", Key: "k", ExtraData: []byte(`{}`), Visibility: "private", Disposition: "inline", ActivationLease: time.Minute})
			return err
		},
		func() error {
			_, err := activateUpload(ctx, e, db.FileActivateUploadParams{ID: id, UploadMarker: lease, Now: now})
			return err
		},
		func() error {
			_, err := q.FileSettleFailedUpload(ctx, e, db.FileSettleFailedUploadParams{ID: id, UploadMarker: lease, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileRestoreUploadForCleanup(ctx, e, db.FileRestoreUploadForCleanupParams{ID: id, UploadMarker: &lease, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileClaimDeletion(ctx, e, db.FileClaimDeletionParams{ID: id, TenantCode: ten, OwnerUserID: user, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileClaimDeletionByReferences(ctx, e, db.FileClaimDeletionByReferencesParams{Refs: refs, TenantCode: ten, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileClaimAbort(ctx, e, db.FileClaimAbortParams{ID: id, TenantCode: ten, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileReleaseDeletion(ctx, e, db.FileReleaseDeletionParams{ID: id, Claim: lease, Backoff: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileSettleDeletion(ctx, e, db.FileSettleDeletionParams{ID: id, Claim: lease, Now: now})
			return err
		},
		func() error {
			_, err := q.FileRescheduleTombstone(ctx, e, db.FileRescheduleTombstoneParams{ID: id, Claim: lease, UploadMarker: lease, Backoff: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileInsertPending(ctx, e, db.FileInsertPendingParams{ID: uuid.New(), TenantCode: ten, UserID: "u", Key: "k", PendingKey: ptr("s"), Visibility: "private", Disposition: "inline", UploadTTL: time.Minute, CleanupLease: time.Hour})
			return err
		},
		func() error {
			_, err := q.FileClaimCompletion(ctx, e, db.FileClaimCompletionParams{ID: id, TenantCode: ten, CompletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileTakeOverCompletion(ctx, e, db.FileTakeOverCompletionParams{ID: id, TenantCode: ten, ExpiredLease: lease, CompletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileDeletedSince(ctx, e, db.FileDeletedSinceParams{ID: id, TenantCode: ten, OwnerUserID: user, Since: t0})
			return err
		},
		func() error {
			_, err := q.FileExtendCompletion(ctx, e, db.FileExtendCompletionParams{ID: id, Lease: lease, CompletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileExtendActivation(ctx, e, db.FileExtendActivationParams{ID: id, UploadMarker: lease, ActivationLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileFinalizeCompletion(ctx, e, db.FileFinalizeCompletionParams{ID: id, Lease: lease, Now: now})
			return err
		},
		func() error {
			_, err := q.FileFailCompletion(ctx, e, db.FileFailCompletionParams{ID: id, Lease: lease, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileGetVisible(ctx, e, db.FileGetVisibleParams{ID: id, TenantCode: ten, DepartmentCode: dept, OwnerUserID: user, Now: now})
			return err
		},
		func() error {
			_, err := q.FileGetDetail(ctx, e, db.FileGetDetailParams{ID: id, TenantCode: ten, DepartmentCode: dept, OwnerUserID: user, Now: now})
			return err
		},
		func() error {
			_, err := q.FileGetDownload(ctx, e, db.FileGetDownloadParams{ID: id, TenantCode: ten, DepartmentCode: dept, OwnerUserID: user, Now: now})
			return err
		},
		func() error {
			_, err := q.FileGetVisibleByReference(ctx, e, db.FileGetVisibleByReferenceParams{Reference: sample.Key, TenantCode: ten, Now: now})
			return err
		},
		func() error {
			_, err := q.FileGetAttached(ctx, e, db.FileGetAttachedParams{ID: id, TenantCode: ten, Module: "crm", Entity: "invoice", EntityID: *sample.EntityID, Now: now})
			return err
		},
		func() error {
			_, err := q.FileGetDirect(ctx, e, db.FileGetDirectParams{ID: id, TenantCode: ten, OwnerUserID: user, Now: now})
			return err
		},
		func() error {
			_, err := q.FileLockPendingContent(ctx, e, db.FileLockPendingContentParams{ID: id, TenantCode: ten, Now: now})
			return err
		},
		func() error {
			_, err := q.FileLockVisibleByIDs(ctx, e, db.FileLockVisibleByIDsParams{IDs: ids, TenantCode: ten})
			return err
		},
		func() error {
			_, err := q.FileLockVisibleByReferences(ctx, e, db.FileLockVisibleByReferencesParams{Refs: refs, TenantCode: ten, OwnerUserID: user})
			return err
		},
		func() error {
			_, err := q.FileGetUploadState(ctx, e, db.FileGetUploadStateParams{ID: id, Now: now})
			return err
		},
		func() error {
			_, err := q.DeletionClaimElapsed(ctx, e, db.DeletionClaimElapsedParams{Max: 100, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.DeletionClaimExpiredTombstones(ctx, e, db.DeletionClaimExpiredTombstonesParams{Max: 100, PassLimit: 100, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileClaimExpiredDirectUploads(ctx, e, db.FileClaimExpiredDirectUploadsParams{Max: 100, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileClaimExpiredTemporary(ctx, e, db.FileClaimExpiredTemporaryParams{Max: 100, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileClaimUnusedBefore(ctx, e, db.FileClaimUnusedBeforeParams{Cutoff: t0.Add(-30 * 24 * time.Hour), Max: 100, DeletionLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.StagingClaimCompleted(ctx, e, db.StagingClaimCompletedParams{Max: 100, StagingLease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.StagingSettle(ctx, e, db.StagingSettleParams{ID: id, Claim: lease, PendingKey: "s", Now: now})
			return err
		},
		func() error {
			_, err := q.StagingRelease(ctx, e, db.StagingReleaseParams{ID: id, Claim: lease, Backoff: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileRetireTombstone(ctx, e, db.FileRetireTombstoneParams{ID: id, Now: now})
			return err
		},
		func() error {
			_, err := q.ReconcileReferencesFrom(ctx, e, db.ReconcileReferencesFromParams{StartKey: "core/tenant-250/", Max: 1000})
			return err
		},
		func() error {
			_, err := q.DatabaseNow(ctx, e)
			return err
		},
		func() error {
			_, err := q.SigningKeyEnsure(ctx, e, db.SigningKeyEnsureParams{Purpose: "upload-target", Secret: make([]byte, 32)})
			return err
		},
		func() error {
			_, err := q.FileLockPendingContentSigned(ctx, e, db.FileLockPendingContentSignedParams{ID: id, Now: now})
			return err
		},
		func() error {
			_, err := q.OrphanIsClaimed(ctx, e, "core/x.pdf")
			return err
		},
		func() error {
			_, err := q.OrphanClaim(ctx, e, db.OrphanClaimParams{Key: "core/x.pdf", Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.OrphanSettle(ctx, e, db.OrphanSettleParams{Key: "core/x.pdf", Claim: lease})
			return err
		},
		func() error {
			_, err := q.OrphanRelease(ctx, e, db.OrphanReleaseParams{Key: "core/x.pdf", Claim: lease, Backoff: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.OrphanClaimElapsed(ctx, e, db.OrphanClaimElapsedParams{Max: 100, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			return q.EventSinkEnsure(ctx, e, db.EventSinkEnsureParams{Names: []string{"hook", "bus"}, Now: now})
		},
		func() error {
			_, err := q.EventSinkClaim(ctx, e, db.EventSinkClaimParams{Names: []string{"hook", "bus"}, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.EventBatchAfter(ctx, e, db.EventBatchAfterParams{AfterTx: 1, AfterSeq: explainRows - 300, Max: 256})
			return err
		},
		func() error {
			_, err := q.EventSinkAdvance(ctx, e, db.EventSinkAdvanceParams{Name: "hook", Held: lease, AfterTx: 1, AfterSeq: 2, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.EventSinkFail(ctx, e, db.EventSinkFailParams{Name: "hook", Held: lease, AddAttempts: 1, Backoff: time.Minute, LastError: "status 500", Now: now})
			return err
		},
		func() error {
			_, err := q.EventPark(ctx, e, db.EventParkParams{Name: "hook", Held: lease, EventTx: 1, EventSeq: 2, Attempts: 3, LastError: "status 500", Now: now})
			return err
		},
		func() error {
			return q.EventSinkRelease(ctx, e, db.EventSinkReleaseParams{Name: "hook", Held: lease, Now: now})
		},
		func() error {
			_, err := q.EventReplayBatch(ctx, e, db.EventReplayBatchParams{Name: "hook", Max: 256})
			return err
		},
		func() error {
			_, err := q.EventReplayDone(ctx, e, db.EventReplayDoneParams{Name: "hook", EventSeq: 2, Held: lease})
			return err
		},
		func() error {
			_, err := q.EventReplayFail(ctx, e, db.EventReplayFailParams{Name: "hook", EventSeq: 2, MaxAttempts: 3, LastError: "timeout", Now: now})
			return err
		},
		func() error {
			_, err := q.EventReplayRequest(ctx, e, db.EventReplayRequestParams{ID: uuid.New(), Now: now})
			return err
		},
		func() error {
			_, err := q.EventReplayRequestBatch(ctx, e, db.EventReplayRequestBatchParams{Since: t0.Add(-time.Hour), AfterAt: t0.Add(-30 * time.Minute), AfterSeq: 7, Max: 1000, Now: now})
			return err
		},
		func() error {
			_, err := q.EventListParked(ctx, e, 100)
			return err
		},
		func() error {
			_, err := q.EventSinkStatus(ctx, e, db.EventSinkStatusParams{Names: []string{"hook"}, Now: now})
			return err
		},
		func() error {
			_, err := listCall(ctx, q, e, "OwnerByCreated", listFilters{}, ten, sample.UserID)
			return err
		},
		func() error {
			_, err := listCall(ctx, q, e, "OwnerByName", listFilters{}, ten, sample.UserID)
			return err
		},
		func() error {
			_, err := listCall(ctx, q, e, "OwnerBySize", listFilters{}, ten, sample.UserID)
			return err
		},
		func() error { _, err := listCall(ctx, q, e, "TenantByCreated", listFilters{}, ten, ""); return err },
		func() error { _, err := listCall(ctx, q, e, "TenantByName", listFilters{}, ten, ""); return err },
		func() error { _, err := listCall(ctx, q, e, "TenantBySize", listFilters{}, ten, ""); return err },
		func() error {
			for _, shape := range []string{"OwnerByCreated", "OwnerByName", "OwnerBySize"} {
				if _, err := listCall(ctx, q, e, shape, listFilters{module: ptr("crm")}, ten, sample.UserID); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			for _, shape := range []string{"TenantByCreated", "TenantByName", "TenantBySize"} {
				if _, err := listCall(ctx, q, e, shape, listFilters{visibility: ptr("public")}, ten, ""); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			for _, shape := range []string{"TenantByCreated", "TenantByName", "TenantBySize"} {
				for _, f := range []listFilters{{dept: dept}, {dept: dept, module: ptr("crm")}} {
					if _, err := listCall(ctx, q, e, shape, f, ten, ""); err != nil {
						return err
					}
				}
			}
			return nil
		},
		func() error {
			_, err := recordCall(ctx, q, e, "RecordByCreated", listFilters{entity: sample.Entity, entityID: sample.EntityID}, ten, sample.UserID)
			return err
		},
		func() error {
			_, err := recordCall(ctx, q, e, "RecordByName", listFilters{entity: sample.Entity, entityID: sample.EntityID}, ten, "")
			return err
		},
		func() error {
			_, err := recordCall(ctx, q, e, "RecordBySize", listFilters{entity: sample.Entity, entityID: sample.EntityID}, ten, sample.UserID)
			return err
		},
		func() error {
			_, err := q.FileRescanBatch(ctx, e, db.FileRescanBatchParams{AfterID: id, Since: &now0, Scan: 10_000, Max: 100})
			return err
		},
		func() error {
			_, err := q.FileRescanTenantBatch(ctx, e, db.FileRescanTenantBatchParams{Tenant: ten, AfterID: id, Scan: 10_000, Max: 100})
			return err
		},
		func() error {
			_, err := q.FileQuarantine(ctx, e, db.FileQuarantineParams{ID: id, Now: now})
			return err
		},
		func() error {
			_, err := q.FileUnquarantine(ctx, e, db.FileUnquarantineParams{ID: id, Now: now})
			return err
		},
		func() error {
			_, err := q.FileReleaseCompletion(ctx, e, db.FileReleaseCompletionParams{ID: id, Lease: lease, Now: now})
			return err
		},
		func() error {
			_, err := q.UsageRead(ctx, e, db.UsageReadParams{TenantCode: ten, UserID: sample.UserID, DefaultTenantBytes: 1 << 30})
			return err
		},
		func() error {
			_, err := q.QuotaSet(ctx, e, db.QuotaSetParams{TenantCode: ten, TenantBytes: ptr(int64(1 << 30))})
			return err
		},
		func() error {
			_, err := q.QuotaList(ctx, e, db.QuotaListParams{Tenant: &ten, Max: 100})
			return err
		},
		func() error {
			_, err := q.UsageRecount(ctx, e, []string{ten})
			return err
		},
		func() error {
			_, err := q.UsageTenants(ctx, e)
			return err
		},
		func() error {
			return q.ReplicaHeartbeat(ctx, e, db.ReplicaHeartbeatParams{ID: id, BinaryVersion: 20261128100001})
		},
		func() error {
			return q.ReplicaForget(ctx, e, id)
		},
		func() error {
			_, err := q.TrackTryLock(ctx, e, 1)
			return err
		},
		func() error {
			_, err := q.TrackUnlock(ctx, e, 1)
			return err
		},
		func() error {
			_, err := q.ReplicaPrune(ctx, e, time.Minute)
			return err
		},
		func() error {
			_, err := q.UsageLockTenants(ctx, e, []string{ten})
			return err
		},
		func() error {
			_, err := q.EventPrune(ctx, e, db.EventPruneParams{Cutoff: t0.Add(-7 * 24 * time.Hour), Names: []string{"hook"}, Max: 1000})
			return err
		},
		func() error {
			_, err := q.VariantGet(ctx, e, db.VariantGetParams{FileID: id, Preset: "thumb"})
			return err
		},
		func() error {
			_, err := q.VariantGetVisible(ctx, e, db.VariantGetVisibleParams{ID: id, Preset: "thumb", TenantCode: ten, OwnerUserID: user, Now: now})
			return err
		},
		func() error {
			_, err := q.VariantGetDownload(ctx, e, db.VariantGetDownloadParams{ID: id, Preset: "thumb", TenantCode: ten, OwnerUserID: user, Now: now})
			return err
		},
		func() error {
			_, err := q.VariantClaim(ctx, e, db.VariantClaimParams{ID: uuid.New(), FileID: id, Preset: "thumb", Key: "core/v/1.webp", ContentType: "image/webp", Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.VariantFinish(ctx, e, db.VariantFinishParams{ID: uuid.New(), FileID: id, Claim: lease, SizeBytes: 10, Width: 1, Height: 1, Now: now})
			return err
		},
		func() error {
			_, err := q.VariantDrop(ctx, e, db.VariantDropParams{ID: id, Claim: lease})
			return err
		},
		func() error {
			_, err := q.VariantClaimForFile(ctx, e, db.VariantClaimForFileParams{FileID: id, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.VariantClaimElapsed(ctx, e, db.VariantClaimElapsedParams{Max: 100, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.VariantRelease(ctx, e, db.VariantReleaseParams{ID: id, Claim: lease, Backoff: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.VariantSettle(ctx, e, db.VariantSettleParams{ID: id, Claim: lease})
			return err
		},
		func() error {
			_, err := q.FileClaimResumableWrite(ctx, e, db.FileClaimResumableWriteParams{ID: id, TenantCode: ten, DepartmentCode: dept, OwnerUserID: user, AtOffset: 0, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileExtendResumableWrite(ctx, e, db.FileExtendResumableWriteParams{ID: id, Claim: lease, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.FileReleaseResumableWrite(ctx, e, db.FileReleaseResumableWriteParams{ID: id, Claim: lease})
			return err
		},
		func() error {
			_, err := q.FileAdvanceResumable(ctx, e, db.FileAdvanceResumableParams{ID: id, AtOffset: 0, NewOffset: 10, Size: 10, Claim: lease, Now: now})
			return err
		},
		func() error {
			_, err := q.FileClaimResumableCompletion(ctx, e, db.FileClaimResumableCompletionParams{ID: id, Checksum: "sha256:x", ETag: ptr("e"), CompletionLease: time.Minute, Claim: lease, Now: now})
			return err
		},
		func() error {
			_, err := q.ChunkTrim(ctx, e, db.ChunkTrimParams{FileID: id, AtOffset: 0, Now: now})
			return err
		},
		func() error {
			_, err := q.ChunkBegin(ctx, e, db.ChunkBeginParams{Key: "core/_staging/x.chunk", FileID: id, StartOffset: 0, MaxChunks: 1000, Now: now})
			return err
		},
		func() error {
			_, err := q.ChunkList(ctx, e, id)
			return err
		},
		func() error {
			_, err := q.ChunkDrop(ctx, e, db.ChunkDropParams{Key: "core/_staging/x.chunk", Claim: lease})
			return err
		},
		func() error {
			_, err := q.ChunkClaimStale(ctx, e, db.ChunkClaimStaleParams{Max: 100, Grace: time.Hour, Now: now})
			return err
		},
		func() error {
			_, err := q.IdempotencyClaim(ctx, e, db.IdempotencyClaimParams{TenantCode: "t", Caller: "u", Key: "k", Route: "POST /uploaded-file", FileID: &id, Lease: time.Minute, Retention: 24 * time.Hour, Now: now})
			return err
		},
		func() error {
			_, err := q.IdempotencyGet(ctx, e, db.IdempotencyGetParams{TenantCode: "t", Caller: "u", Key: "k", Now: now})
			return err
		},
		func() error {
			_, err := q.IdempotencyTakeOver(ctx, e, db.IdempotencyTakeOverParams{TenantCode: "t", Caller: "u", Key: "k", Expired: lease, FileID: &id, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.IdempotencyExtend(ctx, e, db.IdempotencyExtendParams{TenantCode: "t", Caller: "u", Key: "k", Claim: lease, Lease: time.Minute, Now: now})
			return err
		},
		func() error {
			_, err := q.IdempotencyFinish(ctx, e, db.IdempotencyFinishParams{TenantCode: "t", Caller: "u", Key: "k", Claim: lease, Fingerprint: []byte{1}, Status: 201})
			return err
		},
		func() error {
			return q.IdempotencyRelease(ctx, e, db.IdempotencyReleaseParams{TenantCode: "t", Caller: "u", Key: "k", Claim: lease})
		},
		func() error {
			_, err := q.IdempotencyExpire(ctx, e, db.IdempotencyExpireParams{Max: 100, Now: now})
			return err
		},
		func() error {
			_, err := insertHidden(ctx, e, db.FileInsertHiddenParams{ID: uuid.New(), TenantCode: ten, UserID: "u", Key: "k2", ExtraData: []byte(`{}`), Visibility: "private", Disposition: "inline",
				ActivationLease: time.Minute, IdempotencyKey: ptr("k"), IdempotencyFingerprint: []byte{1}})
			return err
		},
		func() error {
			_, err := q.FileGetByIdempotencyKey(ctx, e, db.FileGetByIdempotencyKeyParams{TenantCode: ten, UserID: "u", IdempotencyKey: "k", Now: now})
			return err
		},
		func() error {
			_, err := q.FileForgetIdempotencyKey(ctx, e, db.FileForgetIdempotencyKeyParams{ID: id, IdempotencyKey: "k", Retention: 24 * time.Hour, Now: now})
			return err
		},
		func() error {
			_, err := q.IdempotencyKeyOnFile(ctx, e, db.IdempotencyKeyOnFileParams{TenantCode: ten, Caller: "u", Key: "k"})
			return err
		},
		func() error {
			_, err := q.SweepBacklog(ctx, e, db.SweepBacklogParams{Cap: 100_000, Now: now})
			return err
		},
		func() error {
			return q.CheckpointSave(ctx, e, db.CheckpointSaveParams{Command: "rescan", Selection: "tenant=t", AfterID: id, DoneAbove: []uuid.UUID{}, Now: now})
		},
		func() error {
			_, err := q.CheckpointGet(ctx, e, db.CheckpointGetParams{Command: "rescan", Selection: "tenant=t"})
			return err
		},
		func() error {
			return q.CheckpointClear(ctx, e, db.CheckpointClearParams{Command: "rescan", Selection: "tenant=t"})
		},
	}
	for _, call := range calls {
		if err := call(); err != nil {
			require.ErrorIs(t, err, pgx.ErrNoRows)
		}
	}
	custom := e

	// The same queries again under generic plans: pgx prepares every
	// statement, and after five executions PostgreSQL may switch to a plan
	// made without the arguments' values. No query may scan or sort far
	// more rows than it returns under either plan.
	e = &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}, generic: true}
	for _, call := range calls {
		if err := call(); err != nil {
			require.ErrorIs(t, err, pgx.ErrNoRows)
		}
	}
	_, err = conn.Exec(b.ctx, "RESET plan_cache_mode")
	require.NoError(t, err)
	generic := e
	e = custom
	customOnly := customPlanQueries(t)
	require.Contains(t, customOnly, "FileClaimExpiredDirectUploads")
	for name, plan := range generic.plans {
		var nodes []any
		require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
		if name == "UsageRecount" || customOnly[name] {
			continue // an operator's repair (below), or run on a pool that plans each statement with its arguments
		}
		for _, scan := range seqScans(nodes) {
			if scan == "uploaded_file" || scan == "uploaded_file_event" || scan == "uploaded_file_variant" {
				t.Errorf("generic plan: %s scans %s sequentially:\n%s", name, scan, plan)
			}
		}
		for _, w := range append(wastefulFilters(nodes), wastefulSorts(nodes)...) {
			t.Errorf("generic plan: %s: %s\n%s", name, w, plan)
		}
	}

	// Every query in db/queries was explained.
	require.ElementsMatch(t, declaredQueries(t), keys(e.plans), "a query in db/queries has no EXPLAIN case")

	for name, plan := range e.plans {
		var nodes []any
		require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
		for _, scan := range seqScans(nodes) {
			if name == "UsageRecount" && (scan == "uploaded_file_variant" || scan == "uploaded_file") {
				continue // the operator's repair sums every row of the tenant that holds space, pending ones too (no list index has them); run while quiet
			}
			require.NotContains(t, []string{"uploaded_file", "uploaded_file_event", "uploaded_file_variant"}, scan, "%s scans %s sequentially:\n%s", name, scan, plan)
		}
	}
	// No node's filter throws away far more rows than it passes on: a
	// candidate query whose index does not match its filter reads rows it
	// cannot use (and one that does so before its LIMIT stalls once enough
	// of them sit in front of the rows it wants).
	for name, plan := range e.plans {
		if name == "UsageRecount" {
			continue // the operator's repair reads every row of the tenant (above)
		}
		var nodes []any
		require.NoError(t, json.Unmarshal([]byte(plan), &nodes))
		for _, w := range wastefulFilters(nodes) {
			t.Errorf("%s: %s\n%s", name, w, plan)
		}
	}
	// Every index of uploaded_file is used by some query's plan, or
	// enforces a rule: each costs every insert and every update that moves
	// a row out of HOT (an activation, a claim).
	used := map[string]bool{}
	for _, plan := range e.plans {
		for _, ix := range indexesUsed(plan) {
			used[ix] = true
		}
	}
	var all []string
	ixRows, err := b.pool.Query(b.ctx, `SELECT indexrelid::regclass::text FROM pg_index
		JOIN pg_class ON pg_class.oid = pg_index.indrelid
		JOIN pg_namespace ON pg_namespace.oid = pg_class.relnamespace
		WHERE pg_namespace.nspname = 'public' AND pg_class.relname = 'uploaded_file'`)
	require.NoError(t, err)
	all, err = pgx.CollectRows(ixRows, pgx.RowTo[string])
	require.NoError(t, err)
	// The staging half of ReconcileReferencesFrom walks staging keys in
	// byte order; with the explain data's 5,000 the planner sorts them
	// instead, so the index is shown to serve the query with sorting off.
	_, err = conn.Exec(b.ctx, "SET enable_sort = off")
	require.NoError(t, err)
	sorted := &explainer{t: t, conn: conn.Conn(), plans: map[string]string{}}
	_, err = q.ReconcileReferencesFrom(ctx, sorted, db.ReconcileReferencesFromParams{StartKey: "core/tenant-250/", Max: 1000})
	if err != nil {
		require.ErrorIs(t, err, pgx.ErrNoRows)
	}
	// A department of the explain data holds a few files a tenant, which
	// the planner finds through any department index and sorts; with
	// sorting off each order's own index serves its list (a department of
	// thousands: TestDepartmentListsReadOnlyTheDepartment).
	for _, order := range []string{"Created", "Name", "Size"} {
		_, err := listCall(ctx, q, sorted, "TenantBy"+order, listFilters{dept: dept}, ten, "")
		require.NoError(t, err)
		own := "uploaded_file_list_department_" + strings.ToLower(order) + "_idx"
		require.Contains(t, indexesUsed(sorted.plans["FileListDepartmentBy"+order]), own)
		used[own] = true
	}
	_, err = conn.Exec(b.ctx, "RESET enable_sort")
	require.NoError(t, err)
	require.Contains(t, indexesUsed(sorted.plans["ReconcileReferencesFrom"]), "uploaded_file_pending_key_bytes_idx")
	used["uploaded_file_pending_key_bytes_idx"] = true
	for _, ix := range all {
		if used[ix] {
			continue
		}
		if _, ok := ruleIndexes[ix]; ok {
			continue
		}
		t.Errorf("index %s is used by no query's plan and enforces no rule (ruleIndexes): drop it, or name the query it serves", ix)
	}
	for ix := range ruleIndexes {
		require.Contains(t, all, ix, "ruleIndexes names an index the schema does not have")
	}
	t.Logf("explained without running (their sample arguments fail): %v", e.unrun)
	if testing.Verbose() {
		for _, name := range keys(e.plans) {
			t.Logf("%s: %s", name, strings.Join(indexesUsed(e.plans[name]), ", "))
		}
	}
}

// ruleIndexes are the indexes kept for a rule they enforce (uniqueness,
// a primary key) even where no query's plan reads them, with the rule.
var ruleIndexes = map[string]string{
	"uploaded_file_pkey":               "a file's id is unique",
	"uploaded_file_key_unique":         "a storage key names one file",
	"uploaded_file_cdn_unique":         "a CDN path names one file",
	"uploaded_file_pending_key_unique": "an upload target's key names one upload",
}
