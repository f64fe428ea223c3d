package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	api "github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/remote"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/internal/testkit/syncbuf"
	"github.com/uploadedfile/uploadedfile/internal/tracing"
	"github.com/uploadedfile/uploadedfile/service"
)

// outageFiles are the files the outage requests name, made while the
// database answered.
type outageFiles struct {
	ready, image, pending, attached string
	key                             string // the ready file's storage key (host references)
	signedPut                       string // the pending upload's signed local target
	signedHeaders                   map[string]string
	pendingBody                     []byte
	resumable                       string // a resumable upload's URL path, one chunk in
}

// outageRequest is one request of an operation of the OpenAPI document.
type outageRequest struct {
	method, path, contentType string
	body                      []byte
	headers                   map[string]string
	host, anonymous           bool
}

// outageRequests has a request for every operation of api/openapi.yaml;
// TestDatabaseOutageIsNeverNotFound fails for an operation without one, so
// a new route cannot miss the outage test.
func outageRequests(t *testing.T, f outageFiles) map[string][]outageRequest {
	pdfBody := []byte(pdf)
	initiate := mustJSON(t, map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": len(pdfBody), "checksum": checksum(pdfBody)})
	ct, form := multipartBody(t, map[string][]byte{"o.pdf": pdfBody})
	attached := "?module=crm&entity=deal&entityId=d-1"
	return map[string][]outageRequest{
		"initiateUpload":          {{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json", body: initiate}},
		"initiateTemporaryUpload": {{method: "POST", path: "/uploaded-file/temporary/initiate", contentType: "application/json", body: initiate}},
		"completeUpload":          {{method: "POST", path: "/uploaded-file/" + f.pending + "/complete"}},
		"putUploadContent": {
			{method: "PUT", path: "/uploaded-file/" + f.pending + "/content", contentType: "application/pdf", body: f.pendingBody},
			{method: "PUT", path: f.signedPut, body: f.pendingBody, headers: f.signedHeaders, anonymous: true},
		},
		"getUsage":            {{method: "GET", path: "/uploaded-file/usage"}},
		"getFile":             {{method: "GET", path: "/uploaded-file/" + f.ready}},
		"deleteFile":          {{method: "DELETE", path: "/uploaded-file/" + f.ready}, {method: "DELETE", path: "/uploaded-file/" + f.pending}},
		"listFiles":           {{method: "GET", path: "/uploaded-file"}},
		"uploadFile":          {{method: "POST", path: "/uploaded-file", contentType: ct, body: form.Bytes()}},
		"downloadFile":        {{method: "GET", path: "/uploaded-file/" + f.ready + "/download"}},
		"getFileVariant":      {{method: "GET", path: "/uploaded-file/" + f.image + "/variants/thumb"}},
		"downloadFileVariant": {{method: "GET", path: "/uploaded-file/" + f.image + "/variants/thumb/download"}},
		"hostInitiateUpload":  {{method: "POST", path: "/internal/uploaded-file/initiate", contentType: "application/json", body: initiate, host: true}},
		"hostUpload":          {{method: "POST", path: "/internal/uploaded-file/uploads", contentType: ct, body: form.Bytes(), host: true}},
		"hostCloneFromUrl": {{method: "POST", path: "/internal/uploaded-file/clone", contentType: "application/json", host: true,
			body: mustJSON(t, map[string]any{"url": "https://files.example/o.pdf"})}},
		"hostListFiles":        {{method: "GET", path: "/internal/uploaded-file", host: true}},
		"hostGetUsage":         {{method: "GET", path: "/internal/uploaded-file/usage", host: true}},
		"hostGetFile":          {{method: "GET", path: "/internal/uploaded-file/" + f.ready, host: true}},
		"hostGetFileVariant":   {{method: "GET", path: "/internal/uploaded-file/" + f.image + "/variants/thumb", host: true}},
		"hostResolveUrl":       {{method: "GET", path: "/internal/uploaded-file/" + f.ready + "/url", host: true}},
		"hostSetExtraData":     {{method: "PATCH", path: "/internal/uploaded-file/" + f.ready + "/extra-data", contentType: "application/json", body: []byte(`{"a":1}`), host: true}},
		"hostDownloadAttached": {{method: "GET", path: "/internal/uploaded-file/" + f.attached + "/attached" + attached, host: true}},
		"hostMarkUsed": {{method: "POST", path: "/internal/uploaded-file/mark-used", contentType: "application/json", host: true,
			body: mustJSON(t, map[string]any{"ids": []string{f.ready}, "module": "crm", "entity": "deal", "entityId": "d-2"})}},
		"hostUseFiles": {{method: "POST", path: "/internal/uploaded-file/use-files", contentType: "application/json", host: true,
			body: mustJSON(t, map[string]any{"references": []string{f.key}, "entity": "deal", "entityId": "d-3"})}},
		"hostChangeFiles": {{method: "POST", path: "/internal/uploaded-file/change-files", contentType: "application/json", host: true,
			body: mustJSON(t, map[string]any{"olds": []string{}, "news": []string{f.key}, "entity": "deal", "entityId": "d-4"})}},
		"hostDelete": {{method: "POST", path: "/internal/uploaded-file/delete", contentType: "application/json", host: true,
			body: mustJSON(t, map[string]any{"references": []string{f.key}})}},
		// The two operations that do not need the database to answer.
		"healthz": {{method: "GET", path: "/healthz", anonymous: true}},
		"readyz":  {{method: "GET", path: "/readyz", anonymous: true}},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// pdfFetcher answers every remote fetch with the same PDF: the remote web
// server of a clone, which the outage test does not care about.
type pdfFetcher struct{}

func (pdfFetcher) Fetch(context.Context, string) (*remote.Response, error) {
	return &remote.Response{Body: io.NopCloser(strings.NewReader(pdf)), ContentType: "application/pdf", FileName: "o.pdf"}, nil
}

// TestDatabaseOutageIsNeverNotFound: while the test database refuses
// connections (ALLOW_CONNECTIONS false, its backends terminated), every
// operation of the OpenAPI document that needs it answers 503
// core.database.unavailable, retryable, with Retry-After -- never 404 --
// and answers as before once connections are allowed again. Missing and
// foreign ids stay byte-identical 404s.
func TestDatabaseOutageIsNeverNotFound(t *testing.T) {
	t.Parallel()
	s := startServer(t, service.DriverLocal, nil, []service.Option{service.WithFetcher(pdfFetcher{})}, variantPresets, func(c *service.Config) {
		c.RemoteClone.Enabled = true
		c.AttachedReadPolicy = func(context.Context, service.AttachedReadRequest) (bool, error) { return true, nil }
	})
	ctx := context.Background()
	user := s.token("acme", "alice", nil)
	host := s.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope})
	f := outageSetup(t, s, user, host)

	doc, err := api.GetSpec()
	require.NoError(t, err)
	requests := outageRequests(t, f)
	var ops []string
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			ops = append(ops, op.OperationID)
		}
	}
	sort.Strings(ops)
	require.NotEmpty(t, ops)

	missing := fmt.Sprintf("/uploaded-file/%s", "0b0e7a36-3f7c-4d51-9a34-6c2b1c39a001")
	before := do(t, s, outageRequest{method: "GET", path: missing}, user, host)
	detail := do(t, s, outageRequest{method: "GET", path: "/uploaded-file/" + f.ready}, user, host)
	require.Equal(t, http.StatusOK, detail.status, detail.body)
	var granted struct{ URL string }
	require.NoError(t, json.Unmarshal([]byte(detail.body), &granted))

	restore := pgtest.CutConnections(t, s.pool)
	// A granted download (the local driver's signed url) needs neither the
	// database nor a token: the outage does not touch it, and a forged
	// grant is still refused, never "not found".
	grantedGet := do(t, s, outageRequest{method: "GET", path: granted.URL, anonymous: true}, "", "")
	require.Equal(t, http.StatusOK, grantedGet.status, grantedGet.body)
	require.Equal(t, pdf, grantedGet.body)
	forged := do(t, s, outageRequest{method: "GET", path: strings.Replace(granted.URL, f.ready, f.image, 1), anonymous: true}, "", "")
	require.Equal(t, http.StatusForbidden, forged.status, forged.body)
	require.Contains(t, forged.body, "core.file.download-url-invalid")
	for _, op := range ops {
		reqs, ok := requests[strings.ToLower(op[:1])+op[1:]]
		if !ok {
			t.Errorf("operation %s has no outage request: add one to outageRequests", op)
			continue
		}
		for _, r := range reqs {
			resp := do(t, s, r, user, host)
			switch strings.ToLower(op) {
			case "healthz":
				require.Equal(t, http.StatusOK, resp.status, "%s %s", r.method, r.path)
			case "readyz":
				// A database every replica shares is reported, never
				// gating: the balancer keeps every replica.
				require.Equal(t, http.StatusOK, resp.status, "%s %s", r.method, r.path)
				require.Contains(t, resp.body, "database unavailable")
			default:
				require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s %s %s: %s", op, r.method, r.path, resp.body)
				var p struct {
					Code      string `json:"code"`
					Retryable *bool  `json:"retryable"`
				}
				require.NoError(t, json.Unmarshal([]byte(resp.body), &p), "%s: %s", op, resp.body)
				require.Equal(t, "core.database.unavailable", p.Code, "%s %s %s", op, r.method, r.path)
				require.NotNil(t, p.Retryable, op)
				require.True(t, *p.Retryable, op)
				require.NotEmpty(t, resp.header.Get("Retry-After"), op)
			}
		}
	}
	for _, r := range tusOutageRequests(f) {
		resp := do(t, s, r, user, host)
		require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s %s: %s", r.method, r.path, resp.body)
		require.NotEmpty(t, resp.header.Get("Retry-After"), "%s %s", r.method, r.path)
		if r.method != "HEAD" {
			require.Contains(t, resp.body, `"code":"core.database.unavailable"`, "%s %s", r.method, r.path)
		}
	}
	restore()

	// Back: the file is there and the same requests answer as before. A
	// connection of the pool that the outage terminated while it sat idle
	// fails the first request that takes it (503, retryable): a client
	// retries, as this loop does, a few times.
	for _, path := range []string{"/uploaded-file/" + f.ready, "/uploaded-file/" + f.image + "/variants/thumb", "/uploaded-file/usage"} {
		var resp outageResponse
		for range 5 {
			if resp = do(t, s, outageRequest{method: "GET", path: path}, user, host); resp.status != http.StatusServiceUnavailable {
				break
			}
		}
		require.Equal(t, http.StatusOK, resp.status, "%s after the outage: %s", path, resp.body)
	}
	after := do(t, s, outageRequest{method: "GET", path: missing}, user, host)
	require.Equal(t, http.StatusNotFound, after.status)
	_, beforeBody := anonymized(t, before.header, []byte(before.body))
	_, afterBody := anonymized(t, after.header, []byte(after.body))
	require.Equal(t, beforeBody, afterBody)
	foreign := do(t, s, outageRequest{method: "GET", path: "/uploaded-file/" + f.ready}, s.token("other", "mallory", nil), host)
	require.Equal(t, after.status, foreign.status)
	_, foreignBody := anonymized(t, foreign.header, []byte(foreign.body))
	require.Equal(t, afterBody, foreignBody, "a foreign file looks missing")
	_ = ctx
}

type outageResponse struct {
	status int
	header http.Header
	body   string
}

// do sends r to s with the end user's or the host's token (none when
// anonymous).
func do(t *testing.T, s *server, r outageRequest, user, host string) outageResponse {
	t.Helper()
	url := r.path
	if !strings.HasPrefix(url, "http") {
		url = s.url + url
	}
	req, err := http.NewRequest(r.method, url, bytes.NewReader(r.body))
	require.NoError(t, err)
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	switch {
	case r.anonymous:
	case r.host:
		req.Header.Set("Authorization", "Bearer "+host)
	default:
		req.Header.Set("Authorization", "Bearer "+user)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return outageResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// outageSetup makes the files the outage requests name: a ready PDF, an
// image with its variant, a pending direct upload with its signed target,
// and a file attached to crm/deal/d-1.
func outageSetup(t *testing.T, s *server, user, host string) outageFiles {
	t.Helper()
	upload := func(name string, content []byte) string {
		ct, body := multipartBody(t, map[string][]byte{name: content})
		resp := do(t, s, outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: body.Bytes()}, user, host)
		require.Equal(t, http.StatusCreated, resp.status, resp.body)
		var f struct{ Id string }
		require.NoError(t, json.Unmarshal([]byte(resp.body), &f))
		return f.Id
	}
	f := outageFiles{ready: upload("r.pdf", []byte(pdf)), image: upload("pic.png", pngImage(t, 64, 48)), attached: upload("a.pdf", []byte(pdf))}
	v := do(t, s, outageRequest{method: "GET", path: "/uploaded-file/" + f.image + "/variants/thumb"}, user, host)
	require.Equal(t, http.StatusOK, v.status, v.body)
	mark := do(t, s, outageRequest{method: "POST", path: "/internal/uploaded-file/mark-used", contentType: "application/json", host: true,
		body: mustJSON(t, map[string]any{"ids": []string{f.attached}, "module": "crm", "entity": "deal", "entityId": "d-1"})}, user, host)
	require.Equal(t, http.StatusNoContent, mark.status, mark.body)
	hf := do(t, s, outageRequest{method: "GET", path: "/internal/uploaded-file/" + f.ready, host: true}, user, host)
	require.Equal(t, http.StatusOK, hf.status, hf.body)
	var hostFile struct{ Key string }
	require.NoError(t, json.Unmarshal([]byte(hf.body), &hostFile))
	f.key = hostFile.Key

	f.pendingBody = []byte(pdf + "%pending\n")
	init := do(t, s, outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body: mustJSON(t, map[string]any{"originalName": "p.pdf", "contentType": "application/pdf", "sizeBytes": len(f.pendingBody), "checksum": checksum(f.pendingBody)})}, user, host)
	require.Equal(t, http.StatusCreated, init.status, init.body)
	var target struct {
		Id     string
		Upload struct {
			Url     string
			Headers map[string]string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(init.body), &target))
	f.pending, f.signedPut, f.signedHeaders = target.Id, target.Upload.Url, target.Upload.Headers

	created := do(t, s, outageRequest{method: "POST", path: "/uploaded-file/tus/", headers: map[string]string{
		"Tus-Resumable": "1.0.0", "Upload-Length": "100", "Upload-Metadata": tusMeta("filename", "r.csv", "filetype", "text/csv"),
	}}, user, host)
	require.Equal(t, http.StatusCreated, created.status, created.body)
	f.resumable = strings.TrimPrefix(created.header.Get("Location"), s.url)
	chunk := do(t, s, tusChunkRequest(f.resumable, 0, []byte("id,n\n")), user, host)
	require.Equal(t, http.StatusNoContent, chunk.status, chunk.body)
	return f
}

// tusChunkRequest is a PATCH of chunk at offset to the resumable upload at path.
func tusChunkRequest(path string, offset int, chunk []byte) outageRequest {
	return outageRequest{method: "PATCH", path: path, body: chunk, headers: map[string]string{
		"Tus-Resumable": "1.0.0", "Content-Type": "application/offset+octet-stream", "Upload-Offset": strconv.Itoa(offset),
	}}
}

// tusOutageRequests are the resumable route's requests, which the OpenAPI
// document does not list (the tus protocol is its own contract).
func tusOutageRequests(f outageFiles) []outageRequest {
	tus := map[string]string{"Tus-Resumable": "1.0.0"}
	var reqs []outageRequest
	for _, base := range []string{httpapi.TusPath, httpapi.HostTusPath} {
		host := base == httpapi.HostTusPath
		at := base + strings.TrimPrefix(f.resumable, httpapi.TusPath)
		chunk := tusChunkRequest(at, 5, []byte("1,2\n"))
		chunk.host = host
		reqs = append(reqs,
			outageRequest{method: "POST", path: base, host: host, headers: map[string]string{
				"Tus-Resumable": "1.0.0", "Upload-Length": "100", "Upload-Metadata": tusMeta("filename", "s.csv", "filetype", "text/csv")}},
			outageRequest{method: "HEAD", path: at, host: host, headers: tus},
			chunk,
			outageRequest{method: "DELETE", path: at, host: host, headers: tus},
		)
	}
	return reqs
}

// TestStorageOutageIsNeverNotFound: with the S3 server stopped (a real
// server of the selected kind, killed), reading a stored file's bytes,
// uploading and completing answer 503 core.storage.unavailable, retryable
// -- never 404 -- while what needs no storage round trip (the detail with
// its presigned URL) still answers.
func TestStorageOutageIsNeverNotFound(t *testing.T) {
	t.Parallel()
	kind := s3test.Selected()
	if kind == s3test.External {
		kind = s3test.VersityGW // an external endpoint cannot be stopped: a server of our own is
	}
	srv, err := s3test.StartKind(kind)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	bucket := srv.NewBucket(t)
	s := start(t, service.DriverS3, func(c *service.Config) {
		c.Bucket, c.Endpoint, c.Region, c.ForcePathStyle = bucket.Bucket, bucket.Endpoint, bucket.Region, true
		c.AccessID, c.AccessKey = bucket.AccessID, bucket.AccessKey
	})
	user := s.token("acme", "alice", nil)
	ct, form := multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
	up := do(t, s, outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: form.Bytes()}, user, "")
	require.Equal(t, http.StatusCreated, up.status, up.body)
	var f struct{ Id string }
	require.NoError(t, json.Unmarshal([]byte(up.body), &f))
	init := do(t, s, outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body: mustJSON(t, map[string]any{"originalName": "p.pdf", "contentType": "application/pdf", "sizeBytes": len(pdf), "checksum": checksum([]byte(pdf))})}, user, "")
	require.Equal(t, http.StatusCreated, init.status, init.body)
	var pending struct{ Id string }
	require.NoError(t, json.Unmarshal([]byte(init.body), &pending))
	created := do(t, s, outageRequest{method: "POST", path: "/uploaded-file/tus/", headers: map[string]string{
		"Tus-Resumable": "1.0.0", "Upload-Length": "100", "Upload-Metadata": tusMeta("filename", "r.csv", "filetype", "text/csv"),
	}}, user, "")
	require.Equal(t, http.StatusCreated, created.status, created.body)
	resumable := strings.TrimPrefix(created.header.Get("Location"), s.url)

	srv.Stop()
	time.Sleep(2100 * time.Millisecond) // past the service's last probe of the store
	for _, r := range []outageRequest{
		{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json", // no target while the store does not answer
			body: mustJSON(t, map[string]any{"originalName": "q.pdf", "contentType": "application/pdf", "sizeBytes": len(pdf), "checksum": checksum([]byte(pdf))})},
		{method: "GET", path: "/uploaded-file/" + f.Id + "/download"},
		{method: "POST", path: "/uploaded-file", contentType: ct, body: form.Bytes()},
		{method: "POST", path: "/uploaded-file/" + pending.Id + "/complete"},
		{method: "POST", path: "/uploaded-file/tus/", headers: map[string]string{ // no resumable upload begun either
			"Tus-Resumable": "1.0.0", "Upload-Length": "100", "Upload-Metadata": tusMeta("filename", "s.csv", "filetype", "text/csv")}},
		tusChunkRequest(resumable, 0, []byte("id,n\n")), // the chunk cannot be stored
	} {
		resp := do(t, s, r, user, "")
		require.Equal(t, http.StatusServiceUnavailable, resp.status, "%s %s: %s", r.method, r.path, resp.body)
		require.Contains(t, resp.body, `"code":"core.storage.unavailable"`)
		require.Contains(t, resp.body, `"retryable":true`)
		require.NotEmpty(t, resp.header.Get("Retry-After"))
	}
	detail := do(t, s, outageRequest{method: "GET", path: "/uploaded-file/" + f.Id}, user, "")
	require.Equal(t, http.StatusOK, detail.status, "the detail needs no storage round trip: %s", detail.body)
}

