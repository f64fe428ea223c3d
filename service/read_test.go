package service_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/uploadedfile/uploadedfile/service"
)

type invoiceData struct {
	Pages  int    `json:"pages"`
	Source string `json:"source,omitempty"`
}

func TestReads(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			f, err := b.svc.UploadLegacy(alice, strings.NewReader(pdf), "Résumé.pdf", nil, invoiceData{Pages: 3}, nil)
			require.NoError(t, err)
			id := f.ID.String()

			r, err := b.svc.Find(alice, id)
			require.NoError(t, err)
			require.Equal(t, "Résumé.pdf", r.OriginalName)

			typed, err := service.FindByID[invoiceData](alice, b.svc, id)
			require.NoError(t, err)
			require.Equal(t, invoiceData{Pages: 3}, typed.ExtraData)

			d, err := b.svc.Download(alice, id)
			require.NoError(t, err)
			body, _ := io.ReadAll(d.Body)
			d.Body.Close()
			require.Equal(t, pdf, string(body))
			require.Equal(t, "Résumé.pdf", d.FileName)
			require.Equal(t, "application/pdf", d.ContentType)
			require.EqualValues(t, len(pdf), d.Size)
			if driver == service.DriverLocal {
				_, seekable := d.Body.(io.Seeker)
				require.True(t, seekable, "local downloads can serve ranges")
			}

			u, err := b.svc.ResolveURL(alice, id)
			require.NoError(t, err)
			switch driver {
			case service.DriverLocal:
				require.True(t, strings.HasPrefix(u.URL, "https://files.example.test/uploaded-file/"+id+"/download?expires="), "the granted download route: %s", u.URL)
				require.Contains(t, u.URL, "&grant=")
				require.Equal(t, b.clock.Now().Add(15*time.Minute), u.URLExpiredAt.UTC(), "privateDownloadUrlTtlSeconds")
				p, err := url.Parse(u.URL)
				require.NoError(t, err)
				g, err := b.svc.DownloadGranted(context.Background(), id, "", grantOf(t, p.RawQuery))
				require.NoError(t, err, "no request context: the grant is the authorization")
				got, _ := io.ReadAll(g.Body)
				g.Body.Close()
				require.Equal(t, pdf, string(got))
				require.Equal(t, "Résumé.pdf", g.FileName)
				require.Equal(t, "application/pdf", g.ContentType, "as Download answers it")
				_, err = b.svc.DownloadGranted(context.Background(), id, "thumb", grantOf(t, p.RawQuery))
				require.ErrorIs(t, err, service.ErrDownloadURLInvalid, "bound to its preset")
				b.clock.Advance(15 * time.Minute)
				_, err = b.svc.DownloadGranted(context.Background(), id, "", grantOf(t, p.RawQuery))
				require.ErrorIs(t, err, service.ErrDownloadURLInvalid, "expired")
			case service.DriverS3:
				require.Equal(t, b.clock.Now().Add(15*time.Minute), u.URLExpiredAt.UTC(), "privateDownloadUrlTtlSeconds")
				resp, err := http.Get(u.URL)
				require.NoError(t, err)
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Equal(t, pdf, string(got), "a working presigned GET")
				require.Contains(t, resp.Header.Get("Content-Disposition"), "filename*=UTF-8''R%C3%A9sum%C3%A9.pdf")
				var n int
				require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file WHERE cdn LIKE '%X-Amz%' OR key LIKE '%X-Amz%'").Scan(&n))
				require.Zero(t, n, "the signed URL is never persisted")
			}

			c := b.svc.GetContent("photo.JPG")
			require.Equal(t, "image/jpeg", c.ContentType)
		})
	}
}

func TestDownloadPathMovesURLs(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, func(c *service.Config) { c.DownloadPath = "/files/v1/" })
	r := b.upload(alice)
	require.True(t, strings.HasPrefix(r.URL, "https://files.example.test/files/v1/"+r.ID.String()+"/download?expires="), r.URL)
	require.Equal(t, "urn:uploadedfile:"+r.ID.String(), *r.CDN, "a private file's persisted reference is not a URL")
}

func TestTemporaryExpiryRefusesReads(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			r, err := b.svc.UploadTemporary(alice, strings.NewReader(pdf), "report.pdf", nil)
			require.NoError(t, err)
			id := r.ID.String()

			b.clock.Advance(24*time.Hour - 5*time.Minute)
			u, err := b.svc.ResolveURL(alice, id)
			require.NoError(t, err)
			require.Equal(t, *r.ExpiredAt, *u.URLExpiredAt, "the signed URL is clamped to expiredAt")

			b.clock.Advance(5 * time.Minute) // exactly expiredAt
			_, err = b.svc.Find(alice, id)
			require.ErrorIs(t, err, service.ErrExpired)
			_, err = b.svc.ResolveURL(alice, id)
			require.ErrorIs(t, err, service.ErrExpired)
			_, err = b.svc.Download(alice, id)
			require.ErrorIs(t, err, service.ErrExpired)
			_, err = service.FindByID[map[string]any](alice, b.svc, id)
			require.ErrorIs(t, err, service.ErrExpired)
			require.True(t, b.hasObject(r.Key), "refusal is independent of cleanup: the bytes are still stored")

			n, err := b.svc.CleanupExpiredTemporaryFiles(context.Background(), nil, 0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			require.False(t, b.hasObject(r.Key))
			_, err = b.svc.Find(alice, id)
			requireNotFound(t, err)
		})
	}
}

