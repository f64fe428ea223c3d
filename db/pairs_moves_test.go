package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

// pairGroups is docs/schema.md's pairs table: per state of a file row, the
// statements that act on a row in it. Their times are t0 plus what each
// needs to act (a sweep runs once the lease it looks for has passed).
func pairGroups() []pairGroup {
	return []pairGroup{
		{state: "pending (a direct upload initiated)", fixture: fixture((*bundle).pending),
			moves: []move{claimCompletion, claimAbort, expiredDirect, insertPending, recount}},
		{state: "completing (a completion claimed)", fixture: fixture((*bundle).completing),
			moves: []move{takeOverCompletion, extendCompletion, finalizeCompletion, failCompletion, releaseCompletion, expiredDirect, recount}},
		{state: "resumable (no writer)", fixture: resumableFixture(false),
			moves: []move{claimWrite(0), claimAbort, expiredDirect}},
		{state: "resumable (a writer's lease)", fixture: resumableFixture(true),
			moves: []move{extendWrite, releaseWrite, advanceWrite, claimResumableCompletion, claimAbort, claimWrite(time.Minute)}},
		{state: "hidden (a buffer upload written)", fixture: fixture((*bundle).hidden),
			moves: []move{extendActivation, activate, settleFailed, abandonedTombstones, insertHidden2, recount}},
		{state: "ready", fixture: fixture((*bundle).ready),
			moves: []move{markUsedByIDs, markUsedByRefs, mergeExtra, claimDeletion, claimDeletionByRefs, unusedBefore, quarantine, variantClaim, insertHidden2, recount}},
		{state: "ready, temporary", fixture: func(t *testing.T, b *bundle) db.UploadedFile { return b.ready(t, fileOpts{Temporary: true}) },
			moves: []move{expiredTemporary, markUsedByIDs, mergeExtra, claimDeletion}},
		{state: "quarantined", fixture: quarantinedFixture,
			moves: []move{unquarantine, recount}},
		{state: "deleting (a deletion claimed)", fixture: deletingFixture,
			moves: []move{releaseDeletion, settleDeletion, deletionElapsed, recount}},
		{state: "an upload tombstone claimed", fixture: tombstoneFixture,
			moves: []move{rescheduleTombstone, settleDeletion, restoreForCleanup, forgetKey}},
		{state: "an upload tombstone at rest", fixture: restingTombstoneFixture,
			moves: []move{claimTombstones(72 * time.Hour), retireTombstone, restoreForCleanup}},
		{state: "ready, its staging object retained", fixture: stagedFixture(false),
			moves: []move{stagingClaim, claimDeletion, markUsedByIDs}},
		{state: "ready, its staging object's removal claimed", fixture: stagedFixture(true),
			moves: []move{stagingSettle, stagingRelease, claimDeletion}},
		{state: "ready, a variant generating", fixture: generatingFixture,
			moves: []move{variantFinish, claimDeletion, recount}},
		{state: "deleting, its ready variant claimed", fixture: variantDeletingFixture,
			moves: []move{variantSettle, recount, insertHidden2}},
	}
}

func fixture(make func(*bundle, *testing.T, fileOpts) db.UploadedFile) func(*testing.T, *bundle) db.UploadedFile {
	return func(t *testing.T, b *bundle) db.UploadedFile { return make(b, t, fileOpts{}) }
}

// resumableFixture: a resumable upload at offset 0; when held, its write
// lease held since t0 and the row of the chunk being written.
func resumableFixture(held bool) func(*testing.T, *bundle) db.UploadedFile {
	return func(t *testing.T, b *bundle) db.UploadedFile {
		p := newPendingParams(fileOpts{})
		p.ResumableOffset, p.Checksum = ptr(int64(0)), nil
		f, err := asFileCall(b.q.FileInsertPending, b.ctx, b.pool, p)
		require.NoError(t, err)
		if held {
			_, err := claimWrite(0).run(b.ctx, b.q, b.pool, f)
			require.NoError(t, err)
			_, err = b.q.ChunkBegin(b.ctx, b.pool, db.ChunkBeginParams{FileID: f.ID, Key: *f.PendingKey + ".0", StartOffset: 0, MaxChunks: 1000, Now: at(0)})
			require.NoError(t, err)
		}
		return b.get(t, f.ID)
	}
}

func quarantinedFixture(t *testing.T, b *bundle) db.UploadedFile {
	f := b.ready(t, fileOpts{})
	_, err := quarantine.run(b.ctx, b.q, b.pool, f)
	require.NoError(t, err)
	return b.get(t, f.ID)
}

