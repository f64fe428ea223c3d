package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

func TestFileInsertHidden(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.hidden(t, fileOpts{})
	require.Equal(t, "pending", h.Status)
	require.Equal(t, t0.Add(activationLease), h.UploadPendingAt.UTC(), "a future 15-minute activation lease")
	require.Nil(t, h.DeletionPendingAt)
	require.Nil(t, h.DeletedAt)
	require.Nil(t, h.UploadExpiresAt, "not a direct upload")
	require.JSONEq(t, `{"a":1}`, string(h.ExtraData))

	// key and cdn are unique.
	_, err := insertHidden(b.ctx, b.pool, db.FileInsertHiddenParams{
		ID: h.ID, TenantCode: "acme", UserID: "u", Key: "other", OriginalName: "x", ContentType: "text/plain",
		Visibility: "private", Disposition: "attachment", ExtraData: []byte(`{}`), ActivationLease: activationLease,
	})
	require.ErrorContains(t, err, "uploaded_file_pkey")
	for _, c := range []struct {
		name       string
		key, cdn   string
		constraint string
	}{
		{"duplicate key", h.Key, "fresh-cdn", "uploaded_file_key_unique"},
		{"duplicate cdn", "fresh-key", *h.CDN, "uploaded_file_cdn_unique"},
	} {
		dup := b.hiddenParams(t)
		dup.Key, dup.CDN = c.key, ptr(c.cdn)
		_, err := insertHidden(b.ctx, b.pool, dup)
		require.ErrorContains(t, err, c.constraint, c.name)
	}
}

func TestFileInsertHiddenConstraints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		name       string
		mutate     func(p *db.FileInsertHiddenParams)
		constraint string
	}{
		{"visibility outside the enum", func(p *db.FileInsertHiddenParams) { p.Visibility = "secret" }, "uploaded_file_visibility_check"},
		{"disposition outside the enum", func(p *db.FileInsertHiddenParams) { p.Disposition = "download" }, "uploaded_file_disposition_check"},
		{"public temporary file", func(p *db.FileInsertHiddenParams) { p.IsTemporary, p.Visibility = true, "public" }, "uploaded_file_temporary_private_check"},
		{"empty tenant", func(p *db.FileInsertHiddenParams) { p.TenantCode = "" }, "uploaded_file_tenant_code_check"},
		{"negative size", func(p *db.FileInsertHiddenParams) { p.SizeBytes = -1 }, "uploaded_file_usage_bytes_check"}, // the reservation refuses it first
		{"extra data not an object", func(p *db.FileInsertHiddenParams) { p.ExtraData = []byte(`[1]`) }, "uploaded_file_extra_data_object_check"},
	} {
		p := b.hiddenParams(t)
		c.mutate(&p)
		_, err := insertHidden(b.ctx, b.pool, p)
		require.ErrorContains(t, err, c.constraint, c.name)
	}
}

