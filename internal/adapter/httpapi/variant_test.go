//lint:file-ignore SA1019 the multipart route is the simplest way to store an image here; the direct lifecycle has its own tests

package httpapi_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

func variantPresets(c *service.Config) {
	c.Variants.Presets = map[string]service.VariantPreset{"thumb": {Width: 32, Height: 24, Fit: "cover", Format: "jpeg"}}
}

func pngImage(t *testing.T, w, h int) []byte {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = uint8(i)
	}
	m.Set(0, 0, color.NRGBA{255, 0, 0, 255})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, m))
	return b.Bytes()
}

// TestVariantsOverHTTP: the detail answers with a URL that serves the
// variant's bytes; another tenant's image, a non-image and a missing id
// answer identical 404s; an unknown preset is 400 invalid-meta; both
// drivers.
func TestVariantsOverHTTP(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			s := start(t, driver, variantPresets)
			ctx := context.Background()
			tok := s.token("acme", "alice", nil)
			alice := s.client(tok)
			ct, body := multipartBody(t, map[string][]byte{"pic.png": pngImage(t, 320, 240)})
			up, err := alice.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, up.StatusCode(), string(up.Body))
			ct, body = multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
			doc, err := alice.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
			require.NoError(t, err)
			id := up.JSON201.Id

			v, err := alice.GetFileVariantWithResponse(ctx, id, "thumb")
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, v.StatusCode(), string(v.Body))
			require.Equal(t, 32, v.JSON200.Width)
			require.Equal(t, 24, v.JSON200.Height)
			require.EqualValues(t, "image/jpeg", v.JSON200.ContentType)
			noStorageRefs(t, s, v.Body, id)

			// The URL serves the variant with no token (presigned on S3,
			// the granted download route on the local driver).
			req, err := http.NewRequest(http.MethodGet, v.JSON200.Url, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
			require.EqualValues(t, v.JSON200.SizeBytes, len(raw))
			m, format, err := image.Decode(bytes.NewReader(raw))
			require.NoError(t, err)
			require.Equal(t, "jpeg", format)
			require.Equal(t, image.Rect(0, 0, 32, 24), m.Bounds())

			dl, err := alice.DownloadFileVariantWithResponse(ctx, id, "thumb", nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, dl.StatusCode())
			require.Equal(t, raw, dl.Body)
			require.Equal(t, "image/jpeg", dl.HTTPResponse.Header.Get("Content-Type"))
			require.Equal(t, "nosniff", dl.HTTPResponse.Header.Get("X-Content-Type-Options"))

			bad, err := alice.GetFileVariantWithResponse(ctx, id, "huge")
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, bad.StatusCode())
			require.Contains(t, string(bad.Body), "core.file.invalid-meta")

			mallory := s.client(s.token("globex", "mallory", nil))
			answers := map[string]*http.Response{}
			bodies := map[string][]byte{}
			for name, call := range map[string]func() (*http.Response, []byte){
				"cross-tenant": func() (*http.Response, []byte) {
					r, err := mallory.GetFileVariantWithResponse(ctx, id, "thumb")
					require.NoError(t, err)
					return r.HTTPResponse, r.Body
				},
				"non-image": func() (*http.Response, []byte) {
					r, err := alice.GetFileVariantWithResponse(ctx, doc.JSON201.Id, "thumb")
					require.NoError(t, err)
					return r.HTTPResponse, r.Body
				},
				"missing": func() (*http.Response, []byte) {
					r, err := alice.GetFileVariantWithResponse(ctx, uuid.MustParse("6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e"), "thumb")
					require.NoError(t, err)
					return r.HTTPResponse, r.Body
				},
				"cross-tenant bytes": func() (*http.Response, []byte) {
					r, err := mallory.DownloadFileVariantWithResponse(ctx, id, "thumb", nil)
					require.NoError(t, err)
					return r.HTTPResponse, r.Body
				},
			} {
				r, b := call()
				require.Equal(t, http.StatusNotFound, r.StatusCode, name)
				h, body := anonymized(t, r.Header, b)
				r.Header = h
				answers[name], bodies[name] = r, []byte(body)
			}
			for name := range answers {
				require.Equal(t, bodies["missing"], bodies[name], name)
				require.Equal(t, answers["missing"].Header, answers[name].Header, name)
			}
		})
	}
}
