package service_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

func TestBufferUploads(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			ctx := alice

			legacy, err := b.svc.UploadLegacy(ctx, strings.NewReader(pdf), "../Q1 report.pdf",
				&service.Meta{Module: "crm", Entity: "invoice", EntityID: "42", Type: "scan"}, map[string]any{"pages": 1}, nil)
			require.NoError(t, err)
			require.Equal(t, "Q1 report.pdf", legacy.OriginalName, "the name is sanitized")
			require.Equal(t, "application/pdf", legacy.ContentType)
			require.EqualValues(t, len(pdf), legacy.SizeBytes)
			require.Equal(t, service.StatusReady, legacy.Status)
			require.Equal(t, service.Private, legacy.Visibility, "private by default")
			require.NotEmpty(t, legacy.Key)
			require.NotNil(t, legacy.CDN)
			require.Equal(t, "invoice", *legacy.Entity)
			require.JSONEq(t, `{"pages":1}`, string(legacy.ExtraData))
			require.Equal(t, pdf, b.readObject(legacy.Key))
			require.Contains(t, legacy.Key, legacy.ID.String(), "the key holds a server-generated UUID")
			require.NotContains(t, legacy.Key, "Q1", "the caller's name is not part of the key")

			managed, err := b.svc.Upload(ctx, strings.NewReader(pdf), "report.pdf", nil)
			require.NoError(t, err)
			require.NotEmpty(t, managed.URL)
			require.NotEqual(t, legacy.Key, managed.Key)

			tmp, err := b.svc.UploadTemporaryLegacy(ctx, strings.NewReader("a,b\n1,2\n"), "rows.csv", nil)
			require.NoError(t, err)
			require.NotEmpty(t, tmp.Key)
			require.NotEmpty(t, tmp.CDN)

			tm, err := b.svc.UploadTemporary(ctx, strings.NewReader("notes"), "notes.txt", nil)
			require.NoError(t, err)
			require.True(t, tm.IsTemporary)
			require.Equal(t, service.Private, tm.Visibility)
			require.Equal(t, tm.CompletedAt.Add(24*time.Hour), *tm.ExpiredAt, "expires 24 hours after completion")
			require.NotNil(t, tm.URLExpiredAt)
			require.False(t, tm.URLExpiredAt.After(*tm.ExpiredAt), "the URL never outlives the file")
			require.Equal(t, 4, b.store.Calls(storagefault.OpPut))
			if driver == service.DriverLocal {
				require.Equal(t, 4, b.store.Calls(storagefault.OpSpool), "local uploads are spooled in the store and linked, not copied")
			} else {
				require.Zero(t, b.store.Calls(storagefault.OpSpool), "S3 has no spool of its own: the upload is spooled to a temporary file and put")
			}
			b.checkInvariants()
		})
	}
}

func TestInvalidUploadChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, func(c *service.Config) { c.MaxFileSizeBytes = 1024 })
	for _, c := range []struct {
		name, body string
		opts       *service.UploadOptions
		rule       string
	}{
		{"shell.exe", "MZ", nil, "type.unknown-extension"},
		{"report.pdf", "", nil, "size.empty"},
		{"report.pdf", strings.Repeat("x", 1025), nil, "size.too-large"},
		{"report.pdf", "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 64), nil, "content.other-type"},
		{"report.pdf", pdf, &service.UploadOptions{AllowedMIMETypes: []string{"image/png"}}, "type.not-allowed"},
		{"report.pdf", pdf, &service.UploadOptions{MaxFileSizeBytes: 10}, "size.too-large"},
		{"report.pdf", pdf, &service.UploadOptions{ContentType: "image/png"}, "type.declared-mismatch"},
	} {
		_, err := b.svc.Upload(alice, strings.NewReader(c.body), c.name, c.opts)
		require.ErrorIs(t, err, service.ErrInvalidUpload, c.rule)
		require.Equal(t, c.rule, service.Rule(err))
		require.Equal(t, c.rule == "size.too-large", service.SizeOnly(err))
	}
	_, err := b.svc.Upload(alice, strings.NewReader(pdf), "report.pdf", &service.UploadOptions{Disposition: "download"})
	require.ErrorIs(t, err, service.ErrInvalidMeta)
	_, err = b.svc.UploadLegacy(alice, strings.NewReader(pdf), "report.pdf", &service.Meta{Entity: strings.Repeat("e", 256)}, nil, nil)
	require.ErrorIs(t, err, service.ErrInvalidMeta)
	_, err = b.svc.UploadLegacy(alice, strings.NewReader(pdf), "report.pdf", nil, []int{1}, nil)
	require.ErrorIs(t, err, service.ErrInvalidMeta, "extra data must be an object")
	require.Zero(t, b.rowCount(), "refused uploads write no row")
	require.Empty(t, b.objects(), "and no object")
}

