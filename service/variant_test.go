package service_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/webp"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

// presets configures the variant presets the tests use.
func presets(c *service.Config) {
	c.Variants.Presets = map[string]service.VariantPreset{
		"thumb":  {Width: 40, Height: 30, Fit: "cover", Format: "webp"},
		"avatar": {Width: 16, Height: 16, Fit: "inside", Format: "jpeg", Quality: 80},
	}
}

// photo is a 200x100 JPEG carrying EXIF GPS data.
func photo(t testing.TB) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, 200, 100))
	for y := range 100 {
		for x := range 200 {
			m.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	var b bytes.Buffer
	require.NoError(t, jpeg.Encode(&b, m, nil))
	j := b.Bytes()
	exif := []byte("Exif\x00\x00II*\x00\x08\x00\x00\x00\x00\x00GPS-SECRET-48.8584N")
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(exif)+2))
	return append(append(append([]byte{}, j[:2]...), append(seg, exif...)...), j[2:]...)
}

func (b *bundle) uploadImage(ctx context.Context, content []byte, name string, opts *service.UploadOptions) *service.Result {
	b.t.Helper()
	r, err := b.svc.Upload(ctx, bytes.NewReader(content), name, opts)
	require.NoError(b.t, err)
	return r
}

// variantRows reads every variant row.
func (b *bundle) variantRows() []db.UploadedFileVariant {
	b.t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), "SELECT * FROM uploaded_file_variant ORDER BY created_at")
	require.NoError(b.t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[db.UploadedFileVariant])
	require.NoError(b.t, err)
	return out
}

func (b *bundle) eventCount(typ string) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file_event WHERE type = $1", typ).Scan(&n))
	return n
}

func TestVariantGeneratedOnceStoredBesideAndServed(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver, presets)
			f := b.uploadImage(alice, photo(t), "holiday.jpg", nil)
			before := len(b.objects())

			v, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
			require.NoError(t, err)
			require.Equal(t, "image/webp", v.ContentType)
			require.Equal(t, [2]int{40, 30}, [2]int{v.Width, v.Height})
			require.Positive(t, v.SizeBytes)
			require.NotEmpty(t, v.URL)
			require.NotContains(t, v.URL, "GPS")

			rows := b.variantRows()
			require.Len(t, rows, 1)
			require.Equal(t, "ready", rows[0].Status)
			// Beside the original: the same folder and namespace, its own
			// generated name, the preset's extension.
			orig := b.row(f.ID).Key
			require.Equal(t, orig[:strings.LastIndexByte(orig, '/')], rows[0].Key[:strings.LastIndexByte(rows[0].Key, '/')])
			require.True(t, strings.HasSuffix(rows[0].Key, ".webp"))
			require.Len(t, b.objects(), before+1)

			// The bytes: a WebP of the box, without the original's EXIF.
			raw := b.readObject(rows[0].Key)
			require.NotContains(t, raw, "GPS-SECRET")
			m, err := webp.Decode(strings.NewReader(raw))
			require.NoError(t, err)
			require.Equal(t, image.Rect(0, 0, 40, 30), m.Bounds())

			// Served from storage after that: no second object, no new row.
			again, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
			require.NoError(t, err)
			require.Equal(t, v.SizeBytes, again.SizeBytes)
			require.Equal(t, rows, b.variantRows())
			require.Len(t, b.objects(), before+1)
			require.Equal(t, 1, b.eventCount("file.variant-ready"))

			d, err := b.svc.DownloadVariant(alice, f.ID.String(), "thumb")
			require.NoError(t, err)
			body, err := io.ReadAll(d.Body)
			d.Body.Close()
			require.NoError(t, err)
			require.Equal(t, raw, string(body))
			require.Equal(t, "holiday-thumb.webp", d.FileName)
			require.Equal(t, "image/webp", d.ContentType)

			// The variant's bytes count to the owner.
			ub, uf := b.usageOf("acme", "alice")
			require.Equal(t, b.row(f.ID).SizeBytes+v.SizeBytes, ub)
			require.EqualValues(t, 1, uf)
			b.checkInvariants()
		})
	}
}

// The first request for a variant may be its download: generated then,
// served from storage after.
func TestVariantDownloadedFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, presets)
	f := b.uploadImage(alice, photo(t), "holiday.jpg", nil)
	read := func() string {
		d, err := b.svc.DownloadVariant(alice, f.ID.String(), "thumb")
		require.NoError(t, err)
		defer d.Body.Close()
		body, err := io.ReadAll(d.Body)
		require.NoError(t, err)
		require.Equal(t, "holiday-thumb.webp", d.FileName)
		require.Equal(t, "image/webp", d.ContentType)
		return string(body)
	}
	first := read()
	rows := b.variantRows()
	require.Len(t, rows, 1)
	require.Equal(t, "ready", rows[0].Status)
	require.Equal(t, b.readObject(rows[0].Key), first)
	require.Equal(t, first, read())
	require.Equal(t, rows, b.variantRows(), "the second download generated nothing")
	require.Equal(t, 1, b.eventCount("file.variant-ready"))
	b.checkInvariants()
}

