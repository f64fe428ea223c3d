package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

func TestDeletionClaimReleaseSettle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.ready(t, fileOpts{})

	claimed, err := b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: f.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(time.Minute)})
	require.NoError(t, err)
	claim := *claimed.DeletionPendingAt
	require.Equal(t, t0.Add(time.Minute+deletionLease), claim.UTC())
	require.Nil(t, claimed.DeletedAt, "bytes are deleted after the claim, metadata after the bytes")

	_, err = b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: f.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(time.Minute)})
	requireNoRows(t, err, "a claimed file cannot be claimed again by a user")

	// Storage failed: release to a retry marker one minute ahead.
	_, err = b.q.FileReleaseDeletion(b.ctx, b.pool, db.FileReleaseDeletionParams{ID: f.ID, Claim: claim.Add(time.Second), Backoff: retryBackoff, Now: at(2 * time.Minute)})
	requireNoRows(t, err, "only the exact claim can be released")
	released, err := b.q.FileReleaseDeletion(b.ctx, b.pool, db.FileReleaseDeletionParams{ID: f.ID, Claim: claim, Backoff: retryBackoff, Now: at(2 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, t0.Add(2*time.Minute+retryBackoff), released.DeletionPendingAt.UTC())

	_, err = b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: f.ID, Claim: claim, Now: at(3 * time.Minute)})
	requireNoRows(t, err, "the released claim no longer settles")

	// The retry sweep claims it again once the marker elapsed, then settles.
	rows, err := b.q.DeletionClaimElapsed(b.ctx, b.pool, db.DeletionClaimElapsedParams{Max: 10, DeletionLease: deletionLease, Now: at(2*time.Minute + retryBackoff - time.Microsecond)})
	require.NoError(t, err)
	require.Empty(t, rows, "not before the retry marker")
	rows, err = b.q.DeletionClaimElapsed(b.ctx, b.pool, db.DeletionClaimElapsedParams{Max: 10, DeletionLease: deletionLease, Now: at(2*time.Minute + retryBackoff)})
	require.NoError(t, err)
	require.Len(t, rows, 1)

	settled, err := b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: f.ID, Claim: *rows[0].DeletionPendingAt, Now: at(4 * time.Minute)})
	require.NoError(t, err)
	require.Nil(t, settled.DeletionPendingAt, "a settled deletion clears its claim")
	require.Equal(t, t0.Add(4*time.Minute), settled.DeletedAt.UTC())

	rows, err = b.q.DeletionClaimElapsed(b.ctx, b.pool, db.DeletionClaimElapsedParams{Max: 10, DeletionLease: deletionLease, Now: at(time.Hour)})
	require.NoError(t, err)
	require.Empty(t, rows, "nothing left to retry")
}

func TestFileClaimDeletionByReferences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f1, f2, other := b.ready(t, fileOpts{}), b.ready(t, fileOpts{}), b.ready(t, fileOpts{})
	rows, err := b.q.FileClaimDeletionByReferences(b.ctx, b.pool, db.FileClaimDeletionByReferencesParams{
		Refs: []string{f1.Key, *f2.CDN, "core/acme/unknown"}, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0),
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []any{f1.ID, f2.ID}, []any{rows[0].ID, rows[1].ID})
	require.Nil(t, b.get(t, other.ID).DeletionPendingAt, "an unnamed file is untouched")
}

func TestFileClaimAbort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	abort := func(f db.UploadedFile) (db.UploadedFile, error) {
		return asFile(b.q.FileClaimAbort(b.ctx, b.pool, db.FileClaimAbortParams{ID: f.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(time.Minute)}))
	}

	p := b.pending(t, fileOpts{})
	row, err := abort(p)
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Minute+deletionLease), row.DeletionPendingAt.UTC())
	require.Equal(t, *p.UploadPendingAt, *row.UploadPendingAt, "the upload marker stays while the target is valid")
	_, err = abort(p)
	requireNoRows(t, err, "already aborted")

	other := setup(t) // the sweeps below must see only p
	for name, f := range map[string]db.UploadedFile{
		"a completing upload is not aborted under its completer": other.completing(t, fileOpts{}),
		"a ready file is deleted, not aborted":                   other.ready(t, fileOpts{}),
		"a buffer upload has no direct target to abort":          other.hidden(t, fileOpts{}),
	} {
		_, err = other.q.FileClaimAbort(b.ctx, other.pool, db.FileClaimAbortParams{ID: f.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(time.Minute)})
		requireNoRows(t, err, name)
	}

	// Settled while the target is still valid: rescheduled as a tombstone,
	// not before the upload window closes.
	tomb, err := b.q.FileRescheduleTombstone(b.ctx, b.pool, db.FileRescheduleTombstoneParams{
		ID: p.ID, Claim: *row.DeletionPendingAt, UploadMarker: *row.UploadPendingAt, Backoff: retryBackoff, NotBefore: row.UploadPendingAt, Now: at(2 * time.Minute),
	})
	require.NoError(t, err)
	require.Equal(t, *row.UploadPendingAt, *tomb.DeletionPendingAt)
	require.Equal(t, t0.Add(2*time.Minute), tomb.DeletedAt.UTC())

	// Once the window has closed the tombstone sweep claims it, and it
	// settles for good.
	rows, err := b.q.DeletionClaimExpiredTombstones(b.ctx, b.pool, db.DeletionClaimExpiredTombstonesParams{Max: 10, PassLimit: 10, DeletionLease: deletionLease, Now: at(cleanupLease - time.Second)})
	require.NoError(t, err)
	require.Empty(t, rows)
	rows, err = b.q.DeletionClaimExpiredTombstones(b.ctx, b.pool, db.DeletionClaimExpiredTombstonesParams{Max: 10, PassLimit: 10, DeletionLease: deletionLease, Now: at(cleanupLease)})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Nil(t, rows[0].DeletedAt, "restored to hidden pending while claimed")
	done, err := b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: p.ID, Claim: *rows[0].DeletionPendingAt, UploadMarker: rows[0].UploadPendingAt, Now: at(cleanupLease + time.Second)})
	require.NoError(t, err)
	require.Nil(t, done.UploadPendingAt)
	require.Nil(t, done.DeletionPendingAt)
	require.NotNil(t, done.DeletedAt)
}

func TestFileSettleDeletionNamesTheUploadMarker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.hidden(t, fileOpts{})
	rows, err := b.q.DeletionClaimExpiredTombstones(b.ctx, b.pool, db.DeletionClaimExpiredTombstonesParams{Max: 10, PassLimit: 10, DeletionLease: deletionLease, Now: at(activationLease)})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	_, err = b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: h.ID, Claim: *rows[0].DeletionPendingAt, Now: at(activationLease)})
	requireNoRows(t, err, "a tombstone is not settled as if it had no upload marker")
	_, err = b.q.FileRescheduleTombstone(b.ctx, b.pool, db.FileRescheduleTombstoneParams{ID: h.ID, Claim: *rows[0].DeletionPendingAt, UploadMarker: h.UploadPendingAt.Add(time.Second), Backoff: retryBackoff, Now: at(activationLease)})
	requireNoRows(t, err, "nor rescheduled under another marker")
}