func deletingFixture(t *testing.T, b *bundle) db.UploadedFile {
	f := b.ready(t, fileOpts{})
	_, err := claimDeletion.run(b.ctx, b.q, b.pool, f)
	require.NoError(t, err)
	return b.get(t, f.ID)
}

// tombstoneFixture: a keyed buffer upload whose writer never came back,
// claimed by the tombstone sweep.
func tombstoneFixture(t *testing.T, b *bundle) db.UploadedFile {
	p := newHiddenParams(fileOpts{})
	p.IdempotencyKey, p.IdempotencyFingerprint = ptr("key-1"), []byte{1}
	f, err := asFileCall(insertHidden, b.ctx, b.pool, p)
	require.NoError(t, err)
	n, err := abandonedTombstones.run(b.ctx, b.q, b.pool, f)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	return b.get(t, f.ID)
}

// restingTombstoneFixture: a claimed tombstone rescheduled, its deletion
// marker and upload marker both passed by t0 + a day.
func restingTombstoneFixture(t *testing.T, b *bundle) db.UploadedFile {
	f := tombstoneFixture(t, b)
	_, err := rescheduleTombstone.run(b.ctx, b.q, b.pool, f)
	require.NoError(t, err)
	return b.get(t, f.ID)
}

// stagedFixture: an S3 direct upload made ready with its staging object
// retained, its removal claimed by the staging sweep when claimed.
func stagedFixture(claimed bool) func(*testing.T, *bundle) db.UploadedFile {
	return func(t *testing.T, b *bundle) db.UploadedFile {
		f := b.completing(t, fileOpts{})
		_, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{ID: f.ID, Lease: *f.CompletionLeaseUntil, FinalETag: ptr(`"v2"`), RetainStaging: true, ClockSkew: clockSkew, Now: at(time.Second)})
		require.NoError(t, err)
		if claimed {
			n, err := stagingClaim.run(b.ctx, b.q, b.pool, f)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
		return b.get(t, f.ID)
	}
}

// generatingFixture: a ready file with a variant being generated.
func generatingFixture(t *testing.T, b *bundle) db.UploadedFile {
	f := b.ready(t, fileOpts{})
	_, err := variantClaim.run(b.ctx, b.q, b.pool, f)
	require.NoError(t, err)
	return b.get(t, f.ID)
}

// variantDeletingFixture: a file with a ready variant, both claimed for
// deletion.
func variantDeletingFixture(t *testing.T, b *bundle) db.UploadedFile {
	f := generatingFixture(t, b)
	_, err := variantFinish.run(b.ctx, b.q, b.pool, f)
	require.NoError(t, err)
	_, err = claimDeletion.run(b.ctx, b.q, b.pool, f)
	require.NoError(t, err)
	vs, err := b.q.VariantClaimForFile(b.ctx, b.pool, db.VariantClaimForFileParams{FileID: f.ID, Lease: deletionLease, Now: at(0)})
	require.NoError(t, err)
	require.Len(t, vs, 1)
	return b.get(t, f.ID)
}

// variantOf is the id and lease of the one variant row of file id, as
// conn sees it; ok is false when it has none or its lease is gone (a
// holder finished it).
func variantOf(ctx context.Context, conn db.DBTX, id uuid.UUID) (v db.UploadedFileVariant, ok bool, err error) {
	err = conn.QueryRow(ctx, "SELECT id, lease_until FROM uploaded_file_variant WHERE file_id = $1", id).Scan(&v.ID, &v.LeaseUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, false, nil
	}
	return v, err == nil && v.LeaseUntil != nil, err
}

