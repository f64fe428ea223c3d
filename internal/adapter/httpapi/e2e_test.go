//lint:file-ignore SA1019 the deprecated compatibility routes are still served, so they are tested

package httpapi_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/uploadedfile/uploadedfile/gen/client"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/service"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// server is a real server on a loopback port, with what it stores.
type server struct {
	t      *testing.T
	url    string
	secret []byte
	svc    *service.Service
	pool   *pgxpool.Pool
}

func start(t *testing.T, driver string, mods ...func(*service.Config)) *server {
	t.Helper()
	return startWith(t, driver, nil, mods...)
}

// startWith is start with the HTTP options adjusted by opts.
func startWith(t *testing.T, driver string, opts func(*httpapi.Options), mods ...func(*service.Config)) *server {
	t.Helper()
	return startServer(t, driver, opts, nil, mods...)
}

// startServer is startWith with service options too.
func startServer(t *testing.T, driver string, opts func(*httpapi.Options), svcOpts []service.Option, mods ...func(*service.Config)) *server {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.New(t)
	cfg := service.Config{Driver: driver}
	for _, m := range mods {
		m(&cfg)
	}
	if driver == service.DriverS3 && cfg.Endpoint == "" {
		s3cfg := s3test.New(t)
		cfg.Bucket, cfg.Endpoint, cfg.Region, cfg.ForcePathStyle = s3cfg.Bucket, s3cfg.Endpoint, s3cfg.Region, true
		cfg.AccessID, cfg.AccessKey = s3cfg.AccessID, s3cfg.AccessKey
	} else {
		cfg.LocalRoot = t.TempDir()
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	guard, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: secret, Issuer: "test-issuer", Audience: "uploadedfile"})
	require.NoError(t, err)

	// The listener exists before the handler (whose URLs name it); the
	// server starts only once the handler is in place.
	ts := httptest.NewUnstartedServer(nil)
	t.Cleanup(ts.Close)
	url := "http://" + ts.Listener.Addr().String()
	cfg.Host = url
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.New(ctx, cfg, pool, append([]service.Option{service.WithLogger(quiet)}, svcOpts...)...)
	require.NoError(t, err)
	o := httpapi.Options{Service: svc, Guard: guard, Logger: quiet, DownloadPath: svc.EffectiveConfig().DownloadPath,
		Health: &httpapi.Health{Dependencies: map[string]httpapi.Pinger{"database": pool, "storage": svc}}}
	if opts != nil {
		opts(&o)
	}
	ts.Config.Handler = httpapi.New(o)
	ts.Start()
	return &server{t: t, url: url, secret: secret, svc: svc, pool: pool}
}

// token signs a token for user of tenant; extra claims are merged in.
func (s *server) token(tenant, user string, extra jwt.MapClaims) string {
	s.t.Helper()
	claims := jwt.MapClaims{"sub": user, "tenant": tenant, "iss": "test-issuer", "aud": "uploadedfile", "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range extra {
		claims[k] = v
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.secret)
	require.NoError(s.t, err)
	return tok
}

func (s *server) client(token string) *client.ClientWithResponses {
	s.t.Helper()
	c, err := client.NewClientWithResponses(s.url, client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}))
	require.NoError(s.t, err)
	return c
}

