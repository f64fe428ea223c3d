package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/gen/client"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/servecontent"
	"github.com/uploadedfile/uploadedfile/service"
)

// rawRequest opens a connection to s and writes the request head; the
// caller writes (or does not write) the body.
func rawRequest(t *testing.T, s *server, head string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = conn.Write([]byte(strings.ReplaceAll(head, "\n", "\r\n") + "\r\n"))
	require.NoError(t, err)
	return conn
}

// readUntilClosed reads what the server sends until it closes the
// connection, or fails the test after limit (the test's own bound). A
// server that closes with unread request bytes in its socket makes the
// kernel answer with a reset: that is a close too.
func readUntilClosed(t *testing.T, conn net.Conn, limit time.Duration) string {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(limit)))
	var out bytes.Buffer
	_, err := io.Copy(&out, conn)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	require.NoError(t, err, "the server must close the connection; got so far: %q", out.String())
	return out.String()
}

// TestUnauthenticatedBodyIsNotRead: a request without a valid token is
// answered 401 and the connection closed, without waiting for (or
// draining) its body.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	// 100 KiB announced, none sent: a server that drained the body would
	// wait for it (the read deadline below would fail the test).
	conn := rawRequest(t, s, fmt.Sprintf("POST /uploaded-file HTTP/1.1\nHost: x\nContent-Type: multipart/form-data; boundary=b\nContent-Length: %d\n", 100<<10))
	out := readUntilClosed(t, conn, 10*time.Second)
	require.True(t, strings.HasPrefix(out, "HTTP/1.1 401 "), out)
	require.Contains(t, out, "Connection: close")
}

// TestSlowBodiesAreCutOff: an authenticated client that trickles its body
// (a byte at a time, never pausing long) is cut off once the body has
// taken its total time; one that stops sending is cut off after the idle
// time. Each connection ends; nothing is stored.
func TestSlowBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	s := startWith(t, service.DriverLocal, func(o *httpapi.Options) {
		o.BodyReadTimeout, o.BodyIdleTimeout = 2*time.Second, 500*time.Millisecond
	})
	token := s.token("acme", "alice", nil)
	head := fmt.Sprintf("POST /uploaded-file HTTP/1.1\nHost: x\nAuthorization: Bearer %s\nContent-Type: multipart/form-data; boundary=b\nContent-Length: %d\n", token, 1<<20)

	trickle := rawRequest(t, s, head)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := trickle.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	readUntilClosed(t, trickle, 30*time.Second)

	stall := rawRequest(t, s, head)
	_, err := stall.Write([]byte("--b\r\n"))
	require.NoError(t, err)
	readUntilClosed(t, stall, 30*time.Second)

	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file").Scan(&n))
	require.Zero(t, n, "nothing was stored")
}

