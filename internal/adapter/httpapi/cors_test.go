//lint:file-ignore SA1019 the deprecated multipart route is still served, so its problem details are tested

package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/gen/client"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
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
	init, err := c.InitiateUploadWithResponse(ctx, nil, initiateBody(body))
	require.NoError(t, err)
	id := init.JSON201.Id
	early, err := c.CompleteUploadWithResponse(ctx, id, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, early.StatusCode())
	p := problemOf(t, early.Body)
	require.Equal(t, "content.missing", p["rule"])
	require.Equal(t, true, p["retryable"], "no bytes yet: send them, then complete again")

	wrong := bytes.Repeat([]byte("x"), len(body))
	spoofed, err := c.InitiateUploadWithResponse(ctx, nil, client.InitiateUploadJSONRequestBody{OriginalName: "Plan.docx", ContentType: docxType, SizeBytes: int64(len(wrong)), Checksum: checksum(wrong)})
	require.NoError(t, err)
	put, err := c.PutUploadContentWithBodyWithResponse(ctx, spoofed.JSON201.Id, nil, "application/octet-stream", bytes.NewReader(wrong))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, put.StatusCode())
	failed, err := c.CompleteUploadWithResponse(ctx, spoofed.JSON201.Id, nil)
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
	up, err := c.UploadFileWithBodyWithResponse(ctx, nil, mw.FormDataContentType(), &form)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, up.StatusCode())
	p = problemOf(t, up.Body)
	require.Equal(t, "core.file.invalid-upload", p["code"])
	require.Equal(t, "content.other-type", p["rule"], "PNG bytes named .jpg")
	require.Equal(t, false, p["retryable"])

	missing, err := c.GetFileWithResponse(ctx, uuid.MustParse("00000000-0000-4000-8000-000000000000"))
	require.NoError(t, err)
	p = problemOf(t, missing.Body)
	require.NotContains(t, p, "rule")
	require.NotContains(t, p, "retryable")
}

// TestSignedLocalTarget: the local driver's upload target is
// self-contained -- exactly {method, url, headers}, no token -- answers with
// an ETag, and refuses what S3 refuses: a tampered signature, a header that
// differs from the signed one, bytes that are not the declared ones, a
// second write, an expired target.
func TestSignedLocalTarget(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal, func(c *service.Config) { c.UploadURLTTLSeconds = 2 })
	ctx := context.Background()
	c := s.client(s.token("acme", "alice", nil))
	body := docx(t)
	init, err := c.InitiateUploadWithResponse(ctx, nil, initiateBody(body))
	require.NoError(t, err)
	target := init.JSON201.Upload
	require.NotContains(t, target.Headers, "Content-Length")
	require.NotContains(t, target.Headers, "Authorization")

	send := func(url string, headers map[string]string, b []byte) (*http.Response, map[string]any) {
		req, err := http.NewRequest(target.Method, url, bytes.NewReader(b))
		require.NoError(t, err)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var doc map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&doc)
		return resp, doc
	}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for hk, hv := range target.Headers {
			h[hk] = hv
		}
		h[k] = v
		return h
	}

	resp, p := send(strings.Replace(target.Url, "signature=", "signature=x", 1), target.Headers, body)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a tampered signature")
	require.Equal(t, "core.file.upload-target-invalid", p["code"])
	resp, _ = send(target.Url, with("Content-Type", "application/pdf"), body)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "another content type than the signed one")
	resp, _ = send(target.Url, with(service.ChecksumHeader, ""), body)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no checksum header")
	wrong := bytes.Clone(body)
	wrong[len(wrong)-1] ^= 0xff
	resp, p = send(target.Url, target.Headers, wrong)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "bytes that are not the declared ones")
	require.Equal(t, "content.mismatch", p["rule"])
	require.Equal(t, true, p["retryable"], "the upload is still pending: send the right bytes")

	resp, p = send(target.Url, target.Headers, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%v", p)
	require.NotEmpty(t, resp.Header.Get("ETag"), "an ETag, as S3 answers")
	require.Equal(t, init.JSON201.Id.String(), p["id"])
	resp, p = send(target.Url, target.Headers, body)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "written once")
	require.Equal(t, "content.already-written", p["rule"])

	done, err := c.CompleteUploadWithResponse(ctx, init.JSON201.Id, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, done.StatusCode())

	late, err := c.InitiateUploadWithResponse(ctx, nil, initiateBody(body))
	require.NoError(t, err)
	target = late.JSON201.Upload
	time.Sleep(time.Until(late.JSON201.Upload.ExpiresAt) + 1100*time.Millisecond)
	resp, p = send(target.Url, target.Headers, body)
	require.Equal(t, http.StatusGone, resp.StatusCode, "an expired target")
	require.Equal(t, "core.file.upload-expired", p["code"])
}