func docx(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, content := range map[string]string{
		"[Content_Types].xml": `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`,
		"word/document.xml":   `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body/></w:document>`,
	} {
		f, err := w.Create(name)
		require.NoError(t, err)
		_, _ = f.Write([]byte(content))
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func checksum(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + base64.StdEncoding.EncodeToString(s[:])
}

// localETag is the local driver's ETag of an object: the first 128 bits of
// its SHA-256, in hex, quoted.
func localETag(b []byte) string {
	s := sha256.Sum256(b)
	return `"` + hex.EncodeToString(s[:16]) + `"`
}

const docxType = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

// noStorageRefs asserts a raw end-user response body names neither the
// file's storage key nor its persisted cdn reference anywhere but inside a
// URL the client is meant to follow: an S3 presigned URL names its object
// in its path by construction.
func noStorageRefs(t *testing.T, s *server, body []byte, id uuid.UUID) {
	t.Helper()
	var doc map[string]any
	require.NoError(t, json.Unmarshal(body, &doc))
	stripURLs(doc)
	rest, err := json.Marshal(doc)
	require.NoError(t, err)
	require.NotContains(t, string(rest), `"key"`)
	require.NotContains(t, string(rest), `"cdn"`)
	var key, cdn string
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT key, coalesce(cdn, '') FROM uploaded_file WHERE id = $1", id.String()).Scan(&key, &cdn))
	require.NotEmpty(t, key)
	require.NotEmpty(t, cdn)
	require.NotContains(t, string(rest), key)
	require.NotContains(t, string(rest), cdn)
	require.NotContains(t, string(body), cdn, "the persisted reference appears nowhere, URLs included")
}

// stripURLs removes the "url" values of a response document.
func stripURLs(v any) {
	if m, ok := v.(map[string]any); ok {
		delete(m, "url")
		for _, c := range m {
			stripURLs(c)
		}
	}
}

func TestDirectLifecycleOverHTTP(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			s := start(t, driver)
			c := s.client(s.token("acme", "alice", nil))
			ctx := context.Background()
			body := docx(t)

			init, err := c.InitiateUploadWithResponse(ctx, nil, client.InitiateUploadJSONRequestBody{
				OriginalName: "Plan.docx", ContentType: docxType, SizeBytes: int64(len(body)), Checksum: checksum(body),
			})
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, init.StatusCode(), "%s", init.Body)
			id := init.JSON201.Id
			noStorageRefs(t, s, init.Body, id)

			switch driver {
			case service.DriverLocal:
				put, err := c.PutUploadContentWithBodyWithResponse(ctx, id, nil, "application/octet-stream", bytes.NewReader(body))
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, put.StatusCode(), "%s", put.Body)
				noStorageRefs(t, s, put.Body, id)
			case service.DriverS3:
				// As a browser would: plain net/http, exactly the given headers.
				req, err := http.NewRequest(init.JSON201.Upload.Method, init.JSON201.Upload.Url, bytes.NewReader(body))
				require.NoError(t, err)
				for k, v := range init.JSON201.Upload.Headers {
					if k != "Content-Length" {
						req.Header.Set(k, v)
					}
				}
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}

			done, err := c.CompleteUploadWithResponse(ctx, id, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, done.StatusCode(), "%s", done.Body)
			require.Equal(t, client.StatusReady, done.JSON200.Status)
			noStorageRefs(t, s, done.Body, id)

			got, err := c.GetFileWithResponse(ctx, id)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, got.StatusCode())
			require.NotNil(t, got.JSON200.Url)
			noStorageRefs(t, s, got.Body, id)

			dl, err := c.DownloadFileWithResponse(ctx, id, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, dl.StatusCode())
			require.Equal(t, body, dl.Body)
			require.Equal(t, docxType, dl.HTTPResponse.Header.Get("Content-Type"))
			if driver == service.DriverLocal {
				require.Equal(t, localETag(body), dl.HTTPResponse.Header.Get("ETag"), "the object's ETag, from the digest the row records")
			}

			del, err := c.DeleteFileWithResponse(ctx, id, nil)
			require.NoError(t, err)
			require.Equal(t, http.StatusNoContent, del.StatusCode())
			gone, err := c.GetFileWithResponse(ctx, id)
			require.NoError(t, err)
			require.Equal(t, http.StatusNotFound, gone.StatusCode())
		})
	}
}

// multipartBody builds a multipart form with the given files.
func multipartBody(t *testing.T, files map[string][]byte) (string, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for name, content := range files {
		part, err := w.CreateFormFile("file", name)
		require.NoError(t, err)
		_, _ = part.Write(content)
	}
	require.NoError(t, w.Close())
	return w.FormDataContentType(), &buf
}

const pdf = "%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