// TestOversizedClaimsAreRefused: a verified token whose tenant, user or
// department claim cannot be a scope is 401 core.auth.invalid-claims,
// never a database error.
func TestOversizedClaimsAreRefused(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	for name, claims := range map[string]jwt.MapClaims{
		"tenant too long":     {"tenant": strings.Repeat("t", 256)},
		"user too long":       {"sub": strings.Repeat("u", 256)},
		"NUL in tenant":       {"tenant": "acme\x00"},
		"NUL in user":         {"sub": "al\x00ice"},
		"department too long": {"department": strings.Repeat("d", 300)},
		"department not text": {"department": 42},
		"control character":   {"tenant": "ac\nme"},
	} {
		tok := s.token("acme", "alice", claims)
		req, err := http.NewRequest(http.MethodPost, s.url+"/uploaded-file/initiate", strings.NewReader(`{"originalName":"a.pdf","contentType":"application/pdf","sizeBytes":10,"checksum":"sha256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
		require.Contains(t, string(body), `"code":"core.auth.invalid-claims"`, name)
	}
	// A token over MaxTokenBytes is refused before it is decoded.
	big := s.token("acme", "alice", jwt.MapClaims{"pad": strings.Repeat("p", 4*httpapi.MaxTokenBytes)})
	resp0, err := http.DefaultClient.Do(func() *http.Request {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/uploaded-file/usage", nil)
		req.Header.Set("Authorization", "Bearer "+big)
		return req
	}())
	require.NoError(t, err)
	body0, _ := io.ReadAll(resp0.Body)
	resp0.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp0.StatusCode)
	require.Contains(t, string(body0), `"code":"core.auth.token-too-large"`)

	ok := s.token("acme", "alice", jwt.MapClaims{"tenant": strings.Repeat("t", 255), "department": "sales"})
	resp, err := s.client(ok).GetFileWithResponse(context.Background(), uuid.MustParse("00000000-0000-4000-8000-000000000000"))
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, resp.StatusCode(), "255 characters is still a tenant")
}

// TestClosedJSONBodies: a member the contract does not list, or data after
// the JSON object, is core.file.invalid-meta and changes nothing.
func TestClosedJSONBodies(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	user := s.token("acme", "alice", nil)
	host := s.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope})
	good := `{"originalName":"a.pdf","contentType":"application/pdf","sizeBytes":10,"checksum":"sha256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}`
	for _, c := range []struct {
		name, token, path, body string
		want                    int
	}{
		{"well formed", user, "/uploaded-file/initiate", good, http.StatusCreated},
		{"unknown member", user, "/uploaded-file/initiate", strings.TrimSuffix(good, "}") + `,"owner":"bob"}`, http.StatusBadRequest},
		{"visibility is the host's", user, "/uploaded-file/initiate", strings.TrimSuffix(good, "}") + `,"visibility":"public"}`, http.StatusBadRequest},
		{"trailing data", user, "/uploaded-file/initiate", good + `{"x":1}`, http.StatusBadRequest},
		{"trailing garbage", user, "/uploaded-file/temporary/initiate", good + "]", http.StatusBadRequest},
		{"two values", host, "/internal/uploaded-file/delete", `{"references":["a"]} {"references":["b"]}`, http.StatusBadRequest},
		{"unknown member (host)", host, "/internal/uploaded-file/mark-used", `{"ids":["x"],"tenant":"other"}`, http.StatusBadRequest},
		{"nested 10,000 deep", user, "/uploaded-file/initiate", strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000), http.StatusBadRequest},
		{"nested 100,000 deep (past 64 KiB)", user, "/uploaded-file/initiate", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), http.StatusRequestEntityTooLarge},
	} {
		req, err := http.NewRequest(http.MethodPost, s.url+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, c.want, resp.StatusCode, "%s: %s", c.name, body)
		if c.want != http.StatusCreated {
			require.Contains(t, string(body), `"code":"core.file.invalid-meta"`, c.name)
		}
	}
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file").Scan(&n))
	require.Equal(t, 1, n, "only the well-formed request created a file")
}

// TestPublicDirectUploadsAreTheHosts: end users always start private
// uploads; a host backend chooses public, which needs allowPublicUploads.
func TestPublicDirectUploadsAreTheHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	body := []byte("%PDF-1.4\n%%EOF\n")
	in := func(vis string) io.Reader {
		m := map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": len(body), "checksum": checksum(body)}
		if vis != "" {
			m["visibility"] = vis
		}
		b, _ := json.Marshal(m)
		return bytes.NewReader(b)
	}
	closed := start(t, service.DriverLocal)
	host := closed.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope})
	resp, err := closed.client(host).HostInitiateUploadWithBodyWithResponse(ctx, nil, "application/json", in("public"))
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode(), "public needs allowPublicUploads")
	require.Contains(t, string(resp.Body), "core.file.public-upload-disabled")

	open := start(t, service.DriverLocal, func(c *service.Config) { c.AllowPublicUploads = true; c.DefaultVisibility = service.Public })
	host = open.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope})
	hr, err := open.client(host).HostInitiateUploadWithBodyWithResponse(ctx, nil, "application/json", in("public"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, hr.StatusCode(), string(hr.Body))
	require.Equal(t, "public", string(hr.JSON201.File.Visibility))

	user := open.token("acme", "alice", nil)
	ur, err := open.client(user).InitiateUploadWithBodyWithResponse(ctx, nil, "application/json", in(""))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, ur.StatusCode())
	require.Equal(t, "private", string(ur.JSON201.File.Visibility), "an end user's upload is private, whatever the default")
	_, err = open.client(host).HostInitiateUploadWithBodyWithResponse(ctx, nil, "application/json", in("private"))
	require.NoError(t, err)
}

