package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/gen/client"
	"github.com/uploadedfile/uploadedfile/internal/httpapi"
	"github.com/uploadedfile/uploadedfile/service"
)

func preflight(t *testing.T, s *server, origin, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, s.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", http.MethodPost)
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

// TestCORS: an allowed origin's preflight is answered before the guard
// (it carries no token) and its calls expose ETag, Location, Retry-After
// and the request id; another origin gets no CORS headers, and without
// configured origins there is no CORS at all.
func TestCORS(t *testing.T) {
	t.Parallel()
	const app = "https://app.example.test"
	s := startWith(t, service.DriverLocal, func(o *httpapi.Options) { o.CORSAllowedOrigins = []string{app} })

	resp := preflight(t, s, app, "/uploaded-file/initiate")
	require.Less(t, resp.StatusCode, 300, "a preflight is not a 401")
	require.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization")
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), http.MethodPost)

	req, err := http.NewRequest(http.MethodGet, s.url+"/uploaded-file/00000000-0000-4000-8000-000000000000", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", app)
	req.Header.Set("Authorization", "Bearer "+s.token("acme", "alice", nil))
	got, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got.Body.Close()
	require.Equal(t, http.StatusNotFound, got.StatusCode)
	require.Equal(t, app, got.Header.Get("Access-Control-Allow-Origin"))
	exposed := got.Header.Get("Access-Control-Expose-Headers")
	for _, h := range []string{"Etag", "Location", "Retry-After", "X-Request-Id"} {
		require.Contains(t, exposed, h)
	}

	other := preflight(t, s, "https://evil.example.test", "/uploaded-file/initiate")
	require.Empty(t, other.Header.Get("Access-Control-Allow-Origin"), "an origin not allowed gets no CORS")

	closed := start(t, service.DriverLocal)
	none := preflight(t, closed, app, "/uploaded-file/initiate")
	require.Equal(t, http.StatusUnauthorized, none.StatusCode, "no origins configured: no CORS")
	require.Empty(t, none.Header.Get("Access-Control-Allow-Origin"))
}

// problemOf decodes a problem body.
func problemOf(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal(body, &p))
	return p
}

// TestProblemRules: a refused upload says which rule it broke and whether
// retrying can help -- a complete before the bytes is retryable, a
// complete of the wrong bytes is final, a spoofed file names its rule --
// and a not-found says neither.
func TestProblemRules(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	ctx := context.Background()
	token := s.token("acme", "alice", nil)
	c := s.client(token)

	body := docx(t)
	init, err := c.InitiateUploadWithResponse(ctx, initiateBody(body))
	require.NoError(t, err)
	id := init.JSON201.Id.String()
	early, err := c.CompleteUploadWithResponse(ctx, id)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, early.StatusCode())
	p := problemOf(t, early.Body)
	require.Equal(t, "content.missing", p["rule"])
	require.Equal(t, true, p["retryable"], "no bytes yet: send them, then complete again")

	wrong := bytes.Repeat([]byte("x"), len(body))
	spoofed, err := c.InitiateUploadWithResponse(ctx, client.InitiateUploadJSONRequestBody{OriginalName: "Plan.docx", ContentType: docxType, SizeBytes: int64(len(wrong)), Checksum: checksum(wrong)})
	require.NoError(t, err)
	put, err := c.PutUploadContentWithBodyWithResponse(ctx, spoofed.JSON201.Id.String(), "application/octet-stream", bytes.NewReader(wrong))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, put.StatusCode())
	failed, err := c.CompleteUploadWithResponse(ctx, spoofed.JSON201.Id.String())
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, failed.StatusCode())
	p = problemOf(t, failed.Body)
	require.Equal(t, "core.file.upload-verification-failed", p["code"])
	require.NotEmpty(t, p["rule"])
	require.Equal(t, false, p["retryable"], "the upload failed: final")

	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 64)...)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("file", "photo.jpg")
	require.NoError(t, err)
	_, _ = fw.Write(png)
	require.NoError(t, mw.Close())
	up, err := c.UploadFileWithBodyWithResponse(ctx, mw.FormDataContentType(), &form)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, up.StatusCode())
	p = problemOf(t, up.Body)
	require.Equal(t, "core.file.invalid-upload", p["code"])
	require.Equal(t, "content.other-type", p["rule"], "PNG bytes named .jpg")
	require.Equal(t, false, p["retryable"])

	missing, err := c.GetFileWithResponse(ctx, "00000000-0000-4000-8000-000000000000")
	require.NoError(t, err)
	p = problemOf(t, missing.Body)
	require.NotContains(t, p, "rule")
	require.NotContains(t, p, "retryable")
}