func TestVisibility(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	_, err := b.svc.Upload(alice, strings.NewReader(pdf), "report.pdf", &service.UploadOptions{Visibility: service.Public})
	require.ErrorIs(t, err, service.ErrPublicUploadDisabled)
	_, err = b.svc.UploadTemporaryLegacy(alice, strings.NewReader(pdf), "report.pdf", &service.UploadOptions{Visibility: service.Private})
	require.ErrorIs(t, err, service.ErrInvalidMeta, "a temporary upload takes no visibility")
	require.Zero(t, b.rowCount())

	pub := setup(t, service.DriverS3, func(c *service.Config) { c.AllowPublicUploads = true; c.CDNBaseURL = "https://cdn.example.test/" })
	r := pub.upload(alice, func(o *service.UploadOptions) { o.Visibility = service.Public })
	require.Equal(t, service.Public, r.Visibility)
	require.Equal(t, "https://cdn.example.test/"+r.Key, r.URL, "a stable URL on cdnBaseUrl")
	require.Nil(t, r.URLExpiredAt)
	tmp, err := pub.svc.UploadTemporary(alice, strings.NewReader(pdf), "report.pdf", nil)
	require.NoError(t, err)
	require.Equal(t, service.Private, tmp.Visibility, "temporary files are always private")

	legacyPublic := setup(t, service.DriverLocal, func(c *service.Config) { c.PublicFiles = ptr(true) })
	lr := legacyPublic.upload(alice)
	require.Equal(t, service.Public, lr.Visibility, "publicFiles makes permanent uploads public by default")
	lt, err := legacyPublic.svc.UploadTemporary(alice, strings.NewReader(pdf), "report.pdf", nil)
	require.NoError(t, err)
	require.Equal(t, service.Private, lt.Visibility, "but never temporary ones")
}

func ptr[T any](v T) *T { return &v }

// Rule 1: the row exists, hidden, with a short activation lease, while
// the bytes are written.
func TestRule1HiddenRowWhileWriting(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	release := make(chan struct{})
	b.store.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.Delay, Release: release})
	done := make(chan error, 1)
	go func() { _, err := b.svc.Upload(alice, strings.NewReader(pdf), "report.pdf", nil); done <- err }()

	var row db.UploadedFile
	require.Eventually(t, func() bool {
		var id string
		if b.db.Pool.QueryRow(context.Background(), "SELECT id FROM uploaded_file").Scan(&id) != nil {
			return false
		}
		row = b.row(uuidOf(t, id))
		return true
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "pending", row.Status)
	require.Equal(t, b.clock.Now().Add(service.ActivationLease), row.UploadPendingAt.UTC())
	require.Nil(t, row.DeletionPendingAt)
	_, err := b.svc.Find(alice, row.ID.String())
	requireNotFound(t, err, "invisible while in flight")

	close(release)
	require.NoError(t, <-done)
	r, err := b.svc.Find(alice, row.ID.String())
	require.NoError(t, err, "visible once activated")
	require.Equal(t, service.StatusReady, r.Status)
}

// Rules 2-3: the write fails -> the settled cleanup claims deletion (marker
// cleared) before any storage I/O; a late activation then matches nothing.
func TestRule3WriteFailsSettledCleanup(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			// The write lands but its response is lost; then the cleanup's
			// storage delete fails too: the claim must already be durable.
			b.store.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.After, Nth: 1})
			b.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1})
			_, err := b.svc.Upload(alice, strings.NewReader(pdf), "report.pdf", nil)
			require.ErrorIs(t, err, service.ErrUploadFailed)

			var id string
			require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT id FROM uploaded_file").Scan(&id))
			row := b.row(uuidOf(t, id))
			require.Nil(t, row.UploadPendingAt, "the exact upload marker was cleared")
			require.NotNil(t, row.DeletionPendingAt, "a deletion claim exists")
			require.Equal(t, b.clock.Now().Add(time.Minute), row.DeletionPendingAt.UTC(), "released to a retry one minute ahead (rule 6)")
			require.True(t, b.hasObject(row.Key), "the failed delete left the object for the sweep")

			_, err = service.ActivateUpload(context.Background(), b.db.Pool, db.FileActivateUploadParams{
				ID: row.ID, UploadMarker: b.clock.Now().Add(service.ActivationLease), Now: ptr(b.clock.Now()),
			})
			require.ErrorContains(t, err, "no rows", "a late activation cannot bring the metadata back")

			n, err := b.svc.UnsafeSystemRetryPendingDeletions(context.Background(), 0)
			require.NoError(t, err)
			require.Zero(t, n, "not before the retry marker")
			b.clock.Advance(time.Minute)
			n, err = b.svc.UnsafeSystemRetryPendingDeletions(context.Background(), 0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.False(t, b.hasObject(row.Key))
			done := b.row(row.ID)
			require.NotNil(t, done.DeletedAt)
			require.Nil(t, done.DeletionPendingAt, "a settled deletion clears its claim")
			b.checkInvariants()
		})
	}
}

