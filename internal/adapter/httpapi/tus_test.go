package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/service"
)

// tusMeta is an Upload-Metadata header: each value base64.
func tusMeta(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+" "+base64.StdEncoding.EncodeToString([]byte(kv[i+1])))
	}
	return strings.Join(parts, ",")
}

// tus sends one request of the protocol with token; body nil sends none.
func (s *server) tus(method, path, token string, header map[string]string, body []byte) (*http.Response, []byte) {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	if !strings.HasPrefix(path, "http") {
		path = s.url + path
	}
	req, err := http.NewRequest(method, path, r)
	require.NoError(s.t, err)
	req.Header.Set("Tus-Resumable", "1.0.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp, b
}

// tusCreate creates a resumable upload of size bytes named name; it
// returns its URL.
func (s *server) tusCreate(token, name, typ string, size int) string {
	s.t.Helper()
	resp, body := s.tus(http.MethodPost, "/uploaded-file/tus/", token, map[string]string{
		"Upload-Length": strconv.Itoa(size), "Upload-Metadata": tusMeta("filename", name, "filetype", typ),
	}, nil)
	require.Equal(s.t, http.StatusCreated, resp.StatusCode, "%s", body)
	loc := resp.Header.Get("Location")
	require.True(s.t, strings.HasPrefix(loc, s.url+"/uploaded-file/tus/"), loc)
	require.NotEmpty(s.t, resp.Header.Get("Upload-Expires"), "the expiration extension")
	return loc
}

func (s *server) tusPatch(token, url string, offset int, chunk []byte, header map[string]string) (*http.Response, []byte) {
	s.t.Helper()
	h := map[string]string{"Content-Type": "application/offset+octet-stream", "Upload-Offset": strconv.Itoa(offset)}
	for k, v := range header {
		h[k] = v
	}
	return s.tus(http.MethodPatch, url, token, h, chunk)
}

func problemCode(t *testing.T, body []byte) string {
	t.Helper()
	var p struct{ Code string }
	require.NoError(t, json.Unmarshal(body, &p), "a problem body: %s", body)
	return p.Code
}

func sha256Header(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256 " + base64.StdEncoding.EncodeToString(sum[:])
}

func TestTusUploadOverHTTP(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			s := start(t, driver)
			token := s.token("acme", "alice", nil)
			body := docx(t)
			half := len(body) / 2

			resp, _ := s.tus(http.MethodOptions, "/uploaded-file/tus/", token, nil, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "1.0.0", resp.Header.Get("Tus-Version"))
			for _, ext := range []string{"creation", "creation-with-upload", "termination", "expiration", "checksum"} {
				require.Contains(t, strings.Split(resp.Header.Get("Tus-Extension"), ","), ext)
			}
			require.Equal(t, "sha256", resp.Header.Get("Tus-Checksum-Algorithm"))
			require.Equal(t, strconv.Itoa(10<<20), resp.Header.Get("Tus-Max-Size"))

			url := s.tusCreate(token, "Plan.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", len(body))
			resp, _ = s.tus(http.MethodHead, url, token, nil, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "0", resp.Header.Get("Upload-Offset"))
			require.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Upload-Length"))
			require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

			resp, b := s.tusPatch(token, url, 0, body[:half], map[string]string{"Upload-Checksum": sha256Header(body[:half])})
			require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
			require.Equal(t, strconv.Itoa(half), resp.Header.Get("Upload-Offset"))

			resp, b = s.tusPatch(token, url, 0, body[:half], nil)
			require.Equal(t, http.StatusConflict, resp.StatusCode)
			require.Equal(t, service.ErrUploadOffsetMismatch.Code, problemCode(t, b))
			resp, b = s.tusPatch(token, url, half, body[half:], map[string]string{"Upload-Checksum": sha256Header(body[:half])})
			require.Equal(t, 460, resp.StatusCode, "the checksum extension's status")
			require.Equal(t, service.ErrChunkChecksumMismatch.Code, problemCode(t, b))
			resp, b = s.tusPatch(token, url, half, body[half:], map[string]string{"Upload-Checksum": "md5 " + base64.StdEncoding.EncodeToString(make([]byte, 16))})
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "only sha256")
			require.Equal(t, "core.tus.invalid-request", problemCode(t, b))

			resp, b = s.tusPatch(token, url, half, body[half:], nil)
			require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
			require.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Upload-Offset"))

			id := url[strings.LastIndex(url, "/")+1:]
			got, err := s.client(token).GetFileWithResponse(context.Background(), uuid.MustParse(id))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, got.StatusCode(), "%s", got.Body)
			require.Equal(t, "ready", string(got.JSON200.Status))
			require.Equal(t, "Plan.docx", got.JSON200.OriginalName)
			require.NotNil(t, got.JSON200.Url)
			dl, err := http.Get(*got.JSON200.Url)
			require.NoError(t, err)
			stored, err := io.ReadAll(dl.Body)
			require.NoError(t, err)
			require.NoError(t, dl.Body.Close())
			require.Equal(t, body, stored)

			resp, _ = s.tus(http.MethodHead, url, token, nil, nil)
			require.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Upload-Offset"), "a finished upload says so")
		})
	}
}