func TestMultipartAndDownloadHeaders(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	c := s.client(s.token("acme", "alice", nil))
	ctx := context.Background()

	ct, body := multipartBody(t, map[string][]byte{"Résumé 2026.pdf": []byte(pdf)})
	up, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode(), "%s", up.Body)
	id := up.JSON201.Id
	noStorageRefs(t, s, up.Body, id)

	dl, err := c.DownloadFileWithResponse(ctx, id, nil)
	require.NoError(t, err)
	h := dl.HTTPResponse.Header
	require.Equal(t, "application/pdf", h.Get("Content-Type"))
	require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	require.Equal(t, `attachment; filename="R_sum_ 2026.pdf"; filename*=UTF-8''R%C3%A9sum%C3%A9%202026.pdf`, h.Get("Content-Disposition"))
	require.Equal(t, pdf, string(dl.Body))
	etag := h.Get("ETag")
	require.Equal(t, localETag([]byte(pdf)), etag, "the object's ETag, from the digest the row records")

	ranged, err := c.DownloadFileWithResponse(ctx, id, nil, func(_ context.Context, r *http.Request) error {
		r.Header.Set("Range", "bytes=0-4")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusPartialContent, ranged.StatusCode())
	require.Equal(t, "%PDF-", string(ranged.Body))

	cond, err := c.DownloadFileWithResponse(ctx, id, nil, func(_ context.Context, r *http.Request) error {
		r.Header.Set("If-None-Match", etag)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusNotModified, cond.StatusCode())

	ct, body = multipartBody(t, map[string][]byte{"a.pdf": []byte(pdf), "b.pdf": []byte(pdf)})
	two, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, two.StatusCode(), "more than one file")
	require.Contains(t, string(two.Body), "core.file.invalid-upload")

	big := bytes.Repeat([]byte("x"), 26<<20)
	ct, body = multipartBody(t, map[string][]byte{"big.txt": big})
	tooBig, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, tooBig.StatusCode(), "over the 25 MiB ceiling")

	ct, body = multipartBody(t, map[string][]byte{"notes.txt": bytes.Repeat([]byte("y"), 11<<20)})
	overConfig, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, overConfig.StatusCode(), "over the configured 10 MiB")
}

// TestCrossTenantLooksMissing: a cross-tenant id, a missing id and an id
// that is not a UUID give byte-identical 404 responses (status, body,
// headers but Date and the request id).
func TestCrossTenantLooksMissing(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	ctx := context.Background()
	alice := s.client(s.token("acme", "alice", nil))
	ct, body := multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
	up, err := alice.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode())

	mallory := s.client(s.token("globex", "mallory", nil))
	type call = func(id uuid.UUID, eds ...client.RequestEditorFn) (*http.Response, []byte)
	for name, call := range map[string]call{
		"get": func(id uuid.UUID, eds ...client.RequestEditorFn) (*http.Response, []byte) {
			r, err := mallory.GetFileWithResponse(ctx, id, eds...)
			require.NoError(t, err)
			return r.HTTPResponse, r.Body
		},
		"download": func(id uuid.UUID, eds ...client.RequestEditorFn) (*http.Response, []byte) {
			r, err := mallory.DownloadFileWithResponse(ctx, id, nil, eds...)
			require.NoError(t, err)
			return r.HTTPResponse, r.Body
		},
		"delete": func(id uuid.UUID, eds ...client.RequestEditorFn) (*http.Response, []byte) {
			r, err := mallory.DeleteFileWithResponse(ctx, id, nil, eds...)
			require.NoError(t, err)
			return r.HTTPResponse, r.Body
		},
		"complete": func(id uuid.UUID, eds ...client.RequestEditorFn) (*http.Response, []byte) {
			r, err := mallory.CompleteUploadWithResponse(ctx, id, nil, eds...)
			require.NoError(t, err)
			return r.HTTPResponse, r.Body
		},
	} {
		cross, crossBody := call(up.JSON201.Id)
		missing, missingBody := call(uuid.MustParse("6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e"))
		// An id that is not a UUID: the contract types the path's id as
		// one, and a malformed id answers as a missing file does.
		for _, bad := range []string{"not-a-uuid", strings.Repeat("a", 65), "6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4"} {
			malformed, malformedBody := call(uuid.Nil, pathID(bad))
			require.Equal(t, http.StatusNotFound, malformed.StatusCode, "%s %q", name, bad)
			missingH, missingB := anonymized(t, missing.Header, missingBody)
			malformedH, malformedB := anonymized(t, malformed.Header, malformedBody)
			require.Equal(t, missingB, malformedB, "%s %q", name, bad)
			require.Equal(t, missingH, malformedH, "%s %q", name, bad)
		}
		for _, r := range []*http.Response{cross, missing} {
			require.Equal(t, http.StatusNotFound, r.StatusCode, name)
		}
		missingH, missingB := anonymized(t, missing.Header, missingBody)
		crossH, crossB := anonymized(t, cross.Header, crossBody)
		require.Equal(t, missingB, crossB, name)
		require.Equal(t, missingH, crossH, name)
		require.Contains(t, string(crossBody), `"code":"core.file.not-found"`)
	}
	// The file is intact for its owner.
	got, err := alice.GetFileWithResponse(ctx, up.JSON201.Id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode())
}