// Rule 4: the activation committed but its response was lost: the writer
// confirms the active row and does not clean up.
func TestRule4LostActivationResponse(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	b.db.loseNext.Store("FileActivateUpload")
	r, err := b.svc.Upload(alice, strings.NewReader(pdf), "report.pdf", nil)
	require.NoError(t, err, "the upload succeeded")
	require.Equal(t, service.StatusReady, r.Status)
	require.True(t, b.hasObject(r.Key), "its object was not cleaned up")
	_, err = b.svc.Find(alice, r.ID.String())
	require.NoError(t, err)
	require.Zero(t, b.store.Calls(storagefault.OpDelete))
}

// Rule 5: maintenance reached the expired upload while the writer was still
// writing; the writer finishes, finds its row soft-deleted, restores it to
// hidden pending with its own claim, deletes its object and settles.
func TestRule5SlowWriterAfterMaintenance(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			release := make(chan struct{})
			b.store.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.Delay, Release: release, Nth: 1})
			done := make(chan error, 1)
			go func() { _, err := b.svc.Upload(alice, strings.NewReader(pdf), "report.pdf", nil); done <- err }()
			require.Eventually(t, func() bool { return b.store.Calls(storagefault.OpPut) == 1 }, 10*time.Second, 5*time.Millisecond)

			b.clock.Advance(16 * time.Minute) // the activation lease expired
			n, err := b.svc.UnsafeSystemRetryPendingDeletions(context.Background(), 0)
			require.NoError(t, err)
			require.Equal(t, 1, n, "maintenance claimed the tombstone, deleted and rescheduled it")
			var id string
			require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT id FROM uploaded_file").Scan(&id))
			tomb := b.row(uuidOf(t, id))
			require.NotNil(t, tomb.DeletedAt, "soft-deleted")
			require.NotNil(t, tomb.UploadPendingAt, "the upload tombstone is kept")
			require.NotNil(t, tomb.DeletionPendingAt, "with a future deletion claim")

			close(release) // the slow write lands now
			require.ErrorIs(t, <-done, service.ErrUploadFailed)
			final := b.row(tomb.ID)
			require.Nil(t, final.UploadPendingAt, "the writer resolved its tombstone")
			require.Nil(t, final.DeletionPendingAt)
			require.NotNil(t, final.DeletedAt)
			require.False(t, b.hasObject(final.Key), "the late object was deleted")
			b.checkInvariants()
		})
	}
}

