package service_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

func TestMarkUsedOwnTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	f1, f2 := b.upload(alice), b.upload(alice)
	before := b.db.begins.Load()
	require.NoError(t, b.svc.MarkUsed(alice, []string{f1.ID.String(), f2.ID.String()}, &service.Meta{Module: "crm", Entity: "invoice", EntityID: "7"}, nil))
	require.EqualValues(t, 1, b.db.begins.Load()-before, "exactly one library-owned transaction")
	require.NotNil(t, b.row(f1.ID).UsedAt)
	require.Equal(t, "invoice", *b.row(f2.ID).Entity)

	other := b.upload(as("acme", "bob"))
	err := b.svc.MarkUsed(alice, []string{f1.ID.String(), other.ID.String()}, &service.Meta{Entity: "order"}, nil)
	requireNotFound(t, err, "one id out of scope refuses the batch")
	require.Equal(t, "invoice", *b.row(f1.ID).Entity, "and nothing is marked")
	require.Nil(t, b.row(other.ID).UsedAt)
}

func TestMarkUsedCallerTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	f := b.upload(alice)
	ctx := context.Background()

	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	before := b.db.begins.Load()
	require.NoError(t, b.svc.MarkUsed(alice, []string{f.ID.String()}, &service.Meta{Entity: "invoice"}, tx))
	require.Equal(t, before, b.db.begins.Load(), "no transaction of its own")
	var inTx bool
	require.NoError(t, tx.QueryRow(ctx, "SELECT used_at IS NOT NULL FROM uploaded_file WHERE id = $1", f.ID).Scan(&inTx))
	require.True(t, inTx, "marked inside the caller's transaction")
	require.Nil(t, b.row(f.ID).UsedAt, "not visible outside it before commit")
	require.NoError(t, tx.Rollback(ctx))
	require.Nil(t, b.row(f.ID).UsedAt, "the caller's rollback leaves nothing marked")

	tx, err = b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, b.svc.MarkUsed(alice, []string{f.ID.String()}, nil, tx))
	require.NoError(t, tx.Commit(ctx))
	require.NotNil(t, b.row(f.ID).UsedAt)
}

func TestUseAndChangeFiles(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			old1, old2, keep, fresh := b.upload(alice), b.upload(alice), b.upload(alice), b.upload(alice)
			require.NoError(t, b.svc.UseFiles(alice, []string{old1.Key, *old2.CDN, keep.Key}, "invoice", "42"))
			require.Equal(t, "42", *b.row(old2.ID).EntityID)

			require.NoError(t, b.svc.ChangeFiles(alice, []string{old1.Key, old2.Key, keep.Key}, []string{keep.Key, fresh.Key}, "invoice", "42"))
			for _, gone := range []*service.Result{old1, old2} {
				_, err := b.svc.Find(alice, gone.ID.String())
				requireNotFound(t, err, "the old files are deleted")
				require.False(t, b.hasObject(gone.Key))
			}
			_, err := b.svc.Find(alice, keep.ID.String())
			require.NoError(t, err, "a file on both sides is kept")
			require.Equal(t, "42", *b.row(fresh.ID).EntityID, "the new files are marked")

			err = b.svc.ChangeFiles(alice, []string{keep.Key}, []string{"core/unknown"}, "invoice", "42")
			requireNotFound(t, err)
			_, err = b.svc.Find(alice, keep.ID.String())
			require.NoError(t, err, "a refused change deletes nothing")
			b.checkInvariants()
		})
	}
}