// pathID replaces the nil UUID in a request's path with id: the generated
// client types the path's id as a UUID, and a caller by hand can send any.
func pathID(id string) client.RequestEditorFn {
	return func(_ context.Context, r *http.Request) error {
		r.URL.Path = strings.Replace(r.URL.Path, uuid.Nil.String(), id, 1)
		r.URL.RawPath = ""
		return nil
	}
}

func TestGuard(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	ctx := context.Background()
	other := make([]byte, 32)
	wrongKey, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "a", "tenant": "t", "iss": "test-issuer", "aud": "uploadedfile", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(other)
	require.NoError(t, err)
	for name, tok := range map[string]string{
		"no token":       "",
		"garbage":        "not-a-jwt",
		"wrong key":      wrongKey,
		"expired":        s.token("acme", "alice", jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()}),
		"not yet valid":  s.token("acme", "alice", jwt.MapClaims{"nbf": time.Now().Add(time.Hour).Unix()}),
		"wrong issuer":   s.token("acme", "alice", jwt.MapClaims{"iss": "someone-else"}),
		"wrong audience": s.token("acme", "alice", jwt.MapClaims{"aud": "another-service"}),
		"no tenant":      s.token("", "alice", nil),
	} {
		r, err := s.client(tok).GetFileWithResponse(ctx, uuid.MustParse("6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e"))
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, r.StatusCode(), name)
		require.Contains(t, r.HTTPResponse.Header.Get("WWW-Authenticate"), "Bearer", name)
		require.Equal(t, httpapi.ProblemContentType, r.HTTPResponse.Header.Get("Content-Type"), name)
	}

	// Host routes need the host scope.
	user := s.client(s.token("acme", "alice", nil))
	host := s.client(s.token("acme", "alice", jwt.MapClaims{"scope": "openid " + httpapi.HostScope}))
	ct, body := multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
	up, err := user.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	id := up.JSON201.Id
	denied, err := user.HostGetFileWithResponse(ctx, id)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, denied.StatusCode(), "no host scope: the host routes do not exist for this token")
	allowed, err := host.HostGetFileWithResponse(ctx, id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, allowed.StatusCode(), "%s", allowed.Body)
	require.NotEmpty(t, allowed.JSON200.Key, "host routes do carry the storage references")

	mark, err := host.HostMarkUsedWithResponse(ctx, nil, client.HostMarkUsedJSONRequestBody{Ids: []string{id.String()}, Entity: ptr("invoice"), EntityId: ptr("42")})
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, mark.StatusCode(), "%s", mark.Body)
	bad, err := host.HostMarkUsedWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(`{"ids": "not a list"}`))
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, bad.StatusCode())
	require.Contains(t, string(bad.Body), "core.file.invalid-meta")
	require.NotContains(t, string(bad.Body), "unmarshal", "the parser's message is not echoed")

	health, err := s.client("").ReadyzWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, health.StatusCode(), "health needs no token")
}

func ptr[T any](v T) *T { return &v }

