package db_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
)

// scope is what the service passes to every scoped query: the tenant always,
// the department when the scope has one, the owner for the 'owner' decision.
type scope struct {
	Tenant     string
	Department *string
	Owner      *string
}

// scopeCases is every way a scope can match or miss alice's file.
var scopeCases = []struct {
	name  string
	scope scope
	want  bool
}{
	{"owner decision, no department in scope", scope{"acme", nil, ptr("alice")}, true},
	{"owner decision, same department", scope{"acme", ptr("sales"), ptr("alice")}, true},
	{"tenant decision, no department", scope{"acme", nil, nil}, true},
	{"tenant decision, same department", scope{"acme", ptr("sales"), nil}, true},
	{"other owner under owner decision", scope{"acme", nil, ptr("bob")}, false},
	{"other department", scope{"acme", ptr("support"), ptr("alice")}, false},
	{"other department, tenant decision", scope{"acme", ptr("support"), nil}, false},
	{"other tenant, same owner id", scope{"globex", nil, ptr("alice")}, false},
	{"other tenant, tenant decision", scope{"globex", nil, nil}, false},
	{"tenant differs only by case", scope{"ACME", nil, nil}, false},
}

// scopedQuery runs one scoped query against file f inside a transaction that
// is rolled back, and reports whether it matched f.
type scopedQuery struct {
	name string
	// fixture builds the row the query is meant to act on.
	fixture func(b *bundle, t *testing.T) db.UploadedFile
	run     func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error
}

func scopedQueries() []scopedQuery {
	ready := func(b *bundle, t *testing.T) db.UploadedFile { return b.ready(t, fileOpts{}) }
	pending := func(b *bundle, t *testing.T) db.UploadedFile { return b.pending(t, fileOpts{}) }
	one := func(n int, err error) error {
		if err != nil {
			return err
		}
		if n != 1 {
			return errNotFound
		}
		return nil
	}
	return []scopedQuery{
		{"FileGetVisible", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileGetVisible(b.ctx, tx, db.FileGetVisibleParams{ID: f.ID, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, Now: at(0)})
			return err
		}},
		{"FileGetDetail", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileGetDetail(b.ctx, tx, db.FileGetDetailParams{ID: f.ID, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, Now: at(0)})
			return err
		}},
		{"FileGetDownload", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileGetDownload(b.ctx, tx, db.FileGetDownloadParams{ID: f.ID, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, Now: at(0)})
			return err
		}},
		{"FileGetVisibleByReference key", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileGetVisibleByReference(b.ctx, tx, db.FileGetVisibleByReferenceParams{Reference: f.Key, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, Now: at(0)})
			return err
		}},
		{"FileGetVisibleByReference cdn", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileGetVisibleByReference(b.ctx, tx, db.FileGetVisibleByReferenceParams{Reference: *f.CDN, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, Now: at(0)})
			return err
		}},
		{"FileGetDirect", pending, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileGetDirect(b.ctx, tx, db.FileGetDirectParams{ID: f.ID, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, Now: at(0)})
			return err
		}},
		{"FileLockVisibleByIDs", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			rows, err := b.q.FileLockVisibleByIDs(b.ctx, tx, db.FileLockVisibleByIDsParams{IDs: []uuid.UUID{f.ID}, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner})
			return one(len(rows), err)
		}},
		{"FileLockVisibleByReferences", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			rows, err := b.q.FileLockVisibleByReferences(b.ctx, tx, db.FileLockVisibleByReferencesParams{Refs: []string{f.Key}, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner})
			return one(len(rows), err)
		}},
		{"FileClaimDeletion", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileClaimDeletion(b.ctx, tx, db.FileClaimDeletionParams{ID: f.ID, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, DeletionLease: deletionLease, Now: at(0)})
			return err
		}},
		{"FileClaimDeletionByReferences", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			rows, err := b.q.FileClaimDeletionByReferences(b.ctx, tx, db.FileClaimDeletionByReferencesParams{Refs: []string{*f.CDN}, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, DeletionLease: deletionLease, Now: at(0)})
			return one(len(rows), err)
		}},
		{"FileClaimAbort", pending, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileClaimAbort(b.ctx, tx, db.FileClaimAbortParams{ID: f.ID, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, DeletionLease: deletionLease, Now: at(0)})
			return err
		}},
		{"FileMarkUsedByIDs", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			ids, err := b.q.FileMarkUsedByIDs(b.ctx, tx, db.FileMarkUsedByIDsParams{IDs: []uuid.UUID{f.ID}, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner, Module: ptr("crm")})
			return one(len(ids), err)
		}},
		{"FileMarkUsedByReferences", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			ids, err := b.q.FileMarkUsedByReferences(b.ctx, tx, db.FileMarkUsedByReferencesParams{Refs: []string{f.Key}, TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner})
			return one(len(ids), err)
		}},
		{"FileMergeExtraData", ready, func(b *bundle, tx pgx.Tx, f db.UploadedFile, s scope) error {
			_, err := b.q.FileMergeExtraData(b.ctx, tx, db.FileMergeExtraDataParams{MaxBytes: maxExtraData, ID: f.ID, Patch: json.RawMessage(`{"b":2}`), TenantCode: s.Tenant, DepartmentCode: s.Department, OwnerUserID: s.Owner})
			return err
		}},
	}
}