func TestDownloadAttached(t *testing.T) {
	t.Parallel()
	const entityID = "0190f2a4-7c1e-7a3b-9d2e-4f5a6b7c8d9e" // UUIDv7
	att := service.Attachment{Module: "crm", Entity: "invoice", EntityID: entityID}
	approve := func(v bool) func(*service.Config) {
		return func(c *service.Config) {
			c.AttachedReadPolicy = func(context.Context, service.AttachedReadRequest) (bool, error) { return v, nil }
		}
	}

	none := setup(t, service.DriverLocal)
	f := none.upload(alice)
	require.NoError(t, none.svc.MarkUsed(alice, []string{f.ID.String()}, &service.Meta{Module: "crm", Entity: "invoice", EntityID: entityID}, nil))
	_, err := none.svc.DownloadAttached(alice, f.ID.String(), att)
	requireNotFound(t, err, "no attached-read policy: denied")

	denied := setup(t, service.DriverLocal, approve(false))
	f = denied.upload(alice)
	require.NoError(t, denied.svc.MarkUsed(alice, []string{f.ID.String()}, &service.Meta{Module: "crm", Entity: "invoice", EntityID: entityID}, nil))
	_, err = denied.svc.DownloadAttached(alice, f.ID.String(), att)
	requireNotFound(t, err)

	panics := setup(t, service.DriverLocal, func(c *service.Config) {
		c.AttachedReadPolicy = func(context.Context, service.AttachedReadRequest) (bool, error) { panic("boom") }
	})
	f = panics.upload(alice)
	_, err = panics.svc.DownloadAttached(alice, f.ID.String(), att)
	requireNotFound(t, err, "a panicking policy denies")

	var seen service.AttachedReadRequest
	b := setup(t, service.DriverS3, func(c *service.Config) {
		c.AttachedReadPolicy = func(_ context.Context, r service.AttachedReadRequest) (bool, error) { seen = r; return true, nil }
	})
	f = b.upload(alice)
	require.NoError(t, b.svc.MarkUsed(alice, []string{f.ID.String()}, &service.Meta{Module: "crm", Entity: "invoice", EntityID: entityID}, nil))
	d, err := b.svc.DownloadAttached(as("acme", "carol", "sales"), f.ID.String(), att)
	require.NoError(t, err, "another user of the tenant reads it: the uploader is not part of the lookup")
	body, _ := io.ReadAll(d.Body)
	d.Body.Close()
	require.Equal(t, pdf, string(body))
	require.Equal(t, att, seen.Attachment)
	require.Equal(t, "carol", seen.Context.UserID)

	for name, c := range map[string]struct {
		ctx context.Context
		att service.Attachment
	}{
		"other tenant":     {as("globex", "carol"), att},
		"other department": {as("acme", "carol", "support"), att},
		"other entity id":  {alice, service.Attachment{Module: "crm", Entity: "invoice", EntityID: entityID[:35] + "f"}},
		"other entity":     {alice, service.Attachment{Module: "crm", Entity: "order", EntityID: entityID}},
		"empty attachment": {alice, service.Attachment{}},
	} {
		_, err := b.svc.DownloadAttached(c.ctx, f.ID.String(), c.att)
		requireNotFound(t, err, name)
	}
	unused := b.upload(alice)
	_, err = b.svc.DownloadAttached(alice, unused.ID.String(), att)
	requireNotFound(t, err, "a file not marked used is not attached")
}

func TestDeleteIsDurable(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			f := b.upload(alice)
			require.NoError(t, b.svc.DeleteByID(alice, f.ID.String()))
			require.False(t, b.hasObject(f.Key))
			row := b.row(f.ID)
			require.NotNil(t, row.DeletedAt)
			require.Nil(t, row.DeletionPendingAt)
			requireNotFound(t, b.svc.DeleteByID(alice, f.ID.String()), "already deleted")

			// Storage fails: the claim stays (as a retry marker), the file is
			// gone for readers, and the sweep finishes the deletion.
			g := b.upload(alice)
			b.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1})
			require.NoError(t, b.svc.DeleteByID(alice, g.ID.String()), "the deletion is recorded durably")
			_, err := b.svc.Find(alice, g.ID.String())
			requireNotFound(t, err)
			require.True(t, b.hasObject(g.Key))
			require.NotNil(t, b.row(g.ID).DeletionPendingAt)
			b.checkInvariants()
			b.settle()
			require.False(t, b.hasObject(g.Key))
			require.Nil(t, b.row(g.ID).DeletionPendingAt)

			// Delete by references: whole batch or nothing.
			h1, h2 := b.upload(alice), b.upload(alice)
			requireNotFound(t, b.svc.Delete(alice, []string{h1.Key, "core/not-a-file"}))
			require.True(t, b.hasObject(h1.Key), "nothing deleted")
			require.NoError(t, b.svc.Delete(alice, []string{h1.Key, *h2.CDN}))
			require.False(t, b.hasObject(h1.Key))
			require.False(t, b.hasObject(h2.Key))
			b.checkInvariants()
		})
	}
}

func TestBatchBounds(t *testing.T) {
	t.Parallel()
	calls := 0
	b := setup(t, service.DriverLocal, func(c *service.Config) {
		c.AuthorizationPolicy = func(_ context.Context, r service.AuthorizationRequest) (service.AccessDecision, error) {
			calls++
			return service.DecisionOwner, nil
		}
	})
	ids := make([]string, 101)
	for i := range ids {
		ids[i] = "6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e"
	}
	require.ErrorIs(t, b.svc.MarkUsed(alice, ids, nil, nil), service.ErrInvalidMeta)
	refs := make([]string, 101)
	for i := range refs {
		refs[i] = "core/x"
	}
	require.ErrorIs(t, b.svc.Delete(alice, refs), service.ErrInvalidMeta)
	require.ErrorIs(t, b.svc.UseFiles(alice, []string{strings.Repeat("r", 1025)}, "", ""), service.ErrInvalidMeta)
	require.ErrorIs(t, b.svc.Delete(alice, nil), service.ErrInvalidMeta, "an empty batch")
	require.Zero(t, calls, "bounds are checked before the policy runs")
}