// TestTypeScriptClient runs the TypeScript client's Node test (a whole
// direct upload and download) against a real server. `make test` builds
// the client first (`make ts`); without it this test fails, it does not skip.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	dir := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "clients", "typescript")
	compiled := filepath.Join(dir, "dist", "test", "direct-upload.test.js")
	_, err = os.Stat(compiled)
	require.NoError(t, err, "build the TypeScript client first: make ts")

	s := start(t, service.DriverLocal, variantPresets)
	// A key whose initiate an earlier attempt still holds for a few
	// seconds (its server died mid-request): upload() waits it out.
	_, err = s.pool.Exec(context.Background(), `INSERT INTO uploaded_file_idempotency (tenant_code, caller, key, route, state, lease_until, created_at, expires_at)
		VALUES ('acme', 'alice', 'held-ts.initiate', 'POST /uploaded-file/initiate', 'running', now() + interval '3 seconds', now(), now() + interval '1 day')`)
	require.NoError(t, err)
	cmd := exec.Command("node", "--test", compiled)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "UPLOADEDFILE_URL="+s.url, "UPLOADEDFILE_TOKEN="+s.token("acme", "alice", nil), "UPLOADEDFILE_HELD_KEY=held-ts")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", output)
	require.Contains(t, string(output), "# pass 8")
	require.Contains(t, string(output), "# fail 0")
}

// TestCustomDownloadPath: a custom downloadPath moves the download routes
// and the URLs that point at them.
func TestCustomDownloadPath(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal, func(c *service.Config) { c.DownloadPath = "files/v2" })
	c := s.client(s.token("acme", "alice", nil))
	ct, body := multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
	up, err := c.UploadFileWithBodyWithResponse(context.Background(), nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode())
	want := s.url + "/files/v2/" + up.JSON201.Id.String() + "/download"
	require.True(t, strings.HasPrefix(*up.JSON201.Url, want+"?expires="), *up.JSON201.Url)
	status, _, got := getNoToken(t, *up.JSON201.Url)
	require.Equal(t, http.StatusOK, status, "the granted url, under the moved path")
	require.Equal(t, pdf, got)

	req, err := http.NewRequest(http.MethodGet, want, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token("acme", "alice", nil))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, pdf, string(body2))
}

func TestCloneRouteDisabledByDefault(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	host := s.client(s.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope}))
	r, err := host.HostCloneFromUrlWithResponse(context.Background(), nil, client.HostCloneFromUrlJSONRequestBody{Url: "http://169.254.169.254/latest/meta-data"})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, r.StatusCode())
	require.Contains(t, string(r.Body), "core.file.remote-disabled")
}