// TestAccessLogAndRequestIDs: one JSON line per request -- a 401 and an
// unmatched route included -- with route, status, bytes and request id,
// never the query or the token; a 5xx answer carries the request id its
// log lines carry.
func TestAccessLogAndRequestIDs(t *testing.T) {
	t.Parallel()
	var logs syncbuf.Buffer
	s := startWith(t, service.DriverLocal, func(o *httpapi.Options) {
		o.AccessLog, o.Logger = true, slog.New(tracing.LogHandler{Handler: slog.NewJSONHandler(&logs, nil), RequestID: httpapi.RequestIDFrom})
	})
	user := s.token("acme", "alice", nil)
	ok := do(t, s, outageRequest{method: "GET", path: "/uploaded-file/usage?sig=secret-signature", headers: map[string]string{"X-Request-Id": "req-1"}}, user, "")
	require.Equal(t, http.StatusOK, ok.status)
	do(t, s, outageRequest{method: "GET", path: "/uploaded-file/usage", anonymous: true}, user, "")
	do(t, s, outageRequest{method: "GET", path: "/nowhere"}, user, "")
	restore := pgtest.CutConnections(t, s.pool)
	failed := do(t, s, outageRequest{method: "GET", path: "/uploaded-file/usage", headers: map[string]string{"X-Request-Id": "req-503"}}, user, "")
	restore()
	require.Equal(t, http.StatusServiceUnavailable, failed.status)
	require.Contains(t, failed.body, `"requestId":"req-503"`)

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	require.Len(t, lines, 4, logs.String())
	require.Equal(t, "GET /uploaded-file/usage", lines[0]["route"])
	require.EqualValues(t, 200, lines[0]["status"])
	require.Equal(t, "req-1", lines[0]["request_id"])
	require.Positive(t, lines[0]["bytes_out"])
	require.EqualValues(t, 401, lines[1]["status"], "a 401 has its line")
	require.Equal(t, "unmatched", lines[2]["route"])
	require.NotContains(t, logs.String(), "secret-signature", "never the query")
	require.NotContains(t, logs.String(), user[:30], "never the token")
	require.Contains(t, logs.String(), `"request_id":"req-503"`, "the 503's own log lines carry its request id")
}
