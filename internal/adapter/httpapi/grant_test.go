//lint:file-ignore SA1019 the granted URL is the download route, compared with its authenticated answer; files are stored through the multipart route
package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// getNoToken sends a GET of u with extra headers and no token; it answers the
// status, the headers and the body.
func getNoToken(t *testing.T, u string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// withQuery is u with one query parameter replaced.
func withQuery(t *testing.T, u, name, value string) string {
	t.Helper()
	p, err := url.Parse(u)
	require.NoError(t, err)
	q := p.Query()
	q.Set(name, value)
	p.RawQuery = q.Encode()
	return p.String()
}

// TestGrantedDownloadURL: on the local driver a private file's url is its
// download route granted for a while -- it serves the bytes with no token,
// as the authenticated route does, and nothing in it can be changed, moved
// to another file or used after its expiry; a forged grant answers the same
// whether or not the file exists, and a deleted file's grant finds nothing.
func TestGrantedDownloadURL(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal, func(c *service.Config) { c.PrivateDownloadURLTTLSeconds = 60 })
	c := s.client(s.token("acme", "alice", nil))
	ctx := context.Background()

	ct, body := multipartBody(t, map[string][]byte{"Résumé.pdf": []byte(pdf)})
	up, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode(), "%s", up.Body)
	id := up.JSON201.Id
	noStorageRefs(t, s, up.Body, id)
	detail, err := c.GetFileWithResponse(ctx, id)
	require.NoError(t, err)
	u := *detail.JSON200.Url
	require.True(t, strings.HasPrefix(u, s.url+"/uploaded-file/"+id.String()+"/download?"), u)
	require.NotNil(t, detail.JSON200.UrlExpiredAt)
	require.WithinDuration(t, time.Now().Add(time.Minute), *detail.JSON200.UrlExpiredAt, 5*time.Second, "privateDownloadUrlTtlSeconds")
	p, err := url.Parse(u)
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(detail.JSON200.UrlExpiredAt.Unix(), 10), p.Query().Get("expires"))

	status, h, got := getNoToken(t, u)
	require.Equal(t, http.StatusOK, status, got)
	require.Equal(t, pdf, got)
	authed, err := c.DownloadFileWithResponse(ctx, id, nil)
	require.NoError(t, err)
	for _, name := range []string{"Content-Type", "Content-Disposition", "X-Content-Type-Options", "Content-Security-Policy", "ETag", "Cache-Control"} {
		require.NotEmpty(t, h.Get(name), name)
		require.Equal(t, authed.HTTPResponse.Header.Get(name), h.Get(name), "%s as the authenticated route answers", name)
	}
	require.Equal(t, "same-origin", authed.HTTPResponse.Header.Get("Cross-Origin-Resource-Policy"))
	require.Equal(t, "cross-origin", h.Get("Cross-Origin-Resource-Policy"), "a signed URL, as a presigned GET")
	status, _, got = getNoToken(t, u, "Range", "bytes=0-4")
	require.Equal(t, http.StatusPartialContent, status)
	require.Equal(t, "%PDF-", got)
	status, _, _ = getNoToken(t, u, "If-None-Match", h.Get("ETag"))
	require.Equal(t, http.StatusNotModified, status)
	head, err := http.Head(u)
	require.NoError(t, err)
	head.Body.Close()
	require.Equal(t, http.StatusOK, head.StatusCode, "HEAD as GET")
	require.EqualValues(t, len(pdf), head.ContentLength)

	// Another file of another tenant, to move the grant to.
	other := s.client(s.token("globex", "mallory", nil))
	ct, body = multipartBody(t, map[string][]byte{"other.pdf": []byte(pdf)})
	up2, err := other.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up2.StatusCode())
	otherID := up2.JSON201.Id.String()
	grant := p.Query().Get("grant")
	flipped := []byte(grant)
	flipped[len(flipped)/2] ^= 1
	if flipped[len(flipped)/2] == '-' || flipped[len(flipped)/2] == '_' {
		flipped[len(flipped)/2] = 'A'
	}
	refused := map[string]string{
		"tampered grant":       withQuery(t, u, "grant", string(flipped)),
		"other expiry":         withQuery(t, u, "expires", strconv.FormatInt(detail.JSON200.UrlExpiredAt.Unix()+3600, 10)),
		"no expiry":            strings.Replace(u, "expires=", "x=", 1),
		"moved to other file":  strings.Replace(u, id.String(), otherID, 1),
		"moved to a missing":   strings.Replace(u, id.String(), "6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e", 1),
		"moved to a variant":   strings.Replace(u, "/download?", "/variants/thumb/download?", 1),
		"not base64":           withQuery(t, u, "grant", "!!!"),
		"empty grant":          withQuery(t, u, "grant", ""),
		"grant over the bound": withQuery(t, u, "grant", strings.Repeat("A", 5000)),
	}
	var first string
	for name, bad := range refused {
		status, h, got := getNoToken(t, bad)
		require.Equal(t, http.StatusForbidden, status, "%s: %s", name, got)
		var prob map[string]any
		require.NoError(t, json.Unmarshal([]byte(got), &prob), name)
		require.Equal(t, "core.file.download-url-invalid", prob["code"], name)
		require.Empty(t, h.Get("ETag"), name)
		if strings.HasPrefix(name, "moved") {
			_, same := anonymized(t, h, []byte(got))
			if first == "" {
				first = same
			}
			require.Equal(t, first, same, "another tenant's file and a missing one answer alike")
		}
	}
	status, _, _ = getNoToken(t, "http://"+strings.TrimPrefix(s.url, "http://")+"/uploaded-file/"+id.String()+"/download")
	require.Equal(t, http.StatusUnauthorized, status, "without a grant the route takes a token")

	// Expired: the same URL once its expiry has passed.
	short := start(t, service.DriverLocal, func(c *service.Config) { c.PrivateDownloadURLTTLSeconds = 1 })
	sc := short.client(short.token("acme", "alice", nil))
	ct, body = multipartBody(t, map[string][]byte{"a.pdf": []byte(pdf)})
	up3, err := sc.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up3.StatusCode())
	status, _, _ = getNoToken(t, *up3.JSON201.Url)
	require.Equal(t, http.StatusOK, status, "the upload's answer carries a working url")
	time.Sleep(time.Until(up3.JSON201.UrlExpiredAt.Add(100 * time.Millisecond)))
	status, _, got = getNoToken(t, *up3.JSON201.Url)
	require.Equal(t, http.StatusForbidden, status, got)
	require.Contains(t, got, "core.file.download-url-invalid")

	// Deleted: the grant outlives the file but finds nothing.
	del, err := c.DeleteFileWithResponse(ctx, id, nil)
	require.NoError(t, err)
	require.Less(t, del.StatusCode(), 300)
	status, _, got = getNoToken(t, u)
	require.Equal(t, http.StatusNotFound, status, got)
	require.Contains(t, got, "core.file.not-found")
}