// TestListOverHTTP: pages through the generated Go client; the end-user
// list carries no storage references, the host list does; a tampered or
// foreign cursor and bad parameters are 400 invalid-meta; another tenant's
// list is empty.
func TestListOverHTTP(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	ctx := context.Background()
	c := s.client(s.token("acme", "alice", nil))
	var ids []string
	for i := range 3 {
		ct, body := multipartBody(t, map[string][]byte{fmt.Sprintf("report-%d.pdf", i): []byte(pdf)})
		up, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, up.StatusCode(), "%s", up.Body)
		ids = append([]string{up.JSON201.Id.String()}, ids...) // newest first
	}

	first, err := c.ListFilesWithResponse(ctx, &client.ListFilesParams{Limit: ptr(2)})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, first.StatusCode(), "%s", first.Body)
	require.Len(t, first.JSON200.Items, 2)
	require.NotNil(t, first.JSON200.NextCursor)
	for i, f := range first.JSON200.Items {
		require.Equal(t, ids[i], f.Id.String())
		require.Nil(t, f.Url, "no URL unless withUrls")
	}
	var doc struct{ Items []json.RawMessage }
	require.NoError(t, json.Unmarshal(first.Body, &doc))
	noStorageRefs(t, s, doc.Items[0], uuid.MustParse(ids[0]))

	next, err := c.ListFilesWithResponse(ctx, &client.ListFilesParams{Limit: ptr(2), Cursor: first.JSON200.NextCursor, WithUrls: ptr(true)})
	require.NoError(t, err)
	require.Len(t, next.JSON200.Items, 1)
	require.Equal(t, ids[2], next.JSON200.Items[0].Id.String())
	require.Nil(t, next.JSON200.NextCursor, "the last page")
	require.NotNil(t, next.JSON200.Items[0].Url)

	host := s.client(s.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope}))
	hl, err := host.HostListFilesWithResponse(ctx, &client.HostListFilesParams{Sort: ptr(client.Name), NamePrefix: ptr("REPORT-1")})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hl.StatusCode(), "%s", hl.Body)
	require.Len(t, hl.JSON200.Items, 1)
	require.Equal(t, ids[1], hl.JSON200.Items[0].Id.String())
	require.NotEmpty(t, hl.JSON200.Items[0].Key, "the host's view carries the storage reference")

	other, err := s.client(s.token("globex", "alice", nil)).ListFilesWithResponse(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, other.StatusCode())
	require.Empty(t, other.JSON200.Items, "another tenant's list is empty")
	foreign, err := s.client(s.token("globex", "alice", nil)).ListFilesWithResponse(ctx, &client.ListFilesParams{Cursor: first.JSON200.NextCursor})
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, foreign.StatusCode(), "a cursor is worthless in another tenant")

	for name, q := range map[string]string{
		"foreign cursor":  "cursor=" + *first.JSON200.NextCursor + "&sort=size",
		"tampered cursor": "cursor=x" + *first.JSON200.NextCursor,
		"limit too large": "limit=201",
		"limit zero":      "limit=0",
		"limit not int":   "limit=ten",
		"bad sort":        "sort=owner",
		"bad time":        "createdFrom=yesterday",
		"bad type":        "contentType=image",
	} {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/uploaded-file?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+s.token("acme", "alice", nil))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		require.Contains(t, string(body), `"code":"core.file.invalid-meta"`, name)
	}
}

// TestQuotaOverHTTP: over quota is 413 quota-exceeded with the limit as
// rule; the usage routes show the caller's and the tenant's usage.
func TestQuotaOverHTTP(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal, func(c *service.Config) { c.Quota = service.QuotaConfig{OwnerFiles: 1, TenantBytes: 1 << 20} })
	ctx := context.Background()
	c := s.client(s.token("acme", "alice", nil))
	ct, body := multipartBody(t, map[string][]byte{"a.pdf": []byte(pdf)})
	up, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode(), "%s", up.Body)

	ct, body = multipartBody(t, map[string][]byte{"b.pdf": []byte(pdf)})
	over, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, over.StatusCode())
	_, overBody := anonymized(t, over.HTTPResponse.Header, over.Body)
	require.JSONEq(t, `{"type":"urn:uploadedfile:problem:file.quota-exceeded","title":"Request Entity Too Large","status":413,"code":"core.file.quota-exceeded","rule":"quota.owner-files","detail":"You have reached your number of files.","retryable":false}`, overBody)

	init, err := c.InitiateUploadWithResponse(ctx, nil, client.InitiateUploadJSONRequestBody{OriginalName: "c.pdf", ContentType: "application/pdf", SizeBytes: int64(len(pdf)), Checksum: checksum([]byte(pdf))})
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, init.StatusCode(), "initiate reserves too: %s", init.Body)

	u, err := c.GetUsageWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, u.StatusCode(), "%s", u.Body)
	require.Equal(t, client.UsageOf{Bytes: int64(len(pdf)), Files: 1, FilesLimit: 1}, u.JSON200.Owner)
	require.Equal(t, client.UsageOf{Bytes: int64(len(pdf)), Files: 1, BytesLimit: 1 << 20}, u.JSON200.Tenant)

	bob, err := s.client(s.token("acme", "bob", jwt.MapClaims{"scope": httpapi.HostScope})).HostGetUsageWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, client.UsageOf{FilesLimit: 1}, bob.JSON200.Owner, "bob holds nothing")
	require.EqualValues(t, 1, bob.JSON200.Tenant.Files, "his tenant holds alice's file")

	other, err := s.client(s.token("globex", "alice", nil)).GetUsageWithResponse(ctx)
	require.NoError(t, err)
	require.Zero(t, other.JSON200.Tenant.Files, "another tenant sees nothing of acme's")
}