// TestTusCreationWithUpload: the creation request may carry the file, and
// a chunk may be as large as a file (the body bound of JSON requests,
// 64 KiB, does not apply to chunks).
func TestTusCreationWithUpload(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	token := s.token("acme", "alice", nil)
	csv := bytes.Repeat([]byte("id,name,amount\n"), 20000) // 300 KB
	resp, b := s.tus(http.MethodPost, "/uploaded-file/tus", token, map[string]string{
		"Upload-Length": strconv.Itoa(len(csv) + 1000), "Upload-Metadata": tusMeta("name", "r.csv", "type", "text/csv", "temporary", "true"),
		"Content-Type": "application/offset+octet-stream",
	}, csv)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	require.Equal(t, strconv.Itoa(len(csv)), resp.Header.Get("Upload-Offset"))
	loc := resp.Header.Get("Location")
	resp, b = s.tusPatch(token, loc, len(csv), csv[:1000], nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
	got, err := s.client(token).GetFileWithResponse(context.Background(), uuid.MustParse(loc[strings.LastIndex(loc, "/")+1:]))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode())
	require.True(t, got.JSON200.IsTemporary)
}

// TestTusHostileRequests: every refusal is problem JSON with a stable
// code, and another caller's upload answers exactly like a missing one.
func TestTusHostileRequests(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	alice := s.token("acme", "alice", nil)
	mallory := s.token("globex", "mallory", nil)
	body := docx(t)
	url := s.tusCreate(alice, "Plan.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", len(body))
	missing := s.url + "/uploaded-file/tus/" + uuid.NewString()

	for _, method := range []string{http.MethodHead, http.MethodPatch, http.MethodDelete} {
		call := func(u string) (*http.Response, []byte) {
			if method == http.MethodPatch {
				return s.tusPatch(mallory, u, 0, body[:10], nil)
			}
			return s.tus(method, u, mallory, nil, nil)
		}
		cross, crossBody := call(url)
		gone, goneBody := call(missing)
		malformed, malformedBody := call(s.url + "/uploaded-file/tus/not-an-id")
		for _, r := range []*http.Response{cross, gone, malformed} {
			require.Equal(t, http.StatusNotFound, r.StatusCode, method)
		}
		if method == http.MethodHead {
			h1, h2, h3 := cross.Header.Clone(), gone.Header.Clone(), malformed.Header.Clone()
			for _, h := range []http.Header{h1, h2, h3} {
				h.Del("X-Request-Id")
				h.Del("Date")
			}
			require.Equal(t, h2, h1, method)
			require.Equal(t, h2, h3, method)
			continue
		}
		crossH, crossB := anonymized(t, cross.Header, crossBody)
		goneH, goneB := anonymized(t, gone.Header, goneBody)
		malH, malB := anonymized(t, malformed.Header, malformedBody)
		require.Equal(t, goneB, crossB, method)
		require.Equal(t, goneB, malB, method)
		require.Equal(t, goneH, crossH, method)
		require.Equal(t, goneH, malH, method)
	}

	for name, c := range map[string]struct {
		header map[string]string
		status int
		code   string
	}{
		"over the size limit": {map[string]string{"Upload-Length": strconv.Itoa(11 << 20)}, http.StatusRequestEntityTooLarge, service.ErrInvalidUpload.Code},
		"deferred length":     {map[string]string{"Upload-Defer-Length": "1"}, http.StatusBadRequest, "core.tus.length-required"},
		"no length":           {map[string]string{}, http.StatusBadRequest, "core.tus.invalid-request"},
		"no version":          {map[string]string{"Tus-Resumable": "", "Upload-Length": "10"}, http.StatusPreconditionFailed, "core.tus.unsupported-version"},
		"no name":             {map[string]string{"Upload-Length": "10", "Upload-Metadata": tusMeta("filetype", "application/pdf")}, http.StatusUnprocessableEntity, service.ErrInvalidUpload.Code},
		"public":              {map[string]string{"Upload-Length": "10", "Upload-Metadata": tusMeta("filename", "r.pdf", "filetype", "application/pdf", "visibility", "public")}, http.StatusBadRequest, service.ErrInvalidMeta.Code},
	} {
		h := map[string]string{"Upload-Metadata": tusMeta("filename", "r.pdf", "filetype", "application/pdf")}
		for k, v := range c.header {
			h[k] = v
		}
		resp, b := s.tus(http.MethodPost, "/uploaded-file/tus/", alice, h, nil)
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", name, b)
		require.Equal(t, c.code, problemCode(t, b), name)
		_, _ = anonymized(t, resp.Header, b)
	}

	resp, b := s.tusPatch(alice, url, 0, body[:10], map[string]string{"Content-Type": "application/octet-stream"})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "core.tus.invalid-request", problemCode(t, b))
	resp, b = s.tusPatch(alice, url, 0, body, map[string]string{"Upload-Offset": "1"})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Equal(t, service.ErrUploadOffsetMismatch.Code, problemCode(t, b))
	resp, b = s.tusPatch(alice, url, 0, append(append([]byte{}, body...), 'x'), nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a chunk past the declared length")
	require.Equal(t, service.ErrInvalidUpload.Code, problemCode(t, b))

	// A chunked body has no length to check: refused.
	req, err := http.NewRequest(http.MethodPatch, url, io.MultiReader(bytes.NewReader(body[:10])))
	require.NoError(t, err)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Upload-Offset", "0")
	chunked, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	cb, _ := io.ReadAll(chunked.Body)
	chunked.Body.Close()
	require.Equal(t, http.StatusLengthRequired, chunked.StatusCode, "%s", cb)
	require.Equal(t, "core.tus.length-required", problemCode(t, cb))

	resp, _ = s.tus(http.MethodHead, url, "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "every request carries a token")
	resp, _ = s.tus(http.MethodHead, url, alice, nil, nil)
	require.Equal(t, "0", resp.Header.Get("Upload-Offset"), "nothing refused was kept")

	resp, _ = s.tus(http.MethodDelete, url, alice, nil, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = s.tus(http.MethodHead, url, alice, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "terminated")
}

// TestTusCreationIsIdempotent: a creation sent again under its
// Idempotency-Key -- its answer lost -- answers with the same upload,
// holding its quota once; the key with another length is another request.
func TestTusCreationIsIdempotent(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	token := s.token("acme", "alice", nil)
	h := map[string]string{"Upload-Length": "100", "Upload-Metadata": tusMeta("filename", "r.csv", "filetype", "text/csv"), httpapi.IdempotencyKeyHeader: "create-1"}
	first, b := s.tus(http.MethodPost, "/uploaded-file/tus/", token, h, nil)
	require.Equal(t, http.StatusCreated, first.StatusCode, "%s", b)
	again, b := s.tus(http.MethodPost, "/uploaded-file/tus/", token, h, nil)
	require.Equal(t, http.StatusCreated, again.StatusCode, "%s", b)
	require.Equal(t, first.Header.Get("Location"), again.Header.Get("Location"), "the same upload")
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, "0", again.Header.Get("Upload-Offset"))

	resp, b := s.tusPatch(token, first.Header.Get("Location"), 0, []byte("id,n\n"), nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
	again, _ = s.tus(http.MethodPost, "/uploaded-file/tus/", token, h, nil)
	require.Equal(t, "5", again.Header.Get("Upload-Offset"), "a replay tells where the upload is")

	h["Upload-Length"] = "200"
	other, b := s.tus(http.MethodPost, "/uploaded-file/tus/", token, h, nil)
	require.Equal(t, http.StatusUnprocessableEntity, other.StatusCode)
	require.Equal(t, service.ErrIdempotencyKeyReused.Code, problemCode(t, b))
	usage, err := s.client(token).GetUsageWithResponse(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, usage.JSON200.Owner.Files, "one upload holds quota")
}

// TestHostTusUploadsMayBePublic: below HostTusPath a host backend's
// resumable upload may be public, as its initiate may (allowPublicUploads
// on); the upload's URL stays below that path, a replay of its creation
// answers with it, and the route is the host's alone: an end user's token
// finds nothing there, and the end user's route still refuses public.
func TestHostTusUploadsMayBePublic(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal, func(c *service.Config) { c.AllowPublicUploads = true })
	host := s.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope})
	user := s.token("acme", "alice", nil)
	csv := []byte("id,name\n1,a\n")
	h := map[string]string{"Upload-Length": strconv.Itoa(len(csv)),
		"Upload-Metadata":            tusMeta("filename", "r.csv", "filetype", "text/csv", "visibility", "public"),
		httpapi.IdempotencyKeyHeader: "host-create-1"}

	resp, b := s.tus(http.MethodPost, httpapi.HostTusPath, host, h, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	loc := resp.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, s.url+httpapi.HostTusPath), loc)
	again, b := s.tus(http.MethodPost, httpapi.HostTusPath, host, h, nil)
	require.Equal(t, http.StatusCreated, again.StatusCode, "%s", b)
	require.Equal(t, loc, again.Header.Get("Location"), "the replay names the host's URL")

	missing, b := s.tusPatch(user, loc, 0, csv, nil)
	require.Equal(t, http.StatusNotFound, missing.StatusCode, "an end user's token below the host path: %s", b)
	resp, b = s.tusPatch(host, loc, 0, csv, nil)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", b)
	got, err := s.client(user).GetFileWithResponse(context.Background(), uuid.MustParse(loc[strings.LastIndex(loc, "/")+1:]))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode())
	require.Equal(t, "public", string(got.JSON200.Visibility))
	require.Equal(t, "ready", string(got.JSON200.Status))

	h[httpapi.IdempotencyKeyHeader] = "user-create-1"
	resp, b = s.tus(http.MethodPost, httpapi.TusPath, user, h, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, service.ErrInvalidMeta.Code, problemCode(t, b), "public stays a host's to make")
	delete(h, httpapi.IdempotencyKeyHeader)
	h["Upload-Metadata"] = tusMeta("filename", "r.csv", "filetype", "text/csv", "visibility", "public", "temporary", "true")
	resp, b = s.tus(http.MethodPost, httpapi.HostTusPath, host, h, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, service.ErrInvalidMeta.Code, problemCode(t, b), "a temporary file is private")

	closed := start(t, service.DriverLocal)
	h["Upload-Metadata"] = tusMeta("filename", "r.csv", "filetype", "text/csv", "visibility", "public")
	resp, b = closed.tus(http.MethodPost, httpapi.HostTusPath, closed.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope}), h, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", b)
	require.Equal(t, service.ErrPublicUploadDisabled.Code, problemCode(t, b))
}