// scopeAllows is the predicate every scoped query must implement.
func scopeAllows(f db.UploadedFile, s scope) bool {
	if f.TenantCode != s.Tenant {
		return false
	}
	if s.Department != nil && (f.DepartmentCode == nil || *f.DepartmentCode != *s.Department) {
		return false
	}
	return s.Owner == nil || *s.Owner == f.UserID
}

func TestScopePredicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, q := range scopedQueries() {
		f := q.fixture(b, t)
		for _, c := range scopeCases {
			require.Equal(t, c.want, scopeAllows(f, c.scope), "case table and predicate disagree: %s", c.name)
			err := b.rollbackTx(t, func(tx pgx.Tx) error { return q.run(b, tx, f, c.scope) })
			ok, ferr := found(err)
			require.NoError(t, ferr, "%s / %s", q.name, c.name)
			require.Equal(t, c.want, ok, "%s / %s", q.name, c.name)
		}
	}
}

// TestAttachedLookupIgnoresOwner checks FileGetAttached: tenant and department
// always, the exact attachment, and never the uploader.
func TestAttachedLookupIgnoresOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.ready(t, fileOpts{})
	entityID := "0190f2a4-7c1e-7a3b-9d2e-4f5a6b7c8d9e" // a UUIDv7
	_, err := b.q.FileMarkUsedByIDs(b.ctx, b.pool, db.FileMarkUsedByIDsParams{
		IDs: []uuid.UUID{f.ID}, TenantCode: "acme", Module: ptr("crm"), Entity: ptr("invoice"), EntityID: ptr(entityID), Now: at(0),
	})
	require.NoError(t, err)

	get := func(tenant string, dept *string, module, entity, eid string) bool {
		_, err := b.q.FileGetAttached(b.ctx, b.pool, db.FileGetAttachedParams{
			ID: f.ID, TenantCode: tenant, DepartmentCode: dept, Module: module, Entity: entity, EntityID: eid, Now: at(0),
		})
		ok, ferr := found(err)
		require.NoError(t, ferr)
		return ok
	}
	require.True(t, get("acme", nil, "crm", "invoice", entityID))
	require.True(t, get("acme", ptr("sales"), "crm", "invoice", entityID))
	require.False(t, get("acme", ptr("support"), "crm", "invoice", entityID), "other department")
	require.False(t, get("globex", nil, "crm", "invoice", entityID), "other tenant")
	require.False(t, get("acme", nil, "crm", "invoice", "0190f2a4-7c1e-7a3b-9d2e-4f5a6b7c8d9f"), "other entity id")
	require.False(t, get("acme", nil, "crm", "order", entityID), "other entity")
	require.False(t, get("acme", nil, "hr", "invoice", entityID), "other module")

	unused := b.ready(t, fileOpts{})
	_, err = b.q.FileGetAttached(b.ctx, b.pool, db.FileGetAttachedParams{
		ID: unused.ID, TenantCode: "acme", Module: "crm", Entity: "invoice", EntityID: entityID, Now: at(0),
	})
	requireNoRows(t, err, "a file never marked used is not attached anywhere")
}