// TestConcurrentUploadsKeepTheirOwnBytes: uploads at once, of several sizes
// around the buffers the server reuses (the multipart read buffer, the UTF-8
// check's chunk, the spool's write buffer), some refused mid-body (a NUL
// after the first chunk): every stored file is byte for byte the one sent,
// every refusal names its rule, whatever ran before on the same buffers.
func TestConcurrentUploadsKeepTheirOwnBytes(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	c := s.client(s.token("acme", "alice", nil))
	ctx := context.Background()
	sizes := []int{1, 4 << 10, 64<<10 - 1, 64 << 10, 64<<10 + 3, 300 << 10, 1 << 20}
	type upload struct {
		body, form []byte
		ct         string
		refused    bool
	}
	uploads := make([]upload, 48)
	for i := range uploads {
		size := sizes[i%len(sizes)]
		body := make([]byte, size)
		for j := range body {
			body[j] = 'a' + byte((i*7+j*13)%26)
		}
		body[size-1] = '\n'
		refused := i%5 == 4 && size > 64<<10
		if refused {
			body[64<<10+1] = 0
		}
		ct, form := multipartBody(t, map[string][]byte{fmt.Sprintf("n%d.txt", i): body})
		uploads[i] = upload{body: body, form: form.Bytes(), ct: ct, refused: refused}
	}
	var g errgroup.Group
	g.SetLimit(8)
	for i, u := range uploads {
		g.Go(func() error {
			up, err := c.UploadFileWithBodyWithResponse(ctx, nil, u.ct, bytes.NewReader(u.form))
			if err != nil {
				return err
			}
			if u.refused {
				if up.StatusCode() != http.StatusUnprocessableEntity || !bytes.Contains(up.Body, []byte("content.nul")) {
					return fmt.Errorf("upload %d (%d B with a NUL): %d %s", i, len(u.body), up.StatusCode(), up.Body)
				}
				return nil
			}
			if up.StatusCode() != http.StatusCreated {
				return fmt.Errorf("upload %d (%d B): %d %s", i, len(u.body), up.StatusCode(), up.Body)
			}
			if got := *up.JSON201.Checksum; got != checksum(u.body) {
				return fmt.Errorf("upload %d (%d B): checksum %s, sent %s", i, len(u.body), got, checksum(u.body))
			}
			dl, err := c.DownloadFileWithResponse(ctx, up.JSON201.Id, nil)
			if err != nil {
				return err
			}
			if !bytes.Equal(dl.Body, u.body) {
				return fmt.Errorf("upload %d (%d B): stored bytes differ from those sent", i, len(u.body))
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
}

// TestImageSizeOverHTTP: an uploaded PNG's width and height are in its
// 201, its detail and the list; a PDF's are absent.
func TestImageSizeOverHTTP(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	ctx := context.Background()
	c := s.client(s.token("acme", "alice", nil))
	m := image.NewNRGBA(image.Rect(0, 0, 64, 48))
	var p bytes.Buffer
	require.NoError(t, png.Encode(&p, m))
	ct, body := multipartBody(t, map[string][]byte{"pic.png": p.Bytes()})
	up, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode(), "%s", up.Body)
	require.Equal(t, [2]int{64, 48}, [2]int{deref(up.JSON201.Width), deref(up.JSON201.Height)})

	detail, err := c.GetFileWithResponse(ctx, up.JSON201.Id)
	require.NoError(t, err)
	require.Equal(t, [2]int{64, 48}, [2]int{deref(detail.JSON200.Width), deref(detail.JSON200.Height)})
	require.Contains(t, string(detail.Body), `"height":48`)

	ct, body = multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
	doc, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Nil(t, doc.JSON201.Width)
	require.NotContains(t, string(doc.Body), `"width"`)

	list, err := c.ListFilesWithResponse(ctx, nil)
	require.NoError(t, err)
	sizes := map[string]*int{}
	for _, f := range list.JSON200.Items {
		sizes[f.OriginalName] = f.Width
	}
	require.Equal(t, 64, deref(sizes["pic.png"]))
	require.Nil(t, sizes["r.pdf"])
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