func TestVariantConcurrentFirstRequestsGenerateOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, presets)
	f := b.uploadImage(alice, photo(t), "p.jpg", nil)
	replicas := []*service.Service{b.svc, b.another(), b.another()}
	var wg sync.WaitGroup
	sizes := make([]int64, 12)
	for i := range sizes {
		wg.Go(func() {
			v, err := replicas[i%len(replicas)].FindVariant(alice, f.ID.String(), "avatar")
			require.NoError(t, err)
			sizes[i] = v.SizeBytes
		})
	}
	wg.Wait()
	for _, s := range sizes {
		require.Equal(t, sizes[0], s)
	}
	require.Len(t, b.variantRows(), 1)
	require.Equal(t, 1, b.eventCount("file.variant-ready"))
	require.Equal(t, 1, b.store.Calls(storagefault.OpPut)-1, "one variant object written (after the original)")
	b.checkInvariants()
}

func TestVariantLooksLikeAMissingFileOutOfScope(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver, presets)
			img := b.uploadImage(alice, photo(t), "p.jpg", nil)
			doc := b.upload(alice)
			mallory := as("other", "alice", "sales")
			for name, call := range map[string]func() error{
				"another tenant's image": func() error { _, err := b.svc.FindVariant(mallory, img.ID.String(), "thumb"); return err },
				"a non-image":            func() error { _, err := b.svc.FindVariant(alice, doc.ID.String(), "thumb"); return err },
				"a missing id":           func() error { _, err := b.svc.FindVariant(alice, uuid.NewString(), "thumb"); return err },
				"a malformed id":         func() error { _, err := b.svc.FindVariant(alice, "../x", "thumb"); return err },
				"another tenant's bytes": func() error { _, err := b.svc.DownloadVariant(mallory, img.ID.String(), "thumb"); return err },
				"a non-image's bytes":    func() error { _, err := b.svc.DownloadVariant(alice, doc.ID.String(), "thumb"); return err },
				"a missing id's bytes":   func() error { _, err := b.svc.DownloadVariant(alice, uuid.NewString(), "thumb"); return err },
			} {
				err := call()
				require.ErrorIs(t, err, service.ErrNotFound, name)
				require.Equal(t, service.ErrNotFound.Error(), err.Error(), name)
			}
			_, err := b.svc.FindVariant(alice, img.ID.String(), "huge")
			require.ErrorIs(t, err, service.ErrInvalidMeta, "an unknown preset")
			_, err = b.svc.DownloadVariant(alice, img.ID.String(), "huge")
			require.ErrorIs(t, err, service.ErrInvalidMeta, "an unknown preset's bytes")
			require.Empty(t, b.variantRows(), "nothing was generated")
		})
	}
}

func TestVariantPixelBombIsRefusedAndLeavesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, presets, func(c *service.Config) { c.Variants.MaxPixels = 10_000 })
	f := b.uploadImage(alice, photo(t), "big.jpg", nil) // 20,000 pixels
	before := b.objects()
	_, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
	require.ErrorIs(t, err, service.ErrVariantRefused)
	require.Equal(t, service.RuleVariantTooManyPixels, service.Rule(err))
	require.Empty(t, b.variantRows())
	require.Equal(t, before, b.objects())
}

func TestVariantsAreDeletedWithTheFile(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver, presets)
			f := b.uploadImage(alice, photo(t), "p.jpg", nil)
			for _, p := range []string{"thumb", "avatar"} {
				_, err := b.svc.FindVariant(alice, f.ID.String(), p)
				require.NoError(t, err)
			}
			require.Len(t, b.variantRows(), 2)
			// The first variant delete fails: the file's claim is released
			// and the retry sweep finishes both.
			b.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Nth: 1})
			require.NoError(t, b.svc.DeleteByID(alice, f.ID.String()))
			require.NotEmpty(t, b.variantRows())
			b.store.Reset()
			b.settle()
			require.Empty(t, b.variantRows())
			require.Empty(t, b.objects())
			ub, uf := b.usageOf("acme", "alice")
			require.Zero(t, ub)
			require.Zero(t, uf)
			_, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
			requireNotFound(t, err)
		})
	}
}

func TestVariantOfATemporaryFileExpiresWithIt(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, presets)
	r, err := b.svc.UploadTemporary(alice, bytes.NewReader(photo(t)), "tmp.jpg", nil)
	require.NoError(t, err)
	_, err = b.svc.FindVariant(alice, r.ID.String(), "thumb")
	require.NoError(t, err)
	b.clock.Advance(25 * time.Hour)
	_, err = b.svc.CleanupExpiredTemporaryFiles(context.Background(), nil, 100)
	require.NoError(t, err)
	require.Empty(t, b.variantRows())
	require.Empty(t, b.objects())
}

func TestVariantOfAPublicFileIsPublic(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, presets, func(c *service.Config) { c.AllowPublicUploads = true })
	f := b.uploadImage(alice, photo(t), "p.jpg", &service.UploadOptions{Visibility: service.Public})
	_, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
	require.NoError(t, err)
	require.Contains(t, b.variantRows()[0].Key, "/_public/")
}