// Rules 8-10: a writer that never comes back leaves an expired upload; the
// sweep turns it into a tombstone (restore, delete, reschedule) each time,
// and an operator retires it once producers are drained.
func TestRules8To10TombstoneSweepAndRetire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A writer that died after writing its object, before activation: its
	// hidden row and its object, written directly.
	crashed := setup(t, service.DriverLocal)
	row, err := service.InsertHidden(ctx, crashed.db.Pool, db.FileInsertHiddenParams{
		ID: uuidOf(t, "0b5ee4a2-0f5a-4c4e-8f0a-2d6c1b7e9a10"), TenantCode: "acme", UserID: "alice", Key: "core/t-mfrwg2i/0b5ee4a2-0f5a-4c4e-8f0a-2d6c1b7e9a10.pdf",
		OriginalName: "report.pdf", ContentType: "application/pdf", Visibility: "private", Disposition: "attachment",
		ExtraData: json.RawMessage(`{}`), ActivationLease: service.ActivationLease, Now: ptr(crashed.clock.Now()),
	})
	require.NoError(t, err)
	_, err = crashed.inner.Put(ctx, row.Key, strings.NewReader(pdf), putOpts(len(pdf)))
	require.NoError(t, err)

	n, err := crashed.svc.UnsafeSystemRetryPendingDeletions(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n, "the activation lease is still live")
	ok, err := crashed.svc.UnsafeSystemRetireUploadTombstone(ctx, row.ID)
	require.NoError(t, err)
	require.False(t, ok, "retire refuses a live upload lease")

	crashed.clock.Advance(service.ActivationLease)
	n, err = crashed.svc.UnsafeSystemRetryPendingDeletions(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	tomb := crashed.row(row.ID)
	require.False(t, crashed.hasObject(row.Key), "deleted")
	require.NotNil(t, tomb.DeletedAt)
	require.Equal(t, *row.UploadPendingAt, *tomb.UploadPendingAt, "tombstone kept")
	require.Equal(t, crashed.clock.Now().Add(time.Minute), tomb.DeletionPendingAt.UTC(), "rescheduled")

	// The writer was only slow after all: its object lands late.
	_, err = crashed.inner.Put(ctx, row.Key, strings.NewReader(pdf), putOpts(len(pdf)))
	require.NoError(t, err)
	ok, err = crashed.svc.UnsafeSystemRetireUploadTombstone(ctx, row.ID)
	require.NoError(t, err)
	require.False(t, ok, "retire refuses a live deletion lease")

	crashed.clock.Advance(time.Minute)
	n, err = crashed.svc.UnsafeSystemRetryPendingDeletions(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the next sweep restores, deletes and reschedules again")
	require.False(t, crashed.hasObject(row.Key), "the late object is gone too")

	crashed.clock.Advance(time.Minute)
	ok, err = crashed.svc.UnsafeSystemRetireUploadTombstone(ctx, row.ID)
	require.NoError(t, err)
	require.True(t, ok, "producers drained: the operator retires the tombstone")
	n, err = crashed.svc.UnsafeSystemRetryPendingDeletions(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	final := crashed.row(row.ID)
	require.Nil(t, final.UploadPendingAt)
	require.Nil(t, final.DeletionPendingAt, "settled for good")
	require.NotNil(t, final.DeletedAt)
	n, err = crashed.svc.UnsafeSystemRetryPendingDeletions(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n)
	crashed.checkInvariants()
}

func putOpts(n int) storage.PutOptions {
	return storage.PutOptions{ContentType: "application/pdf", Size: int64(n)}
}

// TestUploadStreamsFromAReader: a source that is only an io.Reader (no
// length, no seeking) is stored intact, hashed while it was read.
func TestUploadStreamsFromAReader(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("line of text ✓\n", 200_000) // ~3.4 MB
	want := sha256.Sum256([]byte(body))
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			r, err := b.svc.Upload(alice, io.MultiReader(strings.NewReader(body[:100]), strings.NewReader(body[100:])), "big.txt", nil)
			require.NoError(t, err)
			require.EqualValues(t, len(body), r.SizeBytes)
			require.Equal(t, body, b.readObject(r.Key))
			require.Equal(t, "sha256:"+base64.StdEncoding.EncodeToString(want[:]), *r.Checksum)
		})
	}
}

// Rule 8: the retry sweep handles settled deletion claims first and gives
// only the capacity left to expired upload tombstones.
func TestRule8SettledClaimsBeforeTombstones(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	ctx := context.Background()
	// An expired buffer upload (its writer died) ...
	dead, err := service.InsertHidden(ctx, b.db.Pool, db.FileInsertHiddenParams{
		ID: uuidOf(t, "1f0e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"), TenantCode: "acme", UserID: "alice", Key: "core/t-x/1f0e2d3c-4b5a-4978-8695-a4b3c2d1e0f9.pdf",
		OriginalName: "r.pdf", ContentType: "application/pdf", Visibility: "private", Disposition: "attachment",
		ExtraData: json.RawMessage(`{}`), ActivationLease: 15 * time.Minute, Now: ptr(b.clock.Now().Add(-time.Hour)),
	})
	require.NoError(t, err)
	// ... and a deletion whose storage call failed (released to a retry).
	f := b.upload(alice)
	b.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1})
	require.NoError(t, b.svc.DeleteByID(alice, f.ID.String()))
	b.clock.Advance(time.Minute)

	n, err := b.svc.UnsafeSystemRetryPendingDeletions(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Nil(t, b.row(f.ID).DeletionPendingAt, "the settled claim went first")
	require.Nil(t, b.row(dead.ID).DeletedAt, "the tombstone waits for capacity")

	n, err = b.svc.UnsafeSystemRetryPendingDeletions(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NotNil(t, b.row(dead.ID).DeletedAt, "then the tombstone")
}
