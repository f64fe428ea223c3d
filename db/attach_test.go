package db_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

func TestFileMarkUsed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f1, f2 := b.ready(t, fileOpts{}), b.ready(t, fileOpts{})

	marked, err := b.q.FileMarkUsedByIDs(b.ctx, b.pool, db.FileMarkUsedByIDsParams{
		IDs: []uuid.UUID{f1.ID, f2.ID}, TenantCode: "acme", Module: ptr("crm"), Entity: ptr("invoice"), EntityID: ptr("42"), Type: ptr("scan"), Now: at(time.Minute),
	})
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{f1.ID, f2.ID}, marked)
	got := b.get(t, f1.ID)
	require.Equal(t, t0.Add(time.Minute), got.UsedAt.UTC())
	require.Equal(t, "invoice", *got.Entity)

	// Marking again keeps the first used_at; NULL provenance keeps the value.
	_, err = b.q.FileMarkUsedByReferences(b.ctx, b.pool, db.FileMarkUsedByReferencesParams{
		Refs: []string{f1.Key}, TenantCode: "acme", EntityID: ptr("43"), Now: at(time.Hour),
	})
	require.NoError(t, err)
	got = b.get(t, f1.ID)
	require.Equal(t, t0.Add(time.Minute), got.UsedAt.UTC())
	require.Equal(t, "43", *got.EntityID)
	require.Equal(t, "invoice", *got.Entity)
	require.Equal(t, "scan", *got.Type)
}

// TestFileLockThenMarkInOneTransaction: the lock-count-then-mark pattern the
// service uses; a rollback of the caller's transaction leaves nothing marked.
func TestFileLockThenMarkInOneTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.ready(t, fileOpts{})
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	locked, err := b.q.FileLockVisibleByIDs(b.ctx, tx, db.FileLockVisibleByIDsParams{IDs: []uuid.UUID{f.ID, uuid.New()}, TenantCode: "acme"})
	require.NoError(t, err)
	require.Len(t, locked, 1, "one of the two ids is unknown: the service refuses the batch")
	_, err = b.q.FileMarkUsedByIDs(b.ctx, tx, db.FileMarkUsedByIDsParams{IDs: []uuid.UUID{f.ID}, TenantCode: "acme", Now: at(0)})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(b.ctx))
	require.Nil(t, b.get(t, f.ID).UsedAt)

	// The lock really is held: a second transaction cannot claim the row for
	// deletion while the first holds it.
	tx1, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx1.Rollback(b.ctx)
	_, err = b.q.FileLockVisibleByIDs(b.ctx, tx1, db.FileLockVisibleByIDsParams{IDs: []uuid.UUID{f.ID}, TenantCode: "acme"})
	require.NoError(t, err)
	tx2, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx2.Rollback(b.ctx)
	_, err = tx2.Exec(b.ctx, "SET LOCAL lock_timeout = '100ms'")
	require.NoError(t, err)
	_, err = b.q.FileClaimDeletion(b.ctx, tx2, db.FileClaimDeletionParams{ID: f.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
	require.ErrorContains(t, err, "lock timeout")
	require.NotErrorIs(t, err, pgx.ErrNoRows)
}

func TestFileMergeExtraData(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.ready(t, fileOpts{})
	row, err := b.q.FileMergeExtraData(b.ctx, b.pool, db.FileMergeExtraDataParams{MaxBytes: maxExtraData, ID: f.ID, TenantCode: "acme", Patch: []byte(`{"b":{"c":2},"a":3}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"a":3,"b":{"c":2}}`, string(row.ExtraData))
	_, err = b.q.FileMergeExtraData(b.ctx, b.pool, db.FileMergeExtraDataParams{MaxBytes: maxExtraData, ID: f.ID, TenantCode: "acme", Patch: []byte(`[1,2]`)})
	require.ErrorContains(t, err, "uploaded_file_extra_data_object_check", "a patch that is not an object is refused")
	require.JSONEq(t, `{"a":3,"b":{"c":2}}`, string(b.get(t, f.ID).ExtraData), "and changes nothing")

	// The merged object is bounded: a patch that would pass the bound
	// fails with UFX01 and changes nothing.
	_, err = b.q.FileMergeExtraData(b.ctx, b.pool, db.FileMergeExtraDataParams{MaxBytes: 40, ID: f.ID, TenantCode: "acme", Patch: []byte(`{"d":"0123456789012345678901234567890"}`)})
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "UFX01", pe.Code)
	require.JSONEq(t, `{"a":3,"b":{"c":2}}`, string(b.get(t, f.ID).ExtraData), "a refused merge changes nothing")
}