func TestFileActivateUpload(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("exact marker activates", func(t *testing.T) {
		h := b.hidden(t, fileOpts{})
		row, err := activateUpload(b.ctx, b.pool, db.FileActivateUploadParams{
			ID: h.ID, UploadMarker: *h.UploadPendingAt, Checksum: ptr("sha256:s"), ETag: ptr(`"e"`), Now: at(time.Minute),
		})
		require.NoError(t, err)
		require.Equal(t, "ready", row.Status)
		require.Nil(t, row.UploadPendingAt)
		require.EqualValues(t, 42, row.SizeBytes, "the size inserted and reserved")
		require.Equal(t, t0.Add(time.Minute), row.CompletedAt.UTC())
		require.Nil(t, row.ExpiredAt, "permanent file")
	})
	t.Run("temporary file expires 24 elapsed hours after activation", func(t *testing.T) {
		h := b.hidden(t, fileOpts{Temporary: true})
		row, err := activateUpload(b.ctx, b.pool, db.FileActivateUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, t0.Add(time.Minute+24*time.Hour), row.ExpiredAt.UTC())
	})
	t.Run("wrong marker matches nothing", func(t *testing.T) {
		h := b.hidden(t, fileOpts{})
		_, err := activateUpload(b.ctx, b.pool, db.FileActivateUploadParams{ID: h.ID, UploadMarker: h.UploadPendingAt.Add(time.Microsecond), Now: at(0)})
		requireNoRows(t, err)
		require.Equal(t, "pending", b.get(t, h.ID).Status)
	})
	t.Run("late activation after settled cleanup matches nothing", func(t *testing.T) {
		h := b.hidden(t, fileOpts{})
		_, err := b.q.FileSettleFailedUpload(b.ctx, b.pool, db.FileSettleFailedUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, DeletionLease: deletionLease, Now: at(0)})
		require.NoError(t, err)
		_, err = activateUpload(b.ctx, b.pool, db.FileActivateUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, Now: at(time.Second)})
		requireNoRows(t, err, "metadata cannot come back after the cleanup claimed it")
		got := b.get(t, h.ID)
		require.Equal(t, "pending", got.Status)
		require.NotNil(t, got.DeletionPendingAt)
	})
	t.Run("soft-deleted tombstone cannot be activated", func(t *testing.T) {
		h := b.hidden(t, fileOpts{})
		b.exec(t, "UPDATE uploaded_file SET deleted_at = $2, deletion_pending_at = $3 WHERE id = $1", h.ID, t0, t0.Add(time.Minute))
		_, err := activateUpload(b.ctx, b.pool, db.FileActivateUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, Now: at(0)})
		requireNoRows(t, err)
	})
	t.Run("activation is not repeatable", func(t *testing.T) {
		h := b.hidden(t, fileOpts{})
		p := db.FileActivateUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, Now: at(0)}
		_, err := activateUpload(b.ctx, b.pool, p)
		require.NoError(t, err)
		_, err = activateUpload(b.ctx, b.pool, p)
		requireNoRows(t, err)
	})
	t.Run("activation keeps the reservation and locks no usage row", func(t *testing.T) {
		h := b.hidden(t, fileOpts{})
		var held [2]int64
		require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT sum(bytes), sum(files) FROM uploaded_file_usage WHERE tenant_code = $1", h.TenantCode).Scan(&held[0], &held[1]))
		require.Positive(t, held[0], "the insert reserved the row's size")
		// Another transaction holds the tenant's usage rows, as a
		// reservation or a release does until its commit.
		lock, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { _ = lock.Rollback(b.ctx) }()
		_, err = lock.Exec(b.ctx, "SELECT 1 FROM uploaded_file_usage WHERE tenant_code = $1 FOR UPDATE", h.TenantCode)
		require.NoError(t, err)
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(b.ctx) }()
		_, err = tx.Exec(b.ctx, "SET LOCAL lock_timeout = '2s'")
		require.NoError(t, err)
		row, err := activateUpload(b.ctx, tx, db.FileActivateUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, Now: at(0)})
		require.NoError(t, err, "the activation waited on a usage row")
		require.NoError(t, tx.Commit(b.ctx))
		require.NoError(t, lock.Rollback(b.ctx))
		require.Equal(t, h.SizeBytes, row.SizeBytes)
		var after [2]int64
		require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT sum(bytes), sum(files) FROM uploaded_file_usage WHERE tenant_code = $1", h.TenantCode).Scan(&after[0], &after[1]))
		require.Equal(t, held, after, "the space reserved at the insert is kept as it was")
	})
}

func TestFileSettleFailedUpload(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("clears the exact marker and claims deletion", func(t *testing.T) {
		h := b.hidden(t, fileOpts{})
		row, err := b.q.FileSettleFailedUpload(b.ctx, b.pool, db.FileSettleFailedUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, DeletionLease: deletionLease, Now: at(time.Second)})
		require.NoError(t, err)
		require.Nil(t, row.UploadPendingAt)
		require.Equal(t, t0.Add(time.Second+deletionLease), row.DeletionPendingAt.UTC(), "a future deletion claim before any storage I/O")
		require.Nil(t, row.DeletedAt)
	})
	t.Run("after the activation committed it matches nothing", func(t *testing.T) {
		r := b.ready(t, fileOpts{})
		h := b.get(t, r.ID)
		require.Nil(t, h.UploadPendingAt)
		_, err := b.q.FileSettleFailedUpload(b.ctx, b.pool, db.FileSettleFailedUploadParams{ID: r.ID, UploadMarker: t0.Add(activationLease), DeletionLease: deletionLease, Now: at(time.Second)})
		requireNoRows(t, err, "an activation whose response was lost must not be cleaned up")
		state, err := b.q.FileGetUploadState(b.ctx, b.pool, db.FileGetUploadStateParams{ID: r.ID, Now: at(time.Second)})
		require.NoError(t, err)
		require.Equal(t, "ready", state.Status, "the writer confirms the row is active")
		require.Nil(t, state.UploadPendingAt)
		require.Nil(t, state.DeletionPendingAt)
	})
}