func TestSetExtraData(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	f, err := b.svc.UploadLegacy(alice, strings.NewReader(pdf), "report.pdf", nil, invoiceData{Pages: 3}, nil)
	require.NoError(t, err)
	id := f.ID.String()
	require.NoError(t, service.SetExtraData(alice, b.svc, id, map[string]any{"source": "scanner"}))
	got, err := service.FindByID[invoiceData](alice, b.svc, id)
	require.NoError(t, err)
	require.Equal(t, invoiceData{Pages: 3, Source: "scanner"}, got.ExtraData, "a merge, not a replace")

	require.ErrorIs(t, service.SetExtraData(alice, b.svc, id, []string{"x"}), service.ErrInvalidMeta)
	require.ErrorIs(t, service.SetExtraData(alice, b.svc, id, map[string]any{"big": strings.Repeat("x", 70_000)}), service.ErrInvalidMeta)
	requireNotFound(t, service.SetExtraData(as("globex", "alice"), b.svc, id, map[string]any{"a": 1}))

	// The bound holds for the row, not only for one patch: patches that
	// each fit cannot merge past it, and the refused one changes nothing.
	half := strings.Repeat("x", service.MaxExtraDataBytes/2)
	require.NoError(t, service.SetExtraData(alice, b.svc, id, map[string]any{"first": half}))
	require.ErrorIs(t, service.SetExtraData(alice, b.svc, id, map[string]any{"second": half}), service.ErrExtraDataTooLarge)
	row := b.row(f.ID)
	require.NotContains(t, string(row.ExtraData), `"second"`, "nothing merged")
	require.LessOrEqual(t, len(row.ExtraData), service.MaxExtraDataBytes+16)
	require.NoError(t, service.SetExtraData(alice, b.svc, id, map[string]any{"first": "small"}), "a patch that shrinks it fits")
	requireNotFound(t, service.SetExtraData(as("globex", "alice"), b.svc, id, map[string]any{"second": half}), "out of scope: not found, not too large")
}

// TestDownloadsTakeTheETagTheRowKeeps: on the local driver a download --
// by id or through the detail's granted url -- answers the ETag the file's
// row (or the grant made from it) keeps, the one the store reported when
// it wrote the object, instead of reading the object's checksum attribute
// again; a grant made before grants carried the ETag still reads it.
func TestDownloadsTakeTheETagTheRowKeeps(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	direct, err := b.svc.CompleteUpload(alice, b.written(realDOCX(t)).ID.String())
	require.NoError(t, err)
	for _, f := range []*service.Result{b.upload(alice), direct} {
		id := f.ID.String()
		oi, err := b.inner.Stat(context.Background(), f.Key)
		require.NoError(t, err)
		require.NotEmpty(t, oi.ETag)
		row := b.row(f.ID)
		require.Equal(t, oi.ETag, *row.ETag, "the row keeps the version the store reported")
		u, err := b.svc.ResolveURL(alice, id)
		require.NoError(t, err)
		legacy, err := b.svc.GrantedURLWithoutETag(alice, row)
		require.NoError(t, err)
		etags := func() (byID, granted, legacyGranted string, legacyErr error) {
			byID, err := etagOf(b.svc.Download(alice, id))
			require.NoError(t, err)
			granted, err = etagOf(b.svc.DownloadGranted(alice, id, "", queryOf(t, u.URL)))
			require.NoError(t, err)
			legacyGranted, legacyErr = etagOf(b.svc.DownloadGranted(alice, id, "", queryOf(t, legacy)))
			return byID, granted, legacyGranted, legacyErr
		}
		byID, granted, legacyGranted, err := etags()
		require.NoError(t, err)
		require.Equal(t, []string{oi.ETag, oi.ETag, oi.ETag}, []string{byID, granted, legacyGranted})

		// Without the attribute only the legacy grant, which has no ETag
		// of its own, finds the object unreadable.
		require.NoError(t, unix.Removexattr(filepath.Join(b.root, f.Key), "user.uploadedfile.sha256"))
		byID, granted, _, err = etags()
		require.Equal(t, []string{oi.ETag, oi.ETag}, []string{byID, granted}, "neither reads the attribute")
		requireNotFound(t, err, "a legacy grant reads the attribute")
	}
}

// etagOf is the ETag of an opened download, which it closes.
func etagOf(d *service.Download, err error) (string, error) {
	if err != nil {
		return "", err
	}
	d.Body.Close()
	return d.ETag, nil
}

// queryOf is the grant the url u carries.
func queryOf(t *testing.T, u string) service.DownloadGrant {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	return grantOf(t, p.RawQuery)
}

// grantOf is the grant a URL's raw query carries; it must carry one.
func grantOf(t *testing.T, rawQuery string) service.DownloadGrant {
	t.Helper()
	g, ok := service.GrantOf(rawQuery)
	require.True(t, ok, "a granted url's query: %s", rawQuery)
	return g
}
