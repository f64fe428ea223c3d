package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

func TestFileInsertPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.pending(t, fileOpts{})
	require.Equal(t, "pending", p.Status)
	require.NotEqual(t, p.Key, *p.PendingKey, "a private staging key distinct from the final key")
	require.EqualValues(t, 1234, p.SizeBytes)
	require.Equal(t, t0.Add(uploadTTL), p.UploadExpiresAt.UTC())
	require.Equal(t, t0.Add(cleanupLease), p.UploadPendingAt.UTC(), "in-flight cleanup lease")
	require.Nil(t, p.CompletionLeaseUntil)

	// The cleanup lease may never end before the upload target does.
	params := db.FileInsertPendingParams{
		ID: p.ID, TenantCode: "acme", UserID: "u", Key: "k2", PendingKey: ptr("s2"), OriginalName: "a.txt", ContentType: "text/plain",
		Visibility: "private", Disposition: "attachment", Checksum: ptr("sha256:x"), UploadTTL: uploadTTL, CleanupLease: uploadTTL - time.Second,
	}
	params.ID[0] ^= 0xff
	_, err := b.q.FileInsertPending(b.ctx, b.pool, params)
	require.ErrorContains(t, err, "uploaded_file_cleanup_after_upload_check")

	// The staging key can never be the final key.
	params.CleanupLease, params.PendingKey = cleanupLease, ptr("k2")
	_, err = b.q.FileInsertPending(b.ctx, b.pool, params)
	require.ErrorContains(t, err, "uploaded_file_pending_key_distinct_check")
}

func TestFileClaimCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	claim := func(f db.UploadedFile, tenant string, now time.Duration) (db.UploadedFile, error) {
		return b.q.FileClaimCompletion(b.ctx, b.pool, db.FileClaimCompletionParams{
			ID: f.ID, TenantCode: tenant, ETag: ptr(`"v1"`), CompletionLease: completionLease, Now: at(now),
		})
	}

	t.Run("pending -> completing with a lease", func(t *testing.T) {
		p := b.pending(t, fileOpts{})
		row, err := claim(p, "acme", time.Minute)
		require.NoError(t, err)
		require.Equal(t, "completing", row.Status)
		require.Equal(t, t0.Add(time.Minute+completionLease), row.CompletionLeaseUntil.UTC())
		require.Equal(t, `"v1"`, *row.ETag, "the verified staging version is recorded")
		require.Equal(t, t0.Add(cleanupLease), row.UploadPendingAt.UTC(), "cleanup lease already past the completion lease")
	})
	t.Run("cleanup lease is pushed past the completion lease", func(t *testing.T) {
		p := b.pending(t, fileOpts{})
		b.exec(t, "UPDATE uploaded_file SET upload_pending_at = upload_expires_at WHERE id = $1", p.ID)
		row, err := claim(p, "acme", uploadTTL-time.Second)
		require.NoError(t, err)
		require.Equal(t, t0.Add(uploadTTL-time.Second+completionLease), row.UploadPendingAt.UTC())
	})
	t.Run("refused once the upload expired", func(t *testing.T) {
		p := b.pending(t, fileOpts{})
		_, err := claim(p, "acme", uploadTTL)
		requireNoRows(t, err)
		require.Equal(t, "pending", b.get(t, p.ID).Status)
	})
	t.Run("refused for another tenant", func(t *testing.T) {
		p := b.pending(t, fileOpts{})
		_, err := claim(p, "globex", 0)
		requireNoRows(t, err)
	})
	t.Run("refused when already completing", func(t *testing.T) {
		c := b.completing(t, fileOpts{})
		_, err := claim(c, "acme", time.Second)
		requireNoRows(t, err)
		_, err = claim(c, "acme", time.Hour) // even after the lease expired: that is a takeover
		requireNoRows(t, err)
	})
	t.Run("refused after abort", func(t *testing.T) {
		p := b.pending(t, fileOpts{})
		_, err := b.q.FileClaimAbort(b.ctx, b.pool, db.FileClaimAbortParams{ID: p.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
		require.NoError(t, err)
		_, err = claim(p, "acme", time.Second)
		requireNoRows(t, err)
	})
	t.Run("refused for a buffer upload", func(t *testing.T) {
		h := b.hidden(t, fileOpts{})
		_, err := claim(h, "acme", 0)
		requireNoRows(t, err)
	})
}

func TestFileTakeOverCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.completing(t, fileOpts{})
	lease := *c.CompletionLeaseUntil
	take := func(expired time.Time, now time.Duration) (db.UploadedFile, error) {
		return b.q.FileTakeOverCompletion(b.ctx, b.pool, db.FileTakeOverCompletionParams{
			ID: c.ID, TenantCode: "acme", ETag: ptr(`"v2"`), ExpiredLease: expired, CompletionLease: completionLease, Now: at(now),
		})
	}
	_, err := take(lease, completionLease-time.Microsecond)
	requireNoRows(t, err, "a live lease cannot be taken over")
	_, err = take(lease.Add(-time.Second), completionLease+time.Second)
	requireNoRows(t, err, "a lease that is not the one read")

	row, err := take(lease, completionLease+time.Second)
	require.NoError(t, err)
	require.Equal(t, "completing", row.Status)
	require.Equal(t, t0.Add(2*completionLease+time.Second), row.CompletionLeaseUntil.UTC())
	require.Equal(t, `"v2"`, *row.ETag)

	_, err = take(lease, completionLease+2*time.Second)
	requireNoRows(t, err, "a second recoverer loses to the first")

	// The first holder lost its lease: it can neither finalize nor fail.
	_, err = b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{ID: c.ID, Lease: lease, Now: at(completionLease + 3*time.Second)})
	requireNoRows(t, err)
	_, err = b.q.FileFailCompletion(b.ctx, b.pool, db.FileFailCompletionParams{ID: c.ID, Lease: lease, DeletionLease: deletionLease, Now: at(completionLease + 3*time.Second)})
	requireNoRows(t, err)
}

func TestFileFinalizeCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("local: staging key cleared", func(t *testing.T) {
		c := b.completing(t, fileOpts{})
		row, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{
			ID: c.ID, Lease: *c.CompletionLeaseUntil, FinalETag: ptr(`"final"`), RetainStaging: false, Now: at(time.Minute),
		})
		require.NoError(t, err)
		require.Equal(t, "ready", row.Status)
		require.Nil(t, row.PendingKey)
		require.Nil(t, row.StagingCleanupAt)
		require.Nil(t, row.UploadPendingAt)
		require.Nil(t, row.CompletionLeaseUntil)
		require.Nil(t, row.ExpiredAt)
		require.Equal(t, t0.Add(time.Minute), row.CompletedAt.UTC())
		require.Equal(t, `"final"`, *row.ETag)

		got, err := b.q.FileGetVisible(b.ctx, b.pool, db.FileGetVisibleParams{ID: c.ID, TenantCode: "acme", Now: at(time.Minute)})
		require.NoError(t, err, "a finalized upload is visible")
		require.Equal(t, c.ID, got.UploadedFile.ID)
	})
	t.Run("s3: staging retained for the staging sweep", func(t *testing.T) {
		c := b.completing(t, fileOpts{})
		row, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{
			ID: c.ID, Lease: *c.CompletionLeaseUntil, RetainStaging: true, ClockSkew: clockSkew, Now: at(time.Minute),
		})
		require.NoError(t, err)
		require.Equal(t, *c.PendingKey, *row.PendingKey)
		require.Equal(t, t0.Add(uploadTTL+clockSkew), row.StagingCleanupAt.UTC(), "not before the upload target can no longer land")
	})
	t.Run("s3: finalized after the target expired, staging due at once", func(t *testing.T) {
		c := b.completing(t, fileOpts{})
		late := uploadTTL + clockSkew + time.Minute
		row, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{
			ID: c.ID, Lease: *c.CompletionLeaseUntil, RetainStaging: true, ClockSkew: clockSkew, Now: at(late),
		})
		require.NoError(t, err)
		require.Equal(t, t0.Add(late), row.StagingCleanupAt.UTC())
	})
	t.Run("temporary: expires completed_at + 24 h", func(t *testing.T) {
		c := b.completing(t, fileOpts{Temporary: true})
		row, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{ID: c.ID, Lease: *c.CompletionLeaseUntil, Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, row.CompletedAt.Add(24*time.Hour), *row.ExpiredAt)
	})
	t.Run("a pending row cannot be finalized", func(t *testing.T) {
		p := b.pending(t, fileOpts{})
		_, err := b.q.FileFinalizeCompletion(b.ctx, b.pool, db.FileFinalizeCompletionParams{ID: p.ID, Lease: t0, Now: at(0)})
		requireNoRows(t, err)
	})
}

func TestFileFailCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.completing(t, fileOpts{})
	row, err := b.q.FileFailCompletion(b.ctx, b.pool, db.FileFailCompletionParams{ID: c.ID, Lease: *c.CompletionLeaseUntil, DeletionLease: deletionLease, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, "failed", row.Status)
	require.Nil(t, row.CompletionLeaseUntil)
	require.Equal(t, t0.Add(time.Minute+deletionLease), row.DeletionPendingAt.UTC(), "failed durably with its cleanup claimed")
	require.Equal(t, *c.UploadPendingAt, *row.UploadPendingAt, "a tombstone until the upload window closes")

	_, err = b.q.FileFailCompletion(b.ctx, b.pool, db.FileFailCompletionParams{ID: c.ID, Lease: *c.CompletionLeaseUntil, DeletionLease: deletionLease, Now: at(time.Minute)})
	requireNoRows(t, err)
}