func TestVariantQuotaCountsAndRefuses(t *testing.T) {
	t.Parallel()
	img := photo(t)
	b := setup(t, service.DriverLocal, presets, quota(service.QuotaConfig{OwnerBytes: int64(len(img)) + 10}))
	f := b.uploadImage(alice, img, "p.jpg", nil)
	_, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
	require.ErrorIs(t, err, service.ErrQuotaExceeded)
	require.Equal(t, service.RuleQuotaOwnerBytes, service.Rule(err))
	require.Empty(t, b.variantRows(), "the refused variant left no row")
	require.Len(t, b.objects(), 1, "nor an object")
	ub, _ := b.usageOf("acme", "alice")
	require.EqualValues(t, len(img), ub)

	// The tenant's limit names the tenant; a limit the variant fits in
	// lets it through and counts it.
	tb := setup(t, service.DriverLocal, presets, quota(service.QuotaConfig{TenantBytes: int64(len(img)) + 10, OwnerFiles: 1}))
	f = tb.uploadImage(alice, img, "p.jpg", nil)
	_, err = tb.svc.FindVariant(alice, f.ID.String(), "thumb")
	require.Equal(t, service.RuleQuotaTenantBytes, service.Rule(err))
	ok := setup(t, service.DriverLocal, presets, quota(service.QuotaConfig{OwnerBytes: int64(len(img)) + 100_000, OwnerFiles: 1}))
	f = ok.uploadImage(alice, img, "p.jpg", nil)
	v, err := ok.svc.FindVariant(alice, f.ID.String(), "thumb")
	require.NoError(t, err, "a variant adds bytes, not a file: the files limit of 1 does not refuse it")
	ub, uf := ok.usageOf("acme", "alice")
	require.Equal(t, int64(len(img))+v.SizeBytes, ub)
	require.EqualValues(t, 1, uf)
}

// A generator that died after writing its object: the row keeps pointing
// at the key until the sweep, after the lease, deletes both; the next
// request generates the variant again.
func TestVariantOfADeadGeneratorIsSwept(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver, presets, func(c *service.Config) { c.Variants.Timeout = 300 * time.Millisecond })
			f := b.uploadImage(alice, photo(t), "p.jpg", nil)
			// A generator's claim and object, then nothing: it was killed.
			orig := b.row(f.ID).Key
			key := orig[:strings.LastIndexByte(orig, '/')] + "/" + uuid.NewString() + ".webp"
			now := b.clock.Now()
			_, err := b.q.VariantClaim(context.Background(), b.db.Pool, db.VariantClaimParams{
				ID: uuid.New(), FileID: f.ID, Preset: "thumb", Key: key, ContentType: "image/webp", Lease: 5 * time.Minute, Now: &now,
			})
			require.NoError(t, err)
			_, err = b.inner.Put(context.Background(), key, strings.NewReader("partial"), storage.PutOptions{Size: 7, ContentType: "image/webp"})
			require.NoError(t, err)
			// Under the lease a request waits for it (and times out).
			_, err = b.svc.FindVariant(alice, f.ID.String(), "thumb")
			require.ErrorIs(t, err, service.ErrVariantFailed)
			b.checkInvariants()
			b.settle()
			require.Empty(t, b.variantRows())
			require.Len(t, b.objects(), 1)
			v, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
			require.NoError(t, err)
			require.Positive(t, v.SizeBytes)
			b.checkInvariants()
		})
	}
}

func TestVariantReconcileKnowsVariantKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, presets)
	f := b.uploadImage(alice, photo(t), "p.jpg", nil)
	_, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
	require.NoError(t, err)
	var findings []service.Finding
	b.clock.Advance(time.Hour)
	counts, err := b.svc.UnsafeSystemReconcile(context.Background(), service.ReconcileOptions{Repair: true}, func(f service.Finding) error {
		findings = append(findings, f)
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, findings)
	require.EqualValues(t, 2, counts.Objects)
	require.Len(t, b.variantRows(), 1)
	require.Len(t, b.objects(), 2, "the repair kept the variant")

	// A ready variant whose object vanished is reported missing.
	require.NoError(t, b.inner.Delete(context.Background(), b.variantRows()[0].Key))
	_, err = b.svc.UnsafeSystemReconcile(context.Background(), service.ReconcileOptions{}, func(f service.Finding) error {
		findings = append(findings, f)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, findings, 1)
	require.Equal(t, service.FindingMissing, findings[0].Kind)
}

func TestVariantRecountIncludesVariantBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, presets)
	f := b.uploadImage(alice, photo(t), "p.jpg", nil)
	_, err := b.svc.FindVariant(alice, f.ID.String(), "thumb")
	require.NoError(t, err)
	kept, _ := b.usageOf("acme", "alice")
	b.exec("UPDATE uploaded_file_usage SET bytes = 0")
	_, err = b.svc.UnsafeSystemRecountUsage(context.Background(), "")
	require.NoError(t, err)
	recounted, _ := b.usageOf("acme", "alice")
	require.Equal(t, kept, recounted)
	tenant, _ := b.usageOf("acme", "")
	require.Equal(t, kept, tenant)
}