func TestFileRestoreUploadForCleanup(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Maintenance reached the expired upload while its writer was slow: it
	// claimed, deleted (nothing yet) and rescheduled a tombstone.
	h := b.hidden(t, fileOpts{})
	claimed, err := b.q.DeletionClaimExpiredTombstones(b.ctx, b.pool, db.DeletionClaimExpiredTombstonesParams{Max: 10, PassLimit: 10, DeletionLease: deletionLease, Now: at(activationLease)})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	tomb, err := b.q.FileRescheduleTombstone(b.ctx, b.pool, db.FileRescheduleTombstoneParams{
		ID: h.ID, Claim: *claimed[0].DeletionPendingAt, UploadMarker: *h.UploadPendingAt, Backoff: retryBackoff, Now: at(activationLease + time.Second),
	})
	require.NoError(t, err)
	require.NotNil(t, tomb.DeletedAt)

	// The writer finishes, its activation fails, it reads the exact state.
	_, err = activateUpload(b.ctx, b.pool, db.FileActivateUploadParams{ID: h.ID, UploadMarker: *h.UploadPendingAt, Now: at(activationLease + 2*time.Second)})
	requireNoRows(t, err)
	state, err := b.q.FileGetUploadState(b.ctx, b.pool, db.FileGetUploadStateParams{ID: h.ID})
	require.NoError(t, err)

	stale := db.FileRestoreUploadForCleanupParams{
		ID: h.ID, UploadMarker: state.UploadPendingAt, DeletionMarker: ptr(state.DeletionPendingAt.Add(-time.Second)), DeletedMarker: state.DeletedAt,
		DeletionLease: deletionLease, Now: at(activationLease + 3*time.Second),
	}
	_, err = b.q.FileRestoreUploadForCleanup(b.ctx, b.pool, stale)
	requireNoRows(t, err, "a stale deletion marker refuses the restore")

	exact := stale
	exact.DeletionMarker = state.DeletionPendingAt
	row, err := b.q.FileRestoreUploadForCleanup(b.ctx, b.pool, exact)
	require.NoError(t, err)
	require.Nil(t, row.DeletedAt, "restored from soft delete")
	require.Nil(t, row.UploadPendingAt, "the writer writes no more")
	require.Equal(t, t0.Add(activationLease+3*time.Second+deletionLease), row.DeletionPendingAt.UTC(), "its own durable claim")

	_, err = b.q.FileRestoreUploadForCleanup(b.ctx, b.pool, exact)
	requireNoRows(t, err, "the state it restored from no longer holds")

	// The maintenance worker's claim was taken over: its settle skips.
	_, err = b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: h.ID, Claim: *state.DeletionPendingAt, UploadMarker: state.UploadPendingAt, Now: at(activationLease + 4*time.Second)})
	requireNoRows(t, err)

	// The writer deletes its object and settles with its own claim.
	done, err := b.q.FileSettleDeletion(b.ctx, b.pool, db.FileSettleDeletionParams{ID: h.ID, Claim: *row.DeletionPendingAt, Now: at(activationLease + 5*time.Second)})
	require.NoError(t, err)
	require.NotNil(t, done.DeletedAt)
	require.Nil(t, done.DeletionPendingAt)
	require.Nil(t, done.UploadPendingAt)
}

// hiddenParams returns valid insert parameters with fresh unique values.
func (b *bundle) hiddenParams(t *testing.T) db.FileInsertHiddenParams {
	t.Helper()
	h := b.hidden(t, fileOpts{}) // proves the params are valid as built
	b.exec(t, "DELETE FROM uploaded_file WHERE id = $1", h.ID)
	return db.FileInsertHiddenParams{
		ID: h.ID, TenantCode: h.TenantCode, DepartmentCode: h.DepartmentCode, UserID: h.UserID, Key: h.Key, CDN: h.CDN,
		OriginalName: h.OriginalName, ContentType: h.ContentType, Visibility: h.Visibility, Disposition: h.Disposition,
		ExtraData: h.ExtraData, ActivationLease: activationLease, Now: at(0),
	}
}