// The moves. Each names its statement; the row's leases and markers are
// the fixture's.
var (
	claimCompletion = move{name: "FileClaimCompletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileClaimCompletion(ctx, c, db.FileClaimCompletionParams{ID: f.ID, TenantCode: f.TenantCode, ETag: ptr(`"v1"`), CompletionLease: completionLease, Now: at(time.Second)})
		return one(err)
	}}
	claimAbort = move{name: "FileClaimAbort", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileClaimAbort(ctx, c, db.FileClaimAbortParams{ID: f.ID, TenantCode: f.TenantCode, DeletionLease: deletionLease, Now: at(time.Second)})
		return one(err)
	}}
	expiredDirect = move{name: "FileClaimExpiredDirectUploads", skips: true, run: func(ctx context.Context, q *db.Queries, c db.DBTX, _ db.UploadedFile) (int, error) {
		return many(q.FileClaimExpiredDirectUploads(ctx, c, db.FileClaimExpiredDirectUploadsParams{Max: 10, DeletionLease: deletionLease, Now: at(cleanupLease + time.Hour)}))
	}}
	insertPending = move{name: "FileInsertPending", run: func(ctx context.Context, q *db.Queries, c db.DBTX, _ db.UploadedFile) (int, error) {
		_, err := q.FileInsertPending(ctx, c, newPendingParams(fileOpts{Now: t0.Add(time.Second)}))
		return one(err)
	}}
	insertHidden2 = move{name: "FileInsertHidden", run: func(ctx context.Context, _ *db.Queries, c db.DBTX, _ db.UploadedFile) (int, error) {
		_, err := insertHidden(ctx, c, newHiddenParams(fileOpts{Now: t0.Add(time.Second)}))
		return one(err)
	}}
	// recount is the service's: UsageLockTenants, then UsageRecount in
	// the same transaction (UsageRecount alone sums from a snapshot taken
	// before it waited on the usage rows).
	// It counts the usage rows it rewrote (those it zeroes included).
	recount = move{name: "UsageRecount", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		locked, err := q.UsageLockTenants(ctx, c, []string{f.TenantCode})
		if err != nil {
			return 0, err
		}
		_, err = q.UsageRecount(ctx, c, []string{f.TenantCode})
		return len(locked), err
	}}
	takeOverCompletion = move{name: "FileTakeOverCompletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileTakeOverCompletion(ctx, c, db.FileTakeOverCompletionParams{ID: f.ID, TenantCode: f.TenantCode, ETag: ptr(`"v1"`), ExpiredLease: *f.CompletionLeaseUntil, CompletionLease: completionLease, Now: at(completionLease + time.Second)})
		return one(err)
	}}
	extendCompletion = move{name: "FileExtendCompletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileExtendCompletion(ctx, c, db.FileExtendCompletionParams{ID: f.ID, Lease: *f.CompletionLeaseUntil, CompletionLease: completionLease, Now: at(time.Second)})
		return one(err)
	}}
	finalizeCompletion = move{name: "FileFinalizeCompletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileFinalizeCompletion(ctx, c, db.FileFinalizeCompletionParams{ID: f.ID, Lease: *f.CompletionLeaseUntil, FinalETag: ptr(`"v2"`), ClockSkew: clockSkew, Now: at(time.Second)})
		return one(err)
	}}
	failCompletion = move{name: "FileFailCompletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileFailCompletion(ctx, c, db.FileFailCompletionParams{ID: f.ID, Lease: *f.CompletionLeaseUntil, Rule: "checksum-mismatch", DeletionLease: deletionLease, Now: at(time.Second)})
		return one(err)
	}}
	releaseCompletion = move{name: "FileReleaseCompletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileReleaseCompletion(ctx, c, db.FileReleaseCompletionParams{ID: f.ID, Lease: *f.CompletionLeaseUntil, Now: at(time.Second)})
		return one(err)
	}}
	extendWrite = move{name: "FileExtendResumableWrite", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileExtendResumableWrite(ctx, c, db.FileExtendResumableWriteParams{ID: f.ID, Claim: *f.ResumableLeaseUntil, Lease: 3 * time.Second, Now: at(time.Second)})
		return one(err)
	}}
	releaseWrite = move{name: "FileReleaseResumableWrite", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileReleaseResumableWrite(ctx, c, db.FileReleaseResumableWriteParams{ID: f.ID, Claim: *f.ResumableLeaseUntil})
		return one(err)
	}}
	advanceWrite = move{name: "FileAdvanceResumable", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileAdvanceResumable(ctx, c, db.FileAdvanceResumableParams{ID: f.ID, Claim: *f.ResumableLeaseUntil, AtOffset: 0, NewOffset: 100, Size: 100, Now: at(time.Second)})
		return one(err)
	}}
	claimResumableCompletion = move{name: "FileClaimResumableCompletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileClaimResumableCompletion(ctx, c, db.FileClaimResumableCompletionParams{ID: f.ID, Claim: *f.ResumableLeaseUntil, Checksum: "sha256:abc", ETag: ptr(`"v1"`), CompletionLease: completionLease, Now: at(time.Second)})
		return one(err)
	}}
	extendActivation = move{name: "FileExtendActivation", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileExtendActivation(ctx, c, db.FileExtendActivationParams{ID: f.ID, UploadMarker: *f.UploadPendingAt, ActivationLease: activationLease, Now: at(time.Second)})
		return one(err)
	}}
	activate = move{name: "FileActivateUpload", run: func(ctx context.Context, _ *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := activateUpload(ctx, c, db.FileActivateUploadParams{ID: f.ID, UploadMarker: *f.UploadPendingAt, Checksum: ptr("sha256:x"), Now: at(time.Second)})
		return one(err)
	}}
	settleFailed = move{name: "FileSettleFailedUpload", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileSettleFailedUpload(ctx, c, db.FileSettleFailedUploadParams{ID: f.ID, UploadMarker: *f.UploadPendingAt, DeletionLease: deletionLease, Now: at(time.Second)})
		return one(err)
	}}
	markUsedByIDs = move{name: "FileMarkUsedByIDs", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		return many(q.FileMarkUsedByIDs(ctx, c, db.FileMarkUsedByIDsParams{IDs: []uuid.UUID{f.ID}, TenantCode: f.TenantCode, Module: ptr("crm"), Entity: ptr("deal"), EntityID: ptr("7"), Now: at(time.Second)}))
	}}
	markUsedByRefs = move{name: "FileMarkUsedByReferences", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		return many(q.FileMarkUsedByReferences(ctx, c, db.FileMarkUsedByReferencesParams{Refs: []string{f.Key}, TenantCode: f.TenantCode, Module: ptr("crm"), Entity: ptr("deal"), EntityID: ptr("8"), Now: at(time.Second)}))
	}}
	mergeExtra = move{name: "FileMergeExtraData", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileMergeExtraData(ctx, c, db.FileMergeExtraDataParams{ID: f.ID, TenantCode: f.TenantCode, Patch: json.RawMessage(`{"b":2}`), MaxBytes: maxExtraData, Now: at(time.Second)})
		return one(err)
	}}
	claimDeletion = move{name: "FileClaimDeletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileClaimDeletion(ctx, c, db.FileClaimDeletionParams{ID: f.ID, TenantCode: f.TenantCode, DeletionLease: deletionLease, Now: at(time.Second)})
		return one(err)
	}}
	claimDeletionByRefs = move{name: "FileClaimDeletionByReferences", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		return many(q.FileClaimDeletionByReferences(ctx, c, db.FileClaimDeletionByReferencesParams{Refs: []string{f.Key}, TenantCode: f.TenantCode, DeletionLease: deletionLease, Now: at(time.Second)}))
	}}
	unusedBefore = move{name: "FileClaimUnusedBefore", skips: true, run: func(ctx context.Context, q *db.Queries, c db.DBTX, _ db.UploadedFile) (int, error) {
		return many(q.FileClaimUnusedBefore(ctx, c, db.FileClaimUnusedBeforeParams{Cutoff: t0.Add(time.Hour), Max: 10, DeletionLease: deletionLease, Now: at(2 * time.Hour)}))
	}}
	quarantine = move{name: "FileQuarantine", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileQuarantine(ctx, c, db.FileQuarantineParams{ID: f.ID, Now: at(time.Second)})
		return one(err)
	}}
	unquarantine = move{name: "FileUnquarantine", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileUnquarantine(ctx, c, db.FileUnquarantineParams{ID: f.ID, Now: at(2 * time.Second)})
		return one(err)
	}}
	expiredTemporary = move{name: "FileClaimExpiredTemporary", skips: true, run: func(ctx context.Context, q *db.Queries, c db.DBTX, _ db.UploadedFile) (int, error) {
		return many(q.FileClaimExpiredTemporary(ctx, c, db.FileClaimExpiredTemporaryParams{Max: 10, DeletionLease: deletionLease, Now: at(25 * time.Hour)}))
	}}
	releaseDeletion = move{name: "FileReleaseDeletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileReleaseDeletion(ctx, c, db.FileReleaseDeletionParams{ID: f.ID, Claim: *f.DeletionPendingAt, Backoff: retryBackoff, Now: at(2 * time.Second)})
		return one(err)
	}}
	settleDeletion = move{name: "FileSettleDeletion", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileSettleDeletion(ctx, c, db.FileSettleDeletionParams{ID: f.ID, Claim: *f.DeletionPendingAt, UploadMarker: f.UploadPendingAt, Now: at(2 * time.Second)})
		return one(err)
	}}
	deletionElapsed = move{name: "DeletionClaimElapsed", skips: true, run: func(ctx context.Context, q *db.Queries, c db.DBTX, _ db.UploadedFile) (int, error) {
		return many(q.DeletionClaimElapsed(ctx, c, db.DeletionClaimElapsedParams{Max: 10, DeletionLease: deletionLease, Now: at(deletionLease + time.Hour)}))
	}}
	rescheduleTombstone = move{name: "FileRescheduleTombstone", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileRescheduleTombstone(ctx, c, db.FileRescheduleTombstoneParams{ID: f.ID, Claim: *f.DeletionPendingAt, UploadMarker: *f.UploadPendingAt, Backoff: retryBackoff, Now: at(48*time.Hour + time.Second)})
		return one(err)
	}}
	restoreForCleanup = move{name: "FileRestoreUploadForCleanup", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileRestoreUploadForCleanup(ctx, c, db.FileRestoreUploadForCleanupParams{ID: f.ID, UploadMarker: f.UploadPendingAt, DeletionMarker: f.DeletionPendingAt, DeletedMarker: f.DeletedAt, DeletionLease: deletionLease, Now: at(72 * time.Hour)})
		return one(err)
	}}
	forgetKey = move{name: "FileForgetIdempotencyKey", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		n, err := q.FileForgetIdempotencyKey(ctx, c, db.FileForgetIdempotencyKeyParams{ID: f.ID, IdempotencyKey: "key-1", Retention: 24 * time.Hour, Now: at(48*time.Hour + 2*time.Second)})
		return int(n), err
	}}
	retireTombstone = move{name: "FileRetireTombstone", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileRetireTombstone(ctx, c, db.FileRetireTombstoneParams{ID: f.ID, Now: at(72 * time.Hour)})
		return one(err)
	}}
	stagingClaim = move{name: "StagingClaimCompleted", skips: true, run: func(ctx context.Context, q *db.Queries, c db.DBTX, _ db.UploadedFile) (int, error) {
		return many(q.StagingClaimCompleted(ctx, c, db.StagingClaimCompletedParams{Max: 10, StagingLease: deletionLease, Now: at(48 * time.Hour)}))
	}}
	stagingSettle = move{name: "StagingSettle", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.StagingSettle(ctx, c, db.StagingSettleParams{ID: f.ID, Claim: *f.StagingCleanupAt, PendingKey: *f.PendingKey, Now: at(48*time.Hour + time.Second)})
		return one(err)
	}}
	stagingRelease = move{name: "StagingRelease", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.StagingRelease(ctx, c, db.StagingReleaseParams{ID: f.ID, Claim: *f.StagingCleanupAt, Backoff: retryBackoff, Now: at(48*time.Hour + time.Second)})
		return one(err)
	}}
	variantClaim = move{name: "VariantClaim", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.VariantClaim(ctx, c, db.VariantClaimParams{ID: uuid.New(), FileID: f.ID, Preset: "thumb", Key: "variants/" + f.ID.String() + "/thumb", ContentType: "image/webp", Lease: time.Minute, Now: at(time.Second)})
		return one(err)
	}}
	variantFinish = move{name: "VariantFinish", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		v, ok, err := variantOf(ctx, c, f.ID)
		if !ok {
			return 0, err
		}
		_, err = q.VariantFinish(ctx, c, db.VariantFinishParams{ID: v.ID, FileID: f.ID, Claim: *v.LeaseUntil, SizeBytes: 7, Width: 4, Height: 4, Now: at(2 * time.Second)})
		return one(err)
	}}
	variantSettle = move{name: "VariantSettle", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		v, ok, err := variantOf(ctx, c, f.ID)
		if !ok {
			return 0, err
		}
		_, err = q.VariantSettle(ctx, c, db.VariantSettleParams{ID: v.ID, Claim: *v.LeaseUntil})
		return one(err)
	}}
)

// claimWrite claims a resumable upload's write lease at offset 0, after
// the fixture's lease when it held one.
func claimWrite(after time.Duration) move {
	return move{name: "FileClaimResumableWrite", run: func(ctx context.Context, q *db.Queries, c db.DBTX, f db.UploadedFile) (int, error) {
		_, err := q.FileClaimResumableWrite(ctx, c, db.FileClaimResumableWriteParams{ID: f.ID, TenantCode: f.TenantCode, AtOffset: 0, Lease: 3 * time.Second, Now: at(after)})
		return one(err)
	}}
}

// abandonedTombstones claims a buffer upload whose writer never came back.
var abandonedTombstones = claimTombstones(48 * time.Hour)

// claimTombstones claims abandoned uploads and tombstones due at t0 + after.
func claimTombstones(after time.Duration) move {
	return move{name: "DeletionClaimExpiredTombstones", skips: true, run: func(ctx context.Context, q *db.Queries, c db.DBTX, _ db.UploadedFile) (int, error) {
		return many(q.DeletionClaimExpiredTombstones(ctx, c, db.DeletionClaimExpiredTombstonesParams{Max: 10, PassLimit: 5, DeletionLease: deletionLease, Now: at(after)}))
	}}
}