// TestGrantedDownloadURLNotOnS3: on S3 the url is the store's presigned
// GET; the service's download route does not take grants there.
func TestGrantedDownloadURLNotOnS3(t *testing.T) {
	t.Parallel()
	local := start(t, service.DriverLocal)
	lc := local.client(local.token("acme", "alice", nil))
	ct, body := multipartBody(t, map[string][]byte{"a.pdf": []byte(pdf)})
	up, err := lc.UploadFileWithBodyWithResponse(context.Background(), nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode())
	p, err := url.Parse(*up.JSON201.Url)
	require.NoError(t, err)

	s3 := start(t, service.DriverS3)
	c := s3.client(s3.token("acme", "alice", nil))
	ct, body = multipartBody(t, map[string][]byte{"a.pdf": []byte(pdf)})
	up, err = c.UploadFileWithBodyWithResponse(context.Background(), nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode())
	require.NotContains(t, *up.JSON201.Url, "grant=")
	status, _, got := getNoToken(t, s3.url+"/uploaded-file/"+up.JSON201.Id.String()+"/download?"+p.RawQuery)
	require.Equal(t, http.StatusForbidden, status, got)
	require.Contains(t, got, "core.file.download-url-invalid")
}

// TestReplayedAnswerResolvesItsURLAgain: a keyed complete's answer carries
// the file's url, a capability that is never persisted -- the recorded
// answer holds neither the url nor its expiry -- and its replay resolves a
// working one again.
func TestReplayedAnswerResolvesItsURLAgain(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	user := s.token("acme", "alice", nil)
	ctx := context.Background()
	init := do(t, s, outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body: mustJSON(t, map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": len(pdf), "checksum": checksum([]byte(pdf))})}, user, "")
	require.Equal(t, http.StatusCreated, init.status, init.body)
	var started struct {
		ID     string `json:"id"`
		Upload struct {
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"upload"`
	}
	require.NoError(t, json.Unmarshal([]byte(init.body), &started))
	put := do(t, s, outageRequest{method: "PUT", path: started.Upload.URL, body: []byte(pdf), headers: started.Upload.Headers, anonymous: true}, "", "")
	require.Equal(t, http.StatusOK, put.status, put.body)

	complete := outageRequest{method: "POST", path: "/uploaded-file/" + started.ID + "/complete", headers: map[string]string{"Idempotency-Key": "c-1"}}
	first := do(t, s, complete, user, "")
	require.Equal(t, http.StatusOK, first.status, first.body)
	var stored int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM uploaded_file_idempotency
		WHERE key = 'c-1' AND state = 'done' AND position('grant='::bytea IN body) = 0 AND position('"url"'::bytea IN body) = 0
		AND position('urlExpiredAt'::bytea IN body) = 0`).Scan(&stored))
	require.Equal(t, 1, stored, "the recorded answer has no url")

	again := do(t, s, complete, user, "")
	require.Equal(t, http.StatusOK, again.status, again.body)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	var b map[string]any
	require.NoError(t, json.Unmarshal([]byte(again.body), &b))
	require.Contains(t, b["url"], "grant=", "a url resolved for the replay")
	require.NotEmpty(t, b["urlExpiredAt"])
	status, _, got := getNoToken(t, b["url"].(string))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, pdf, got)
	requireSameFile(t, first.body, again.body, "otherwise the first answer")
}

// requireSameFile: two answers of one file are the same but for the url
// each resolves afresh (and its expiry).
func requireSameFile(t *testing.T, want, got string, msg string) {
	t.Helper()
	var a, b map[string]any
	require.NoError(t, json.Unmarshal([]byte(want), &a))
	require.NoError(t, json.Unmarshal([]byte(got), &b))
	for _, m := range []map[string]any{a, b} {
		require.NotEmpty(t, m["url"], msg)
		delete(m, "url")
		delete(m, "urlExpiredAt")
	}
	require.Equal(t, a, b, msg)
}