// TestVisibleLookupsHideEveryNonActiveState: hidden, in-flight, claimed,
// failed and soft-deleted rows are invisible, exactly like missing ones.
func TestVisibleLookupsHideEveryNonActiveState(t *testing.T) {
	t.Parallel()
	b := setup(t)

	claimed := b.ready(t, fileOpts{})
	_, err := b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: claimed.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)

	deleted := b.ready(t, fileOpts{})
	b.exec(t, "UPDATE uploaded_file SET deleted_at = $2 WHERE id = $1", deleted.ID, t0)

	failed := b.completing(t, fileOpts{})
	_, err = b.q.FileFailCompletion(b.ctx, b.pool, db.FileFailCompletionParams{ID: failed.ID, Lease: *failed.CompletionLeaseUntil, DeletionLease: deletionLease, Now: at(0)})
	require.NoError(t, err)

	states := map[string]db.UploadedFile{
		"hidden buffer upload":   b.hidden(t, fileOpts{}),
		"pending direct upload":  b.pending(t, fileOpts{}),
		"completing upload":      b.completing(t, fileOpts{}),
		"failed upload":          failed,
		"claimed for deletion":   claimed,
		"soft-deleted":           deleted,
		"missing (never stored)": {ID: uuid.New(), Key: "core/acme/none", CDN: ptr("none")},
	}
	for name, f := range states {
		_, err := b.q.FileGetVisible(b.ctx, b.pool, db.FileGetVisibleParams{ID: f.ID, TenantCode: "acme", Now: at(0)})
		requireNoRows(t, err, name)
		_, err = b.q.FileGetVisibleByReference(b.ctx, b.pool, db.FileGetVisibleByReferenceParams{Reference: f.Key, TenantCode: "acme", Now: at(0)})
		requireNoRows(t, err, name)
		rows, err := b.q.FileLockVisibleByIDs(b.ctx, b.pool, db.FileLockVisibleByIDsParams{IDs: []uuid.UUID{f.ID}, TenantCode: "acme"})
		require.NoError(t, err)
		require.Empty(t, rows, name)
		_, err = b.q.FileClaimDeletion(b.ctx, b.pool, db.FileClaimDeletionParams{ID: f.ID, TenantCode: "acme", DeletionLease: deletionLease, Now: at(0)})
		requireNoRows(t, err, name)
		_, err = b.q.FileMergeExtraData(b.ctx, b.pool, db.FileMergeExtraDataParams{MaxBytes: maxExtraData, ID: f.ID, TenantCode: "acme", Patch: json.RawMessage(`{}`)})
		requireNoRows(t, err, name)
	}
}

// TestTemporaryExpiry: a temporary file is expired exactly from completed_at
// + 24 h on, by the database's notion of now; still stored, still found, and
// flagged expired so the service refuses the read.
func TestTemporaryExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := b.ready(t, fileOpts{Temporary: true})
	require.Equal(t, t0.Add(24*time.Hour), f.ExpiredAt.UTC())
	require.Equal(t, t0, f.CompletedAt.UTC())

	for _, c := range []struct {
		now     time.Duration
		expired bool
	}{{0, false}, {24*time.Hour - time.Microsecond, false}, {24 * time.Hour, true}, {25 * time.Hour, true}} {
		row, err := b.q.FileGetVisible(b.ctx, b.pool, db.FileGetVisibleParams{ID: f.ID, TenantCode: "acme", Now: at(c.now)})
		require.NoError(t, err)
		require.Equal(t, c.expired, row.Expired, "at t0+%s", c.now)
		require.Equal(t, t0.Add(c.now), row.DBNow.UTC())
		detail, err := b.q.FileGetDetail(b.ctx, b.pool, db.FileGetDetailParams{ID: f.ID, TenantCode: "acme", Now: at(c.now)})
		require.NoError(t, err)
		require.Equal(t, c.expired, detail.Expired, "detail at t0+%s", c.now)
		require.Equal(t, t0.Add(c.now), detail.DBNow.UTC())
		dl, err := b.q.FileGetDownload(b.ctx, b.pool, db.FileGetDownloadParams{ID: f.ID, TenantCode: "acme", Now: at(c.now)})
		require.NoError(t, err)
		require.Equal(t, c.expired, dl.Expired, "download at t0+%s", c.now)
		require.Equal(t, f.Key, dl.Key)
	}

	permanent := b.ready(t, fileOpts{})
	require.Nil(t, permanent.ExpiredAt)
	row, err := b.q.FileGetVisible(b.ctx, b.pool, db.FileGetVisibleParams{ID: permanent.ID, TenantCode: "acme", Now: at(1000 * time.Hour)})
	require.NoError(t, err)
	require.False(t, row.Expired)

	// Without a pinned time the database clock is used.
	row, err = b.q.FileGetVisible(b.ctx, b.pool, db.FileGetVisibleParams{ID: f.ID, TenantCode: "acme"})
	require.NoError(t, err)
	require.True(t, row.Expired, "t0 is in the past of the database clock")
	require.WithinDuration(t, time.Now(), row.DBNow, time.Minute)
}