// TestHostLegacyTemporaryUpload: legacy=true&temporary=true stores a
// temporary (private, expiring) file, not a permanent one.
func TestHostLegacyTemporaryUpload(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	host := s.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope})
	form := func(fields map[string]string) (string, io.Reader) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		for k, v := range fields {
			require.NoError(t, w.WriteField(k, v))
		}
		f, err := w.CreateFormFile("file", "rows.csv")
		require.NoError(t, err)
		_, _ = f.Write([]byte("a,b\n1,2\n"))
		require.NoError(t, w.Close())
		return w.FormDataContentType(), &buf
	}
	ct, body := form(map[string]string{"legacy": "true", "temporary": "true"})
	resp, err := s.client(host).HostUploadWithBodyWithResponse(context.Background(), nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode(), string(resp.Body))
	require.True(t, resp.JSON201.IsTemporary, "the legacy form honours temporary")
	require.NotNil(t, resp.JSON201.ExpiredAt)
	require.Equal(t, "private", string(resp.JSON201.Visibility))

	ct, body = form(map[string]string{"legacy": "true", "temporary": "true", "visibility": "public"})
	resp, err = s.client(host).HostUploadWithBodyWithResponse(context.Background(), nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode(), "a temporary file is always private")
	ct, body = form(map[string]string{"legacy": "true", "temporary": "true", "module": "billing"})
	resp, err = s.client(host).HostUploadWithBodyWithResponse(context.Background(), nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode(), "the legacy temporary upload takes no provenance")
}

// TestContentPutAnswersAreFinal: a content PUT on a ready upload is a
// final 422 without Retry-After, not "completing, retry later".
func TestContentPutAnswersAreFinal(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	ctx := context.Background()
	token := s.token("acme", "alice", nil)
	c := s.client(token)
	body := docx(t)
	init, err := c.InitiateUploadWithResponse(ctx, nil, initiateBody(body))
	require.NoError(t, err)
	put := func() *http.Response {
		req, err := http.NewRequest(http.MethodPut, init.JSON201.Upload.Url, bytes.NewReader(body))
		require.NoError(t, err)
		for k, v := range init.JSON201.Upload.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusOK, put().StatusCode)
	done, err := c.CompleteUploadWithResponse(ctx, init.JSON201.Id, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, done.StatusCode())
	again := put()
	require.Equal(t, http.StatusUnprocessableEntity, again.StatusCode)
	require.Empty(t, again.Header.Get("Retry-After"))
}

func initiateBody(body []byte) client.InitiateUploadJSONRequestBody {
	return client.InitiateUploadJSONRequestBody{OriginalName: "Plan.docx", ContentType: docxType, SizeBytes: int64(len(body)), Checksum: checksum(body)}
}

// TestDownloadBoundsRangesAndSandboxes: the download route refuses more
// than servecontent.MaxRanges ranges, and overlapping or unsorted ones,
// with 416 (20,000 one-byte ranges used to answer about twelve times the
// file), and every download is sandboxed.
func TestDownloadBoundsRangesAndSandboxes(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	user := s.token("acme", "alice", nil)
	content := strings.Repeat("0123456789", 10)
	ct, body := multipartBody(t, map[string][]byte{"digits.txt": []byte(content)})
	up := do(t, s, outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: body.Bytes()}, user, "")
	require.Equal(t, http.StatusCreated, up.status, up.body)
	var f struct{ Id string }
	require.NoError(t, json.Unmarshal([]byte(up.body), &f))
	get := func(rng string) outageResponse {
		return do(t, s, outageRequest{method: "GET", path: "/uploaded-file/" + f.Id + "/download", headers: map[string]string{"Range": rng}}, user, "")
	}
	ones := make([]string, 20000)
	for i := range ones {
		ones[i] = fmt.Sprintf("%d-%d", i%100, i%100)
	}
	zeros := strings.TrimSuffix(strings.Repeat("-0,", 339), ",")
	for _, rng := range []string{"bytes=" + strings.Join(ones, ","), "bytes=0-9,5-14", "bytes=50-59,0-9", "bytes=-0", "bytes=" + zeros, "bytes=0-9,", "bytes=200-300"} {
		resp := get(rng)
		require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.status)
		require.Equal(t, "bytes */100", resp.header.Get("Content-Range"))
		require.Less(t, len(resp.body), 200)
	}
	resp := get("bytes=0-9,50-59")
	require.Equal(t, http.StatusPartialContent, resp.status)
	require.Less(t, len(resp.body), len(content)+2*servecontent.MaxRanges*100)
	require.Equal(t, servecontent.ContentSecurityPolicy, resp.header.Get("Content-Security-Policy"))
	require.Equal(t, "nosniff", resp.header.Get("X-Content-Type-Options"))
	require.Equal(t, "same-origin", resp.header.Get("Cross-Origin-Resource-Policy"))
}
